"""make peer-confluent's fetch of confluent-kafka-python's tests: a clone that fails says how to
give the tree instead (a machine without GitHub)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.peers import confluent

TIER = "component"  # runs git


def test_a_clone_that_fails_names_peer_src(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PEER_SRC", raising=False)
    monkeypatch.setattr(confluent, "WORK", tmp_path)
    monkeypatch.setattr(confluent, "REPOSITORY", str(tmp_path / "no-such-repository"))
    with pytest.raises(SystemExit) as refused:
        confluent.fetch_source("v9.9.9")
    assert str(refused.value) == (
        f"cannot clone {tmp_path / 'no-such-repository'} at v9.9.9 (git says why above): set PEER_SRC to a "
        "checkout of it, or to a git directory to archive PEER_REF from (e.g. a mirror; PEER_REF defaults to v9.9.9)")
    assert list(tmp_path.iterdir()) == []  # nothing half-fetched left behind

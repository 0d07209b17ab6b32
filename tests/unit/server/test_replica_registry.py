"""The replica registry's directory record (vdl_broker.cluster.identity, rule 2): from which
metadata index a data directory holds every replica placed on its node."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vdl_broker.server.replica_registry import DIRECTORY_FILE, ReplicaRegistry


def test_a_directory_that_formed_its_cluster_holds_every_replica(tmp_path: Path) -> None:
    registry = ReplicaRegistry(tmp_path, durable=False)
    registry.open(catching_up=False)
    assert registry.complete_from == 0 and len(registry.directory_id) == 32
    assert not registry.may_have_held(1)


def test_a_directory_catching_up_may_have_held_every_older_stream_until_it_is_known(tmp_path: Path) -> None:
    registry = ReplicaRegistry(tmp_path, durable=False)
    registry.open(catching_up=True)
    assert registry.complete_from is None and registry.may_have_held(10 ** 9)
    again = ReplicaRegistry(tmp_path, durable=False)  # a restart while catching up keeps it unknown
    again.open(catching_up=False)
    assert again.complete_from is None and again.directory_id == registry.directory_id
    again.caught_up(40)
    again.caught_up(90)  # recorded once: streams created from 40 on have their replicas here
    assert again.may_have_held(39) and not again.may_have_held(40)
    reopened = ReplicaRegistry(tmp_path, durable=False)
    reopened.open(catching_up=False)
    assert reopened.complete_from == 40
    assert json.loads((tmp_path / "__replicas" / DIRECTORY_FILE).read_text()) == {
        "version": 1, "directory_id": registry.directory_id, "complete_from": 40}


def test_a_record_of_a_newer_release_is_refused(tmp_path: Path) -> None:
    (tmp_path / "__replicas").mkdir()
    (tmp_path / "__replicas" / DIRECTORY_FILE).write_text('{"version": 2, "directory_id": "x", "complete_from": 0}')
    with pytest.raises(ValueError, match="version 2, this release reads up to 1"):
        ReplicaRegistry(tmp_path, durable=False).open(catching_up=False)


def test_a_start_with_the_record_unchanged_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A node restarted on a full disk: rewriting a record it only read exited with ENOSPC.
    ReplicaRegistry(tmp_path, durable=False).open(catching_up=False)
    written: list[Path] = []
    monkeypatch.setattr("vdl_broker.server.replica_registry.atomic_write", lambda path, *_: written.append(path))
    ReplicaRegistry(tmp_path, durable=False).open(catching_up=False)
    assert written == []
    ReplicaRegistry(tmp_path, durable=False).open(catching_up=True)  # what it records changes: written
    assert written == [tmp_path / "__replicas" / DIRECTORY_FILE]


@pytest.mark.parametrize("damage", [b"\x00", b"k", b"\xb5"], ids=["nul", "letter", "not-utf8"])
def test_a_damaged_record_counts_every_replica_placed_until_now_as_possibly_lost(
        tmp_path: Path, damage: bytes) -> None:
    """A flipped byte in directory.json: the node used to refuse to start. It now starts as one
    whose disk may have been replaced: a missing replica of any stream placed here so far starts
    damaged (it recovers before it votes), until the node's metadata is known to be whole again."""
    registry = ReplicaRegistry(tmp_path, durable=False)
    registry.open(catching_up=False)
    registry.caught_up(10)  # no-op: not catching up
    path = tmp_path / "__replicas" / DIRECTORY_FILE
    path.write_bytes(damage + path.read_bytes()[1:])  # its opening brace
    damaged = ReplicaRegistry(tmp_path, durable=False)
    damaged.open(catching_up=False)
    assert damaged.complete_from is None and damaged.may_have_held(10 ** 9)
    assert damaged.directory_id != registry.directory_id and len(damaged.directory_id) == 32
    damaged.caught_up(70)  # its metadata replica holds the committed metadata through 70
    assert damaged.may_have_held(69) and not damaged.may_have_held(70)
    assert json.loads(path.read_text()) == {"version": 1, "directory_id": damaged.directory_id, "complete_from": 70}

"""The fault campaign's final metadata-log check (tests/faults/chaos/campaign.py) on made-up logs:
nodes that truncated their logs behind snapshots at different points agree; a differing entry, a
node short of the majority's last index, and a differing entry below a majority are found."""

from __future__ import annotations

import pytest

from tests.faults.chaos.campaign import metadata_logs_agree
from tests.faults.harness import LogImage

pytestmark = pytest.mark.unit


def image(node_id: int, first: int, last: int, changed: dict[int, bytes] | None = None) -> LogImage:
    entries = {i: (1, 4, (changed or {}).get(i, f"command {i}".encode())) for i in range(first, last + 1)}
    return LogImage(node_id, first, last, 0, 0, entries)


def test_logs_truncated_behind_snapshots_at_different_points_agree() -> None:
    # The full campaign's 'diverged' finding: node 2 had truncated its log further than the others.
    assert metadata_logs_agree([image(1, 1, 900), image(2, 501, 900), image(3, 201, 900)])


def test_a_differing_entry_in_the_common_window_is_found() -> None:
    assert not metadata_logs_agree([image(1, 1, 900), image(2, 501, 900, {700: b"other"}), image(3, 201, 900)])


def test_a_node_short_of_the_majority_is_found_and_an_uncommitted_tail_is_not() -> None:
    assert not metadata_logs_agree([image(1, 1, 900), image(2, 1, 900), image(3, 1, 850)])
    # A deposed leader's never-committed entry past what a majority holds is no finding.
    assert metadata_logs_agree([image(1, 1, 901, {901: b"deposed"}), image(2, 1, 900), image(3, 1, 900)])

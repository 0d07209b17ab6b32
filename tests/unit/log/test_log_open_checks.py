"""Opening a log walks entry by entry only what no earlier open checked (the segments from the
recovery point on, and sealed segments not checked since they were written); older segments are
compared with the checksums recorded when they passed (vdl_broker/log/verified.py), so a flipped
byte in one of them, or in its indexes, is still found at open, as the full walk found it."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_testing import data_entry, flip

from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.log.damage import DamageRecord
from vdl_broker.log.recovery import CLEAN_SHUTDOWN_FILE
from vdl_broker.log.verified import CHECKSUMS_FILE

SMALL = LogConfig(segment_bytes=600, tail_cache_bytes=0, fsync=False)
HEADER = 25
ENTRIES = 30


def contents(log: StreamLog) -> list[tuple[int, int, bytes]]:
    return [(e.index, e.term, bytes(e.data)) for e in log.entries(log.first_index, log.last_index + 1)]


def build(directory: Path) -> list[tuple[int, int, bytes]]:
    """A log of several segments, written, then opened and closed once (that open checks every
    segment and records them). Returns its entries."""
    log = StreamLog.open(directory, SMALL)
    log.append([data_entry(i, 2, (i - 1) * 2, 2, body_size=50) for i in range(1, ENTRIES + 1)])
    assert log.segment_count >= 5
    log.close()
    log = StreamLog.open(directory, SMALL)
    written = contents(log)
    log.close()
    assert (directory / CHECKSUMS_FILE).exists()
    return written


def walked(log: StreamLog) -> list[bool]:
    """For each segment, whether this open walked it (its indexes rebuilt from the log)."""
    return [segment.indexes_rebuilt for segment in log._segments]


@pytest.mark.parametrize("clean", [True, False])
def test_a_reopened_log_walks_only_what_no_open_checked_before(tmp_path: Path, clean: bool) -> None:
    written = build(tmp_path)
    if not clean:
        (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    log = StreamLog.open(tmp_path, SMALL)
    assert walked(log) == [False] * (log.segment_count - 1) + [True]
    assert contents(log) == written and log.damage is None
    before = log.segment_count
    log.append([data_entry(ENTRIES + i, 3, 2 * (ENTRIES + i - 1), 2, body_size=50) for i in range(1, 11)])
    grown = contents(log)
    log.close()
    log = StreamLog.open(tmp_path, SMALL)  # the segments sealed since the last open are walked
    assert walked(log) == [False] * (before - 1) + [True] * (log.segment_count - before + 1)
    assert contents(log) == grown
    log.close()


@pytest.mark.parametrize("clean", [True, False])
@pytest.mark.parametrize("which", [0, 2])
def test_a_flipped_byte_in_a_checked_old_segment_is_still_damage(tmp_path: Path, clean: bool, which: int) -> None:
    """As the full walk found it: the log is cut before the entry and the damage recorded with
    the highest index held (the records must not let an old segment through unread)."""
    build(tmp_path)
    log = StreamLog.open(tmp_path, SMALL)
    target = log._ensure_loaded(which)
    second = target.base_index + 1
    path, position = target.log_path, target.position_of(second)
    log.close()
    if not clean:
        (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    flip(path, position + HEADER + 70)  # inside the payload of the segment's second entry
    log = StreamLog.open(tmp_path, SMALL)
    assert (log.last_index, log.damage) == (second - 1, DamageRecord(ENTRIES))
    log.close()


@pytest.mark.parametrize("index_file", ["ridx", "oidx", "tidx"])
def test_a_flipped_byte_in_a_checked_segment_index_is_rebuilt_at_open(tmp_path: Path, index_file: str) -> None:
    written = build(tmp_path)
    log = StreamLog.open(tmp_path, SMALL)
    segment = log._segments[1]
    path = getattr(segment, index_file).path
    log.close()
    flip(path, 1)
    log = StreamLog.open(tmp_path, SMALL)
    assert log._segments[1].indexes_rebuilt  # walked again, its indexes rebuilt from the log
    assert contents(log) == written and log.damage is None
    assert [log.offset_for_index(i) for i in range(1, ENTRIES + 1)] == [2 * i for i in range(1, ENTRIES + 1)]
    assert [log.index_for_offset(2 * i) for i in range(ENTRIES)] == list(range(1, ENTRIES + 1))
    log.close()


@pytest.mark.parametrize("damage", ["missing", "torn", "garbage"])
def test_without_a_usable_record_every_segment_is_walked(tmp_path: Path, damage: str) -> None:
    written = build(tmp_path)
    records = tmp_path / CHECKSUMS_FILE
    if damage == "missing":
        records.unlink()
    elif damage == "torn":
        records.write_bytes(records.read_bytes()[:-5])
    else:
        flip(records, len(records.read_bytes()) // 2)
    log = StreamLog.open(tmp_path, SMALL)
    assert walked(log) == [True] * log.segment_count
    assert contents(log) == written
    log.close()


def test_a_segment_rewritten_after_a_truncation_is_walked_again(tmp_path: Path) -> None:
    """A truncation into an old segment and new appends make its record stale: the next open
    walks it (its size or checksum differs) and reads the new entries."""
    build(tmp_path)
    log = StreamLog.open(tmp_path, SMALL)
    cut = log._segments[1].base_index + 1
    log.truncate_suffix(cut)
    log.append([data_entry(i, 5, (i - 1) * 2, 2, body_size=50) for i in range(cut, cut + 20)])
    rewritten = contents(log)
    log.close()
    log = StreamLog.open(tmp_path, SMALL)
    assert contents(log) == rewritten and log.damage is None
    assert walked(log)[:2] == [False, True]
    log.close()

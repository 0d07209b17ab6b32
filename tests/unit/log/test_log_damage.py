"""Torn tail or damaged durable data: recovery cuts the log either way, but records damage (with
the highest index the log had held) only when the lost entries can have been synced."""

from __future__ import annotations

import itertools
import mmap
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from log_testing import data_entry, flip

from vdl_broker.log import DamagedEntry, LogConfig, StreamLog
from vdl_broker.log.damage import DAMAGE_FILE, DamageRecord
from vdl_broker.log.recovery import CLEAN_SHUTDOWN_FILE
from vdl_broker.log.segment import Segment
from vdl_broker.raft.log_storage import StreamLogStorage
from vdl_broker.raft.persistence import HARD_STATE_FILE, load_raft_state, save_commit_point, save_hard_state
from vdl_broker.raft.types import Damage, Entry, HardState

CONFIG = LogConfig(tail_cache_bytes=0, fsync=False)
HEADER = 25


def build(directory: Path, count: int = 10) -> list[int]:
    """`count` data entries of term 2; returns each entry's position in the one segment."""
    log = StreamLog.open(directory, CONFIG)
    log.append([data_entry(i, 2, (i - 1) * 2, 2, body_size=50) for i in range(1, count + 1)])
    positions = [log._segments[0].position_of(i) for i in range(1, count + 1)]
    log.close()
    return positions


def segment(directory: Path) -> Path:
    return next(directory.glob("*.log"))


def test_flipped_byte_after_clean_shutdown_is_damage(tmp_path: Path) -> None:
    positions = build(tmp_path)
    flip(segment(tmp_path), positions[4] + HEADER + 70)  # inside entry 5's payload
    log = StreamLog.open(tmp_path, CONFIG)
    assert log.last_index == 4 and log.damage == DamageRecord(10)
    assert load_raft_state(log, 3) == (HardState(0, 0), Damage(10, False, 0))
    log.close()
    reopened = StreamLog.open(tmp_path, CONFIG)  # the record survives until cleared
    assert reopened.last_index == 4 and reopened.damage == DamageRecord(10)
    reopened.clear_damage()
    assert not (tmp_path / DAMAGE_FILE).exists()
    reopened.close()


def test_flipped_byte_with_intact_entries_after_it_is_damage_after_a_crash(tmp_path: Path) -> None:
    positions = build(tmp_path)
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    flip(segment(tmp_path), positions[2] + HEADER + 60)
    log = StreamLog.open(tmp_path, CONFIG)
    assert log.last_index == 2 and log.damage == DamageRecord(10)
    log.close()


def test_torn_tail_after_a_crash_is_a_plain_cut(tmp_path: Path) -> None:
    positions = build(tmp_path)
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    os.truncate(segment(tmp_path), positions[9] + 30)
    log = StreamLog.open(tmp_path, CONFIG)
    assert log.last_index == 9 and log.damage is None
    assert load_raft_state(log, 3) == (HardState(0, 0), None)
    log.close()


def test_truncated_segment_after_clean_shutdown_is_damage(tmp_path: Path) -> None:
    positions = build(tmp_path)
    os.truncate(segment(tmp_path), positions[6] + 10)
    log = StreamLog.open(tmp_path, CONFIG)
    assert log.last_index == 6 and log.damage == DamageRecord(10)  # the Raft index held 10
    log.close()


def test_commit_point_beyond_a_torn_log_is_damage(tmp_path: Path) -> None:
    positions = build(tmp_path)
    save_commit_point(tmp_path, 10, 2)
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    os.truncate(segment(tmp_path), positions[7])
    log = StreamLog.open(tmp_path, CONFIG)
    assert log.last_index == 7 and log.damage is None
    assert load_raft_state(log, 3) == (HardState(0, 0), Damage(10, False, 0))
    assert log.damage == DamageRecord(10)  # recorded before the node runs
    assert load_raft_state(log, 1) == (HardState(0, 0), None)  # a single voter goes on
    log.close()


def test_unreadable_hard_state_is_damage_not_term_zero(tmp_path: Path) -> None:
    build(tmp_path)
    save_hard_state(tmp_path, HardState(7, 3))
    flip(tmp_path / HARD_STATE_FILE, 2)
    log = StreamLog.open(tmp_path, CONFIG)
    hard_state, damage = load_raft_state(log, 3)
    assert hard_state == HardState(2, 0) and damage == Damage(0, True, 2)
    assert log.damage == DamageRecord(0, 2)
    log.close()


def test_flipped_byte_in_an_old_sealed_segment_is_damage(tmp_path: Path) -> None:
    """Regression: segments before the recovery point were trusted at open, so a flipped byte in
    an old sealed segment went unnoticed (served to followers and consumers, counted in votes).
    Every segment is now re-read with CRC checks when the log opens, after a clean stop or not."""
    small = LogConfig(segment_bytes=600, tail_cache_bytes=0, fsync=False)
    for clean in (True, False):
        directory = tmp_path / f"clean-{clean}"
        log = StreamLog.open(directory, small)
        log.append([data_entry(i, 2, (i - 1) * 2, 2, body_size=50) for i in range(1, 31)])
        assert log.segment_count >= 4
        first = log._segments[0]
        position = first.position_of(2)
        log.close()
        if not clean:
            (directory / CLEAN_SHUTDOWN_FILE).unlink()
        flip(first.log_path, position + HEADER + 70)  # inside entry 2's payload, an old segment
        log = StreamLog.open(directory, small)
        assert log.last_index == 1 and log.damage == DamageRecord(30), (clean, log.last_index, log.damage)
        log.close()
        trusting = StreamLog.open(directory, LogConfig(segment_bytes=600, tail_cache_bytes=0, fsync=False,
                                                       verify_on_open=False))
        assert trusting.last_index == 1  # the cut is durable
        trusting.close()


def build_segments(directory: Path, config: LogConfig, count: int = 40) -> tuple[StreamLog, list[Entry]]:
    log = StreamLog.open(directory, config)
    entries = [data_entry(i, 2, (i - 1) * 2, 2, max_timestamp=1000 + i, body_size=50) for i in range(1, count + 1)]
    log.append(entries)
    assert log.segment_count >= 3
    return log, entries


@dataclass
class FlippedWhileOpen:
    log: StreamLog  # open, with no tail cache: every read meets the segments
    entries: list[Entry]
    segment: Segment  # the second one, holding the damaged entry
    index: int  # the damaged entry
    seen: list[DamagedEntry]  # what the log told its listener

    def check_told(self, error: DamagedEntry) -> None:
        assert error.segment_base == self.segment.base_index and self.seen == [error]


def flip_while_open(directory: Path, at: int) -> FlippedWhileOpen:
    """A log of 1000-byte segments, open, with a bit flipped `at` bytes into the third entry of
    its second segment. Reopened before: the terms of the entries a log appended since it opened
    are answered from memory (TermRuns), those written before from their segments."""
    config = LogConfig(segment_bytes=1000, tail_cache_bytes=0, fsync=False)
    log, entries = build_segments(directory, config)
    log.close()
    log = StreamLog.open(directory, config)
    seen: list[DamagedEntry] = []
    log.on_damaged = seen.append
    segment = log._ensure_loaded(1)
    index = segment.base_index + 2
    flip(segment.log_path, segment.position_of(index) + at)
    return FlippedWhileOpen(log, entries, segment, index, seen)


@pytest.mark.parametrize("verify_on_open", [True, False])
def test_a_byte_flipped_while_the_log_is_open_is_found_by_the_read_that_meets_it(
        tmp_path: Path, verify_on_open: bool) -> None:
    """The open checked the files; a byte flipped since (a running node's disk) must not leave
    the log: the read that meets it raises DamagedEntry and tells the log's listener, and after
    check_again_from the next open cuts the log there and records the damage -- also when sealed
    segments are otherwise trusted unread (verify_on_open off)."""
    config = LogConfig(segment_bytes=1000, tail_cache_bytes=0, fsync=False, verify_on_open=verify_on_open)
    log, entries = build_segments(tmp_path, config)
    log.close()
    log = StreamLog.open(tmp_path, config)  # this open checks (and records) the sealed segments
    seen: list[DamagedEntry] = []
    log.on_damaged = seen.append
    second = log._ensure_loaded(1)
    damaged = second.base_index + 2
    flip(second.log_path, second.position_of(damaged) + HEADER + 40)

    before = log.entries(1, damaged)  # up to the damaged entry: read as ever
    assert [(e.index, e.term, bytes(e.data)) for e in before] == [
        (e.index, e.term, bytes(e.data)) for e in entries[:damaged - 1]]
    with pytest.raises(DamagedEntry) as from_raft:
        log.entries(damaged - 1, log.last_index + 1)
    with pytest.raises(DamagedEntry) as from_kafka:
        log.read((damaged - 1) * 2, 1 << 20)
    assert from_raft.value.segment_base == from_kafka.value.segment_base == second.base_index
    assert seen == [from_raft.value, from_kafka.value]

    log.close()
    log.check_again_from(second.base_index)
    reopened = StreamLog.open(tmp_path, config)
    assert reopened.last_index == damaged - 1 and reopened.damage == DamageRecord(len(entries))
    assert [bytes(e.data) for e in reopened.entries(1, damaged)] == [bytes(e.data) for e in entries[:damaged - 1]]
    reopened.close()


def test_a_segment_cut_short_while_the_log_is_open_is_found_by_every_read_past_its_end(tmp_path: Path) -> None:
    """A file cut short under an open log: reading past its end through the mapping raised
    SIGBUS, which killed the process. Every read that reaches past the end now raises
    DamagedEntry and tells the listener -- the Raft core's reads of an entry's term and the
    offset lookups too, not only reads of payloads -- and the reopened log is cut there with
    the damage recorded."""
    config = LogConfig(segment_bytes=3 * mmap.PAGESIZE, tail_cache_bytes=0, fsync=False)
    log = StreamLog.open(tmp_path, config)
    entries = [data_entry(i, 2, (i - 1) * 2, 2, max_timestamp=1000 + i, body_size=50) for i in range(1, 201)]
    log.append(entries)
    log.close()
    log = StreamLog.open(tmp_path, config)  # the terms of what it appended are not read from its files
    seen: list[DamagedEntry] = []
    log.on_damaged = seen.append
    second = log._ensure_loaded(1)
    os.truncate(second.log_path, mmap.PAGESIZE)  # the segment's later pages wholly past the end
    ends = [second.ridx.positions[k] + HEADER + len(entries[second.base_index + k - 1].data)
            for k in range(second.count)]
    first_lost = second.base_index + next(k for k, end in enumerate(ends) if end > mmap.PAGESIZE)
    gone = second.base_index + next(k for k in range(second.count) if second.ridx.positions[k] >= mmap.PAGESIZE)

    assert [bytes(e.data) for e in log.entries(1, first_lost)] == [bytes(e.data) for e in entries[:first_lost - 1]]
    reads = [lambda: log.entries(first_lost, log.last_index + 1), lambda: log.read((first_lost - 1) * 2, 1 << 20),
             lambda: log.term_at(gone), lambda: log.offset_for_index(gone),
             lambda: log.index_for_offset((first_lost - 1) * 2), lambda: log.offset_for_timestamp(1000 + gone)]
    raised = []
    for read in reads:
        with pytest.raises(DamagedEntry, match="lies past the end of the file") as error:
            read()
        raised.append(error.value)
    assert [error.segment_base for error in raised] == [second.base_index] * len(reads)
    assert seen == raised
    storage = StreamLogStorage(log)  # the Raft core's reads: the group stops, the core's step goes on
    assert storage.term_at(gone) == 0 and storage.entries(first_lost, log.last_index + 1) == []
    assert len(seen) == len(raised) + 2

    log.close()
    log.check_again_from(second.base_index)
    reopened = StreamLog.open(tmp_path, config)
    assert reopened.last_index == first_lost - 1 and reopened.damage == DamageRecord(len(entries))
    reopened.close()


READS_OF_A_DAMAGED_LENGTH = {
    "entries ending before the segment's end": lambda log, damaged: log.entries(damaged - 1, damaged + 1),
    "entries to the segment's end": lambda log, damaged: log.entries(damaged - 1, log.last_index + 1),
    "batches by offset": lambda log, damaged: log.read((damaged - 1) * 2, 1 << 20),
    "the offset after an entry": lambda log, damaged: log.offset_for_index(damaged),
    "the entry of an offset": lambda log, damaged: log.index_for_offset((damaged - 1) * 2),
}


@pytest.mark.parametrize("read", READS_OF_A_DAMAGED_LENGTH.values(), ids=READS_OF_A_DAMAGED_LENGTH.keys())
def test_a_length_damaged_while_the_log_is_open_is_found_by_the_read_that_meets_it(
        tmp_path: Path, read: Callable[[StreamLog, int], object]) -> None:
    """The high byte of an entry's length flipped under an open log: a walk over the segment
    goes past its end. Before: a read to the segment's end raised ValueError, which is no damage
    (a consumer was stuck at that offset for good); one ending before it took the entry's end
    for a damaged index and rebuilt the indexes, which stopped at that entry and quietly dropped
    the rest of the segment from the open log. Both are damage now, and the reopened log is cut
    there with the damage recorded."""
    damage = flip_while_open(tmp_path, HEADER - 1)  # the length's high byte

    with pytest.raises(DamagedEntry, match="is unreadable") as error:
        read(damage.log, damage.index)
    damage.check_told(error.value)
    damage.log.close()
    damage.log.check_again_from(damage.segment.base_index)
    reopened = StreamLog.open(tmp_path, damage.log.config)
    assert reopened.last_index == damage.index - 1 and reopened.damage == DamageRecord(len(damage.entries))
    reopened.close()


def test_a_sealed_segment_cut_short_before_its_first_read_is_damage(tmp_path: Path) -> None:
    """After an open, sealed segments are loaded on their first read. One cut short before that
    was loaded as it now was: fewer entries than it held (logged, then used), so a fetch read to
    its new end and went on at the next segment, and a consumer skipped the offsets in between
    (found by the chaos campaign). It is damage now, as any read past a cut is."""
    # fsync on: the open trusts what was synced (before the recovery point) and checked before
    config = LogConfig(segment_bytes=3 * mmap.PAGESIZE, tail_cache_bytes=0, fsync=True)
    log = StreamLog.open(tmp_path, config)
    entries = [data_entry(i, 2, (i - 1) * 2, 2, body_size=50) for i in range(1, 401)]
    log.append(entries)
    log.close()
    StreamLog.open(tmp_path, config).close()  # this open checks (and records) the sealed segments
    log = StreamLog.open(tmp_path, config)
    second = log._segments[1]
    assert not second.loaded  # found as recorded by this open, loaded by the first read
    os.truncate(second.log_path, mmap.PAGESIZE)
    seen: list[DamagedEntry] = []
    log.on_damaged = seen.append

    with pytest.raises(DamagedEntry, match="is unreadable: the segment's entries end there") as error:
        log.read((second.base_index - 1) * 2, 1 << 20)
    assert error.value.segment_base == second.base_index and seen == [error.value]
    log.close()
    log.check_again_from(second.base_index)
    reopened = StreamLog.open(tmp_path, config)
    ends = itertools.accumulate(HEADER + len(e.data) for e in entries[second.base_index - 1:])
    whole = sum(1 for end in ends if end <= mmap.PAGESIZE)  # the entries the cut left whole
    assert reopened.last_index == second.base_index + whole - 1 and reopened.damage == DamageRecord(len(entries))
    reopened.close()


LOOKUPS_OF_A_DAMAGED_BATCH_HEADER = {
    "the offset after an entry": lambda log, damaged: log.offset_for_index(damaged),
    "the entry of an offset": lambda log, damaged: log.index_for_offset((damaged - 1) * 2 + 1),
    "a timestamp's offset": lambda log, damaged: log.offset_for_timestamp(1000 + damaged),
}


@pytest.mark.parametrize("lookup", LOOKUPS_OF_A_DAMAGED_BATCH_HEADER.values(),
                         ids=LOOKUPS_OF_A_DAMAGED_BATCH_HEADER.keys())
def test_a_batch_header_damaged_while_the_log_is_open_is_found_by_an_offset_lookup(
        tmp_path: Path, lookup: Callable[[StreamLog, int], object]) -> None:
    """Offset lookups read the batch header of the entry they land on. Before, they did not check
    its CRC: a flipped bit in a batch's last offset delta gave a wrong offset (a high watermark,
    an epoch's end offset) instead of damage. (A timestamp lookup rebuilds the segment's time
    index first, which stops at the batch whose offsets no longer follow on: damage too.)"""
    damage = flip_while_open(tmp_path, HEADER + 26)  # the low byte of its last offset delta

    with pytest.raises(DamagedEntry, match="fails its CRC|is unreadable") as error:  # the latter: a rebuild
        lookup(damage.log, damage.index)
    damage.check_told(error.value)
    damage.log.close()


def test_a_term_damaged_while_the_log_is_open_is_found_by_the_raft_cores_lookup(tmp_path: Path) -> None:
    """The Raft core asks for the term of old entries (a follower checking where a leader's
    entries attach, a leader sending entries to one catching up). Before, the term came from the
    entry's header unchecked: a flipped bit in it was a wrong term, a conflict the follower would
    resolve by dropping entries it had acknowledged."""
    damage = flip_while_open(tmp_path, 5)  # the low byte of its term

    with pytest.raises(DamagedEntry, match="fails its CRC") as error:
        damage.log.term_at(damage.index)
    damage.check_told(error.value)
    assert StreamLogStorage(damage.log).term_at(damage.index) == 0  # the core's reads: the group stops
    damage.log.close()

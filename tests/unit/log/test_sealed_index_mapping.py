"""A sealed segment's indexes are read from their files, mapped, not held in memory: every lookup
through them answers exactly what was written (the position and term of an index, batches by
offset, offsets by time), after the appends that sealed them, after a clean reopen and after a
killed process's reopen; a truncation into a sealed segment makes it the active one again, and a
damaged, cut or missing index file is rebuilt as before, also one cut short while mapped."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from log_testing import data_entry, noop_entry

from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.log.entry import HEADER_SIZE
from vdl_broker.log.segment import Segment
from vdl_broker.raft.types import Entry

CONFIG = LogConfig(segment_bytes=1000, index_interval_bytes=150, tail_cache_bytes=0, fsync=False)
COUNT = 90


def written(count: int = COUNT) -> list[Entry]:
    """Terms 1, 2, 3 (30 entries each); a NOOP every 4th entry, else a batch of 2 records whose
    max timestamp is 1000 + its index."""
    entries: list[Entry] = []
    offset = 0
    for index in range(1, count + 1):
        term = (index - 1) // 30 + 1
        if index % 4 == 0:
            entries.append(noop_entry(index, term))
        else:
            entries.append(data_entry(index, term, offset, 2, 1000 + index, 30))
            offset += 2
    return entries


def placed(entries: list[Entry]) -> dict[int, tuple[int, int]]:
    """Entry index -> (its segment's base index, its position there), as the log rolls: a new
    segment when an entry would end past segment_bytes."""
    out: dict[int, tuple[int, int]] = {}
    base, position = entries[0].index, 0
    for entry in entries:
        size = HEADER_SIZE + len(entry.data)
        if position + size > CONFIG.segment_bytes and position > 0:
            base, position = entry.index, 0
        out[entry.index] = (base, position)
        position += size
    return out


def write(directory: Path, entries: list[Entry]) -> StreamLog:
    log = StreamLog.open(directory, CONFIG)
    for entry in entries:
        log.append([entry])
    return log


def segment_of(log: StreamLog, index: int) -> Segment:
    return log._ensure_loaded(log._segment_for_index(index))


def check(log: StreamLog, entries: list[Entry]) -> None:
    """Every answer the indexes give, against what was written."""
    where = placed(entries)
    assert [s.base_index for s in log._segments] == sorted({base for base, _ in where.values()})
    for segment in log._segments[:-1]:
        segment = segment_of(log, segment.base_index)
        assert (segment.ridx.mapped, segment.oidx.mapped, segment.tidx.mapped) == (True, True, True)
    active = log._segments[-1]
    assert not active.ridx.mapped
    for entry in entries:
        segment = segment_of(log, entry.index)
        assert (segment.base_index, segment.position_of(entry.index)) == where[entry.index]
        assert log.term_at(entry.index) == entry.term
        assert [(e.index, e.term, e.type, bytes(e.data)) for e in log.entries(entry.index, entry.index + 1)] == \
            [(entry.index, entry.term, entry.type, bytes(entry.data))]
    assert [(e.index, e.term, bytes(e.data)) for e in log.entries(1, len(entries) + 1)] == \
        [(e.index, e.term, bytes(e.data)) for e in entries]
    batches = [e for e in entries if e.type == 1]
    for k, entry in enumerate(batches):
        for offset in (2 * k, 2 * k + 1):  # either record of the batch: the batch, then the rest
            result = log.read(offset, 1)
            assert [bytes(b) for b in result.buffers] == [bytes(entry.data)]
            assert log.index_for_offset(offset) == entry.index
        assert log.offset_for_index(entry.index) == 2 * k + 2
        assert log.offset_for_timestamp(1000 + entry.index) == (2 * k, 1000 + entry.index)


def test_lookups_through_a_sealed_segments_mapped_indexes_answer_what_was_written(tmp_path: Path) -> None:
    entries = written()
    log = write(tmp_path / "log", entries)
    assert log.segment_count >= 4
    check(log, entries)
    log.close()
    reopened = StreamLog.open(tmp_path / "log", CONFIG)
    check(reopened, entries)
    reopened.close()


def test_a_killed_processs_log_reopens_with_its_sealed_indexes_mapped(tmp_path: Path) -> None:
    entries = written()
    log = write(tmp_path / "log", entries)
    log.sync_now()
    # the files as a killed process leaves them: no clean close, the active segment's indexes unwritten
    shutil.copytree(tmp_path / "log", tmp_path / "killed")
    log.close()
    reopened = StreamLog.open(tmp_path / "killed", CONFIG)
    check(reopened, entries)
    more = written(COUNT + 10)
    reopened.append(more[COUNT:])
    check(reopened, more)
    reopened.close()


def test_a_truncation_into_a_sealed_segment_makes_it_active_and_rewrites_its_index(tmp_path: Path) -> None:
    entries = written()
    log = write(tmp_path / "log", entries)
    where = placed(entries)
    bases = sorted({base for base, _ in where.values()})
    base = bases[1]  # the second segment, sealed
    sealed = segment_of(log, base)
    assert sealed.ridx.mapped
    positions = sealed.ridx.positions  # a view of its mapped file, as a reader may hold it
    held = list(positions)
    cut = base + 3
    log.truncate_suffix(cut)
    assert (log.last_index, log.segment_count, log.active_base_index) == (cut - 1, 2, base)
    assert not log._segments[-1].ridx.mapped
    # new entries of a later term from the cut on, across the next roll
    replaced = written(cut - 1) + [e for e in written(COUNT) if e.index >= cut]
    for entry in replaced[cut - 1:]:
        entry.term = 4
    for entry in replaced[cut - 1:]:
        log.append([entry])
    check(log, replaced)
    assert list(positions) == held  # the view read before still reads the file it mapped
    log.close()
    reopened = StreamLog.open(tmp_path / "log", CONFIG)
    check(reopened, replaced)
    reopened.close()


def test_a_damaged_or_missing_sealed_index_file_is_rebuilt_and_mapped(tmp_path: Path) -> None:
    entries = written()
    write(tmp_path / "log", entries).close()
    ridx = sorted((tmp_path / "log").glob("*.ridx"))
    ridx[0].unlink()
    ridx[1].write_bytes(ridx[1].read_bytes()[:-2])  # a partial record
    timeindex = sorted((tmp_path / "log").glob("*.timeindex"))[2]
    timeindex.write_bytes(b"\xff" * timeindex.stat().st_size)
    log = StreamLog.open(tmp_path / "log", CONFIG)
    check(log, entries)
    log.close()
    where = placed(entries)
    for path, base in zip(ridx[:2], sorted({base for base, _ in where.values()}), strict=False):
        count = sum(1 for b, _ in where.values() if b == base)
        assert path.stat().st_size == 4 * count


def test_a_sealed_index_damaged_while_mapped_is_rebuilt_before_answering(tmp_path: Path) -> None:
    entries = written()
    log = write(tmp_path / "log", entries)
    segment = segment_of(log, placed(entries)[40][0])
    assert segment.ridx.mapped
    k = 40 - segment.base_index
    data = bytearray(segment.ridx.path.read_bytes())
    data[4 * k:4 * k + 4] = b"\x07\x00\x00\x00"  # entry 40's record points into another entry
    with open(segment.ridx.path, "r+b") as f:  # in place: the mapping sees it
        f.write(data)
    assert segment.ridx.positions[k] == 7
    check(log, entries)
    assert segment_of(log, 40).ridx.mapped
    log.close()


@pytest.mark.parametrize("suffix", [".ridx", ".index", ".timeindex"])
def test_a_sealed_index_cut_short_while_mapped_is_rebuilt_before_answering(tmp_path: Path, suffix: str) -> None:
    """Reading a mapped page past the end of a file cut short raised SIGBUS, which killed the
    process: a lookup first makes sure the mapped index files still hold what is mapped."""
    entries = written()
    log = write(tmp_path / "log", entries)
    segment = segment_of(log, placed(entries)[40][0])
    index = {".ridx": segment.ridx, ".index": segment.oidx, ".timeindex": segment.tidx}[suffix]
    assert index.mapped and index.path.suffix == suffix
    os.truncate(index.path, 0)
    check(log, entries)
    assert index.mapped and index.path.stat().st_size > 0
    log.close()

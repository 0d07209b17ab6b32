"""METADATA entries (the metadata group's commands) between DATA entries: stored, recovered and
read back like NOOP/CONFIG -- no Kafka offsets, no batch checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_testing import data_entry, make_batch

from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.raft.types import Entry, EntryType


def config() -> LogConfig:
    # small segments so METADATA entries land at segment starts and ends too
    return LogConfig(segment_bytes=400, index_interval_bytes=100, tail_cache_bytes=0, fsync=False)


def command(index: int) -> bytes:
    # deliberately not a RecordBatch: shorter than a batch header, and a magic-looking byte
    return b'{"op":"create","stream":"s%d"}\x02' % index


def written() -> list[Entry]:
    """Indexes 1..24: DATA (2 records each) at odd indexes, METADATA at even ones."""
    entries: list[Entry] = []
    offset = 0
    for index in range(1, 25):
        if index % 2:
            entries.append(data_entry(index, 1, offset, record_count=2, body_size=20))
            offset += 2
        else:
            entries.append(Entry(index, 1, EntryType.METADATA, command(index)))
    return entries


def check(log: StreamLog, entries: list[Entry]) -> None:
    assert (log.first_index, log.last_index, log.last_term) == (1, 24, 1)
    assert log.segment_count > 3
    got = log.entries(1, 25)
    assert [(e.index, e.term, e.type, bytes(e.data)) for e in got] == \
        [(e.index, e.term, e.type, bytes(e.data)) for e in entries]
    assert all(e.type == EntryType.METADATA and bytes(e.data) == command(e.index) for e in got[1::2])
    # 12 DATA batches of 2 records: offsets 0..23; METADATA entries take none
    assert (log.log_start_offset, log.log_end_offset) == (0, 24)
    for index in range(1, 25):
        data_before = (index + 1) // 2  # DATA entries at indexes <= index
        assert log.offset_for_index(index) == 2 * data_before
    for offset in range(24):
        assert log.index_for_offset(offset) == 2 * (offset // 2) + 1
    result = log.read(0, 1 << 20)
    assert [bytes(b) for b in result.buffers] == [make_batch(2 * k, 2, 0, 20) for k in range(12)]
    assert (result.first_offset, result.next_offset) == (0, 24)
    middle = log.read(7, 1)
    assert [bytes(b) for b in middle.buffers] == [make_batch(6, 2, 0, 20)]
    assert (middle.first_offset, middle.next_offset) == (6, 8)


@pytest.mark.parametrize("reopen", ["clean", "unclean"])
def test_metadata_entries_between_data_entries(tmp_path: Path, reopen: str) -> None:
    entries = written()
    log = StreamLog.open(tmp_path / "s", config())
    log.append(entries[:5])
    log.append(entries[5:])
    check(log, entries)
    if reopen == "clean":
        log.close()
    else:
        log._release()  # like kill -9: no clean-shutdown marker, recovery re-reads everything
    log = StreamLog.open(tmp_path / "s", config())
    check(log, entries)
    # appends continue after recovery: offsets carry on past the METADATA tail
    log.append([Entry(25, 2, EntryType.METADATA, b"x"), data_entry(26, 2, 24)])
    assert (log.last_index, log.last_term, log.log_end_offset) == (26, 2, 25)
    assert log.offset_for_index(25) == 24
    log.close()


def test_metadata_entry_ends_a_recovered_log(tmp_path: Path) -> None:
    entries = written()[:4]  # ends with METADATA at index 4
    log = StreamLog.open(tmp_path / "s", config())
    log.append(entries)
    log._release()
    log = StreamLog.open(tmp_path / "s", config())
    assert (log.last_index, log.log_end_offset, log.offset_for_index(4)) == (4, 4, 4)
    assert bytes(log.entries(4, 5)[0].data) == command(4)
    log.close()

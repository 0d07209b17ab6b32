"""A log of more than 10 segments: first/middle/last offsets and timestamps find the right entries,
before and after a clean and an unclean reopen (lazily loaded sealed segments)."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_testing import data_entry, noop_entry

from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.raft.types import Entry, EntryType

CONFIG = dict(segment_bytes=4000, index_interval_bytes=256, tail_cache_bytes=0, fsync=False)


def build(directory: Path) -> tuple[StreamLog, list[Entry]]:
    log = StreamLog.open(directory, LogConfig(**CONFIG))
    entries: list[Entry] = []
    offset = 0
    for index in range(1, 601):
        if index % 50 == 0:
            entry = noop_entry(index, index // 100 + 1)
        else:
            entry = data_entry(index, index // 100 + 1, offset, 3, 1_000_000 + 7 * index, body_size=index % 40)
            offset += 3
        entries.append(entry)
    for start in range(0, 600, 17):
        log.append(entries[start:start + 17])
    return log, entries


def check_lookups(log: StreamLog, entries: list[Entry]) -> None:
    assert log.segment_count > 10
    data = [e for e in entries if e.type == EntryType.DATA]
    picks = [data[0], data[1], data[len(data) // 2], data[len(data) // 2 + 1], data[-2], data[-1]]
    for entry in picks:
        base = int.from_bytes(bytes(entry.data)[:8], "big")
        for offset in (base, base + 1, base + 2):
            result = log.read(offset, 1)
            assert bytes(result.buffers[0]) == bytes(entry.data)
            assert result.first_offset == base and result.next_offset == base + 3
            assert log.index_for_offset(offset) == entry.index
        timestamp = 1_000_000 + 7 * entry.index
        assert log.offset_for_timestamp(timestamp) == (base, timestamp)
        assert log.offset_for_timestamp(timestamp - 3) == (base, timestamp)
        assert log.entries(entry.index, entry.index + 1)[0].data == entry.data
        assert log.term_at(entry.index) == entry.term
    assert log.offset_for_timestamp(0) == (0, 1_000_007)
    assert log.offset_for_timestamp(2_000_000) is None
    everything = log.read(0, 1 << 30)
    assert b"".join(everything.buffers) == b"".join(bytes(e.data) for e in data)


@pytest.mark.parametrize("reopen", ["none", "clean", "unclean"])
def test_many_segments(tmp_path: Path, reopen: str) -> None:
    log, entries = build(tmp_path / "s")
    if reopen == "clean":
        log.close()
        log = StreamLog.open(tmp_path / "s", LogConfig(**CONFIG))
    elif reopen == "unclean":
        log._release()
        log = StreamLog.open(tmp_path / "s", LogConfig(**CONFIG))
    check_lookups(log, entries)
    log.close()

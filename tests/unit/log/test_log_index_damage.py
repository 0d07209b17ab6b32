"""Damaged index files are rebuilt, never trusted: after a flipped byte anywhere in a sealed
segment's Raft index, offset index or time index, every read answers exactly what an intact log
answers (entries by index, batches by offset, offset <-> index, offset by timestamp)."""

from __future__ import annotations

import os
import shutil
from array import array
from pathlib import Path

import pytest
from log_testing import data_entry, noop_entry

from tests.support.disk import flip_byte
from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.log.offset_index import OffsetIndex
from vdl_wire.records.record_batch import iter_batches

CONFIG = LogConfig(segment_bytes=1000, index_interval_bytes=150, tail_cache_bytes=0, fsync=False)


def write_log(directory: Path) -> None:
    log = StreamLog.open(directory, CONFIG)
    offset = 0
    for index in range(1, 61):
        if index % 4 == 0:
            log.append([noop_entry(index, 1)])
        else:
            log.append([data_entry(index, 1, offset, 2, 1000 + index, 30)])
            offset += 2
    log.close()


def answers(log: StreamLog) -> dict[str, object]:
    """Everything a reader can ask, as plain values."""
    end = log.log_end_offset
    batches = {}
    for offset in range(log.log_start_offset, end):
        result = log.read(offset, 1)
        batches[offset] = [bytes(b) for b in result.buffers][:1]
    return {
        "entries": [(e.index, e.term, int(e.type), bytes(e.data)) for e in log.entries(log.first_index, log.last_index + 1)],
        "one by one": [bytes(log.entries(i, i + 1)[0].data) for i in range(log.first_index, log.last_index + 1)],
        "batches": batches,
        "index of offset": [log.index_for_offset(o) for o in range(log.log_start_offset, end)],
        "offset of index": [log.offset_for_index(i) for i in range(log.first_index, log.last_index + 1)],
        "by time": [log.offset_for_timestamp(t) for t in range(1000, 1062)],
        "terms": [log.term_at(i) for i in range(log.first_index, log.last_index + 1)],
    }


@pytest.mark.parametrize("suffix", [".ridx", ".index", ".timeindex"])
def test_a_flipped_byte_in_a_sealed_segments_index_changes_no_answer(tmp_path: Path, suffix: str) -> None:
    pristine = tmp_path / "pristine"
    write_log(pristine)
    expected = answers(log := StreamLog.open(pristine, CONFIG))
    log.close()
    assert all(len(list(iter_batches(memoryview(b[0])))) == 1 for b in expected["batches"].values())
    target = sorted(pristine.glob(f"*{suffix}"))[1]  # a sealed segment's index
    size = target.stat().st_size
    assert size > 0
    for position in range(size):
        damaged = tmp_path / f"damaged-{position}"
        shutil.copytree(pristine, damaged)
        flip_byte(damaged / target.name, position)
        log = StreamLog.open(damaged, CONFIG)
        try:
            assert answers(log) == expected, f"byte {position} of {target.name} flipped"
        finally:
            log.close()
        shutil.rmtree(damaged)


def test_an_index_file_cut_short_before_its_next_flush_is_written_whole(tmp_path: Path) -> None:
    """The flush writes only the records not yet on disk, at their place in the file: when the
    file was cut short meanwhile, that place lay past its end and the records before it were a
    hole (zeros). It writes again from the file's end."""
    index = OffsetIndex(tmp_path / "00000000000000000001.index")
    for record in range(100):
        index.append(record, record * 10)
    index.flush()
    os.truncate(index.path, 5 * index.record_size)
    for record in range(100, 120):
        index.append(record, record * 10)
    index.flush()
    assert index.path.read_bytes() == array("I", [v for r in range(120) for v in (r, r * 10)]).tobytes()

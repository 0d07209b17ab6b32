"""State snapshots kept by the log (`<offset>.snapshot`): written and read back whole, a damaged
or foreign one skipped for an older one, and the files kept in step with the segments through
retention, a tail truncation, crash recovery and a reset."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_testing import data_entry

from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.log.state_snapshots import (
    VERSION,
    decode_snapshot,
    encode_snapshot,
    snapshot_offsets,
    snapshot_path,
)

pytestmark = pytest.mark.unit


def open_log(directory: Path) -> StreamLog:
    return StreamLog.open(directory, LogConfig(segment_bytes=400, index_interval_bytes=100, tail_cache_bytes=0,
                                               fsync=False))


def fill(log: StreamLog, count: int, term: int = 1) -> None:
    """`count` data entries of 2 records each (about 3 per segment)."""
    for _ in range(count):
        log.append([data_entry(log.last_index + 1, term, log.log_end_offset, record_count=2, body_size=40)])


def test_roundtrip_and_the_newest_at_or_below_wins(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 10)
    for offset in (4, 10, 16):
        log.save_state_snapshot(offset, f"state {offset}".encode())
    assert log.state_snapshot_offsets() == [4, 10, 16]
    assert snapshot_path(tmp_path, 10).name == "00000000000000000010.snapshot"
    assert log.latest_state_snapshot(20) == (16, b"state 16")
    assert log.latest_state_snapshot(15) == (10, b"state 10")
    assert log.latest_state_snapshot(3) is None
    with pytest.raises(ValueError, match="snapshot offset 21 outside the log"):
        log.save_state_snapshot(21, b"beyond the end")
    log.close()
    assert open_log(tmp_path).latest_state_snapshot(20) == (16, b"state 16")  # survives a reopen


@pytest.mark.parametrize("damage", ["flipped byte", "cut short", "newer version", "wrong name"])
def test_a_damaged_snapshot_is_deleted_and_the_older_one_used(tmp_path: Path, damage: str) -> None:
    log = open_log(tmp_path)
    fill(log, 10)
    log.save_state_snapshot(6, b"older")
    log.save_state_snapshot(12, b"newer")
    path = snapshot_path(tmp_path, 12)
    data = bytearray(path.read_bytes())
    if damage == "flipped byte":
        data[-6] ^= 0x40
    elif damage == "cut short":
        del data[-3:]
    elif damage == "newer version":
        data = bytearray(encode_snapshot(12, b"newer"))
        data[4:6] = (VERSION + 1).to_bytes(2, "little")
    else:
        data = bytearray(encode_snapshot(8, b"newer"))  # a file renamed: it holds another offset
    path.write_bytes(bytes(data))
    assert log.latest_state_snapshot(20) == (6, b"older")
    assert log.state_snapshot_offsets() == [6]


def test_decode_names_what_is_wrong() -> None:
    good = encode_snapshot(5, b"payload")
    assert decode_snapshot(good, 5) == b"payload"
    with pytest.raises(ValueError, match="checksum mismatch"):
        decode_snapshot(good[:-1] + bytes([good[-1] ^ 1]), 5)
    with pytest.raises(ValueError, match="format version 2, this node reads version 1"):
        decode_snapshot(good[:4] + (2).to_bytes(2, "little") + good[6:], 5)
    with pytest.raises(ValueError, match="magic"):
        decode_snapshot(b"XXXX" + good[4:], 5)
    with pytest.raises(ValueError, match="shorter than"):
        decode_snapshot(good[:10], 5)


def test_retention_deletes_the_snapshots_below_the_new_start(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 12)
    assert log.segment_count >= 3
    for offset in range(0, log.log_end_offset + 1, 4):
        log.save_state_snapshot(offset, b"s")
    log.sync_now()
    log.delete_through(log.last_index - 1)
    start = log.log_start_offset
    assert start > 0
    assert log.state_snapshot_offsets() == [o for o in range(0, 25, 4) if o >= start]
    assert log.latest_state_snapshot(start - 1) is None


def test_a_tail_truncation_deletes_the_snapshots_above_the_new_end(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 12)
    for offset in (4, 12, 20, 24):
        log.save_state_snapshot(offset, b"s")
    log.truncate_suffix(7)  # Raft conflict: entries 7.. go (offsets 12..)
    assert log.log_end_offset == 12
    assert log.state_snapshot_offsets() == [4, 12]
    fill(log, 2, term=2)
    assert log.latest_state_snapshot(log.log_end_offset) == (12, b"s")


def test_open_drops_snapshots_beyond_a_recovered_log_and_reset_drops_all(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 12)
    log.save_state_snapshot(8, b"s")
    log.close()
    # A snapshot a crash left beyond the durable log (the log lost its tail): never used.
    (tmp_path / snapshot_path(tmp_path, 100).name).write_bytes(encode_snapshot(100, b"beyond"))
    log = open_log(tmp_path)
    assert snapshot_offsets(tmp_path) == [8]
    log.reset(50, 3, 200)
    assert snapshot_offsets(tmp_path) == []

"""Raft's small files: hard state and commit point, in their fixed on-disk formats."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest

from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.raft.persistence import (
    COMMIT_POINT_FILE,
    HARD_STATE_FILE,
    load_commit_point,
    load_hard_state,
    save_commit_point,
    save_hard_state,
)
from vdl_broker.raft.types import NONE, Entry, EntryType, HardState


def test_hard_state_round_trip_and_corruption(tmp_path: Path) -> None:
    assert load_hard_state(tmp_path) == HardState(0, NONE)
    save_hard_state(tmp_path, HardState(5, 2))
    assert load_hard_state(tmp_path) == HardState(5, 2)
    save_hard_state(tmp_path, HardState(6, NONE))
    assert load_hard_state(tmp_path) == HardState(6, NONE)
    assert not list(tmp_path.glob("*.tmp"))
    path = tmp_path / HARD_STATE_FILE
    data = bytearray(path.read_bytes())
    data[0] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError):
        load_hard_state(tmp_path)


def test_hard_state_format_is_fixed(tmp_path: Path) -> None:
    # little-endian term, voted_for (-1 = none), crc32c of both: what existing directories hold
    body = struct.pack("<qq", 7, -1)
    (tmp_path / HARD_STATE_FILE).write_bytes(body + struct.pack("<I", crc32c.crc32c(body)))
    assert load_hard_state(tmp_path) == HardState(7, NONE)
    save_hard_state(tmp_path, HardState(8, 3))
    body = struct.pack("<qq", 8, 3)
    assert (tmp_path / HARD_STATE_FILE).read_bytes() == body + struct.pack("<I", crc32c.crc32c(body))


def test_commit_point(tmp_path: Path) -> None:
    log = StreamLog.open(tmp_path / "s", LogConfig(fsync=False))
    log.append([Entry(1, 1, EntryType.NOOP), Entry(2, 2, EntryType.METADATA, b"cmd"), Entry(3, 2, EntryType.NOOP)])
    assert load_commit_point(log) == 0
    save_commit_point(log.directory, 2, 2)
    body = struct.pack("<qq", 2, 2)
    assert (log.directory / COMMIT_POINT_FILE).read_bytes() == body + struct.pack("<I", crc32c.crc32c(body))
    assert load_commit_point(log) == 2
    save_commit_point(log.directory, 2, 1)  # another term at that index: not this log's entry
    assert load_commit_point(log) == 0
    save_commit_point(log.directory, 9, 2)  # beyond the log
    assert load_commit_point(log) == 0
    save_commit_point(log.directory, 3, 2)
    (log.directory / COMMIT_POINT_FILE).write_bytes(b"\x00" * 20)  # bad checksum
    assert load_commit_point(log) == 0
    log.close()

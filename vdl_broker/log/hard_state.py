"""Raft's persistent state (current term, voted for), one small file per stream directory."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import crc32c

from vdl_broker.log.fileio import atomic_write

HARD_STATE_FILE = "hard-state"
_FORMAT = struct.Struct("<qq")  # term, voted_for (-1 = none)
_CRC = struct.Struct("<I")


@dataclass(frozen=True)
class HardState:
    term: int = 0
    voted_for: int | None = None


def save_hard_state(directory: Path, state: HardState) -> None:
    """Atomic and durable: temp file, fsync, rename, fsync the directory."""
    body = _FORMAT.pack(state.term, -1 if state.voted_for is None else state.voted_for)
    atomic_write(Path(directory) / HARD_STATE_FILE, body + _CRC.pack(crc32c.crc32c(body)))


def load_hard_state(directory: Path) -> HardState:
    """The saved state, or HardState() when none was ever saved. A corrupt file raises ValueError."""
    path = Path(directory) / HARD_STATE_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return HardState()
    if len(data) != _FORMAT.size + _CRC.size:
        raise ValueError(f"{path}: {len(data)} bytes, expected {_FORMAT.size + _CRC.size}")
    body = data[: _FORMAT.size]
    if _CRC.unpack_from(data, _FORMAT.size)[0] != crc32c.crc32c(body):
        raise ValueError(f"{path}: checksum mismatch")
    term, voted_for = _FORMAT.unpack(body)
    return HardState(term, None if voted_for < 0 else voted_for)

"""Raft index (.ridx): the position of every entry of a segment, fixed-size records.

Seed 000: entry X is found by arithmetic, not search — in a segment whose first Raft index is B,
entry X's position is record X - B (uint32 little-endian).
"""

from __future__ import annotations

from array import array

from vdl_broker.log.index_file import IndexFile


class RaftIndex(IndexFile):
    record_size = 4

    def __init__(self, path) -> None:  # type: ignore[no-untyped-def]
        super().__init__(path)
        self.positions = array("I")

    def __len__(self) -> int:
        return len(self.positions)

    def _encode(self, start: int, end: int) -> bytes:
        return self.positions[start:end].tobytes()

    def _decode(self, data: bytes) -> None:
        self.positions = array("I")
        self.positions.frombytes(data)

    def _truncate_records(self, count: int) -> None:
        del self.positions[count:]

    def append(self, position: int) -> None:
        self.positions.append(position)

    def extend(self, positions: array[int]) -> None:
        self.positions.extend(positions)

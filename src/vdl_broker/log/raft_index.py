"""Raft index (.ridx): the position of every entry of a segment, fixed-size records.

Seed 000: entry X is found by arithmetic, not search — in a segment whose first Raft index is B,
entry X's position is record X - B (uint32 little-endian). A sealed segment's is mapped
(index_file.py): its positions are read from the file on demand, not held in memory.
"""

from __future__ import annotations

from array import array

from vdl_broker.log.index_file import IndexFile, Records


class RaftIndex(IndexFile):
    record_size = 4

    def __init__(self, path) -> None:  # type: ignore[no-untyped-def]
        super().__init__(path)
        self.positions: Records = array("I")

    def __len__(self) -> int:
        return len(self.positions)

    def _encode(self, start: int, end: int) -> bytes:
        return self.positions[start:end].tobytes()

    def _decode(self, data: bytes) -> None:
        self.positions = array("I")
        self.positions.frombytes(data)

    def _view(self, data: memoryview) -> None:
        self.positions = data.cast("I")

    def _truncate_records(self, count: int) -> None:
        del self._growable()[count:]

    def _growable(self) -> array[int]:
        self.unmap()
        positions = self.positions
        assert isinstance(positions, array)  # unmapped: in memory
        return positions

    def append(self, position: int) -> None:
        positions = self.positions
        if not isinstance(positions, array):  # only an active segment's index grows
            positions = self._growable()
        positions.append(position)

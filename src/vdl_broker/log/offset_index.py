"""Log index (.index): sparse (relative offset, position) pairs, as Kafka's offset index.

Seeds 001/002: one record per `index_interval_bytes` of log data, always one for the first data
entry of a segment. Offsets are relative to the segment's base offset (uint32 each, little-endian).
A lookup finds the last record at or below the target and scans forward from its position.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right

from vdl_broker.log.index_file import IndexFile, Records


class OffsetIndex(IndexFile):
    record_size = 8

    def __init__(self, path) -> None:  # type: ignore[no-untyped-def]
        super().__init__(path)
        self.relative: Records = array("I")
        self.positions: Records = array("I")

    def __len__(self) -> int:
        return len(self.relative)

    def _encode(self, start: int, end: int) -> bytes:
        relative, positions = self._growable()  # written only from memory (a mapped file holds them)
        out = array("I", bytes(8 * (end - start)))
        out[0::2] = relative[start:end]
        out[1::2] = positions[start:end]
        return out.tobytes()

    def _decode(self, data: bytes) -> None:
        flat = array("I")
        flat.frombytes(data)
        self.relative = flat[0::2]
        self.positions = flat[1::2]

    def _view(self, data: memoryview) -> None:
        flat = data.cast("I")
        self.relative = flat[0::2]
        self.positions = flat[1::2]

    def _growable(self) -> tuple[array[int], array[int]]:
        self.unmap()
        relative, positions = self.relative, self.positions
        assert isinstance(relative, array) and isinstance(positions, array)  # unmapped: in memory
        return relative, positions

    def _truncate_records(self, count: int) -> None:
        relative, positions = self._growable()
        del relative[count:]
        del positions[count:]

    def append(self, relative_offset: int, position: int) -> None:
        relative, positions = self._growable()
        relative.append(relative_offset)
        positions.append(position)

    def floor(self, relative_offset: int) -> int:
        """Record number of the last record with relative offset <= the target, or -1."""
        return bisect_right(self.relative, relative_offset) - 1

    def truncate_from_position(self, position: int) -> None:
        """Drop records pointing at or after `position` (a truncated log)."""
        self.truncate(bisect_right(self.positions, position - 1))

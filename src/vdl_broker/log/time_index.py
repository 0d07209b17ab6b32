"""Time index (.timeindex): (max timestamp so far, relative offset, position) records.

A record is added at an offset-index point when the segment's running maximum timestamp has grown
since the last record, so timestamps are strictly increasing and binary-searchable. The first
data batch whose max timestamp >= T lies after the last record with timestamp < T (records
carry the running maximum). On disk: int64 timestamp, int64 (position << 32 | relative offset).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left

from vdl_broker.log.index_file import IndexFile, Records


class TimeIndex(IndexFile):
    record_size = 16

    def __init__(self, path) -> None:  # type: ignore[no-untyped-def]
        super().__init__(path)
        self.timestamps: Records = array("q")
        self.relative: Records = array("I")
        self.positions: Records = array("I")

    def __len__(self) -> int:
        return len(self.timestamps)

    def _encode(self, start: int, end: int) -> bytes:
        timestamps, relative, positions = self._growable()  # written only from memory (a mapped file holds them)
        out = array("q", bytes(16 * (end - start)))
        out[0::2] = timestamps[start:end]
        out[1::2] = array("q", ((p << 32) | r for r, p in
                                zip(relative[start:end], positions[start:end], strict=True)))
        return out.tobytes()

    def _decode(self, data: bytes) -> None:
        flat = array("q")
        flat.frombytes(data)
        self.timestamps = flat[0::2]
        packed = flat[1::2]
        self.relative = array("I", (v & 0xFFFFFFFF for v in packed))
        self.positions = array("I", ((v >> 32) & 0xFFFFFFFF for v in packed))

    def _view(self, data: memoryview) -> None:
        # (position << 32 | relative offset) little-endian: the relative offset's 4 bytes first
        self.timestamps = data.cast("q")[0::2]
        words = data.cast("I")
        self.relative = words[2::4]
        self.positions = words[3::4]

    def _growable(self) -> tuple[array[int], array[int], array[int]]:
        self.unmap()
        timestamps, relative, positions = self.timestamps, self.relative, self.positions
        assert isinstance(timestamps, array) and isinstance(relative, array) and isinstance(positions, array)
        return timestamps, relative, positions

    def _truncate_records(self, count: int) -> None:
        for records in self._growable():
            del records[count:]

    def append(self, timestamp: int, relative_offset: int, position: int) -> None:
        timestamps, relative, positions = self._growable()
        timestamps.append(timestamp)
        relative.append(relative_offset)
        positions.append(position)

    @property
    def last_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def scan_start(self, timestamp: int) -> int:
        """Record number whose position a scan for the first batch with max ts >= `timestamp`
        starts from (-1 = segment start); len(self) means no record reached the timestamp."""
        return bisect_left(self.timestamps, timestamp) - 1

    def truncate_from_position(self, position: int) -> None:
        self.truncate(bisect_left(self.positions, position))

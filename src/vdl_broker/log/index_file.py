"""Shared machinery of the three index files: records kept in memory, written to disk lazily.

An index lives in memory as arrays; `flush()` writes only the records not yet on disk (one
pwrite) and trims the file to the exact length, so truncation and rebuilds need no special
cases. Index files are never fsynced: recovery rebuilds any index that is missing, short or
inconsistent, so they need not be durable.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


class IndexFile:
    record_size: int = 0

    def __init__(self, path: Path) -> None:
        self.path = path
        self.flushed = 0  # records known to be on disk

    def __len__(self) -> int:
        raise NotImplementedError

    def _encode(self, start: int, end: int) -> bytes:
        raise NotImplementedError

    def _decode(self, data: bytes) -> None:
        raise NotImplementedError

    def _truncate_records(self, count: int) -> None:
        raise NotImplementedError

    def load(self) -> bool:
        """Read the file into memory; False when it is missing or not a whole number of records."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            self._decode(b"")
            self.flushed = 0
            return False
        whole = len(data) - len(data) % self.record_size
        self._decode(data[:whole])
        self.flushed = len(self)
        return whole == len(data)

    def truncate(self, count: int) -> None:
        if count < len(self):
            self._truncate_records(count)
        self.flushed = min(self.flushed, count)

    def clear(self) -> None:
        self.truncate(0)

    def flush(self) -> None:
        count = len(self)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            if self.flushed < count:
                data = self._encode(self.flushed, count)
                os.pwrite(fd, data, self.flushed * self.record_size)
            if os.fstat(fd).st_size != count * self.record_size:
                os.ftruncate(fd, count * self.record_size)
        finally:
            os.close(fd)
        self.flushed = count

    def invalidate_disk(self) -> None:
        """Forget what is on disk: the next flush rewrites the whole file."""
        self.flushed = 0

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)


def strictly_increasing(values: Sequence[int]) -> bool:
    return all(a < b for a, b in zip(values, values[1:], strict=False))

"""Shared machinery of the three index files: records kept in memory, written to disk lazily.

An index lives in memory as arrays; `flush()` writes only the records not yet on disk (one
pwrite) and trims the file to the exact length, so truncation and rebuilds need no special
cases. Index files are never fsynced: recovery rebuilds any index that is missing, short or
inconsistent, so they need not be durable.

A sealed segment's indexes no longer change: `map()` replaces their arrays by views of the
files, mapped read-only, so the records of a log's sealed segments cost no memory however long
the log (4 B per entry and 24 B per index interval otherwise: a log that keeps everything grew
by hundreds of megabytes a day). A change (the segment active again, a rebuild) brings them
back into memory first, and a file that was mapped is rewritten as a new file renamed over it:
a view still in use keeps the old one.
"""

from __future__ import annotations

import os
import sys
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import TypeAlias

from vdl_broker.log.fileio import map_file, pwrite_all

# An index's records: in memory, or views of its mapped file (a sealed segment's).
Records: TypeAlias = "array[int] | memoryview"
# The files hold the arrays' bytes as this machine orders them; views read them as they are.
_MAPPABLE = sys.byteorder == "little"


class IndexFile:
    record_size: int = 0

    def __init__(self, path: Path) -> None:
        self.path = path
        self.flushed = 0  # records known to be on disk
        self._mapped: memoryview | None = None  # the file's records, when the arrays are views of it
        self._was_mapped = False  # the file on disk was mapped: rewritten as a new file, never in place

    def __len__(self) -> int:
        raise NotImplementedError

    def _encode(self, start: int, end: int) -> bytes:
        raise NotImplementedError

    def _decode(self, data: bytes) -> None:
        raise NotImplementedError

    def _view(self, data: memoryview) -> None:
        """The records as views of `data` (whole records, as _decode reads them)."""
        raise NotImplementedError

    def _truncate_records(self, count: int) -> None:
        raise NotImplementedError

    @property
    def mapped(self) -> bool:
        return self._mapped is not None

    def load(self, mapped: bool = False) -> bool:
        """Read the file into memory, or with `mapped` map it when it holds whole records; False
        when it is missing or not a whole number of records."""
        self._mapped = None
        if mapped and self._map_file():
            return True
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

    def cut_short(self) -> bool:
        """The file no longer holds the records mapped from it (cut short under the open log:
        reading a mapped page past the end of its file raises SIGBUS, which kills the process)."""
        if self._mapped is None:
            return False
        try:
            return os.stat(self.path).st_size < self._mapped.nbytes
        except FileNotFoundError:  # removed: the mapping keeps its pages readable
            return False

    def map(self) -> None:
        """The records in memory replaced by views of the file (the same records: all flushed);
        they stay in memory when the file cannot be mapped or no longer holds them all."""
        if self._mapped is None and len(self) and self.flushed == len(self):
            self._map_file(len(self))

    def _map_file(self, count: int | None = None) -> bool:
        """Map the file when it holds whole records (`count` of them if given)."""
        if not _MAPPABLE:
            return False
        try:
            data = map_file(self.path)
        except OSError:  # missing, or no address space left: in memory
            return False
        if data is None or len(data) % self.record_size or (count is not None and len(data) != count * self.record_size):
            return False
        self._mapped = data
        self._was_mapped = True
        self._view(data)
        self.flushed = len(self)
        return True

    def unmap(self) -> None:
        """The records back in memory, to be changed."""
        data = self._mapped
        if data is not None:
            self._mapped = None
            self._decode(bytes(data))

    def truncate(self, count: int) -> None:
        if count < len(self):
            if count == 0 and self._mapped is not None:
                self._mapped = None
                self._decode(b"")
            else:
                self.unmap()
                self._truncate_records(count)
        self.flushed = min(self.flushed, count)

    def clear(self) -> None:
        self.truncate(0)

    def flush(self) -> None:
        if self._mapped is not None:
            return  # the file holds them (mapped only once flushed), and must not change under the views
        count = len(self)
        if self._was_mapped:
            self._rewrite(count)
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            # From the file's end when it is shorter than what was flushed (cut short): writing
            # past its end would leave a hole.
            start = min(self.flushed, size // self.record_size)
            if start < count:
                pwrite_all(fd, self._encode(start, count), start * self.record_size)
                size = max(size, count * self.record_size)
            if size != count * self.record_size:
                os.ftruncate(fd, count * self.record_size)
        finally:
            os.close(fd)
        self.flushed = count

    def _rewrite(self, count: int) -> None:
        """Every record to a new file renamed over the old one: a view of the old file (its
        mapping) reads what it read, where cutting the file would fault it."""
        temp = self.path.with_name(self.path.name + ".tmp")
        try:
            temp.write_bytes(self._encode(0, count))
            os.replace(temp, self.path)
        except OSError:
            temp.unlink(missing_ok=True)
            raise
        self._was_mapped = False
        self.flushed = count

    def invalidate_disk(self) -> None:
        """Forget what is on disk: the next flush rewrites the whole file."""
        self.flushed = 0

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self._was_mapped = False  # a new file from now on


def strictly_increasing(values: Sequence[int]) -> bool:
    return all(a < b for a, b in zip(values, values[1:], strict=False))

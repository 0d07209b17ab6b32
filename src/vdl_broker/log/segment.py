"""One segment: a `.log` file of Raft entries plus its three indexes.

A segment is named by the first Raft index it holds (20 digits). It is appended with os.write and
read through a read-only shared mapping (re-mapped when the file has grown past it), so reads are
memoryview slices with no copy and no syscall. Truncating a mapped file would turn buffers already
handed to readers into SIGBUS, so a segment that was ever mapped is truncated by copying the kept
prefix to a new file (copy_file_range) and renaming it over the old one: old mappings stay valid.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from vdl_broker.log.entry import HEADER, HEADER_SIZE, DamagedEntry, entry_crc
from vdl_broker.log.fileio import map_file, writev_all
from vdl_broker.log.index_file import strictly_increasing
from vdl_broker.log.offset_index import OffsetIndex
from vdl_broker.log.raft_index import RaftIndex
from vdl_broker.log.recovery import scan
from vdl_broker.log.time_index import TimeIndex
from vdl_broker.raft.types import EntryType
from vdl_wire.records.batch_header import BATCH_HEADER_SIZE, BatchFields, batch_fields

logger = logging.getLogger(__name__)
_DATA = int(EntryType.DATA)
LOG_SUFFIX = ".log"


def segment_name(base_index: int) -> str:
    return f"{base_index:020d}"


@dataclass
class TailState:
    """What a walk over a segment's entries learned."""

    end: int  # position after the last valid entry
    count: int  # entries walked
    last_data_position: int = -1


class Segment:
    def __init__(self, directory: Path, base_index: int, base_offset: int, index_interval: int) -> None:
        stem = segment_name(base_index)
        self.directory = directory
        self.base_index = base_index
        self.base_offset = base_offset  # Kafka offset of its first batch (log end when it has none)
        self.index_interval = index_interval
        self.log_path = directory / f"{stem}{LOG_SUFFIX}"
        self.ridx = RaftIndex(directory / f"{stem}.ridx")
        self.oidx = OffsetIndex(directory / f"{stem}.index")
        self.tidx = TimeIndex(directory / f"{stem}.timeindex")
        self.size = 0
        self.next_offset = base_offset
        self.has_data = False
        self.max_timestamp = -1
        self.bytes_since_index = 0
        self.loaded = False
        self.sealed = False
        self.fd: int | None = None  # write descriptor (active segment, or sealed but not yet synced)
        self._view: memoryview | None = None
        self._mappings: list[weakref.ref[object]] = []  # every mapping made; alive while buffers use it
        self.indexes_rebuilt = False  # built from the log here, not read from index files
        self.created_ms = 0.0

    # ---- geometry -------------------------------------------------------------------------
    @property
    def count(self) -> int:
        return len(self.ridx)

    @property
    def last_index(self) -> int:
        return self.base_index + len(self.ridx) - 1

    def file_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    # ---- in-memory indexing (append and rebuild share it, so rebuilds equal what was written)
    def note(self, position: int, size: int, fields: BatchFields | None) -> None:
        self.ridx.append(position)
        if fields is not None:
            if not self.has_data:
                self.has_data = True
                self.base_offset = fields.base_offset
                indexed = True
            else:
                indexed = self.bytes_since_index >= self.index_interval
            if fields.max_timestamp > self.max_timestamp:
                self.max_timestamp = fields.max_timestamp
            if indexed:
                relative = fields.base_offset - self.base_offset
                self.oidx.append(relative, position)
                self.bytes_since_index = 0
                if self.max_timestamp > self.tidx.last_timestamp:
                    self.tidx.append(self.max_timestamp, relative, position)
            self.next_offset = fields.last_offset + 1
        self.bytes_since_index += size
        self.size = position + size

    def _reset_memory(self) -> None:
        self.ridx.clear()
        self.oidx.clear()
        self.tidx.clear()
        self.size = 0
        self.has_data = False
        self.max_timestamp = -1
        self.bytes_since_index = 0
        self.next_offset = self.base_offset

    # ---- reading ----------------------------------------------------------------------------
    def span(self, start: int, end: int) -> memoryview:
        """Bytes [start, end) of the log file: a slice of the mapping (no copy). DamagedEntry when
        the file no longer holds them: a mapping's page wholly past the end of its file raises
        SIGBUS when read, which kills the process (a file cut short on a running node)."""
        if self._view is None or end > len(self._view):
            self._map_file()
            if self._view is None:
                return memoryview(b"")
        held = self._held()
        if held is not None and end > held:
            raise self._cut_short(start, held)
        return self._view[start:end]

    def _held(self) -> int | None:
        """The file's size now (None: removed, and the mapping keeps its pages readable)."""
        try:
            return os.fstat(self.fd).st_size if self.fd is not None else os.stat(self.log_path).st_size
        except FileNotFoundError:
            return None

    def _cut_short(self, position: int, held: int) -> DamagedEntry:
        return DamagedEntry(self.log_path, position, self.base_index,
                            f"lies past the end of the file, cut short to {held} bytes")

    def _rebuild_in_place(self) -> None:
        """Rebuild the indexes of a segment the log holds open. A file cut short meanwhile is
        damage: a rebuild would quietly drop the entries past its end from the open log."""
        held = self._held()
        if held is not None and held < self.size:
            raise self._cut_short(held, held)
        size = self.size
        self.rebuild(verify_crc=False)
        if self.size < size:  # the walk stopped at an entry it cannot read (a damaged length)
            raise DamagedEntry(self.log_path, self.size, self.base_index,
                               f"is unreadable: the segment's entries end there, {size - self.size} bytes "
                               "before the end the log held")
        self.flush_indexes_or_drop()

    def iter_entries(self, start: int, end: int | None = None, chunk: int = 1 << 20
                     ) -> Iterator[tuple[int, int, int, int, memoryview, int]]:
        """(position, type, term, index, payload, crc) from `start` on, payloads being slices of
        the mapping, each entry's CRC checked first (DamagedEntry): nothing read from a file the
        node runs on is trusted. `chunk` bounds how far ahead one slice reaches (a re-map happens only
        when the file has grown past the current mapping)."""
        end = self.size if end is None else end
        position = start
        buf_start, buf = position, self.span(position, min(end, position + chunk))
        buf_end = buf_start + len(buf)
        while position < end:
            if position + HEADER_SIZE > buf_end:
                buf_start, buf = position, self.span(position, min(end, position + max(chunk, HEADER_SIZE)))
                buf_end = buf_start + len(buf)
            crc, entry_type, term, index, length = HEADER.unpack_from(buf, position - buf_start)
            entry_end = position + HEADER_SIZE + length
            if entry_end > end:
                if end >= self.size:  # not an index's doing: the header is damaged
                    raise DamagedEntry(self.log_path, position, self.base_index,
                                       f"is unreadable: its header claims {length} bytes, past the "
                                       f"segment's end at byte {self.size}")
                # `end` is not an entry boundary: a damaged index put it there
                raise ValueError(f"{self.log_path}: entry {index} at {position} crosses {end}")
            if entry_end > buf_end:
                buf_start, buf = position, self.span(position, min(end, position + max(chunk, entry_end - position)))
                buf_end = buf_start + len(buf)
            if entry_crc(buf, position - buf_start, length) != crc:
                raise DamagedEntry(self.log_path, position, self.base_index)
            yield (position, entry_type, term, index,
                   buf[position - buf_start + HEADER_SIZE:entry_end - buf_start], crc)
            position = entry_end

    def header(self, position: int) -> tuple[int, int, int, int, int]:
        return HEADER.unpack(self.span(position, position + HEADER_SIZE))

    # Index files are never trusted: every lookup is checked against the entry it lands on (a
    # header read), and an index that disagrees is rebuilt from the log before answering. A
    # flipped byte in an index can then cost a rebuild, never a wrong read.

    def position_of(self, index: int) -> int:
        """Seed 000: arithmetic — the entry's record in the Raft index (checked)."""
        k = index - self.base_index
        if not self._is_entry_start(self.ridx.positions[k], index):
            self.repair_indexes(f"raft index record {k} does not point at entry {index}")
        return self.ridx.positions[k]

    def position_for_offset(self, offset: int) -> int:
        """Where to start scanning for Kafka `offset`: an entry at or before its batch (checked)."""
        for attempt in (1, 2):
            k = self.oidx.floor(offset - self.base_offset)
            position = self.oidx.positions[k] if k >= 0 else 0
            if k < 0 or self._batch_at_or_before(position, offset):
                return position
            if attempt == 1:
                self.repair_indexes(f"offset index record {k} does not point at a batch at or before {offset}")
        return 0  # a scan from the start finds it, whatever the index says

    def _is_entry_start(self, position: int, index: int) -> bool:
        try:
            return 0 <= position < self.size and self.header(position)[3] == index
        except (ValueError, struct.error):
            return False

    def _batch_at_or_before(self, position: int, offset: int) -> bool:
        try:
            _, entry_type, _, index, _ = self.header(position)
            k = index - self.base_index
            if not (0 <= k < len(self.ridx) and self.ridx.positions[k] == position and entry_type == _DATA):
                return False
            return batch_fields(self.span(position, position + HEADER_SIZE + BATCH_HEADER_SIZE),
                                HEADER_SIZE).base_offset <= offset
        except (ValueError, struct.error, IndexError):
            return False

    def trusted_time_index(self) -> TimeIndex:
        """The time index, rebuilt from the log first if it was read from a file: its records
        hold running maxima that no single entry can confirm."""
        if not self.indexes_rebuilt:
            self._rebuild_in_place()
        return self.tidx

    def check_mapped_indexes(self) -> None:
        """Rebuild from the log an index whose file was cut short under its mapping (an index is
        derived data, never trusted: nothing is lost)."""
        for index in (self.ridx, self.oidx, self.tidx):
            if index.cut_short():
                self.repair_indexes(f"{index.path.name} cut short")
                return

    def repair_indexes(self, reason: str) -> None:
        """Rebuild every index from the log file (an index disagreed with the data)."""
        logger.warning("%s: index damaged (%s): rebuilt from the log", self.log_path, reason)
        self._rebuild_in_place()

    # ---- writing ------------------------------------------------------------------------------
    def open_for_append(self) -> None:
        if self.fd is None:
            self.fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, parts: list[bytes | bytearray | memoryview], total: int = -1) -> None:
        assert self.fd is not None
        writev_all(self.fd, parts, total)

    def flush_indexes(self) -> None:
        self.ridx.flush()
        self.oidx.flush()
        self.tidx.flush()

    def flush_indexes_or_drop(self) -> None:
        """flush_indexes, except that a failure (disk full) removes the index files instead:
        indexes are never durable anyway, and opening the log rebuilds missing ones."""
        try:
            self.flush_indexes()
        except OSError as error:
            logger.warning("%s: cannot write its indexes (%s); they will be rebuilt at the next open",
                           self.log_path, error)
            for index in (self.ridx, self.oidx, self.tidx):
                index.delete()
                index.invalidate_disk()
            return
        if self.sealed:
            self.map_indexes()

    def seal(self) -> None:
        """No more appends: indexes to disk, reads through a mapping from now on (of the log and
        of the indexes, which then cost no memory)."""
        self.flush_indexes()
        self.sealed = True
        self._map_file()
        self.map_indexes()

    def map_indexes(self) -> None:
        """A sealed segment's indexes read from their files, mapped, instead of held in memory."""
        for index in (self.ridx, self.oidx, self.tidx):
            index.map()

    def _map_file(self) -> None:
        """Map the first `size` bytes (again, if the file grew); old mappings live on in the
        buffers that use them."""
        self._drop_map()
        if self.size > 0:
            # map_file keeps no descriptor open (mmap.mmap keeps one per mapping: one per segment).
            view = map_file(self.log_path)
            if view is None:
                return
            self._mappings = [m for m in self._mappings if m() is not None] + [weakref.ref(view.obj)]
            self._view = view[:self.size]

    def unseal(self) -> None:
        """Become the active segment again (after a truncation removed everything after it)."""
        self._drop_map()
        self.sealed = False
        for index in (self.ridx, self.oidx, self.tidx):
            index.unmap()
        self.open_for_append()

    def _drop_map(self) -> None:
        # Buffers handed out may still point into the mapping: drop our references and let the
        # last user unmap it, instead of close() (which would fail or pull the memory away).
        self._view = None

    def close_write(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def close(self) -> None:
        self.close_write()
        self._drop_map()

    def delete(self) -> None:
        self.close()
        for path in (self.log_path, self.ridx.path, self.oidx.path, self.tidx.path):
            path.unlink(missing_ok=True)

    def truncate_entries(self, count: int) -> None:
        """Keep the first `count` entries (file, indexes, derived state)."""
        new_size = self.ridx.positions[count] if count < len(self.ridx) else self.size
        self._truncate_file(new_size)
        self.ridx.truncate(count)
        self.oidx.truncate_from_position(new_size)
        self.tidx.truncate_from_position(new_size)
        self.size = new_size
        self._recompute_tail()

    def discard_unread_tail(self, count: int, size: int) -> None:
        """Keep the first `count` entries (`size` bytes) of the active segment, cutting the file
        in place: only for bytes no reader ever saw (a failed append), where no mapping handed
        out can reach past the cut. Truncating a file further than its size changes nothing."""
        assert self.fd is not None
        os.ftruncate(self.fd, size)
        if self.count != count or self.size != size:
            self.ridx.truncate(count)
            self.oidx.truncate_from_position(size)
            self.tidx.truncate_from_position(size)
            self.size = size
            self._drop_map()
            self._recompute_tail()

    def _truncate_file(self, new_size: int) -> None:
        self._drop_map()
        if not any(m() is not None for m in self._mappings):
            # No buffer points into a mapping of this file: cut it in place (this needs no
            # space, so it works on a full disk too).
            os.truncate(self.log_path, new_size)
            self._mappings.clear()
            return
        # A reader still holds pages of the file: cutting it would make them fault (SIGBUS).
        # Keep them on the old inode and carry the kept prefix over to a new file.
        self.close_write()
        temp = self.log_path.with_name(self.log_path.name + ".tmp")
        try:
            with open(self.log_path, "rb") as src, open(temp, "wb") as dst:
                copied = 0
                while copied < new_size:
                    done = os.copy_file_range(src.fileno(), dst.fileno(), new_size - copied, copied, copied)
                    if done <= 0:
                        break
                    copied += done
                os.fsync(dst.fileno())
        except OSError:
            temp.unlink(missing_ok=True)  # e.g. a full disk: the caller retries once readers let go
            raise
        os.replace(temp, self.log_path)
        self._mappings.clear()

    def _recompute_tail(self) -> None:
        """next_offset, max timestamp and index cadence from the last offset-index record on."""
        if len(self.oidx):
            start = self.oidx.positions[-1]
            self.has_data = True
            self.max_timestamp = self.tidx.last_timestamp
        else:
            start = 0
            self.has_data = False
            self.max_timestamp = -1
            self.next_offset = self.base_offset
        buf = self.span(start, self.size)
        position = start
        while position < self.size:
            _, entry_type, _, _, length = HEADER.unpack_from(buf, position - start)
            if entry_type == _DATA:
                fields = batch_fields(buf, position - start + HEADER_SIZE)
                if not self.has_data:
                    self.has_data = True
                    self.base_offset = fields.base_offset
                self.next_offset = fields.last_offset + 1
                self.max_timestamp = max(self.max_timestamp, fields.max_timestamp)
            position += HEADER_SIZE + length
        self.bytes_since_index = self.size - start

    # ---- loading, checking and rebuilding the indexes ------------------------------------------
    def load(self, expected_count: int | None) -> None:
        """Read the index files and check them against the log; rebuild when they disagree.
        `expected_count` is known for a sealed segment (next segment's base - this base)."""
        file_size = self.file_size()
        mapped = self.sealed  # a sealed segment's are read from their files on demand
        whole = [self.ridx.load(mapped), self.oidx.load(mapped), self.tidx.load(mapped)]
        self.size = file_size
        problem = None if all(whole) else "partial record"
        if problem is None:
            try:
                problem = self._check(expected_count, file_size)
            except (OSError, ValueError, IndexError, struct.error) as error:
                problem = f"unreadable ({error})"
        if problem is not None:
            logger.info("%s: rebuilding indexes (%s)", self.log_path, problem)
            self.rebuild(verify_crc=False)
            self.flush_indexes_or_drop()
            if expected_count is not None and self.count != expected_count:
                # A sealed segment cut short or damaged since the open checked it: loaded as it is
                # now, its reads would end early and a fetch would go on at the next segment.
                raise DamagedEntry(self.log_path, self.size, self.base_index,
                                   f"is unreadable: the segment's entries end there, {self.count} of the "
                                   f"{expected_count} it held")
        self.loaded = True

    def _check(self, expected_count: int | None, file_size: int) -> str | None:
        positions = self.ridx.positions
        count = len(positions)
        if expected_count is not None and count != expected_count:
            return f"raft index has {count} records, expected {expected_count}"
        if count == 0:
            return "empty raft index" if file_size else None
        if positions[0] != 0 or not strictly_increasing(positions) or positions[-1] >= file_size:
            return "raft index out of order"
        try:
            _, entry_type, _, index, length = self.header(positions[-1])
        except Exception:  # noqa: BLE001 - any failure to read means rebuild
            return "unreadable last entry"
        if index != self.base_index + count - 1 or positions[-1] + HEADER_SIZE + length != file_size:
            return "raft index does not end at the end of the log"
        rel, pos = self.oidx.relative, self.oidx.positions
        if len(rel):
            if rel[0] != 0 or not strictly_increasing(rel) or not strictly_increasing(pos):
                return "offset index out of order"
            if pos[-1] >= file_size:
                return "offset index beyond the log"
        times = self.tidx
        if len(times):
            if not len(rel) or not strictly_increasing(times.timestamps) or not strictly_increasing(times.relative):
                return "time index out of order"
            k = self.oidx.floor(times.relative[-1])
            if k < 0 or rel[k] != times.relative[-1] or pos[k] != times.positions[-1]:
                return "time index disagrees with offset index"
        return self._check_tail(file_size)

    def _check_tail(self, file_size: int) -> str | None:
        """Walk from the last offset-index record to the end, as appends would have, and make
        sure no index record is missing; this also yields next_offset and the max timestamp."""
        rel, pos = self.oidx.relative, self.oidx.positions
        if len(rel):
            first = self.span(pos[0], pos[0] + HEADER_SIZE + BATCH_HEADER_SIZE)
            if HEADER.unpack_from(first, 0)[1] != _DATA:
                return "offset index does not point at a batch"
            self.base_offset = batch_fields(first, HEADER_SIZE).base_offset
        start = pos[-1] if len(rel) else 0
        buf = self.span(start, file_size)
        since = 0
        running = self.tidx.last_timestamp  # the running maximum at the last record (see note())
        next_offset = self.base_offset
        position = start
        while position < file_size:
            if position + HEADER_SIZE > file_size:
                return "torn entry at the end"
            _, entry_type, _, _, length = HEADER.unpack_from(buf, position - start)
            end = position + HEADER_SIZE + length
            if end > file_size:
                return "torn entry at the end"
            if entry_type == _DATA:
                fields = batch_fields(buf, position - start + HEADER_SIZE)
                if position == start and len(rel):
                    if fields.base_offset != self.base_offset + rel[-1]:
                        return "offset index does not point at its batch"
                    if fields.max_timestamp > running:
                        return "time index is short"
                elif not len(rel):
                    return "data without an offset index record"
                elif since >= self.index_interval:
                    return "offset index is short"
                running = max(running, fields.max_timestamp)
                next_offset = fields.last_offset + 1
            elif position == start and len(rel):
                return "offset index does not point at a batch"
            since += end - position
            position = end
        self.has_data = bool(len(rel))
        self.next_offset = next_offset
        self.max_timestamp = running
        self.bytes_since_index = since
        return None

    def rebuild_empty(self) -> None:
        self._reset_memory()
        for index in (self.ridx, self.oidx, self.tidx):
            index.invalidate_disk()

    def rebuild(self, verify_crc: bool) -> int:
        """Rebuild every index from the log file; returns the position where valid entries end
        (with verify_crc, the first torn or corrupt entry). Does not touch the log file."""
        self._reset_memory()
        file_size = self.file_size()
        if file_size:
            with open(self.log_path, "rb") as f, \
                    mmap.mmap(f.fileno(), file_size, access=mmap.ACCESS_READ) as mapped:
                view = memoryview(mapped)
                try:
                    for entry in scan(view, 0, file_size, self.base_index, verify_crc):
                        size = HEADER_SIZE + entry.payload_length
                        fields = None
                        if entry.type == _DATA:
                            fields = batch_fields(view, entry.position + HEADER_SIZE)
                            if self.has_data and fields.base_offset != self.next_offset:
                                break  # offsets must be contiguous: anything else is damage
                        self.note(entry.position, size, fields)
                finally:
                    view.release()
        for index in (self.ridx, self.oidx, self.tidx):
            index.invalidate_disk()
        self.indexes_rebuilt = True
        return self.size

"""StreamLog: one stream's Raft log on disk (contracts.md, "log"; DESIGN.md, "Storage").

Appends go to the active segment with one os.write per segment touched by an append call; the
in-memory indexes grow with them and reach disk at roll and close. `sync()` is a group commit:
one fdatasync in a worker thread covers every append made before it started, and callers that
arrive while it runs share the next one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import struct
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from vdl_broker.log.config import LogConfig
from vdl_broker.log.entry import (
    ENTRY_TYPES,
    HEADER_SIZE,
    BatchFields,
    Entry,
    EntryType,
    IndexOutOfRange,
    OffsetOutOfRange,
    batch_fields,
    check_batch,
    encode_header,
)
from vdl_broker.log.fileio import atomic_write, fsync_dir
from vdl_broker.log.recovery import (
    CLEAN_SHUTDOWN_FILE,
    load_recovery_point,
    save_recovery_point,
)
from vdl_broker.log.retention import segments_to_delete
from vdl_broker.log.segment import LOG_SUFFIX, Segment
from vdl_broker.log.tail_cache import CachedEntry, TailCache

logger = logging.getLogger(__name__)

LOG_START_FILE = "log-start"
_LOG_START = struct.Struct("<qqq")  # log start offset, first Raft index, term of first index - 1
_CRC = struct.Struct("<I")
_DATA = int(EntryType.DATA)
_READ_SLACK = 64 << 10


def _immutable_view(payload: bytes | memoryview | bytearray) -> memoryview:
    """The cache may keep the caller's buffer only if nobody can change it later."""
    if isinstance(payload, bytes):
        return memoryview(payload)
    if isinstance(payload, memoryview) and payload.readonly and isinstance(payload.obj, bytes):
        return payload
    return memoryview(bytes(payload))


@dataclass
class ReadResult:
    buffers: list[memoryview]
    first_offset: int
    next_offset: int

    @property
    def size(self) -> int:
        return sum(len(b) for b in self.buffers)


@dataclass
class _SyncJob:
    cover_index: int
    generation: int
    fds: list[int]  # duplicates, owned by the job: a truncation may close the originals meanwhile
    sealed: list[Segment]
    sync_dir: bool
    recovery_base: int | None


@dataclass
class _LogStart:
    start_offset: int = 0
    first_index: int = 1
    previous_term: int = 0


def _save_log_start(directory: Path, state: _LogStart, durable: bool) -> None:
    body = _LOG_START.pack(state.start_offset, state.first_index, state.previous_term)
    atomic_write(directory / LOG_START_FILE, body + _CRC.pack(crc32c.crc32c(body)), durable)


def _load_log_start(directory: Path) -> _LogStart | None:
    try:
        data = (directory / LOG_START_FILE).read_bytes()
    except FileNotFoundError:
        return None
    body = data[: _LOG_START.size]
    if len(data) != _LOG_START.size + _CRC.size or _CRC.unpack_from(data, _LOG_START.size)[0] != crc32c.crc32c(body):
        logger.warning("%s: unreadable %s, ignored", directory, LOG_START_FILE)
        return None
    return _LogStart(*_LOG_START.unpack(body))


@dataclass(eq=False, repr=False)
class StreamLog:
    directory: Path
    config: LogConfig
    clock: Callable[[], float] = time.time
    _segments: list[Segment] = field(default_factory=list)
    _base_indices: list[int] = field(default_factory=list)
    _base_offsets: list[int] = field(default_factory=list)
    _unsynced_sealed: list[Segment] = field(default_factory=list)
    _last_index: int = 0
    _last_term: int = 0
    _previous_term: int = 0
    _durable_index: int = 0
    _durable_end: tuple[int, int] | None = None  # memo (durable index, its end offset)
    _generation: int = 0
    _dir_dirty: bool = False
    _recovery_base: int | None = None
    _inflight: asyncio.Task[None] | None = None
    _closed: bool = False
    cache: TailCache = field(default_factory=lambda: TailCache(0))

    # ---- opening and recovery ---------------------------------------------------------------
    @classmethod
    def open(cls, directory: Path, config: LogConfig | None = None, *,
             clock: Callable[[], float] = time.time) -> StreamLog:
        """Open (creating if needed) the log in `directory`; recovers after an unclean stop."""
        config = LogConfig() if config is None else config
        log = cls(Path(directory), config, clock)
        log.cache = TailCache(config.tail_cache_bytes)
        log._load()
        return log

    def _now_ms(self) -> float:
        return self.clock() * 1000.0

    def _fsync_dir(self) -> None:
        if self.config.fsync:  # fsync=False (tests, benchmarks) skips every fsync
            fsync_dir(self.directory)

    def _new_segment(self, base_index: int, base_offset: int) -> Segment:
        return Segment(self.directory, base_index, base_offset, self.config.index_interval_bytes)

    def _load(self) -> None:
        directory = self.directory
        directory.mkdir(parents=True, exist_ok=True)
        for temp in directory.glob("*.tmp"):
            temp.unlink()
        marker = directory / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        start = _load_log_start(directory) or _LogStart()
        bases = sorted(int(p.name[: -len(LOG_SUFFIX)]) for p in directory.glob(f"*{LOG_SUFFIX}")
                       if p.name[: -len(LOG_SUFFIX)].isdigit())
        # Retention persists the new start before deleting: finish a deletion a crash interrupted.
        while len(bases) > 1 and bases[1] <= start.first_index:
            self._new_segment(bases.pop(0), 0).delete()
        segments = [self._new_segment(base, 0) for base in bases]
        for segment in segments:
            segment.size = segment.file_size()
        if not segments:
            segments = [self._new_segment(start.first_index, start.start_offset)]
        self._segments = segments
        first = 0
        if not clean:
            point = load_recovery_point(directory)
            first = 0 if point is None else max(0, bisect_right(bases, point) - 1)
        self._load_trusted(segments[:first] if not clean else segments[:-1], clean)
        if not clean:
            self._recover(first, start)
        else:
            segments[-1].load(None)
        self._chain_offsets(start)
        for segment in self._segments[:-1]:
            segment.sealed = True
        active = self._segments[-1]
        if not active.loaded:
            active.load(None)
        active.open_for_append()
        active.created_ms = self._now_ms()
        self._reindex()
        self._last_index = active.last_index
        self._previous_term = start.previous_term if start.first_index == self.first_index else 0
        if start.first_index != self.first_index:
            logger.warning("%s: log starts at index %d, persisted start says %d: previous term unknown",
                           directory, self.first_index, start.first_index)
        self._last_term = self._read_term(self._last_index)
        self._durable_index = self._last_index
        if clean:
            marker.unlink()
            self._fsync_dir()
        self._recovery_base = active.base_index
        save_recovery_point(directory, active.base_index, durable=self.config.fsync)

    def _load_trusted(self, segments: list[Segment], clean: bool) -> None:
        """Sealed segments before the recovery point: learn their base offsets cheaply (first
        offset-index record); their indexes are checked when first used."""
        for i, segment in enumerate(segments):
            segment.sealed = True
            if not self._peek_base_offset(segment):
                segment.load(self._segments[i + 1].base_index - segment.base_index)

    @staticmethod
    def _peek_base_offset(segment: Segment) -> bool:
        try:
            with open(segment.oidx.path, "rb") as f:
                record = f.read(8)
        except FileNotFoundError:
            return False
        if len(record) != 8 or struct.unpack("<II", record)[0] != 0:
            return False
        position = struct.unpack("<II", record)[1]
        try:
            head = segment.span(position, position + HEADER_SIZE + 61)
            if len(head) < HEADER_SIZE + 61 or head[4] != _DATA:
                return False
            segment.base_offset = batch_fields(head, HEADER_SIZE).base_offset
        except (OSError, ValueError, struct.error):
            return False
        segment.has_data = True
        segment.next_offset = segment.base_offset
        return True

    def _recover(self, first: int, start: _LogStart) -> None:
        """Re-validate every segment from `first` on with CRCs; cut at the first bad entry."""
        segments = self._segments
        previous_end: int | None = None  # where the offsets of the trusted part end
        for j in range(first - 1, -1, -1):
            if self._ensure_loaded(j).has_data:
                previous_end = segments[j].next_offset
                break
        else:
            if first > 0:
                previous_end = start.start_offset
        for i in range(first, len(segments)):
            segment = segments[i]
            file_size = segment.file_size()
            end = segment.rebuild(verify_crc=True)
            expected = segments[i + 1].base_index - segment.base_index if i + 1 < len(segments) else None
            if segment.has_data and previous_end is not None and segment.base_offset != previous_end:
                end = 0  # offsets do not continue the previous segment: nothing here can be trusted
                segment.rebuild_empty()
            whole = end == file_size and (expected is None or segment.count == expected)
            if end < file_size:
                os.truncate(segment.log_path, end)
            segment.flush_indexes()
            segment.loaded = True
            if segment.has_data:
                previous_end = segment.next_offset
            if not whole:
                dropped = segments[i + 1:]
                logger.warning(
                    "%s: unclean shutdown: cut segment %s at byte %d of %d (entries from index %d on) "
                    "and deleted %d later segment(s)", self.directory, segment.log_path.name, end,
                    file_size, segment.base_index + segment.count, len(dropped))
                for later in dropped:
                    later.delete()
                del segments[i + 1:]
                break
        # A cut can leave an empty segment behind a non-empty one: it stays as the active one.
        self._dir_dirty = True

    def _chain_offsets(self, start: _LogStart) -> None:
        """Segments without data take their base offset from the data before them."""
        segments = self._segments
        previous_end = start.start_offset
        for i, segment in enumerate(segments):
            if not segment.has_data:
                segment.base_offset = previous_end
                segment.next_offset = previous_end
                previous_end = segment.next_offset
                continue
            following = segments[i + 1] if i + 1 < len(segments) else None
            if following is not None and following.has_data:
                previous_end = following.base_offset
            else:
                self._ensure_loaded(i)
                previous_end = segment.next_offset

    def _ensure_loaded(self, i: int) -> Segment:
        segment = self._segments[i]
        if not segment.loaded:
            expected = (self._segments[i + 1].base_index - segment.base_index
                        if i + 1 < len(self._segments) else None)
            segment.load(expected)
        return segment

    def _reindex(self) -> None:
        self._base_indices = [s.base_index for s in self._segments]
        self._base_offsets = [s.base_offset for s in self._segments]

    # ---- geometry -------------------------------------------------------------------------
    @property
    def first_index(self) -> int:
        return self._segments[0].base_index

    @property
    def last_index(self) -> int:
        return self._last_index

    @property
    def last_term(self) -> int:
        return self._last_term

    @property
    def previous_term(self) -> int:
        """Term of entry first_index - 1 (Raft's snapshot point)."""
        return self._previous_term

    @property
    def durable_index(self) -> int:
        return self._durable_index

    @property
    def log_start_offset(self) -> int:
        return self._segments[0].base_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def durable_end_offset(self) -> int:
        if self._durable_index < self.first_index:
            return self.log_start_offset
        memo = self._durable_end
        if memo is None or memo[0] != self._durable_index:
            memo = (self._durable_index, self.offset_for_index(self._durable_index))
            self._durable_end = memo
        return memo[1]

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    def _segment_for_index(self, index: int) -> int:
        return bisect_right(self._base_indices, index) - 1

    def _segment_for_offset(self, offset: int) -> int:
        return max(0, bisect_right(self._base_offsets, offset) - 1)

    def _check_index(self, index: int) -> None:
        if index < self.first_index or index > self._last_index:
            raise IndexOutOfRange(f"index {index} outside [{self.first_index}, {self._last_index}]")

    def _read_term(self, index: int) -> int:
        if index == self.first_index - 1:
            return self._previous_term
        self._check_index(index)
        cached = self.cache.get(index)
        if cached is not None:
            return cached.term
        segment = self._ensure_loaded(self._segment_for_index(index))
        return segment.header(segment.position_of(index))[2]

    def term_at(self, index: int) -> int:
        """Term of entry `index`; first_index - 1 gives the snapshot point's term."""
        if index == self._last_index:
            return self._last_term
        return self._read_term(index)

    # ---- appending --------------------------------------------------------------------------
    def append(self, entries: list[Entry]) -> None:
        """Append entries last_index+1, ... (all or nothing). DATA payloads must be one RecordBatch
        v2 whose base offset is the log end offset at that point."""
        if self._closed:
            raise ValueError("log is closed")
        if not entries:
            return
        checked = self._validate(entries)
        active = self._segments[-1]
        now_ms = self._now_ms()
        if active.count and now_ms - active.created_ms >= self.config.segment_ms:
            self._roll()
        limit = self.config.segment_bytes
        parts: list[bytes | memoryview] = []
        planned: list[tuple[Entry, int, int, BatchFields | None]] = []  # entry, position, size, fields
        position = self._segments[-1].size
        chunk_start = position
        for entry, fields in checked:
            size = HEADER_SIZE + len(entry.payload)
            if position + size > limit and position > 0:
                if planned:
                    self._write(parts, planned, chunk_start, now_ms)
                    parts, planned = [], []
                self._roll()
                position = chunk_start = 0
            parts.append(encode_header(entry.type, entry.term, entry.index, entry.payload))
            parts.append(entry.payload)
            planned.append((entry, position, size, fields))
            position += size
        self._write(parts, planned, chunk_start, now_ms)
        last = entries[-1]
        self._last_index = last.index
        self._last_term = last.term

    def _validate(self, entries: list[Entry]) -> list[tuple[Entry, BatchFields | None]]:
        expected = self._last_index + 1
        term = self._last_term
        next_offset = self.log_end_offset
        checked: list[tuple[Entry, BatchFields | None]] = []
        for entry in entries:
            if entry.index != expected:
                raise ValueError(f"entry index {entry.index}, expected {expected}")
            if entry.term < term:
                raise ValueError(f"entry {entry.index} has term {entry.term} below the previous {term}")
            if entry.type not in ENTRY_TYPES:
                raise ValueError(f"unknown entry type {entry.type!r}")
            fields = None
            if entry.type == EntryType.DATA:
                fields = check_batch(entry.payload)
                if fields.base_offset != next_offset:
                    raise ValueError(f"batch base offset {fields.base_offset}, expected log end offset "
                                     f"{next_offset}")
                next_offset = fields.last_offset + 1
            checked.append((entry, fields))
            expected += 1
            term = entry.term
        return checked

    def _write(self, parts: list[bytes | memoryview],
               planned: list[tuple[Entry, int, int, BatchFields | None]], chunk_start: int,
               now_ms: float) -> None:
        segment = self._segments[-1]
        try:
            # one writev: headers and payloads straight from their buffers
            segment.write(parts, planned[-1][1] + planned[-1][2] - chunk_start)
        except BaseException:
            os.ftruncate(segment.fd, chunk_start)  # type: ignore[arg-type]
            raise
        if not segment.count:
            segment.created_ms = now_ms
            if planned[0][3] is not None:
                self._base_offsets[-1] = planned[0][3].base_offset
        cached: list[CachedEntry] = []
        end_offset = segment.next_offset
        for entry, position, size, fields in planned:
            segment.note(position, size, fields)
            if self.cache.capacity:
                payload = _immutable_view(entry.payload)
                if fields is None:
                    cached.append(CachedEntry(entry.index, entry.term, entry.type, payload, -1, -1, end_offset))
                else:
                    end_offset = fields.last_offset + 1
                    cached.append(CachedEntry(entry.index, entry.term, entry.type, payload,
                                              fields.base_offset, fields.last_offset, end_offset))
        self.cache.add(cached)

    def _roll(self) -> None:
        old = self._segments[-1]
        old.seal()
        if self.config.fsync and old.last_index > self._durable_index:
            self._unsynced_sealed.append(old)
        else:
            old.close_write()
        new = self._new_segment(old.last_index + 1, old.next_offset)
        new.open_for_append()
        new.loaded = True
        new.created_ms = self._now_ms()
        self._segments.append(new)
        self._reindex()
        self._dir_dirty = True

    # ---- group commit -----------------------------------------------------------------------
    def _sync_job(self) -> _SyncJob:
        active = self._segments[-1]
        fds: list[int] = []
        if self.config.fsync:
            for segment in [*self._unsynced_sealed, active]:
                if segment.fd is not None:
                    fds.append(os.dup(segment.fd))
        recovery_base = active.base_index if active.base_index != self._recovery_base else None
        return _SyncJob(self._last_index, self._generation, fds, list(self._unsynced_sealed),
                        self._dir_dirty and self.config.fsync, recovery_base)

    def _run_job(self, job: _SyncJob) -> None:
        """Runs in a worker thread: touches only the job's own descriptors and files."""
        try:
            for fd in job.fds:
                os.fdatasync(fd)
            if job.sync_dir:
                fsync_dir(self.directory)
            if job.recovery_base is not None:
                # Everything before the active segment is durable now: recovery may start there.
                save_recovery_point(self.directory, job.recovery_base, durable=False)
        finally:
            for fd in job.fds:
                os.close(fd)

    def _finish_job(self, job: _SyncJob) -> None:
        if job.sync_dir:
            self._dir_dirty = False
        if job.recovery_base is not None:
            self._recovery_base = job.recovery_base
        for segment in job.sealed:
            if segment in self._unsynced_sealed:
                self._unsynced_sealed.remove(segment)
                if segment is not self._segments[-1]:
                    segment.close_write()
        if job.generation == self._generation:
            self._durable_index = max(self._durable_index, min(job.cover_index, self._last_index))

    def _needs_sync(self, target: int) -> bool:
        return self._durable_index < min(target, self._last_index)

    def sync_now(self) -> None:
        """Blocking sync of everything appended so far."""
        job = self._sync_job()
        self._run_job(job)
        self._finish_job(job)

    async def sync(self) -> None:
        """Return once every entry appended before the call is durable. One fdatasync (in a
        thread) serves all callers waiting at once; callers arriving during it share the next."""
        target = self._last_index
        while self._needs_sync(target):
            if self._inflight is None:
                self._inflight = asyncio.get_running_loop().create_task(self._sync_task())
            await asyncio.shield(self._inflight)

    async def _sync_task(self) -> None:
        try:
            job = self._sync_job()
            await asyncio.get_running_loop().run_in_executor(None, self._run_job, job)
            self._finish_job(job)
        finally:
            self._inflight = None

    # ---- reading entries (replication) ----------------------------------------------------
    def entries(self, start_index: int, end_index: int, max_bytes: int | None = None) -> list[Entry]:
        """Entries [start_index, end_index): at least one if any, then as many as fit in
        max_bytes (header + payload bytes)."""
        if start_index < self.first_index or end_index > self._last_index + 1 or start_index > end_index:
            raise IndexOutOfRange(f"entries [{start_index}, {end_index}) outside "
                                  f"[{self.first_index}, {self._last_index + 1})")
        out: list[Entry] = []
        budget = max_bytes if max_bytes is not None else 1 << 62
        index = start_index
        cache_first = self.cache.first_index
        while index < end_index:
            if cache_first is not None and index >= cache_first:
                for cached in self.cache.entries(index, end_index):
                    size = HEADER_SIZE + len(cached.payload)
                    if out and size > budget:
                        return out
                    budget -= size
                    out.append(Entry(cached.index, cached.term, EntryType(cached.type), cached.payload))
                return out
            i = self._segment_for_index(index)
            segment = self._ensure_loaded(i)
            stop = min(end_index, segment.last_index + 1)
            if cache_first is not None:
                stop = min(stop, max(cache_first, index + 1))
            positions = segment.ridx.positions
            first = index - segment.base_index
            start_position = positions[first]
            last = stop - segment.base_index  # exclusive record number
            end_position = positions[last] if last < len(positions) else segment.size
            if end_position - start_position > budget:
                k = bisect_right(positions, start_position + budget, first + 1, last) - 1
                if k <= first:
                    if out:
                        return out
                    k = first + 1
                last = k
                end_position = positions[last] if last < len(positions) else segment.size
            for _, entry_type, term, entry_index, payload in segment.iter_entries(start_position, end_position):
                out.append(Entry(entry_index, term, EntryType(entry_type), payload))
            budget -= end_position - start_position
            index = segment.base_index + last
            if budget <= 0:
                break
        return out

    # ---- reading by Kafka offset ------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> ReadResult:
        """Whole stored batches from the one holding `offset`, none whose last offset >= max_offset
        (the high watermark), at least one even if larger than max_bytes."""
        start, end = self.log_start_offset, self.log_end_offset
        if offset < start or offset > end:
            raise OffsetOutOfRange(f"offset {offset} outside [{start}, {end}]")
        limit = end if max_offset is None else min(max_offset, end)
        buffers: list[memoryview] = []
        first_offset = -1
        next_offset = offset
        total = 0
        visited = (-1, -1)
        while next_offset < limit:
            cache_first = self.cache.first_offset
            if cache_first is not None and next_offset >= cache_first:
                data, k = self.cache.data_from(next_offset)
                for cached in data[k:]:
                    if cached.last_offset >= limit:
                        break
                    size = len(cached.payload)
                    if buffers and total + size > max_bytes:
                        break
                    if first_offset < 0:
                        first_offset = cached.base_offset
                    buffers.append(cached.payload)
                    total += size
                    next_offset = cached.last_offset + 1
                break
            i = self._segment_for_offset(next_offset)
            if (i, next_offset) == visited:
                break  # no progress (inconsistent segment offsets): never spin
            visited = (i, next_offset)
            segment = self._ensure_loaded(i)
            chunk = max(max_bytes - total, 0) + 2 * self.config.index_interval_bytes + _READ_SLACK
            done = False
            position = segment.position_for_offset(next_offset)
            for _, entry_type, _, _, payload in segment.iter_entries(position, chunk=chunk):
                if entry_type != _DATA:
                    continue
                fields = batch_fields(payload)
                if fields.last_offset < next_offset:
                    continue
                if fields.last_offset >= limit or (buffers and total + len(payload) > max_bytes):
                    done = True
                    break
                if first_offset < 0:
                    first_offset = fields.base_offset
                buffers.append(payload)
                total += len(payload)
                next_offset = fields.last_offset + 1
                if cache_first is not None and next_offset >= cache_first:
                    break  # the rest is in memory
            if done:
                break
            if cache_first is not None and next_offset >= cache_first:
                continue  # the rest comes from the tail cache
            if i == len(self._segments) - 1:
                break
            next_offset = max(next_offset, self._segments[i + 1].base_offset)
        return ReadResult(buffers, offset if first_offset < 0 else first_offset, next_offset)

    def offset_for_index(self, raft_index: int) -> int:
        """Kafka log end offset right after entry `raft_index` (first_index - 1 = log start)."""
        if raft_index == self.first_index - 1:
            return self.log_start_offset
        self._check_index(raft_index)
        if raft_index == self._last_index:
            return self.log_end_offset
        cached = self.cache.get(raft_index)
        if cached is not None:
            return cached.end_offset
        i = self._segment_for_index(raft_index)
        segment = self._ensure_loaded(i)
        for _, entry_type, _, index, payload in segment.iter_entries(segment.position_of(raft_index),
                                                                     chunk=64 << 10):
            if entry_type == _DATA:
                fields = batch_fields(payload)
                return fields.last_offset + 1 if index == raft_index else fields.base_offset
        return segment.next_offset

    def index_for_offset(self, offset: int) -> int:
        """Raft index of the data entry holding Kafka offset `offset`."""
        if offset < self.log_start_offset or offset >= self.log_end_offset:
            raise OffsetOutOfRange(f"offset {offset} outside [{self.log_start_offset}, {self.log_end_offset})")
        cache_first = self.cache.first_offset
        if cache_first is not None and offset >= cache_first:
            data, k = self.cache.data_from(offset)
            return data[k].index
        segment = self._ensure_loaded(self._segment_for_offset(offset))
        for _, entry_type, _, index, payload in segment.iter_entries(segment.position_for_offset(offset),
                                                                     chunk=64 << 10):
            if entry_type == _DATA and batch_fields(payload).last_offset >= offset:
                return index
        raise OffsetOutOfRange(f"offset {offset} not found")  # pragma: no cover - index damage

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(base offset, max timestamp) of the first batch whose max timestamp >= timestamp_ms."""
        for i in range(len(self._segments)):
            segment = self._ensure_loaded(i)
            if not segment.has_data or segment.max_timestamp < timestamp_ms:
                continue
            times = segment.tidx
            k = times.scan_start(timestamp_ms)
            position = times.positions[k] if k >= 0 else 0
            if k == len(times) - 1 and len(segment.oidx):
                position = max(position, segment.oidx.positions[-1])
            for _, entry_type, _, _, payload in segment.iter_entries(position, chunk=64 << 10):
                if entry_type == _DATA:
                    fields = batch_fields(payload)
                    if fields.max_timestamp >= timestamp_ms:
                        return fields.base_offset, fields.max_timestamp
        return None

    # ---- truncation, reset, retention -------------------------------------------------------
    def truncate_suffix(self, from_index: int) -> None:
        """Remove entries >= from_index (Raft conflict resolution)."""
        if from_index > self._last_index:
            return
        if from_index < self.first_index:
            raise IndexOutOfRange(f"cannot truncate from {from_index} below first index {self.first_index}")
        self._generation += 1
        self._durable_index = min(self._durable_index, from_index - 1)
        i = self._segment_for_index(from_index)
        if i > 0 and from_index == self._segments[i].base_index:
            i -= 1  # the segment would become empty: its predecessor becomes the active one
        target = self._ensure_loaded(i)
        if self._recovery_base is None or self._recovery_base > target.base_index:
            save_recovery_point(self.directory, target.base_index, durable=self.config.fsync)
            self._recovery_base = target.base_index
        for segment in self._segments[i + 1:]:
            if segment in self._unsynced_sealed:
                self._unsynced_sealed.remove(segment)
            segment.delete()
        del self._segments[i + 1:]
        if target in self._unsynced_sealed:
            self._unsynced_sealed.remove(target)
        target.unseal()
        target.truncate_entries(from_index - target.base_index)
        target.open_for_append()
        self.cache.truncate_from(from_index)
        self._reindex()
        self._dir_dirty = True
        self._last_index = from_index - 1
        self._last_term = self._read_term(self._last_index)

    def reset(self, first_index: int, previous_term: int, start_offset: int) -> None:
        """Drop everything; the log now starts at first_index (snapshot install)."""
        self._generation += 1
        for segment in self._segments:
            segment.delete()
        self._unsynced_sealed.clear()
        self.cache.clear()
        self._fsync_dir()
        _save_log_start(self.directory, _LogStart(start_offset, first_index, previous_term), self.config.fsync)
        segment = self._new_segment(first_index, start_offset)
        segment.open_for_append()
        segment.loaded = True
        segment.created_ms = self._now_ms()
        self._segments = [segment]
        self._reindex()
        save_recovery_point(self.directory, first_index, durable=self.config.fsync)
        self._recovery_base = first_index
        self._previous_term = previous_term
        self._last_index = first_index - 1
        self._last_term = previous_term
        self._durable_index = first_index - 1
        self._dir_dirty = False

    def apply_retention(self, now_ms: int | None = None, max_index: int | None = None) -> int:
        """Delete whole oldest segments past retention.ms / retention.bytes (never the active one,
        never one holding entries above `max_index`); returns how many were deleted."""
        now = int(self._now_ms()) if now_ms is None else now_ms
        # never delete entries that are not yet durable (the sync covering them still needs them)
        max_index = self._durable_index if max_index is None else min(max_index, self._durable_index)
        count = segments_to_delete(self._segments, now, self.config.retention_ms, self.config.retention_bytes,
                                   max_index, prepare=lambda s: self._ensure_loaded(self._segments.index(s)))
        if count == 0:
            return 0
        first = self._segments[count]
        previous_term = self._read_term(first.base_index - 1)
        _save_log_start(self.directory, _LogStart(first.base_offset, first.base_index, previous_term),
                        self.config.fsync)
        for segment in self._segments[:count]:
            if segment in self._unsynced_sealed:
                self._unsynced_sealed.remove(segment)
            segment.delete()
        del self._segments[:count]
        self._previous_term = previous_term
        self._reindex()
        self._dir_dirty = True
        logger.info("%s: retention deleted %d segment(s); log now starts at index %d, offset %d",
                    self.directory, count, first.base_index, first.base_offset)
        return count

    # ---- shutdown ---------------------------------------------------------------------------
    def close(self) -> None:
        """Flush indexes, sync, write the clean-shutdown marker, release files."""
        if self._closed:
            return
        active = self._segments[-1]
        active.flush_indexes()
        self._dir_dirty = True
        self.sync_now()
        marker = self.directory / CLEAN_SHUTDOWN_FILE
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT, 0o644)
        if self.config.fsync:
            os.fsync(fd)
        os.close(fd)
        self._fsync_dir()
        self._release()

    def _release(self) -> None:
        for segment in self._segments:
            segment.close()
        self._unsynced_sealed.clear()
        self.cache.clear()
        self._closed = True

    @staticmethod
    def purge_deleted(data_dir: Path) -> int:
        """Finish deletions a crash interrupted: remove `.<name>.<id>.deleted` directories."""
        count = 0
        for path in Path(data_dir).glob(".*.deleted"):
            shutil.rmtree(path, ignore_errors=True)
            count += 1
        return count

    def delete(self) -> None:
        """Remove the stream's directory: renamed away first, so a crash never leaves half a log
        under the stream's name."""
        self._release()
        doomed = self.directory.with_name(f".{self.directory.name}.{uuid.uuid4().hex[:8]}.deleted")
        os.replace(self.directory, doomed)
        fsync_dir(self.directory.parent)
        shutil.rmtree(doomed)

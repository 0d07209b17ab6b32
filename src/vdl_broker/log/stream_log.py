"""StreamLog: one stream's Raft log on disk (the README's "Layout").

Appends go to the active segment with one os.write per segment touched by an append call; the
in-memory indexes grow with them and reach disk at roll and close. The parts live next door:
loading (open and crash recovery), group_commit (sync), reading (by Raft index and by Kafka
offset) and log_start (where the log starts after retention or a reset).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from vdl_broker.log import loading, reading, state_snapshots
from vdl_broker.log.aio_sync import AioSync
from vdl_broker.log.config import LogConfig
from vdl_broker.log.damage import DamageRecord, clear_damage, save_damage
from vdl_broker.log.entry import HEADER_SIZE, DamagedEntry, IndexOutOfRange, entry_header
from vdl_broker.log.fileio import fsync_dir
from vdl_broker.log.group_commit import GroupCommit
from vdl_broker.log.log_start import LogStart, save_log_start
from vdl_broker.log.reading import ReadResult
from vdl_broker.log.recovery import CLEAN_SHUTDOWN_FILE, advance_recovery_point, save_recovery_point
from vdl_broker.log.retention import segments_to_delete
from vdl_broker.log.segment import Segment
from vdl_broker.log.tail_cache import CacheBudget, TailCache
from vdl_broker.log.term_runs import TermRuns
from vdl_broker.raft.types import Entry, EntryType, entry_checksum
from vdl_wire.records.batch_header import BatchFields, check_batch

logger = logging.getLogger(__name__)

__all__ = ["LogRollbackError", "ReadResult", "StreamLog"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

# Every type but DATA is stored as is: no Kafka offsets, no batch checks.
_KNOWN_TYPES = frozenset(EntryType)


class LogRollbackError(RuntimeError):
    """A failed append could not be undone: the log's files may hold a partial entry, so the
    log takes no more appends (reopening it runs recovery, which cuts the partial entry)."""


def _tells_damage(read: Callable[Concatenate[StreamLog, _P], _R]) -> Callable[Concatenate[StreamLog, _P], _R]:
    """A read that meets damage in a segment (DamagedEntry) tells the log's on_damaged before it
    raises, whoever called it: the log's Raft group stops and has the log checked again."""

    @functools.wraps(read)
    def reading(log: StreamLog, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return read(log, *args, **kwargs)
        except DamagedEntry as error:
            if log.on_damaged is not None:
                log.on_damaged(error)
            raise

    return reading


@dataclass(frozen=True)
class _AppendUndo:
    segment_count: int
    count: int  # entries in the then active segment
    size: int  # its size in bytes


@dataclass(eq=False, repr=False)
class StreamLog:
    directory: Path
    config: LogConfig
    clock: Callable[[], float] = time.time
    _segments: list[Segment] = field(default_factory=list)
    _base_indices: list[int] = field(default_factory=list)
    _base_offsets: list[int] = field(default_factory=list)
    _last_index: int = 0
    _last_term: int = 0
    _previous_term: int = 0
    _durable_end: tuple[int, int] | None = None  # memo (durable index, its end offset)
    _closed: bool = False
    damage: DamageRecord | None = None  # durable data lost and not yet given back (damage.py)
    # Told of a DamagedEntry before a read raises it, whoever reads: the log's Raft group
    # (RaftGroup.storage_damaged), which stops and has the log checked again.
    on_damaged: Callable[[DamagedEntry], None] | None = None
    _broken: bool = False  # a failed append could not be undone: no more appends
    cache: TailCache = field(default_factory=lambda: TailCache(0))
    _term_runs: TermRuns = field(default_factory=lambda: TermRuns(0))
    _commit: GroupCommit = field(init=False)

    def __post_init__(self) -> None:
        self._commit = GroupCommit(self.directory, self.config.fsync, self._tail)

    # ---- opening ----------------------------------------------------------------------------
    @classmethod
    def open(cls, directory: Path, config: LogConfig | None = None, *,
             clock: Callable[[], float] = time.time, cache_budget: CacheBudget | None = None,
             aio: AioSync | None = None) -> StreamLog:
        """Open (creating if needed) the log in `directory`; recovers after an unclean stop.
        `cache_budget`: the node's tail cache budget, shared with its other logs; `aio`: the
        node's kernel syncs (none: syncs run on worker threads)."""
        config = LogConfig() if config is None else config
        log = cls(Path(directory), config, clock)
        log._commit.aio = aio
        loaded = loading.load(log.directory, config, log._now_ms())
        log._segments = loaded.segments
        log._reindex()
        log._previous_term = loaded.previous_term
        log.damage = loaded.damage
        log._last_index = loaded.segments[-1].last_index
        log._last_term = log._read_term(log._last_index)
        log._term_runs = TermRuns(log._last_index + 1)  # the last entry's term is _last_term
        commit = log._commit
        commit.durable_index = log._last_index
        commit.dir_dirty = loaded.recovered
        # Not written (a full disk): the node still starts, and its first sync moves it.
        if advance_recovery_point(log.directory, loaded.segments[-1].base_index, durable=config.fsync):
            commit.recovery_base = loaded.segments[-1].base_index
        # Recovery may have cut the tail (a crash before it was durable), and a crash may have
        # stopped retention between its segments and their snapshots.
        state_snapshots.delete_above(log.directory, log.log_end_offset)
        state_snapshots.delete_below(log.directory, log.log_start_offset)
        log.cache = TailCache(config.tail_cache_bytes, cache_budget)  # joins the budget once open
        return log

    def mark_damaged(self, record: DamageRecord) -> None:
        """Durably record (merged with any earlier record) that data this log held is lost."""
        self.damage = record.merge(self.damage)
        save_damage(self.directory, self.damage, durable=self.config.fsync)

    def clear_damage(self) -> None:
        """The lost range is back (fetched from a peer): forget the damage, durably."""
        clear_damage(self.directory, durable=self.config.fsync)
        self.damage = None

    def _tail(self) -> tuple[Segment, int]:
        return self._segments[-1], self._last_index

    def _now_ms(self) -> float:
        return self.clock() * 1000.0

    def _fsync_dir(self) -> None:
        if self.config.fsync:  # fsync=False (tests, benchmarks) skips every fsync
            fsync_dir(self.directory)

    def _new_segment(self, base_index: int, base_offset: int) -> Segment:
        return loading.new_segment(self.directory, self.config, base_index, base_offset)

    def _ensure_loaded(self, i: int) -> Segment:
        """Segment `i`, loaded, for a read of its indexes and entries: mapped index files that no
        longer hold what is mapped are rebuilt first (Segment.check_mapped_indexes)."""
        segment = loading.ensure_loaded(self._segments, i)
        segment.check_mapped_indexes()
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
        return self._commit.durable_index

    @property
    def log_start_offset(self) -> int:
        return self._segments[0].base_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def durable_end_offset(self) -> int:
        durable_index = self._commit.durable_index
        if durable_index < self.first_index:
            return self.log_start_offset
        memo = self._durable_end
        if memo is None or memo[0] != durable_index:
            memo = (durable_index, self.offset_for_index(durable_index))
            self._durable_end = memo
        return memo[1]

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def active_base_index(self) -> int:
        """First Raft index of the active segment: it changes when the log rolls."""
        return self._segments[-1].base_index

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
        term = self._term_runs.term_at(index)
        return self._term_from_segment(index) if term is None else term

    @_tells_damage
    def _term_from_segment(self, index: int) -> int:
        """The term in the entry's header, the entry checked first: a flipped bit in a term would
        be a conflict to the Raft core, which a follower resolves by dropping entries."""
        segment = self._ensure_loaded(self._segment_for_index(index))
        _, _, term, _, _, _ = next(segment.iter_entries(segment.position_of(index), chunk=HEADER_SIZE))
        return term

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
        if self._broken:
            raise LogRollbackError(f"{self.directory}: an earlier failed append could not be undone")
        if not entries:
            return
        checked = self._validate(entries)
        # A failed write (disk full, quota, I/O error) must leave the log exactly as it was:
        # no half-written entry in a segment, no segment rolled for nothing.
        active = self._segments[-1]
        undo = _AppendUndo(len(self._segments), active.count, active.size)
        try:
            self._append_checked(checked)
        except BaseException:
            self._undo_append(undo)
            raise
        last = entries[-1]
        self._last_index = last.index
        self._last_term = last.term

    def _append_checked(self, checked: list[tuple[Entry, BatchFields | None]]) -> None:
        active = self._segments[-1]
        now_ms = self._now_ms()
        if active.count and now_ms - active.created_ms >= self.config.segment_ms:
            self._roll()
        limit = self.config.segment_bytes
        parts: list[bytes | bytearray | memoryview] = []
        planned: list[tuple[Entry, int, int, BatchFields | None]] = []  # entry, position, size, fields
        position = self._segments[-1].size
        chunk_start = position
        for entry, fields in checked:
            size = HEADER_SIZE + len(entry.data)
            if position + size > limit and position > 0:
                if planned:
                    self._write(parts, planned, chunk_start, now_ms)
                    parts, planned = [], []
                self._roll()
                position = chunk_start = 0
            parts.append(entry_header(entry))
            parts.append(entry.data)
            planned.append((entry, position, size, fields))
            position += size
        self._write(parts, planned, chunk_start, now_ms)

    def _undo_append(self, undo: _AppendUndo) -> None:
        """Put the log back as it was before a failed append (the write or a roll failed).

        Nothing of the failed append was visible yet (last_index moves only at its end, and
        no buffer into its bytes was handed out), so cutting the file with ftruncate cannot
        pull memory from under a reader. Raises LogRollbackError if even that fails."""
        try:
            for segment in self._segments[undo.segment_count:]:  # rolled during the append
                self._commit.forget(segment)
                segment.delete()
            del self._segments[undo.segment_count:]
            active = self._segments[-1]
            if active.sealed or active.fd is None:
                self._commit.forget(active)
                active.unseal()
            active.discard_unread_tail(undo.count, undo.size)
            self.cache.truncate_from(self._last_index + 1)
            self._term_runs.truncate_from(self._last_index + 1)
            self._reindex()
        except BaseException as error:
            self._broken = True
            raise LogRollbackError(f"{self.directory}: could not undo a failed append: {error}") from error

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
            if entry.type not in _KNOWN_TYPES:
                raise ValueError(f"unknown entry type {entry.type!r}")
            fields = None
            if entry.type == EntryType.DATA:
                fields = check_batch(entry.data)
                if fields.base_offset != next_offset:
                    raise ValueError(f"batch base offset {fields.base_offset}, expected log end offset "
                                     f"{next_offset}")
                next_offset = fields.last_offset + 1
            checked.append((entry, fields))
            expected += 1
            term = entry.term
        return checked

    def _write(self, parts: list[bytes | bytearray | memoryview],
               planned: list[tuple[Entry, int, int, BatchFields | None]], chunk_start: int,
               now_ms: float) -> None:
        segment = self._segments[-1]
        # one writev: headers and payloads straight from their buffers (append() undoes a failure)
        segment.write(parts, planned[-1][1] + planned[-1][2] - chunk_start)
        if not segment.count:
            segment.created_ms = now_ms
            if planned[0][3] is not None:
                self._base_offsets[-1] = planned[0][3].base_offset
        cache, runs = self.cache, self._term_runs
        end_offset = segment.next_offset
        for entry, position, size, fields in planned:
            segment.note(position, size, fields)
            runs.appended(entry.index, entry.term)
            if cache.capacity:
                if fields is None:
                    cache.append(entry.index, entry.term, entry.type, entry.data, -1, -1, end_offset,
                                 entry_checksum(entry), entry.frame, entry.start)
                else:
                    end_offset = fields.last_offset + 1
                    cache.append(entry.index, entry.term, entry.type, entry.data, fields.base_offset,
                                 fields.last_offset, end_offset, entry_checksum(entry), entry.frame, entry.start)
        cache.evict()

    def _roll(self) -> None:
        old = self._segments[-1]
        old.seal()
        self._commit.sealed(old)
        new = self._new_segment(old.last_index + 1, old.next_offset)
        new.open_for_append()
        new.loaded = True
        new.created_ms = self._now_ms()
        self._segments.append(new)
        self._reindex()

    # ---- durability (group_commit.py) -------------------------------------------------------
    def sync_now(self) -> None:
        """Blocking sync of everything appended so far."""
        self._commit.sync_now()

    async def sync(self) -> None:
        """Return once every entry appended before the call is durable. One fdatasync (in a
        thread) serves all callers waiting at once; callers arriving during it share the next."""
        await self._commit.sync()

    def observe_syncs(self, observer: Callable[[float], None] | None) -> None:
        """Tell `observer` how long each fdatasync took, in seconds (metrics)."""
        self._commit.observer = observer

    # ---- reading (reading.py) ---------------------------------------------------------------
    # Each read below raises DamagedEntry for damage it meets, after telling on_damaged.
    @_tells_damage
    def entries(self, start_index: int, end_index: int, max_bytes: int | None = None) -> list[Entry]:
        """Entries [start_index, end_index): at least one if any, then as many as fit in
        max_bytes (header + payload bytes)."""
        return reading.read_entries(self, start_index, end_index, max_bytes)

    @_tells_damage
    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> ReadResult:
        """Whole stored batches from the one holding `offset`, none whose last offset >= max_offset
        (the high watermark), at least one even if larger than max_bytes."""
        return reading.read_batches(self, offset, max_bytes, max_offset)

    @_tells_damage
    def offset_for_index(self, raft_index: int) -> int:
        """Kafka log end offset right after entry `raft_index` (first_index - 1 = log start)."""
        return reading.offset_for_index(self, raft_index)

    @_tells_damage
    def index_for_offset(self, offset: int) -> int:
        """Raft index of the data entry holding Kafka offset `offset`."""
        return reading.index_for_offset(self, offset)

    @_tells_damage
    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(base offset, max timestamp) of the first batch whose max timestamp >= timestamp_ms."""
        return reading.offset_for_timestamp(self, timestamp_ms)

    @_tells_damage
    def max_timestamp_batch(self) -> tuple[int, int] | None:
        """(base offset, max timestamp) of the first batch holding the log's largest timestamp."""
        loaded = [loading.ensure_loaded(self._segments, i) for i in range(len(self._segments))]  # no index read
        newest = max((s.max_timestamp for s in loaded if s.has_data), default=None)
        return None if newest is None else reading.offset_for_timestamp(self, newest)

    # ---- truncation, reset, retention (where the log starts: log_start.py) ------------------
    def truncate_suffix(self, from_index: int) -> None:
        """Remove entries >= from_index (Raft conflict resolution). An OSError (a full disk)
        leaves a consistent log that may still end past from_index: call again."""
        if from_index > self._last_index:
            return
        if from_index < self.first_index:
            raise IndexOutOfRange(f"cannot truncate from {from_index} below first index {self.first_index}")
        self._commit.truncated(from_index - 1)
        i = self._segment_for_index(from_index)
        if i > 0 and from_index == self._segments[i].base_index:
            i -= 1  # the segment would become empty: its predecessor becomes the active one
        target = self._ensure_loaded(i)
        self._commit.move_recovery_point_down(target.base_index)
        for segment in self._segments[i + 1:]:
            self._commit.forget(segment)
            segment.delete()
        del self._segments[i + 1:]
        self._commit.forget(target)
        target.unseal()
        try:
            target.truncate_entries(from_index - target.base_index)
        except OSError:
            # A full disk while a reader holds the target's pages (its kept prefix must be
            # copied): the later segments are gone already, so the log now ends with the
            # target, whole; the caller cuts the rest when it retries.
            target.open_for_append()
            self._end_before(target.base_index + target.count)
            raise
        target.open_for_append()
        self._end_before(from_index)

    def _end_before(self, next_index: int) -> None:
        """The derived state of a log whose segments now end right before `next_index`."""
        self.cache.truncate_from(next_index)
        self._term_runs.truncate_from(next_index)
        self._reindex()
        self._last_index = next_index - 1
        self._last_term = self._read_term(self._last_index)
        state_snapshots.delete_above(self.directory, self.log_end_offset)

    def reset(self, first_index: int, previous_term: int, start_offset: int) -> None:
        """Drop everything; the log now starts at first_index (snapshot install)."""
        for segment in self._segments:
            segment.delete()
        state_snapshots.delete_above(self.directory, -1)
        self.cache.clear()
        self._term_runs.restart(first_index)
        self._fsync_dir()
        save_log_start(self.directory, LogStart(start_offset, first_index, previous_term), self.config.fsync)
        segment = self._new_segment(first_index, start_offset)
        segment.open_for_append()
        segment.loaded = True
        segment.created_ms = self._now_ms()
        self._segments = [segment]
        self._reindex()
        self._commit.reset(first_index)
        self._previous_term = previous_term
        self._last_index = first_index - 1
        self._last_term = previous_term

    def apply_retention(self, now_ms: int | None = None, max_index: int | None = None) -> int:
        """Delete whole oldest segments past retention.ms / retention.bytes (never one holding
        entries above `max_index`); returns how many were deleted. When the active segment goes
        too, the log rolls first and ends up empty, starting at its end offset."""
        now = int(self._now_ms()) if now_ms is None else now_ms
        # never delete entries that are not yet durable (the sync covering them still needs them)
        durable_index = self._commit.durable_index
        max_index = durable_index if max_index is None else min(max_index, durable_index)
        count = segments_to_delete(self._segments, now, self.config.retention_ms, self.config.retention_bytes,
                                   max_index, prepare=lambda s: self._ensure_loaded(self._segments.index(s)))
        if count and count == len(self._segments):
            self._roll()
            # the new segment's file is in the directory before the log start names it, so a
            # crash in between still finds a segment where the log starts (loading.load)
            self._fsync_dir()
        return self._delete_first(count)

    def delete_through(self, index: int) -> int:
        """Delete the oldest segments whose entries are all at or before `index` (never the
        active one, never entries not yet durable): a snapshot holds their state. How many."""
        index = min(index, self._commit.durable_index)
        count = 0
        while count + 1 < len(self._segments) and self._segments[count + 1].base_index - 1 <= index:
            count += 1
        return self._delete_first(count)

    def delete_below_offset(self, offset: int, max_index: int) -> int:
        """Delete the oldest segments whose records are all below `offset` (DeleteRecords moved
        the log start there), never the active one, never entries above `max_index` or not yet
        durable. How many."""
        index = min(max_index, self._commit.durable_index)
        count = 0
        while (count + 1 < len(self._segments) and self._segments[count + 1].base_offset <= offset
               and self._segments[count + 1].base_index - 1 <= index):
            count += 1
        return self._delete_first(count)

    def _delete_first(self, count: int) -> int:
        if count == 0:
            return 0
        first = self._segments[count]
        previous_term = self._read_term(first.base_index - 1)
        save_log_start(self.directory, LogStart(first.base_offset, first.base_index, previous_term),
                       self.config.fsync)
        for segment in self._segments[:count]:
            self._commit.forget(segment)
            segment.delete()
        del self._segments[:count]
        self.cache.drop_before(first.base_index)
        self._term_runs.drop_before(first.base_index)
        state_snapshots.delete_below(self.directory, first.base_offset)
        self._previous_term = previous_term
        self._reindex()
        self._commit.dir_dirty = True
        logger.info("%s: retention deleted %d segment(s); log now starts at index %d, offset %d",
                    self.directory, count, first.base_index, first.base_offset)
        return count

    # ---- state snapshots (state_snapshots.py) -----------------------------------------------
    def save_state_snapshot(self, offset: int, payload: bytes, durable: bool = True) -> None:
        """Keep `payload`, state derived from every batch below `offset` (<= the log end), as
        the snapshot at `offset`; it lives as long as the log holds that offset. Not `durable`:
        written without fsync (a crash of the machine may leave it missing or torn, which its
        checksum tells: an older one, or the log, is used instead)."""
        if not self.log_start_offset <= offset <= self.log_end_offset:
            raise ValueError(f"snapshot offset {offset} outside the log [{self.log_start_offset}, "
                             f"{self.log_end_offset}]")
        state_snapshots.write_snapshot(self.directory, offset, payload, durable and self.config.fsync)

    def latest_state_snapshot(self, max_offset: int) -> tuple[int, bytes] | None:
        """(offset, payload) of the newest readable snapshot at or below `max_offset` and at or
        above the log start, or None (damaged ones are deleted on the way)."""
        return state_snapshots.load_latest(self.directory, max_offset, self.log_start_offset)

    def state_snapshot_offsets(self) -> list[int]:
        return state_snapshots.snapshot_offsets(self.directory)

    def discard_state_snapshot(self, offset: int) -> None:
        """Its payload turned out unreadable to its user: delete it (an older one is used)."""
        state_snapshots.discard(state_snapshots.snapshot_path(self.directory, offset))

    # ---- shutdown ---------------------------------------------------------------------------
    def close(self) -> None:
        """Flush indexes, sync, write the clean-shutdown marker, release files."""
        if self._closed:
            return
        active = self._segments[-1]
        active.flush_indexes_or_drop()
        self._commit.dir_dirty = True
        self.sync_now()
        marker = self.directory / CLEAN_SHUTDOWN_FILE
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT, 0o644)
        if self.config.fsync:
            os.fsync(fd)
        os.close(fd)
        self._fsync_dir()
        self._release()

    def check_again_from(self, segment_base: int) -> None:
        """On a closed log: the next open checks every entry from the segment at `segment_base`
        on, whatever the segment-checksums record says (a DamagedEntry was read there), so the
        cut, and the damage record of what was durable, are that open's (loading.py)."""
        assert self._closed, "close the log first: its syncs move the recovery point up"
        save_recovery_point(self.directory, segment_base, durable=self.config.fsync)

    def _release(self) -> None:
        for segment in self._segments:
            segment.close()
        self._commit.unsynced_sealed.clear()
        self.cache.close()
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

"""Group commit: what is durable in a stream's log, and the one fdatasync that makes more of it so.

`sync()` returns once every entry appended before the call is durable. One fdatasync, run by
the kernel's AIO (aio_sync.py) or else in a worker thread, covers every append made before it
started; callers that arrive while it runs share the next one. fsync/fdatasync, never
sync_file_range: only they make data durable.

A sync job covers the active segment and every segment sealed since the last sync, the directory
when files were created or removed, and then moves the recovery point up to the active segment:
everything before it is durable, so recovery after a crash may start there.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from vdl_broker.log.aio_sync import AioSync
from vdl_broker.log.fileio import fsync_dir
from vdl_broker.log.recovery import advance_recovery_point, save_recovery_point
from vdl_broker.log.segment import Segment


@dataclass
class _SyncJob:
    cover_index: int
    generation: int
    fds: list[int]  # the segments' own; a job for a worker thread takes duplicates (_on_thread)
    sealed: list[Segment]
    sync_dir: bool
    recovery_base: int | None


@dataclass(eq=False)
class GroupCommit:
    """The durability state of one log. `tail()` gives the log's current (active segment, last
    index); `fsync=False` (tests, benchmarks) skips every fsync but keeps the bookkeeping."""

    directory: Path
    fsync: bool
    tail: Callable[[], tuple[Segment, int]]
    durable_index: int = 0
    recovery_base: int | None = None
    dir_dirty: bool = False  # files were created or removed since the directory was last synced
    unsynced_sealed: list[Segment] = field(default_factory=list)
    # Bumped by truncation and reset: a job started before one must not mark the new entries
    # (same indexes, other bytes) durable.
    generation: int = 0
    observer: Callable[[float], None] | None = None  # told each sync's duration in seconds (metrics)
    aio: AioSync | None = None  # the node's: syncs that need only fdatasyncs go to the kernel
    _inflight: asyncio.Future[None] | None = None

    # ---- what the log tells it ------------------------------------------------------------
    def sealed(self, segment: Segment) -> None:
        """The log rolled past `segment`: keep it open for writing until a sync covered it."""
        if self.fsync and segment.last_index > self.durable_index:
            self.unsynced_sealed.append(segment)
        else:
            segment.close_write()
        self.dir_dirty = True

    def forget(self, segment: Segment) -> None:
        """`segment` is being deleted or reopened for appends."""
        if segment in self.unsynced_sealed:
            self.unsynced_sealed.remove(segment)

    def truncated(self, last_index: int) -> None:
        """Entries after `last_index` were removed."""
        self.generation += 1
        self.durable_index = min(self.durable_index, last_index)
        self.dir_dirty = True

    def move_recovery_point_down(self, base_index: int) -> None:
        """Appends will rewrite the segment starting at `base_index`: recovery must re-check it."""
        if self.recovery_base is None or self.recovery_base > base_index:
            save_recovery_point(self.directory, base_index, durable=self.fsync)
            self.recovery_base = base_index

    def reset(self, first_index: int) -> None:
        """The log was emptied and now starts at `first_index` (files already synced)."""
        self.generation += 1
        self.unsynced_sealed.clear()
        save_recovery_point(self.directory, first_index, durable=self.fsync)
        self.recovery_base = first_index
        self.durable_index = first_index - 1
        self.dir_dirty = False

    # ---- syncing --------------------------------------------------------------------------
    def needs_sync(self, target: int) -> bool:
        return self.durable_index < min(target, self.tail()[1])

    def sync_now(self) -> None:
        """Blocking sync of everything appended so far."""
        job = self._job()
        self._run(job)
        self._finish(job)

    async def sync(self) -> None:
        target = self.tail()[1]
        while self.needs_sync(target):
            inflight = self._inflight
            if inflight is None:
                inflight = self._start_sync()
                if inflight is None:
                    continue
            # Shielded: a waiter cancelled (its group stopping) leaves the sync running for the others.
            await asyncio.shield(inflight)

    def _start_sync(self) -> asyncio.Future[None] | None:
        """Start one sync job; its completion is booked by a callback that runs before any waiter
        resumes (no task of its own: one wake-up per sync). None: the job had nothing to do
        (fsync off, no recovery point to move) and is booked already, without a worker thread's
        round trip for it."""
        job = self._job()
        if not (job.fds or job.sync_dir or job.recovery_base is not None):
            self._finish(job)
            return None
        started = time.perf_counter()
        future = self._submit(job)
        self._inflight = future

        def done(finished: asyncio.Future[None]) -> None:
            self._inflight = None
            if finished.cancelled() or finished.exception() is not None:
                return  # the waiters see the error; nothing became durable
            self._finish(job)
            if self.observer is not None and job.fds:
                self.observer(time.perf_counter() - started)

        future.add_done_callback(done)
        return future

    def _submit(self, job: _SyncJob) -> asyncio.Future[None]:
        """The kernel syncs a job of fdatasyncs only (the common case: no segment rolled since
        the last sync); one that also syncs the directory or moves the recovery point, or that
        the kernel cannot take now, runs on a worker thread."""
        if self.aio is not None and job.fds and not job.sync_dir and job.recovery_base is None:
            # The kernel holds each file from submission to completion (fs/aio.c: io_submit_one
            # takes a reference, the completion drops it): a truncation may close the fds at once.
            future = self.aio.fdatasync(job.fds)
            if future is not None:
                return future
        # A truncation may close the segments' fds before the thread gets to them: it syncs
        # duplicates of its own.
        job.fds = [os.dup(fd) for fd in job.fds]
        return asyncio.get_running_loop().run_in_executor(None, self._on_thread, job)

    def _job(self) -> _SyncJob:
        active, last_index = self.tail()
        fds: list[int] = []
        if self.fsync:
            for segment in [*self.unsynced_sealed, active]:
                if segment.fd is not None:
                    fds.append(segment.fd)
        recovery_base = active.base_index if active.base_index != self.recovery_base else None
        return _SyncJob(last_index, self.generation, fds, list(self.unsynced_sealed),
                        self.dir_dirty and self.fsync, recovery_base)

    def _on_thread(self, job: _SyncJob) -> None:
        """Runs in a worker thread: touches only the job's own descriptors (closed after) and files."""
        try:
            self._run(job)
        finally:
            for fd in job.fds:
                os.close(fd)

    def _run(self, job: _SyncJob) -> None:
        for fd in job.fds:
            os.fdatasync(fd)
        if job.sync_dir:
            fsync_dir(self.directory)
        # Everything before the active segment is durable now: recovery may start there.
        if job.recovery_base is not None and not advance_recovery_point(self.directory, job.recovery_base,
                                                                        durable=False):
            job.recovery_base = None

    def _finish(self, job: _SyncJob) -> None:
        active, last_index = self.tail()
        if job.sync_dir:
            self.dir_dirty = False
        if job.recovery_base is not None:
            self.recovery_base = job.recovery_base
        for segment in job.sealed:
            if segment in self.unsynced_sealed:
                self.unsynced_sealed.remove(segment)
                if segment is not active:
                    segment.close_write()
        if job.generation == self.generation:
            self.durable_index = max(self.durable_index, min(job.cover_index, last_index))

"""fdatasync with no thread of this process: Linux native AIO.

A sync handed to a worker thread (run_in_executor) needs the GIL to start and again to report
back, while the event loop holds it for the requests it is busy with. Under Kafka's producer
perf tool that hand-off cost more than the fdatasync itself: ~0.45 ms to reach the thread and
~0.2 ms back per ~0.65 ms sync. Since Linux 4.18 an IOCB_CMD_FDSYNC submitted with io_submit runs
on a kernel workqueue and its completion is counted on an eventfd (IOCB_FLAG_RESFD) that the
event loop watches: one syscall starts a sync, two reap it, and no thread of ours wakes up.
# Linux: fs/aio.c (aio_fsync, aio_complete), include/uapi/linux/aio_abi.h

Where the kernel or the machine cannot do it, `AioSync.open` says why and returns None, and the
logs keep syncing on worker threads (group_commit.py).
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import itertools
import logging
import os
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger(__name__)


class _Syscalls(NamedTuple):
    setup: int
    destroy: int
    getevents: int
    submit: int


# arch/x86/entry/syscalls/syscall_64.tbl; include/uapi/asm-generic/unistd.h (arm64)
_SYSCALLS = {"x86_64": _Syscalls(206, 207, 208, 209), "aarch64": _Syscalls(0, 1, 4, 2)}
_IOCB_CMD_FDSYNC = 3
_IOCB_FLAG_RESFD = 1
CAPACITY = 256  # fds being synced at once per node; a sync beyond it goes to a worker thread
_WAIT_TIMEOUT_S = 30


class _Iocb(ctypes.Structure):
    # struct iocb, as laid out on a little-endian machine (aio_key before aio_rw_flags)
    _fields_ = [("aio_data", ctypes.c_uint64), ("aio_key", ctypes.c_uint32), ("aio_rw_flags", ctypes.c_int32),
                ("aio_lio_opcode", ctypes.c_uint16), ("aio_reqprio", ctypes.c_int16),
                ("aio_fildes", ctypes.c_uint32), ("aio_buf", ctypes.c_uint64), ("aio_nbytes", ctypes.c_uint64),
                ("aio_offset", ctypes.c_int64), ("aio_reserved2", ctypes.c_uint64),
                ("aio_flags", ctypes.c_uint32), ("aio_resfd", ctypes.c_uint32)]


class _IoEvent(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64), ("obj", ctypes.c_uint64), ("res", ctypes.c_int64),
                ("res2", ctypes.c_int64)]


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long


def _call(number: int, *args: object) -> int:
    while True:
        result: int = _syscall(ctypes.c_long(number), *args)
        if result >= 0:
            return result
        code = ctypes.get_errno()
        if code != errno.EINTR:  # a signal during a waiting io_getevents: wait again (PEP 475 does not cover ctypes)
            raise OSError(code, os.strerror(code))


@dataclass(eq=False)
class _Pending:
    future: asyncio.Future[None]
    left: int  # completions still to come
    error: OSError | None = None


class AioSync:
    """One node's fdatasyncs, run by the kernel: open it in the node's event loop, `close()` it
    after its logs."""

    def __init__(self, calls: _Syscalls, context: ctypes.c_ulong, eventfd: int, capacity: int) -> None:
        self._calls = calls
        self._context = context
        self._eventfd = eventfd
        self._capacity = capacity
        self._events = (_IoEvent * capacity)()
        self._pending: dict[int, _Pending] = {}
        self._in_flight = 0
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    @classmethod
    def open(cls, probe: Path, capacity: int = CAPACITY) -> AioSync | None:
        """Set up a context of `capacity` syncs and check with one fdatasync of `probe` (a
        directory of the node's) that this kernel runs them; None, with the reason logged, where
        it cannot."""
        calls = _SYSCALLS.get(platform.machine()) if sys.platform == "linux" else None
        if calls is None:
            log.info("fdatasync runs on worker threads: no Linux native AIO on %s/%s", sys.platform,
                     platform.machine())
            return None
        context = ctypes.c_ulong(0)
        try:
            _call(calls.setup, ctypes.c_long(capacity), ctypes.byref(context))
        except OSError as error:
            log.info("fdatasync runs on worker threads: io_setup refused (%s)", error)
            return None
        sync = cls(calls, context, os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC), capacity)
        try:
            sync._probe(probe)
        except OSError as error:
            # Before Linux 4.18, io_submit refuses IOCB_CMD_FDSYNC with EINVAL.
            log.info("fdatasync runs on worker threads: the kernel's AIO cannot sync (%s)", error)
            sync.close()
            return None
        sync._loop = asyncio.get_running_loop()
        sync._loop.add_reader(sync._eventfd, sync._reap)
        log.info("fdatasync through the kernel's AIO (up to %d at once, then on worker threads)", capacity)
        return sync

    def _probe(self, directory: Path) -> None:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self._submit([fd], 0)
            timeout = _Timespec(_WAIT_TIMEOUT_S, 0)
            if _call(self._calls.getevents, self._context, ctypes.c_long(1), ctypes.c_long(1), self._events,
                     ctypes.byref(timeout)) != 1:
                raise OSError(errno.ETIMEDOUT, f"no completion within {_WAIT_TIMEOUT_S} s")
            if self._events[0].res < 0:
                raise OSError(-self._events[0].res, os.strerror(-self._events[0].res))
            os.eventfd_read(self._eventfd)
        finally:
            os.close(fd)

    def fdatasync(self, fds: Sequence[int]) -> asyncio.Future[None] | None:
        """A future done once every one of `fds` is synced (its error: the first that failed);
        None when this many syncs would overflow the context (the caller syncs on a thread).
        The fds may be closed as soon as this returns: the kernel holds each submitted sync's
        file until it completes (fs/aio.c: io_submit_one takes a reference, completion drops it)."""
        if self._closed or self._loop is None or self._in_flight + len(fds) > self._capacity:
            return None
        request = next(self._ids)
        future = self._loop.create_future()
        # io_submit takes the blocks up to the first it refuses (a file that cannot be synced) and
        # says how many; submitting the rest again names the refusal's error.
        taken = 0
        refused: OSError | None = None
        while taken < len(fds) and refused is None:
            try:
                taken += self._submit(fds[taken:], request)
            except OSError as error:
                refused = error
        if not taken:
            assert refused is not None
            if refused.errno == errno.EAGAIN:
                return None
            future.set_exception(refused)
            return future
        # What was taken completes before the caller learns that the sync failed.
        self._pending[request] = _Pending(future, taken, refused)
        self._in_flight += taken
        return future

    def _submit(self, fds: Sequence[int], request: int) -> int:
        count = len(fds)
        blocks = (_Iocb * count)()
        pointers = (ctypes.POINTER(_Iocb) * count)()
        for i, fd in enumerate(fds):
            block = blocks[i]
            block.aio_data = request
            block.aio_lio_opcode = _IOCB_CMD_FDSYNC
            block.aio_fildes = fd
            block.aio_flags = _IOCB_FLAG_RESFD
            block.aio_resfd = self._eventfd
            pointers[i] = ctypes.pointer(block)
        # The kernel copies the blocks: they need not outlive the call.
        return _call(self._calls.submit, self._context, ctypes.c_long(count), pointers)

    def _reap(self) -> None:
        try:
            os.eventfd_read(self._eventfd)
        except BlockingIOError:
            return  # its completions were reaped at the previous wake-up
        no_wait = _Timespec(0, 0)
        events = self._events
        while True:
            count = _call(self._calls.getevents, self._context, ctypes.c_long(0), ctypes.c_long(len(events)),
                          events, ctypes.byref(no_wait))
            for event in events[:count]:
                self._completed(event.data, event.res)
            if count < len(events):
                return

    def _completed(self, request: int, result: int) -> None:
        self._in_flight -= 1
        pending = self._pending[request]
        pending.left -= 1
        if result < 0 and pending.error is None:
            pending.error = OSError(-result, os.strerror(-result))
        if pending.left:
            return
        del self._pending[request]
        if pending.future.done():
            return
        if pending.error is not None:
            pending.future.set_exception(pending.error)
        else:
            pending.future.set_result(None)

    def close(self) -> None:
        """Wait for the syncs in flight and tell their futures; a sync still running after
        _WAIT_TIMEOUT_S fails its future (io_destroy waits for it all the same)."""
        if self._closed:
            return
        self._closed = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._eventfd)
        deadline = time.monotonic() + _WAIT_TIMEOUT_S
        while self._in_flight and (left := deadline - time.monotonic()) > 0:
            # A signal ends the wait early with the events read so far: wait again for the rest.
            timeout = _Timespec(int(left), int(left % 1 * 1e9))
            count = _call(self._calls.getevents, self._context, ctypes.c_long(self._in_flight),
                          ctypes.c_long(len(self._events)), self._events, ctypes.byref(timeout))
            if not count:
                break
            for event in self._events[:count]:
                self._completed(event.data, event.res)
        _call(self._calls.destroy, self._context)
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_exception(OSError(errno.ECANCELED, "the node's AIO context was closed"))
        self._pending.clear()
        os.close(self._eventfd)

"""The node's kernel syncs (Linux native AIO fdatasync, log/aio_sync.py) and the group commit
that hands them its fdatasyncs."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path

import pytest
import uvloop
from test_log_operations import fill, small_config

from tests.support.waiting import until, within
from vdl_broker.log import StreamLog
from vdl_broker.log.aio_sync import CAPACITY, AioSync

TIER = "component"  # real files, the kernel's AIO


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Callable[[Awaitable[None]], None]:
    """Run a scenario on the standard event loop and on uvloop (the broker's)."""
    if request.param == "uvloop":
        return lambda scenario: uvloop.run(within(scenario, 20))
    return lambda scenario: asyncio.run(within(scenario, 20))


@contextlib.contextmanager
def open_aio(directory: Path, caplog: pytest.LogCaptureFixture, capacity: int = CAPACITY) -> Iterator[AioSync]:
    """A context opened in the running loop, closed on the way out (closing twice is harmless)."""
    with caplog.at_level(logging.INFO, logger="vdl_broker.log.aio_sync"):
        aio = AioSync.open(directory, capacity)
    if aio is None:
        pytest.skip(f"this machine's kernel cannot sync through AIO, the logs use threads: {caplog.text.strip()}")
    try:
        yield aio
    finally:
        aio.close()


@pytest.fixture
def files(tmp_path: Path) -> Iterator[list[int]]:
    """Three files with a page written to each, not yet synced."""
    fds = [os.open(tmp_path / f"file{i}", os.O_CREAT | os.O_WRONLY) for i in range(3)]
    for fd in fds:
        os.write(fd, b"x" * 4096)
    yield fds
    for fd in fds:
        os.close(fd)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_several_files_are_synced_in_one_request(tmp_path: Path, files: list[int], caplog: pytest.LogCaptureFixture,
                                                 run: Callable[[Awaitable[None]], None]) -> None:
    async def scenario() -> None:
        with open_aio(tmp_path, caplog) as aio:
            first = aio.fdatasync(files)
            second = aio.fdatasync(files[:1])
            assert first is not None and second is not None
            assert await first is None
            assert await second is None

    run(scenario())


def test_fds_closed_right_after_the_submission_are_synced_all_the_same(
        tmp_path: Path, files: list[int], caplog: pytest.LogCaptureFixture,
        run: Callable[[Awaitable[None]], None]) -> None:
    """The group commit hands the kernel its segments' own fds, which a truncation may close
    at once: the kernel holds the files until their syncs complete."""

    async def scenario() -> None:
        with open_aio(tmp_path, caplog) as aio:
            fds = [os.dup(fd) for fd in files]  # the same files, through fds of their own
            synced = aio.fdatasync(fds)
            for fd in fds:
                os.close(fd)
            assert synced is not None
            assert await synced is None

    run(scenario())


def test_a_sync_that_fails_fails_its_request_once_all_of_it_completed(
        tmp_path: Path, files: list[int], caplog: pytest.LogCaptureFixture,
        run: Callable[[Awaitable[None]], None]) -> None:
    """A pipe cannot be synced (EINVAL): the request naming it fails with that error, after the
    file synced with it completed; the context then has room for a full request again."""
    read_end, write_end = os.pipe()

    async def scenario() -> None:
        with open_aio(tmp_path, caplog, capacity=2) as aio:
            for fds in ([files[0], read_end], [read_end, files[0]], [read_end]):
                failing = aio.fdatasync(fds)
                assert failing is not None
                with pytest.raises(OSError) as raised:
                    await failing
                assert raised.value.errno == errno.EINVAL
            again = aio.fdatasync(files[:2])
            assert again is not None
            assert await again is None

    try:
        run(scenario())
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_request_beyond_the_capacity_is_left_to_the_caller(
        tmp_path: Path, files: list[int], caplog: pytest.LogCaptureFixture,
        run: Callable[[Awaitable[None]], None]) -> None:
    async def scenario() -> None:
        with open_aio(tmp_path, caplog, capacity=2) as aio:
            assert aio.fdatasync(files) is None  # 3 fds, room for 2
            taken = aio.fdatasync(files[:2])
            assert taken is not None
            assert aio.fdatasync(files[2:]) is None  # the two are still in flight
            await taken
            last = aio.fdatasync(files[2:])
            assert last is not None
            await last

    run(scenario())


def test_closing_waits_for_the_syncs_in_flight(tmp_path: Path, files: list[int], caplog: pytest.LogCaptureFixture,
                                               run: Callable[[Awaitable[None]], None]) -> None:
    async def scenario() -> None:
        with open_aio(tmp_path, caplog) as aio:
            in_flight = aio.fdatasync(files)
            assert in_flight is not None
            aio.close()
            assert in_flight.done() and in_flight.exception() is None
            assert aio.fdatasync(files) is None  # closed: the caller syncs on a thread

    run(scenario())


class CountingAio:
    """A real AioSync, counting the fds it was asked to sync."""

    def __init__(self, aio: AioSync) -> None:
        self.aio = aio
        self.requests: list[int] = []

    def fdatasync(self, fds: Sequence[int]) -> asyncio.Future[None] | None:
        self.requests.append(len(fds))
        return self.aio.fdatasync(fds)


def test_the_log_syncs_appends_through_the_kernel_and_rolls_on_a_thread(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, run: Callable[[Awaitable[None]], None]) -> None:
    """Appends to the active segment are synced by the kernel; a sync that must also sync the
    directory (a segment created) runs on a thread. Either way the entries become durable and
    no fd is left open (the thread's jobs sync duplicates of the segments' fds)."""

    async def scenario() -> None:
        with open_aio(tmp_path, caplog) as aio:
            counting = CountingAio(aio)
            fds = open_fds()
            log = StreamLog.open(tmp_path / "s", small_config(segment_bytes=1000, fsync=True), aio=aio)
            log._commit.aio = counting  # type: ignore[assignment]
            try:
                fill(log, 1)
                await log.sync()  # the first segment's file is new: directory too, on a thread
                assert log.durable_index == 1 and counting.requests == []
                fill(log, 2)
                await log.sync()
                assert log.durable_index == 3 and counting.requests == [1]
                segments = len(log._segments)
                while len(log._segments) == segments:
                    fill(log, 1)
                await log.sync()  # a roll: the sealed segment and the new one, and the directory
                assert log.durable_index == log.last_index and counting.requests == [1]
                fill(log, 1)
                await log.sync()
                assert log.durable_index == log.last_index and counting.requests == [1, 1]
            finally:
                log.close()
            assert open_fds() == fds  # every duplicate a thread's sync job took is closed

    run(scenario())


class FailingAio:
    """Every kernel sync fails as a dying disk's would."""

    def fdatasync(self, fds: Sequence[int]) -> asyncio.Future[None] | None:
        future = asyncio.get_running_loop().create_future()
        future.set_exception(OSError(errno.EIO, "Input/output error"))
        return future


def test_a_failed_kernel_sync_leaves_the_entries_not_durable(tmp_path: Path,
                                                             run: Callable[[Awaitable[None]], None]) -> None:
    async def scenario() -> None:
        fds = open_fds()
        log = StreamLog.open(tmp_path / "s", small_config(segment_bytes=1 << 20, fsync=True))
        try:
            fill(log, 1)
            await log.sync()  # on a thread: the new segment's directory entry
            log._commit.aio = FailingAio()  # type: ignore[assignment]
            fill(log, 2)
            with pytest.raises(OSError) as raised:
                await log.sync()
            assert raised.value.errno == errno.EIO
            assert log.durable_index == 1
        finally:
            log._commit.aio = None
            log.close()
        await until(lambda: open_fds() == fds, message="the failed job's fds closed")

    run(scenario())

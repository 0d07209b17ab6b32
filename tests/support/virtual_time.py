"""An asyncio event loop on a virtual clock, for the unit tier's driver tests.

`loop.time()` is virtual: when nothing is ready to run, the loop jumps straight to its next timer
instead of waiting for it, so `asyncio.sleep`, `wait_for` deadlines and RaftHost's ticker cost no
wall time, and a run is a pure function of its inputs: the same program takes the same steps at
the same virtual times on every run.

What would make a run depend on the machine is refused or removed:
- no I/O: the selector polls nothing, the loop has no self-pipe (nothing may wake it from
  another thread), and `run` refuses to open a socket;
- no threads: `run_in_executor` (and so `asyncio.to_thread`, StreamLog's group commit) calls the
  function inline; its future resolves `io_latency_s` virtual seconds later, as a disk write
  running in a thread would -- the caller yields to the loop meanwhile, so what may happen while
  an fsync is in flight happens here too;
- a loop with nothing scheduled and nothing ready would wait forever: it raises instead.
"""

from __future__ import annotations

import asyncio
import selectors
import socket
import threading
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import Executor
from typing import Any, TypeVar

T = TypeVar("T")

START = 1000.0  # virtual seconds at the loop's creation (not 0: code may treat 0 as "never")


class Stalled(RuntimeError):
    """The loop has nothing ready and no timer: on a real loop the program would hang here."""


class _IdleSelector(selectors.BaseSelector):
    """Registers file objects (none ever becomes ready) and turns a wait into a clock jump."""

    def __init__(self, loop: VirtualLoop) -> None:
        self._loop = loop
        self._keys: dict[int, selectors.SelectorKey] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = selectors.SelectorKey(fileobj, selectors._fileobj_to_fd(fileobj), events, data)  # noqa: SLF001
        self._keys[key.fd] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._keys.pop(selectors._fileobj_to_fd(fileobj))  # noqa: SLF001

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise Stalled(f"virtual clock at {self._loop.time():.3f}: no timer left and nothing ready to run")
        self._loop.advance(timeout)
        return []

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._keys

    def close(self) -> None:
        self._keys.clear()


IO_LATENCY_S = 0.0005  # a file write or fsync handed to a thread: half a millisecond


class VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self, io_latency_s: float = IO_LATENCY_S) -> None:
        self._now = START
        self.io_latency_s = io_latency_s
        super().__init__(_IdleSelector(self))

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += max(0.0, seconds)

    def run_in_executor(self, executor: Executor | None, func: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        future: asyncio.Future[T] = self.create_future()
        try:
            self.call_later(self.io_latency_s, _settle, future, func(*args), None)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as error:
            self.call_later(self.io_latency_s, _settle, future, None, error)
        return future

    # No thread ever wakes this loop, so it needs no self-pipe (a socket pair).
    def _make_self_pipe(self) -> None:
        self._ssock = self._csock = None

    def _close_self_pipe(self) -> None:
        pass

    def _write_to_self(self) -> None:
        pass


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class _NoSocket(socket.socket):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("a socket opened on the virtual clock: nothing would ever answer it")


def run(main: Coroutine[Any, Any, T], io_latency_s: float = IO_LATENCY_S) -> T:
    """asyncio.run on a VirtualLoop; fails if the program opens a socket or starts a thread."""
    threads = set(threading.enumerate())
    real_socket, socket.socket = socket.socket, _NoSocket  # type: ignore[misc]
    try:
        with asyncio.Runner(loop_factory=lambda: VirtualLoop(io_latency_s)) as runner:
            result = runner.run(main)
    finally:
        socket.socket = real_socket  # type: ignore[misc]
    started = [thread.name for thread in threading.enumerate() if thread not in threads]
    assert not started, f"threads started on the virtual clock: {started}"
    return result

"""Waiting on a condition with a deadline: the tests' only way to wait (never a bare sleep)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_until(condition: Any, timeout: float = 10.0, message: str | Callable[[], str] = "",
               interval: float = 0.05) -> Any:
    """Poll `condition()` until it returns a truthy value (returned); AssertionError naming
    `message` at the deadline (a callable message is called then, so it can show the last state
    seen)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            text = message() if callable(message) else message
            raise AssertionError(f"timed out after {timeout:.1f} s waiting for {text or condition}")
        time.sleep(interval)


async def until(condition: Callable[[], object], timeout: float = 10.0, message: str = "") -> None:
    """The asyncio flavour: let the event loop run until `condition()` holds; AssertionError at
    the deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.1f} s waiting for {message or condition}")
        await asyncio.sleep(0.005)


async def within(awaitable: Awaitable[T], seconds: float) -> T:
    """`await awaitable`, TimeoutError after `seconds`: asyncio.wait_for's job without its Python
    3.11 flaw (it can swallow a cancellation that arrives as the awaited call completes, CPython
    gh-86296)."""
    async with asyncio.timeout(seconds):
        return await awaitable

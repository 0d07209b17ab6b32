"""Delayed operations (Kafka's purgatory, seed 003), asyncio style.

A request that cannot be answered yet (a fetch below min_bytes) parks on the partitions it
touches and is completed by the first event that may satisfy it — a commit or a role change on
one of them — or by its deadline. The caller then re-checks its condition: a wake-up is a hint,
not a guarantee (Kafka's tryComplete).
Delayed produce needs no parking here: it awaits the partition's durability future directly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Protocol


class Wakeable(Protocol):
    def changed_future(self) -> asyncio.Future[None]: ...


async def wait_for_any(partitions: Iterable[Wakeable], deadline: float) -> bool:
    """Park until one partition's HW advances or `deadline` (loop time); True if woken."""
    loop = asyncio.get_running_loop()
    futures = [partition.changed_future() for partition in partitions]
    remaining = deadline - loop.time()
    if not futures or remaining <= 0:
        for future in futures:
            future.cancel()
        return False
    try:
        done, _ = await asyncio.wait(futures, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in futures:
            future.cancel()  # the partitions drop cancelled waiters lazily
    return bool(done)

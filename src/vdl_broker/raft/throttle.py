"""Catch-up traffic paced to a byte rate (node setting `recovery_rate_bytes`).

A replica far behind its leader -- a learner added by a reassignment, a follower back from a long
outage -- is sent entries as fast as the leader can read them, which can take the disk and the
network from the producers the in-sync replicas serve. RaftGroup routes APPENDs to such a
replica here (RaftGroup._catching_up); everything else goes straight to the transport. One
throttle per node, shared by every group: a token bucket of `rate_bytes` per second with a
burst of a tenth of a second, FIFO, so a message waits its turn and nothing is reordered among
catch-up messages. A message leaves once the bucket is not empty and the debt it makes is paid
afterwards. Raft's own flow control (max_inflight_bytes per follower) bounds what waits here;
beyond `max_queued_bytes` a message is dropped and Raft sends it again later.

A leader that hears no progress from a follower over a heartbeat sends again from the
follower's last match (its lost-append recovery): with appends waiting here, that resend makes
every queued append to that follower from that point on obsolete. They are dropped when the
resend arrives -- the resend takes the place of the first it replaces, so it does not go back to
the end of the queue -- and the queue never holds the same entries twice; without it, resends
would pile up behind each other faster than the rate lets them out and the follower would never
catch up.

A queued message can also become pointless while it waits: the follower acknowledged its
entries meanwhile (they reached it in an earlier message), or its leader stepped down.
`obsolete(group, message)` (the group's view, RaftHost) is asked before a message spends the
bucket: such a message is dropped, never sent, so the rate goes to entries the follower lacks.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable

from vdl_broker.raft.types import Message

SendFn = Callable[[str, Message], bool]
ObsoleteFn = Callable[[str, Message], bool]


def payload_bytes(message: Message) -> int:
    snapshot = message.snapshot
    state = snapshot.data.get("state", "") if snapshot is not None and isinstance(snapshot.data, dict) else ""
    return sum(len(entry.data) for entry in message.entries) + len(state)


class CatchUpThrottle:
    def __init__(self, rate_bytes: int, send: SendFn, max_queued_bytes: int = 256 << 20,
                 clock: Callable[[], float] = time.monotonic, obsolete: ObsoleteFn | None = None) -> None:
        if rate_bytes <= 0:
            raise ValueError("rate_bytes must be positive")
        self.rate = float(rate_bytes)
        self.burst = max(self.rate / 10, 64 << 10)
        self._send = send
        self._obsolete = obsolete
        self._clock = clock
        self._tokens = self.burst
        self._stamp = clock()
        self._queue: deque[tuple[str, Message, int]] = deque()
        self._queued_bytes = 0
        self.max_queued_bytes = max_queued_bytes
        self._pump: asyncio.Task[None] | None = None
        self.sent_bytes = 0  # catch-up payload bytes handed to the transport
        self.dropped = 0
        self.superseded = 0  # queued appends a resend made obsolete
        self.obsolete = 0  # queued messages dropped unsent: acknowledged meanwhile, or of a past leader

    def submit(self, group: str, message: Message) -> bool:
        """Send now if the bucket allows and nothing waits, else queue (False: dropped)."""
        size = payload_bytes(message)
        position = self._drop_superseded(group, message)
        self._refill()
        if not self._queue and self._tokens > 0:
            self._spend(size)
            return self._send(group, message)
        if self._queued_bytes + size > self.max_queued_bytes:
            self.dropped += 1
            return False
        if position < 0:
            self._queue.append((group, message, size))
        else:
            self._queue.insert(position, (group, message, size))
        self._queued_bytes += size
        if self._pump is None or self._pump.done():
            self._pump = asyncio.get_running_loop().create_task(self._run(), name="raft-catchup-throttle")
        return True

    @property
    def queued_bytes(self) -> int:
        return self._queued_bytes

    async def close(self) -> None:
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump
        self._queue.clear()
        self._queued_bytes = 0

    def _drop_superseded(self, group: str, message: Message) -> int:
        """Forget queued appends to the same follower of the same group that `message` (sent
        from an earlier or the same point of the log) repeats; returns where the first of them
        was (-1: none)."""
        if not self._queue:
            return -1
        kept: deque[tuple[str, Message, int]] = deque()
        position = -1
        for item in self._queue:
            queued_group, queued, size = item
            if queued_group == group and queued.to == message.to and queued.index >= message.index:
                self._queued_bytes -= size
                self.superseded += 1
                if position < 0:
                    position = len(kept)
            else:
                kept.append(item)
        self._queue = kept
        return position

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    def _spend(self, size: int) -> None:
        self._tokens -= size
        self.sent_bytes += size

    async def _run(self) -> None:
        while self._queue:
            queue = self._queue  # (replaced by _drop_superseded)
            group, message, size = queue[0]
            if self._obsolete is not None and self._obsolete(group, message):
                queue.popleft()
                self._queued_bytes -= size
                self.obsolete += 1
                continue
            self._refill()
            if self._tokens <= 0:
                await asyncio.sleep(min(1.0, (1 - self._tokens) / self.rate))
                continue
            queue.popleft()
            self._queued_bytes -= size
            self._spend(size)
            self._send(group, message)

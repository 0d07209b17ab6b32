"""A task's reads from the replicas the driver gave its range (preferReplicas), the leader last.

`ReplicaFetcher` answers like VdlClient's fetch / fetch_start / fetch_finish, so read_range
reads through either. It asks the range's replicas in order (Fetch v11, KIP-392) and moves on
from one that
- cannot serve the offset (NOT_LEADER_OR_FOLLOWER, OFFSET_NOT_AVAILABLE, OFFSET_OUT_OF_RANGE:
  only the leader's word on that counts as data loss), or does not answer (dead, paused);
- falls behind: no records for `patience_s` while the range still needs some (its high
  watermark lags the one the driver planned with).
Once no replica is left it reads from the stream's leader (VdlClient.fetch: leader changes and
data loss handled as without follower reads). Whatever a replica returns lies below its high
watermark, which is never above the leader's, and read_range takes nothing at or past the
range's end: nothing is read above the high watermark the driver planned with.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from vdl_client import FetchResult, VdlClient
from vdl_client.client import PendingFetch
from vdl_client.replicas import fetch_replica, fetch_replica_finish, fetch_replica_start
from vdl_wire.errors import ErrorCode

log = logging.getLogger("vdl_connector")

MIN_PATIENCE_S = 1.0  # a follower's high watermark lags the leader's by a heartbeat (100 ms) or so


class ReplicaFetcher:
    def __init__(self, client: VdlClient, replicas: Sequence[int], patience_s: float) -> None:
        self.client = client
        self.remaining = list(replicas)
        self.patience_s = max(MIN_PATIENCE_S, patience_s)
        self._stalled_since: float | None = None

    @property
    def node(self) -> int | None:
        """The replica read from now; None once only the leader is left."""
        return self.remaining[0] if self.remaining else None

    def _leave(self, stream: str, offset: int, why: str) -> None:
        node = self.remaining.pop(0)
        self._stalled_since = None
        log.info("stream %s at offset %d: leaving replica %d (%s); next: %s", stream, offset, node, why,
                 f"node {self.remaining[0]}" if self.remaining else "the leader")

    def _usable(self, stream: str, offset: int, result: FetchResult) -> bool:
        if result.error != ErrorCode.NONE:
            self._leave(stream, offset, result.error.name)
            return False
        if result.records:
            self._stalled_since = None
            return True
        now = time.monotonic()
        if self._stalled_since is None:
            self._stalled_since = now
        elif now - self._stalled_since >= self.patience_s:
            self._leave(stream, offset, f"no records for {self.patience_s:.1f} s, high watermark {result.high_watermark}")
            return False
        return True

    def fetch(self, stream: str, offset: int, partition_max_bytes: int, max_bytes: int, max_wait_ms: int,
              deadline: float) -> FetchResult:
        while (node := self.node) is not None:
            result = fetch_replica(self.client, node, stream, offset, partition_max_bytes, max_bytes, max_wait_ms)
            if self._usable(stream, offset, result):
                return result
        return self.client.fetch(stream, offset, partition_max_bytes, max_bytes, max_wait_ms, deadline)

    def fetch_start(self, stream: str, offset: int, partition_max_bytes: int, max_bytes: int,
                    max_wait_ms: int) -> PendingFetch:
        node = self.node
        if node is None:
            return self.client.fetch_start(stream, offset, partition_max_bytes, max_bytes, max_wait_ms)
        return fetch_replica_start(self.client, node, stream, offset, partition_max_bytes, max_bytes, max_wait_ms)

    def fetch_finish(self, pending: PendingFetch, deadline: float) -> FetchResult:
        node = self.node
        if node is None:  # started at the leader (replicas only ever drop out)
            return self.client.fetch_finish(pending, deadline)
        result = fetch_replica_finish(self.client, node, pending)
        stream, offset = pending.args[0], pending.args[1]
        if self._usable(stream, offset, result):
            return result
        return self.fetch(*pending.args, deadline)

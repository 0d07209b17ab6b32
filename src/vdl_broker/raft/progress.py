"""The leader's view of one follower: match/next indexes and flow control (etcd's Progress)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import IntEnum


class ProgressState(IntEnum):
    PROBE = 0  # one append in flight at a time until we find where the logs match
    REPLICATE = 1  # logs match: pipeline appends optimistically, bounded by the inflight window
    SNAPSHOT = 2  # the entries it needs are compacted: a log reset is in flight


@dataclass(frozen=True, slots=True)
class PeerStatus:
    """The leader's view of one member (itself included: match = its own durable index)."""

    match: int
    next: int
    state: ProgressState
    recent_active: bool
    learner: bool = False
    # Answered a heartbeat sent within the last election timeout (unlike recent_active, not
    # cleared at every CheckQuorum round): what membership changes count as "alive".
    alive: bool = False


class Progress:
    __slots__ = (
        "match",
        "next",
        "state",
        "probe_sent",
        "pending_snapshot",
        "recent_active",
        "inflight",
        "inflight_bytes",
        "heartbeat_match",
        "lease_tick",
        "commit_sent",
    )

    def __init__(self, next_index: int) -> None:
        self.match = 0
        self.next = next_index
        self.state = ProgressState.PROBE
        self.probe_sent = False
        self.pending_snapshot = 0
        self.recent_active = False
        self.inflight: deque[tuple[int, int]] = deque()  # (last index, bytes) per append in flight
        self.inflight_bytes = 0
        self.heartbeat_match = 0  # match at the previous heartbeat response (stall detection)
        self.lease_tick = -1  # newest leader tick this peer echoed in a heartbeat response (read lease)
        self.commit_sent = 0  # the highest commit index an APPEND told this peer

    def reset_inflight(self) -> None:
        self.inflight.clear()
        self.inflight_bytes = 0

    def become_probe(self) -> None:
        if self.state == ProgressState.SNAPSHOT:
            self.next = max(self.match + 1, self.pending_snapshot + 1)
            self.pending_snapshot = 0
        else:
            self.next = self.match + 1
        self.state = ProgressState.PROBE
        self.probe_sent = False
        self.reset_inflight()

    def become_replicate(self) -> None:
        self.state = ProgressState.REPLICATE
        self.next = self.match + 1
        self.probe_sent = False
        self.reset_inflight()

    def become_snapshot(self, snapshot_index: int) -> None:
        self.state = ProgressState.SNAPSHOT
        self.pending_snapshot = snapshot_index
        self.probe_sent = False
        self.reset_inflight()

    def maybe_update(self, index: int) -> bool:
        """An append up to `index` succeeded; False if the response is stale."""
        updated = False
        if index > self.match:
            self.match = index
            updated = True
            self.probe_sent = False
        self.next = max(self.next, index + 1)
        self.free_to(index)
        return updated

    def maybe_decrease(self, rejected: int, hint: int) -> bool:
        """An append with prev index `rejected` was refused; False if the refusal is stale."""
        if self.state == ProgressState.REPLICATE:
            if rejected <= self.match:
                return False
            self.next = self.match + 1
            return True
        if self.next - 1 != rejected:
            return False
        self.next = max(min(rejected, hint + 1), self.match + 1)
        self.probe_sent = False
        return True

    def sent(self, last_index: int, nbytes: int) -> None:
        """Book an append ending at last_index (replicate: optimistic next; probe: pause)."""
        if self.state == ProgressState.REPLICATE:
            self.next = last_index + 1
            if last_index <= self.match:
                # An empty append to a caught-up member (a commit notice): it holds no window
                # slot, since nothing but its own answer, which may be lost, would free it.
                return
            self.inflight.append((last_index, nbytes))
            self.inflight_bytes += nbytes
        elif self.state == ProgressState.PROBE:
            self.probe_sent = True

    def free_to(self, index: int) -> None:
        while self.inflight and self.inflight[0][0] <= index:
            _, nbytes = self.inflight.popleft()
            self.inflight_bytes -= nbytes

    def free_first(self) -> None:
        if self.inflight:
            _, nbytes = self.inflight.popleft()
            self.inflight_bytes -= nbytes

    def is_paused(self, max_messages: int, max_bytes: int) -> bool:
        if self.state == ProgressState.PROBE:
            return self.probe_sent
        if self.state == ProgressState.SNAPSHOT:
            return True
        return len(self.inflight) >= max_messages or self.inflight_bytes >= max_bytes

    def __repr__(self) -> str:
        return (
            f"Progress(match={self.match}, next={self.next}, state={self.state.name}, "
            f"inflight={len(self.inflight)}, active={self.recent_active})"
        )

"""The leader's view of one follower: match/next indexes and flow control (etcd's Progress).

Every message in flight to it (each append of the pipeline, the probe, the log reset) carries
the leader tick it left at. A heartbeat sent at a later tick travels behind it on the same
ordered connection, and the follower answers both in order: a heartbeat answer echoing a later
tick while that message is still unanswered means it was lost (lost_before). A message the
driver holds back (a paced catch-up: raft/throttle.py) has not left: heartbeats overtake it,
so until the driver says it left (RaftNode.append_left) no answer counts against it (HELD).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import IntEnum

HELD = 1 << 62  # the tick of a message still held back by the driver: later than any heartbeat


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
    # Ticks since the leader last heard from it, and since it last held the leader's whole log
    # when it answered (-1: never this term); 0 for the leader itself.
    heard_ticks_ago: int = -1
    caught_up_ticks_ago: int = -1


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
        "probe_last",
        "probe_tick",
        "heard_tick",
        "caught_up_tick",
    )

    def __init__(self, next_index: int) -> None:
        self.match = 0
        self.next = next_index
        self.state = ProgressState.PROBE
        self.probe_sent = False
        self.pending_snapshot = 0
        self.recent_active = False
        # (last index, bytes, the tick it left at) per append in flight
        self.inflight: deque[tuple[int, int, int]] = deque()
        self.inflight_bytes = 0
        self.heartbeat_match = 0  # match at the previous heartbeat response (stall detection)
        self.lease_tick = -1  # newest leader tick this peer echoed in a heartbeat response (read lease)
        self.commit_sent = 0  # the highest commit index an APPEND told this peer
        # The probe (PROBE) or log reset (SNAPSHOT) in flight: its last index, the tick it left at.
        self.probe_last = 0
        self.probe_tick = 0
        self.heard_tick = -1  # the leader's tick at this peer's last response
        self.caught_up_tick = -1  # ... at its last response while holding the leader's whole log

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

    def become_snapshot(self, snapshot_index: int, tick: int) -> None:
        self.state = ProgressState.SNAPSHOT
        self.pending_snapshot = snapshot_index
        self.probe_sent = False
        self.probe_last, self.probe_tick = snapshot_index, tick
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

    def sent(self, last_index: int, nbytes: int, tick: int) -> None:
        """Book an append ending at last_index, sent at `tick` (replicate: optimistic next;
        probe: pause)."""
        if self.state == ProgressState.REPLICATE:
            self.next = last_index + 1
            if last_index <= self.match:
                # An empty append to a caught-up member (a commit notice): it holds no window
                # slot, since nothing but its own answer, which may be lost, would free it.
                return
            self.inflight.append((last_index, nbytes, tick))
            self.inflight_bytes += nbytes
        elif self.state == ProgressState.PROBE:
            self.probe_sent = True
            self.probe_last, self.probe_tick = last_index, tick

    def stamp(self, last_index: int, tick: int) -> None:
        """The message in flight ending at last_index (an append's last entry, a log reset's
        index) left at `tick` (HELD: it is held back). Unknown (answered, or replaced by a
        resend): nothing to do."""
        if self.state == ProgressState.REPLICATE:
            inflight = self.inflight
            for position, (last, nbytes, _) in enumerate(inflight):
                if last == last_index:
                    inflight[position] = (last, nbytes, tick)
                    return
                if last > last_index:
                    return
        elif self.probe_last == last_index and (self.probe_sent or self.state == ProgressState.SNAPSHOT):
            self.probe_tick = tick

    def lost_before(self, tick: int) -> bool:
        """Whether a message in flight left before `tick` (a heartbeat answered since was sent
        after it: on an ordered connection, its answer would have come first)."""
        if self.state == ProgressState.REPLICATE:
            return bool(self.inflight) and self.inflight[0][2] < tick
        if self.state == ProgressState.PROBE and not self.probe_sent:
            return False
        return self.probe_tick < tick

    def free_to(self, index: int) -> None:
        while self.inflight and self.inflight[0][0] <= index:
            _, nbytes, _ = self.inflight.popleft()
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

"""RaftConfig: every Raft setting, read by the core (RaftNode) and by its driver (RaftGroup,
RaftHost). Times are in ticks; one tick is `tick_interval_s` of the driver's clock. The defaults
are what a node runs its streams with.

A node's groups share one RaftConfig (RaftHost.raft_config); what differs per group or replica
(this node's id, the voters a group was created with, whether a replica starts under the read
lease) is given to RaftNode and RaftGroup beside it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RaftConfig:
    # Elections: a follower campaigns after a randomized [election_ticks, 2 * election_ticks)
    # ticks without a leader; a leader heartbeats every heartbeat_ticks.
    election_ticks: int = 10
    heartbeat_ticks: int = 1
    # The driver's timer: turns the read lease (ticks) into time.
    tick_interval_s: float = 0.1
    # How much faster one node's clock may run than another's (0.1: 10%): the read lease holds a
    # margin for it (read_lease_ticks); a follower found ticking faster than that is logged
    # (vdl_broker.raft.clock).
    max_clock_drift: float = 0.1
    pre_vote: bool = True
    check_quorum: bool = True
    # Quiescence (vdl_broker.raft.quiescence): a leader with nothing to replicate stops ticking and
    # heartbeating after this many idle heartbeat rounds; 0 = never (the metadata group, and any
    # driver without node liveness: vdl_broker.raft.liveness).
    quiesce_after_heartbeats: int = 5
    max_inflight_messages: int = 256  # appends in flight per follower (replicate state)
    max_inflight_bytes: int = 32 << 20  # payload bytes in flight per follower
    max_append_bytes: int = 1 << 20  # payload bytes per append (at least one entry)
    max_committed_bytes: int | None = 64 << 20  # per Ready.committed_entries (at least one entry)
    # The driver's: a replica more entries (or bytes, estimated from the log's average entry)
    # behind the leader than this is catching up, and the entries it is sent go through the
    # node's catch-up throttle (recovery_rate_bytes). Kafka's ISR lag in entries; the bytes
    # exceed what a healthy follower has in flight (max_inflight_bytes).
    catchup_lag_entries: int = 1000
    catchup_lag_bytes: int = 128 << 20
    # A learner (a replica being added) is catching up until it is this close: only its last
    # stretch goes unthrottled, so that it keeps up with what producers add and gets promoted.
    learner_lag_entries: int = 64
    learner_lag_bytes: int = 8 << 20
    # A group with a state machine (the metadata group) snapshots it after this many entries or
    # payload bytes applied since the last snapshot, and truncates its log behind it
    # (vdl_broker.raft.snapshotting); 0 = never.
    snapshot_entries: int = 0
    snapshot_bytes: int = 0
    # A commit a caught-up follower was not told yet rides the next append, or an empty append at
    # the next tick (cheap for streams: no extra frame per replicated batch). True: the empty
    # append goes at once — for the metadata group, whose followers serve what it commits (ACLs,
    # users, configs) to clients right after the leader answered.
    prompt_commit_notices: bool = False

    @property
    def read_lease_ticks(self) -> float:
        """How long a leader's read lease lasts after the tick a majority echoed, in tick
        intervals of the leader's clock. The followers that echoed it refuse votes for
        election_ticks of their own ticks, so no other leader can be elected within
        election_ticks - 1 of their tick intervals (RaftNode.read_lease_tick); one interval less
        for a margin, and shortened by max_clock_drift, as their ticks may run that much faster
        than the leader's clock."""
        return (self.election_ticks - 2) / (1.0 + self.max_clock_drift)

    def validate(self) -> None:
        if self.heartbeat_ticks <= 0 or self.election_ticks <= self.heartbeat_ticks:
            raise ValueError("need 0 < heartbeat_ticks < election_ticks")
        if self.max_inflight_messages <= 0 or self.max_inflight_bytes <= 0 or self.max_append_bytes <= 0:
            raise ValueError("flow-control limits must be positive")
        if self.quiesce_after_heartbeats < 0:
            raise ValueError("quiesce_after_heartbeats must be >= 0")
        if self.tick_interval_s <= 0:
            raise ValueError("tick_interval_s must be positive")
        if not 0 <= self.max_clock_drift < 1:
            raise ValueError("max_clock_drift must be in [0, 1)")
        if self.election_ticks < 3:
            raise ValueError("election_ticks must be at least 3 (the read lease lasts election_ticks - 2 ticks)")


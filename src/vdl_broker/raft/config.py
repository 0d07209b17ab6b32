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

    def validate(self) -> None:
        if self.heartbeat_ticks <= 0 or self.election_ticks <= self.heartbeat_ticks:
            raise ValueError("need 0 < heartbeat_ticks < election_ticks")
        if self.max_inflight_messages <= 0 or self.max_inflight_bytes <= 0 or self.max_append_bytes <= 0:
            raise ValueError("flow-control limits must be positive")
        if self.quiesce_after_heartbeats < 0:
            raise ValueError("quiesce_after_heartbeats must be >= 0")
        if self.tick_interval_s <= 0:
            raise ValueError("tick_interval_s must be positive")


"""What a RaftGroup's leader knows about time and its replicas: the read lease, the in-sync
replicas (Kafka's ISR), which replicas are catching up (their appends are throttled) and how
close a learner must be to be promoted. A part of RaftGroup (group_state.py).

The read lease turns the core's lease tick (RaftNode.read_lease_tick: the newest tick a
majority echoed) into time on this node's clock: every tick's time is recorded, and the lease
holds for RaftConfig.read_lease_ticks tick intervals after the echoed tick's time: (election_ticks
- 2) / (1 + max_clock_drift), a margin of one interval and of the clock drift allowed between
nodes. Followers that tick faster than that drift allows are logged (vdl_broker.raft.clock).
"""

from __future__ import annotations

import logging

from vdl_broker.raft.group_state import GroupState
from vdl_broker.raft.types import Message, MessageType, Role

log = logging.getLogger(__name__)


class LeaseAndIsr(GroupState):
    def has_read_lease(self) -> bool:
        """This node leads and no other leader can have been elected since (RaftNode's
        read_lease_tick, one tick interval of margin): what it has committed is the newest
        committed state, so reads (high watermark, fetches) may be served. A leader cut off
        from its majority loses the lease before anyone else can win an election."""
        if len(self.voters) == 1:
            return self.node.is_leader  # nobody else can be elected (quiescent or not)
        tick = self.node.read_lease_tick()
        if tick < 0:
            return False
        age = self.node.ticks - tick
        if age >= len(self._tick_times):
            return False
        anchored = self._tick_times[-1 - age]
        return self._clock() - anchored < self.config.read_lease_ticks * self.config.tick_interval_s

    def _check_clock(self, message: Message) -> None:
        """A follower's heartbeat response tells its tick count: is its clock within the drift
        the read lease allows for, measured on ours (vdl_broker.raft.clock)?"""
        if message.type != MessageType.HEARTBEAT_RESPONSE or message.index < 0 or self.node.role != Role.LEADER:
            return
        drift = self._drift.observe(message.sender, message.commit, self._clock())
        if drift is not None:
            log.warning("raft group %s on node %d: node %d ticks %.1f%% faster than this node's clock allows, beyond "
                        "the %.0f%% clock drift the read lease is shortened for: one of the two clocks is off; reads "
                        "served under the lease may be stale until it is fixed", self.name, self.node_id, drift.peer,
                        (drift.rate - 1) * 100, (drift.bound - 1) * 100)

    def _record_tick(self) -> None:
        """Called at every core tick: when each recent tick happened anchors the read lease."""
        self._tick_times.append(self._clock())

    def in_sync_replicas(self, max_lag_entries: int = 1000) -> list[int]:
        """Leader only (else []): voters recently heard from whose match index is within
        `max_lag_entries` of the leader's last index (Kafka's ISR; the leader is always in it).
        Learners are not in it: a commit never waits for them."""
        status = self.node.peer_status()
        last = self.node.last_index
        alive = self._peer_alive or (lambda _peer: False)
        quiescent = self.node.quiescent
        # Heard from since the last CheckQuorum round, or its node is alive (node liveness): a
        # woken group hears from its followers only after a heartbeat round. A quiescent one
        # hears nothing of its own (and runs no CheckQuorum): node liveness alone then.
        return sorted(peer for peer, st in status.items()
                      if peer == self.node_id or (not st.learner and st.match >= last - max_lag_entries
                                                  and (alive(peer) or (st.recent_active and not quiescent))))

    def _catching_up(self, peer: int) -> bool:
        """Whether `peer` is far enough behind for its appends to go through the node's
        catch-up throttle (RaftConfig.catchup_lag_*, learner_lag_*)."""
        node = self.node
        progress = node.progress.get(peer)
        if progress is None:
            return False
        lag = node.last_index - progress.match
        cfg = self.config
        if peer in node.voters:
            entries, nbytes = cfg.catchup_lag_entries, cfg.catchup_lag_bytes
        else:
            entries, nbytes = cfg.learner_lag_entries, cfg.learner_lag_bytes
        return lag > entries or lag * self._entry_bytes > nbytes

    def promotion_lag(self) -> int:
        """How many entries behind the leader a learner may be and still count as caught up
        (promoted): the learner's unthrottled last stretch, in entries of this log's size."""
        cfg = self.config
        by_bytes = cfg.learner_lag_bytes // self._entry_bytes if self._entry_bytes else cfg.learner_lag_entries
        return max(1, min(cfg.learner_lag_entries, by_bytes))

    def _measure_entries(self) -> None:
        """The log's average entry size (for catch-up lags in bytes), refreshed every tick."""
        log_ = self.log
        count = log_.last_index - log_.first_index + 1
        self._entry_bytes = log_.size_bytes // count if count > 0 else 0

"""The leader: replication, each member's progress, commits, heartbeats, CheckQuorum, the read
lease and leadership transfer. A room of RaftNode (state.py).

- A new leader appends a no-op of its term (§8) and probes every member from its last index.
- Per member, a Progress (progress.py): PROBE sends one append at a time until the logs match,
  REPLICATE pipelines appends within max_inflight_messages / max_inflight_bytes, SNAPSHOT sends
  the log start point when the entries a member needs are gone. A rejection carries the
  follower's hint (fast backtracking: one round trip per term, not per entry).
- Commit: the highest index a majority of voters holds, and only if it is of the leader's own
  term (§5.4.2). The leader counts its own entries only once the driver synced them (advance).
- Heartbeats carry min(commit, the member's match) and the leader's tick; the echoed tick is the
  read lease (read_lease_tick). A heartbeat response also unsticks a lost probe, a lost snapshot
  or a pipeline stalled by lost appends: one that left before the echoed tick and is still
  unanswered (progress.py). Nothing still on its way is sent again (a paced catch-up's held-back
  appends, message_held, are on their way until they leave).
- CheckQuorum: a leader that heard from no majority within an election timeout steps down.
- A leader outside the voters (elected while the configuration that took it out was not
  committed, or needed for its log: election.py) counts only the voters, and hands over once
  it committed an entry of its term and its configuration (thesis §4.2.2).
- A member that refuses an append at or after its match, its log ending below that match, lost
  entries it had acknowledged (storage damage, recovery.py): the leader stops counting them.
"""

from __future__ import annotations

from vdl_broker.raft.progress import HELD, PeerStatus, Progress, ProgressState
from vdl_broker.raft.state import NodeState
from vdl_broker.raft.types import (
    CONF_UNKNOWN,
    NONE,
    CompactedError,
    Entry,
    EntryType,
    Message,
    MessageType,
    NotLeaderError,
    Role,
    SnapshotMeta,
)


class Replication(NodeState):
    def match_index(self, peer: int) -> int:
        """Leader only: the highest index known durable on `peer` (0 if unknown / not leader)."""
        pr = self.progress.get(peer)
        return pr.match if pr is not None and self.role == Role.LEADER else 0

    def peer_status(self) -> dict[int, PeerStatus]:
        """Leader only (empty otherwise): every member's replication state, for Kafka's ISR
        and for promoting learners that caught up."""
        if self.role != Role.LEADER:
            return {}
        recent = self.ticks - self.config.election_ticks

        def ago(peer: int, tick: int) -> int:
            return 0 if peer == self.id else (self.ticks - tick if tick >= 0 else -1)

        return {
            peer: PeerStatus(pr.match, pr.next, pr.state, pr.recent_active or peer == self.id,
                             peer not in self._voter_set,
                             peer == self.id or pr.recent_active or (pr.lease_tick >= 0 and pr.lease_tick >= recent),
                             ago(peer, pr.heard_tick), ago(peer, pr.caught_up_tick))
            for peer, pr in self.progress.items()
        }

    def read_lease_tick(self) -> int:
        """Leader read lease: the tick at which this leader last knew a majority followed it
        (-1: no lease). Every voter of that majority received a heartbeat sent at or after
        this tick, and refuses votes for `election_ticks` of its own ticks after receiving
        it, so no other leader can be elected within (election_ticks - 1) tick intervals of
        that tick: until then, this leader's committed state is the newest. The driver turns
        the tick into a deadline on its clock. A leader handing over leadership has none."""
        if self.role != Role.LEADER or self.transferee != NONE or self.quiescent:
            return -1  # a quiescent leader heartbeats nobody: wake() it and wait for the lease
        stamps = sorted((self.ticks if peer == self.id else pr.lease_tick for peer, pr in self.progress.items()
                         if peer in self._voter_set), reverse=True)
        return stamps[self.quorum - 1]

    def transfer_leadership(self, target: int) -> None:
        """Hand leadership to `target` (Raft thesis §3.10): catch it up, then TIMEOUT_NOW.

        Proposals are refused until the transfer completes or is aborted after one election
        timeout."""
        if self.role != Role.LEADER:
            raise NotLeaderError(self.leader_id)
        if target not in self.voters:
            raise ValueError(f"{target} is not a voter")
        if target == self.id or target == self.transferee:
            return
        if self.quiescent:
            self._wake(NONE)
        self.transferee = target
        self.election_elapsed = 0  # the transfer must finish within one election timeout
        if self.progress[target].match == self.log.last_index():
            self._send_timeout_now(target)
        else:
            self._send_append(target)

    def _become_leader(self) -> None:
        self._reset(self.term)
        self.role = Role.LEADER
        self.leader_id = self.id
        next_index = self.log.last_index() + 1
        for peer in (*self.voters, *self.learners):
            self.progress[peer] = Progress(next_index)
        # Elected while the latest configuration, not committed yet, leaves us out (election.py).
        me = self.progress.setdefault(self.id, Progress(next_index))
        me.match = self._durable_index()
        me.recent_active = True
        # Raft §8: a no-op in the new term lets the leader commit (and learn) everything before it.
        self.log.append([Entry(next_index, self.term, EntryType.NOOP, b"")])
        self._broadcast = True

    def _tick_heartbeat(self) -> None:
        if self.id not in self._voter_set and self.current_term_committed and not self.conf_pending:
            self._hand_over()
            return
        self._send_due_commits()
        self.heartbeat_elapsed += 1
        self.election_elapsed += 1
        if self.election_elapsed >= self.config.election_ticks:
            self.election_elapsed = 0
            if self.config.check_quorum:
                if not self._quorum_active():
                    self._become_follower(self.term, NONE)  # CheckQuorum: we lost our majority
                    return
                for peer, pr in self.progress.items():
                    pr.recent_active = peer == self.id
            self.transferee = NONE  # a transfer that did not finish in time is abandoned
        if self.heartbeat_elapsed >= self.config.heartbeat_ticks:
            self.heartbeat_elapsed = 0
            if self._maybe_quiesce():
                return
            self._broadcast_heartbeat()

    def _hand_over(self) -> None:
        """A leader outside the voters of its committed configuration (election.py) steps
        down once its own term's entry committed, its job done (thesis §4.2.2), and tells the
        voter that holds the most of its log to campaign at once."""
        last = self.log.last_index()
        holders = [(pr.match, peer) for peer, pr in self.progress.items() if peer in self._voter_set]
        match, target = max(holders, default=(0, NONE))
        if match == last:
            self._send_timeout_now(target)
        self._become_follower(self.term, NONE)

    def _broadcast_heartbeat(self) -> None:
        for peer in self.peers:
            commit = min(self.progress[peer].match, self.log.committed)
            self._send(MessageType.HEARTBEAT, peer, commit=commit, index=self.ticks)

    def _quorum_active(self) -> bool:
        active = sum(1 for peer, pr in self.progress.items()
                     if peer in self._voter_set and (pr.recent_active or peer == self.id))
        return active >= self.quorum

    def _step_leader(self, m: Message) -> None:
        pr = self.progress.get(m.sender)
        if pr is None:
            return
        if m.type == MessageType.APPEND_RESPONSE:
            pr.recent_active = True
            if m.reject:
                self._handle_append_reject(m, pr)
            else:
                self._handle_append_success(m, pr)
        elif m.type == MessageType.HEARTBEAT_RESPONSE:
            if self.quiescent:
                return  # an acknowledged quiesce (any other response woke us in step)
            pr.recent_active = True
            pr.lease_tick = max(pr.lease_tick, m.index)
            self._handle_heartbeat_response(m, pr)
        else:
            return
        # What KRaft's DescribeQuorum reports as each voter's last fetch and last caught-up times.
        pr.heard_tick = self.ticks
        if pr.match >= self.log.last_index():
            pr.caught_up_tick = self.ticks

    def _handle_append_reject(self, m: Message, pr: Progress) -> None:
        hint = m.reject_hint
        if m.log_term > 0:
            hint, _ = self.log.find_conflict_by_term(m.reject_hint, m.log_term)
        if m.index >= pr.match > m.reject_hint:
            # The follower refuses an append at or after its match and its log ends below the
            # match: it lost entries it had acknowledged (storage damage, recovery.py). Stop
            # counting it for them and probe from where its log ends.
            pr.match = m.reject_hint
            pr.become_probe()
            pr.next = m.reject_hint + 1
            self._send_append(m.sender)
            return
        if pr.state == ProgressState.REPLICATE:
            if m.index <= pr.match:
                return  # stale
            pr.become_probe()
            pr.next = max(min(m.index, hint + 1), pr.match + 1)
        elif not pr.maybe_decrease(m.index, hint):
            return
        self._send_append(m.sender)

    def _handle_append_success(self, m: Message, pr: Progress) -> None:
        if m.log_term == CONF_UNKNOWN:
            self.reassert_conf(m.index)
        updated = pr.maybe_update(m.index)
        if updated or (pr.match == m.index and pr.state == ProgressState.PROBE):
            if pr.state == ProgressState.PROBE:
                pr.become_replicate()
            elif pr.state == ProgressState.SNAPSHOT and pr.match + 1 >= self.log.first_index():
                pr.become_probe()
                pr.become_replicate()
            if self._maybe_commit():
                self._commit_changed = True
            self._send_appends(m.sender)
            # Caught up but not told the commit yet (it moved while this append was in flight):
            # the next append with entries tells it, or an empty one at the next tick
            # (_send_due_commits). Not now: an empty append per commit per follower doubled
            # the frames, Readys and answers of every replicated batch -- unless the group
            # wants its followers to know at once (prompt_commit_notices).
            if (self.config.prompt_commit_notices and pr.commit_sent < self.log.committed
                    and pr.match == self.log.last_index()):
                self._send_append(m.sender, send_if_empty=True)
            if m.sender == self.transferee and pr.match == self.log.last_index():
                self._send_timeout_now(m.sender)

    def _send_timeout_now(self, target: int) -> None:
        # It names our last entry: a joiner campaigns on it only holding that entry (follower.py).
        self._send(MessageType.TIMEOUT_NOW, target, index=self.log.last_index(), log_term=self.log.last_term())

    def _handle_heartbeat_response(self, m: Message, pr: Progress) -> None:
        behind = pr.match < self.log.last_index()
        stalled = pr.match == pr.heartbeat_match
        pr.heartbeat_match = pr.match
        # The answer to a heartbeat sent at tick m.index: whatever left before that tick and is
        # still unanswered was lost (progress.py); what left since, or is held back, may still
        # be on its way -- sending it again would send the same entries twice.
        if pr.state == ProgressState.PROBE:
            if pr.probe_sent and not pr.lost_before(m.index):
                return
            pr.probe_sent = False
        elif pr.state == ProgressState.SNAPSHOT:
            if not pr.lost_before(m.index):
                return
            pr.become_probe()  # the reset was lost: decide again
        elif behind and (pr.lost_before(m.index) if pr.inflight else stalled):
            # Replicating, and appends were lost (or, none in flight, no progress over a whole
            # heartbeat interval): find where the logs match again.
            pr.become_probe()
        else:
            return  # responses to the appends in flight drive the pipeline
        if behind or pr.state == ProgressState.PROBE:
            # Probing a follower that holds everything (recheck_peer) too: until an append
            # answers, it counts as catching up and the group never goes quiet.
            self._send_append(m.sender, send_if_empty=True)

    def message_held(self, m: Message) -> None:
        """The driver holds back `m` (an APPEND or SNAPSHOT this leader sent: a paced catch-up,
        raft/throttle.py): heartbeats overtake it, so their answers tell nothing of it until
        message_left(m)."""
        self._stamp(m, HELD)

    def message_left(self, m: Message) -> None:
        """The held-back `m` left now (or was dropped: then the next heartbeat answer finds it
        lost and it is sent again)."""
        self._stamp(m, self.ticks)

    def _stamp(self, m: Message, tick: int) -> None:
        pr = self.progress.get(m.to)
        if pr is None or self.role != Role.LEADER or m.term != self.term:
            return
        if m.type == MessageType.APPEND:
            pr.stamp(m.entries[-1].index if m.entries else m.index, tick)
        elif m.type == MessageType.SNAPSHOT and m.snapshot is not None:
            pr.stamp(m.snapshot.index, tick)

    def _send_appends(self, peer: int) -> None:
        """Pipeline: keep sending while the window allows and entries remain."""
        while self._send_append(peer) and self.progress[peer].state == ProgressState.REPLICATE:
            pass

    def _send_append(self, peer: int, send_if_empty: bool = False) -> bool:
        pr = self.progress[peer]
        cfg = self.config
        if pr.is_paused(cfg.max_inflight_messages, cfg.max_inflight_bytes):
            return False
        log = self.log
        last = log.last_index()
        if pr.next > last + 1:
            pr.next = last + 1
        prev = pr.next - 1
        prev_term = log.term(prev)
        entries: list[Entry] = []
        if prev_term is not None and pr.next <= last:
            try:
                entries = log.entries(pr.next, last + 1, cfg.max_append_bytes)
            except CompactedError:
                prev_term = None
        if prev_term is None:
            # The entries it needs are gone: send our log start point (a "snapshot").
            start = log.first_index() - 1
            start_term = log.term(start)
            assert start_term is not None
            conf = self.membership.conf_at(start)
            self._send(MessageType.SNAPSHOT, peer, snapshot=SnapshotMeta(start, start_term, conf=conf))
            pr.become_snapshot(start, self.ticks)
            return True
        if not entries and not send_if_empty:
            return False
        nbytes = sum(len(e.data) for e in entries)
        self._send(MessageType.APPEND, peer, index=prev, log_term=prev_term, entries=entries, commit=log.committed)
        pr.sent(entries[-1].index if entries else prev, nbytes, self.ticks)
        pr.commit_sent = max(pr.commit_sent, log.committed)
        return True

    def _flush_appends(self) -> None:
        """Turn batched proposals / commit changes into appends (one per follower per window)."""
        if self.role != Role.LEADER:
            self._broadcast = self._commit_changed = False
            return
        if not (self._broadcast or self._commit_changed):
            return
        for peer in self.peers:
            while self._send_append(peer):
                if self.progress[peer].state != ProgressState.REPLICATE:
                    break
        # A commit change alone sends nothing now: appends carry the commit, and _send_due_commits
        # tells the members no append told, once a tick (at once with prompt_commit_notices).
        if self._commit_changed and self.config.prompt_commit_notices:
            self._send_due_commits()
        self._broadcast = self._commit_changed = False

    def _send_due_commits(self) -> None:
        """Every tick: an empty append to each caught-up member whose last append carried an
        older commit. A heartbeat's commit is capped at its match, so only an append lets a
        recovering follower know it holds the whole committed log (recovery.py); and followers
        serve reads up to the commit they know (KIP-392), so they learn it within a tick."""
        log = self.log
        committed, last = log.committed, log.last_index()
        for peer in self.peers:
            pr = self.progress[peer]
            if pr.commit_sent < committed and pr.match == last:
                self._send_append(peer, send_if_empty=True)

    def _maybe_commit(self) -> bool:
        matches = sorted((self.progress[v].match for v in self.voters), reverse=True)
        index = matches[self.quorum - 1]
        # Raft §5.4.2: only entries of the current term commit by counting replicas.
        if index > self.log.committed and self.log.term(index) == self.term:
            self.log.commit_to(index)
            return True
        return False

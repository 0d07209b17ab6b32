"""The follower: appends, heartbeats and log resets from its leader. A room of RaftNode (state.py).

- APPEND: accepted when the entry before the new ones matches (index and term, §5.3); entries
  that conflict with ours replace them from the conflict on (never a committed one); the answer
  names our new last index. A refusal carries a hint for fast backtracking: the last index whose
  term is <= the leader's previous term, and that term.
- HEARTBEAT: learn the leader's commit (up to what we hold), echo its tick (the read lease), and
  quiesce when asked and caught up (quiescence.py).
- SNAPSHOT: the leader's log starts after entries we lack: reset our log to its start point
  (the driver installs it, StreamLog.reset), unless we hold that point already.
- TIMEOUT_NOW: a leadership transfer to us: campaign at once, past PreVote and the lease (a
  joiner catching up: once it holds the leader's last entry the message names, election.py).
Every acknowledgement leaves only after the driver synced what it acknowledges (the driver
contract), and reports the log we hold now (after storage damage too: recovery.py).
"""

from __future__ import annotations

from vdl_broker.raft.state import NodeState
from vdl_broker.raft.types import Message, MessageType


class Follower(NodeState):
    def _step_follower(self, m: Message) -> None:
        t = m.type
        if t == MessageType.APPEND:
            self.election_elapsed = 0
            self.leader_id = m.sender
            self._handle_append(m)
        elif t == MessageType.HEARTBEAT:
            self.election_elapsed = 0
            self.leader_id = m.sender
            self.log.commit_to(min(m.commit, self.log.last_index()))
            if m.quiesce and not self.leader_commit:  # quiesced: every follower holds its commit index
                self.leader_commit = m.commit
            # Quiesce only holding everything the leader committed; else the plain response wakes it.
            quiesce = m.quiesce and self.log.committed == m.commit and not self._recovering
            self.quiescent = quiesce
            # Echo the lease stamp (and whether we quiesced), with our own tick count: the leader
            # checks our clock against its own (vdl_broker.raft.clock).
            self._send(MessageType.HEARTBEAT_RESPONSE, m.sender, index=m.index, commit=self.ticks, quiesce=quiesce)
        elif t == MessageType.SNAPSHOT:
            self.election_elapsed = 0
            self.leader_id = m.sender
            self._handle_snapshot(m)
        elif t == MessageType.TIMEOUT_NOW:
            # A joiner still catching up (election.py) takes it only holding the leader's last
            # entry it names (sent when we held it: one that is not here is a stale message).
            # Older leaders name none (index 0): as before, the transfer goes ahead.
            if self._joining and (m.index > self.log.last_index() or self.log.term(m.index) not in (None, m.log_term)):
                return  # (a term unknown below the log start: a committed entry, held)
            self._hup(force=True)  # leadership transfer: skip PreVote and the leader lease

    def _handle_append(self, m: Message) -> None:
        log = self.log
        if m.index < log.committed:
            self._send(MessageType.APPEND_RESPONSE, m.sender, index=log.committed)
            return
        if not self.leader_commit:
            self.leader_commit = m.commit
        entries = m.entries if isinstance(m.entries, list) else list(m.entries)
        last_new = log.maybe_append(m.index, m.log_term, m.commit, entries)
        if last_new is not None:
            self._note_refetched(last_new, m.commit)
            self._acknowledge(m.sender, last_new)
            return
        # Fast backtracking: tell the leader the last index whose term is <= its prev term.
        hint_index, hint_term = log.find_conflict_by_term(min(m.index, log.last_index()), m.log_term)
        self._send(
            MessageType.APPEND_RESPONSE, m.sender, index=m.index, reject=True, reject_hint=hint_index, log_term=hint_term
        )

    def _acknowledge(self, leader: int, index: int) -> None:
        """One answer per batch of appends: appends that arrived together (a pipelined burst)
        are answered once, by the last one's index, which covers the others (the leader's match
        and its window of appends in flight move to it at once). Only an answer still waiting in
        this Ready is widened: it leaves after the same sync as the entries it now names."""
        msgs = self._msgs
        if msgs:
            last = msgs[-1]
            if (last.type == MessageType.APPEND_RESPONSE and last.to == leader and not last.reject
                    and last.term == self.term and last.index <= index):
                last.index = index
                return
        self._send(MessageType.APPEND_RESPONSE, leader, index=index)

    def _handle_snapshot(self, m: Message) -> None:
        snap = m.snapshot
        log = self.log
        if snap is None or snap.index <= log.committed:
            self._send(MessageType.APPEND_RESPONSE, m.sender, index=log.committed)
            return
        if log.match_term(snap.index, snap.term):
            log.commit_to(snap.index)  # we already have the start point: nothing to reset
            self._send(MessageType.APPEND_RESPONSE, m.sender, index=log.committed)
            return
        log.restore(snap)
        self._note_log_reset(snap.index)
        self._send(MessageType.APPEND_RESPONSE, m.sender, index=snap.index)

"""Elections: randomized timeouts, PreVote, votes, and the leader lease that keeps a live
leader from being disrupted (Raft §5.2, thesis §9.6 and §6.4). A room of RaftNode (state.py).

- A follower that heard no leader for its randomized timeout, in [election_ticks,
  2 * election_ticks), campaigns -- if it may: a voter of the configuration in force that is not
  recovering from storage damage (recovery.py), nor a joiner still catching up (below).
  Learners, nodes outside the configuration and damaged nodes never campaign; their time since
  they last heard a leader grows instead, so past an election timeout they grant the votes of
  those who may.
- Except a node that the latest configuration in its log took out of the voters while that
  configuration is not committed here: it may be needed to elect anyone until it is (Raft
  thesis §4.2.2). Its log may be the only one holding that configuration, and so the most up to
  date of the voters left: its refusals would keep every other candidate out. It campaigns
  without counting its own vote; elected, it leads until that configuration commits, then
  hands over (replication.py). Likewise a node that a candidate asked for its vote (so the
  candidate's configuration counts it a voter) and refused, its own log being the more up to
  date, campaigns once: it may be the only one holding what a leader needs (a learner a
  deposed leader replicated to, when the voters that also got it are damaged or gone).
- A joiner -- a replica opened knowing no configuration, its log empty, added to a running
  group -- copies the log from its start, whose old configurations may name it a voter: a
  stream placed on this node alone before, moved away and back, has a prefix whose
  configuration makes it the only voter. It uses them as any node does (the latest in its log),
  but it campaigns on its own only once it holds the first commit index a leader reported to it
  (RaftNode.leader_commit): everything committed before it was added, so the configuration it
  is on is the one it was added to or a later one. A leadership transfer to it (TIMEOUT_NOW) needs no such
  wait: the leader sends it only to a member holding its whole log. This is the Raft thesis'
  "new servers join as non-voting members until caught up" (§4.2.1) for the one case where the
  log itself would say otherwise; as KIP-853 tells a replica's incarnations apart by directory
  id, the server also wipes a joiner's stale directory and makes it a damaged (recovering)
  replica, which covers a joiner restarted half-way (vdl_broker.server.replica_manager).
- With PreVote a campaign first asks, without changing its term, whether it could win (a
  pre-vote is granted for a log at least as up to date, in a term above the voter's); only then
  does it start a real election in a new term. A partitioned node rejoining therefore does not
  depose a working leader by bumping the term.
- With CheckQuorum, a node that heard from a leader within the last election timeout ignores
  vote and pre-vote requests of a higher term (the leader lease), unless they carry `force` (a
  leadership transfer, TIMEOUT_NOW). RaftNode's lease_after_start extends this to the first
  election timeout after a start: the leader's read lease may count a heartbeat this node
  acknowledged before restarting.
- A vote is granted at most once per term, to an up-to-date log (§5.4.1), and recorded in the
  hard state, durable before the reply leaves (the driver contract).
"""

from __future__ import annotations

from vdl_broker.raft.state import NodeState
from vdl_broker.raft.types import NONE, Message, MessageType, Role

_VOTE_PENDING, _VOTE_WON, _VOTE_LOST = 0, 1, 2


class Election(NodeState):
    def campaign(self) -> None:
        """Start an election now (tests, or a single-node bootstrap); PreVote first if enabled."""
        self.quiescent = False
        self._hup(force=False)

    def _tick_election(self) -> None:
        self.election_elapsed += 1
        # A node that may not campaign (a learner, a node outside the configuration, a damaged
        # one) lets the time since it last heard a leader grow: past an election timeout it no
        # longer claims the leader's lease, so it answers the votes of those who may campaign.
        if self.election_elapsed >= self.randomized_timeout and self._promotable():
            self.election_elapsed = 0
            self._hup(force=False)

    def _promotable(self) -> bool:
        return self._electable() and not self._recovering and not self._catching_up_as_joiner()

    def _electable(self) -> bool:
        """A voter of the configuration in force, or of the one before it while the latest (which
        took this node out) is not committed here, or a node a candidate asked for its vote and
        refused for its better log (module docstring)."""
        if self.id in self._voter_set or self._asked_as_voter:
            return True
        membership = self.membership
        return self.conf_pending and self.id in membership.conf_at(membership.last_index - 1).voters

    def _catching_up_as_joiner(self) -> bool:
        """A joiner (node.py) that does not hold yet the first commit index a leader reported to
        it: its configuration may be an old one of its log's prefix, naming it a voter (even the
        only one) of a placement the group has left. Once it holds that index, every
        configuration committed before it joined is in its log, and later ones are the group's
        own: it campaigns as any voter."""
        if self._joining and 0 < self.leader_commit <= self.log.last_index():
            self._joining = False
        return self._joining

    def _in_leader_lease(self, m: Message) -> bool:
        """A vote request of a higher term that this node ignores: it heard from a live leader
        recently (or just started: RaftNode's lease_after_start) and the request is no transfer."""
        in_lease = (
            self.config.check_quorum
            and (self.leader_id != NONE or self._booting)
            and self.election_elapsed < self.config.election_ticks
        )
        return in_lease and not m.force

    def _hup(self, force: bool) -> None:
        if self.role == Role.LEADER or not self._electable() or self._recovering:
            return
        self._asked_as_voter = False  # one campaign per refusal
        # A transfer (force) campaigns even as a catching-up joiner: its leader sends TIMEOUT_NOW
        # only to a member holding its whole log, so our configuration is the leader's current one.
        if not force and self._catching_up_as_joiner():
            return
        if self.config.pre_vote and not force:
            self._campaign(pre=True, force=False)
        else:
            self._campaign(pre=False, force=force)

    def _campaign(self, pre: bool, force: bool) -> None:
        if pre:
            self._become_pre_candidate()
            vote_term, kind = self.term + self._term_step, MessageType.PRE_VOTE
        else:
            self._become_candidate()
            vote_term, kind = self.term, MessageType.VOTE
        # Our own vote counts only where we are a voter (thesis §4.2.2).
        if self.id in self._voter_set and self._poll(self.id, True) == _VOTE_WON:  # single-voter group
            if pre:
                self._campaign(pre=False, force=force)
            else:
                self._become_leader()
            return
        last_index = self.log.last_index()
        last_term = self.log.last_term()
        for peer in self._voter_peers:
            self._msgs.append(
                Message(kind, peer, self.id, vote_term, log_term=last_term, index=last_index, force=force)
            )

    def _poll(self, voter: int, granted: bool) -> int:
        self.votes.setdefault(voter, granted)
        yes = sum(1 for v in self.votes.values() if v)
        if yes >= self.quorum:
            return _VOTE_WON
        if len(self.votes) - yes >= self.quorum:
            return _VOTE_LOST
        return _VOTE_PENDING

    def _handle_vote_request(self, m: Message) -> None:
        pre = m.type == MessageType.PRE_VOTE
        can_vote = (
            self.voted_for == m.sender
            or (self.voted_for == NONE and self.leader_id == NONE)
            or (pre and m.term > self.term)
        )
        kind = MessageType.PRE_VOTE_RESPONSE if pre else MessageType.VOTE_RESPONSE
        up_to_date = self.log.is_up_to_date(m.index, m.log_term)
        if can_vote and not self._recovering and up_to_date:
            # Granting a real vote is recorded in hard state, durable before this reply leaves.
            self._msgs.append(Message(kind, m.sender, self.id, m.term))
            if not pre:
                self.election_elapsed = 0
                self.voted_for = m.sender
            return
        self._send(kind, m.sender, reject=True)
        leaderless = self.leader_id == NONE or self.election_elapsed >= self.config.election_ticks
        if not up_to_date and self.role == Role.FOLLOWER and leaderless:
            # A leaderless group asked by a candidate that cannot win against our log: we can,
            # so campaign at the next tick rather than after our own timeout (the designated
            # successor of a lost leader may be a replica that lags: vdl_broker.raft.liveness),
            # even outside our own voters (module docstring).
            self._asked_as_voter = self.id not in self._voter_set
            if self._promotable():
                self.election_elapsed = max(self.election_elapsed, self.randomized_timeout - 1)

    def _step_candidate(self, m: Message) -> None:
        t = m.type
        if t in (MessageType.APPEND, MessageType.HEARTBEAT, MessageType.SNAPSHOT):
            self._become_follower(m.term, m.sender)  # someone won this term
            self._step_follower(m)
            return
        expected = MessageType.PRE_VOTE_RESPONSE if self.role == Role.PRE_CANDIDATE else MessageType.VOTE_RESPONSE
        if t != expected or m.sender not in self._voter_set:
            return
        result = self._poll(m.sender, not m.reject)
        if result == _VOTE_WON:
            if self.role == Role.PRE_CANDIDATE:
                self._campaign(pre=False, force=False)
            else:
                self._become_leader()
        elif result == _VOTE_LOST:
            self._become_follower(self.term, NONE)

    def _become_pre_candidate(self) -> None:
        # Raft thesis §9.6: no term change, no vote; just ask whether we could win.
        self.role = Role.PRE_CANDIDATE
        self.votes = {}
        self.leader_id = NONE
        self.progress = {}
        self.transferee = NONE

    def _become_candidate(self) -> None:
        self._reset(self.term + self._term_step)
        self.voted_for = self.id
        self.role = Role.CANDIDATE

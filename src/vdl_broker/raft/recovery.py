"""Damage recovery: a node whose storage lost data it had synced (protocol-aware recovery, CTRL,
FAST '18). A room of RaftNode (state.py); the driver finds the damage (vdl_broker.raft.persistence)
and hands it over as a `Damage`.

Raft's safety rests on two promises a node makes: an entry it acknowledged (or voted with, as
its last entry) stays in its log, and it votes at most once per term. Storage damage breaks
both silently if the node just truncates its log at the damage and carries on: it can then
help elect a leader lacking an entry that only it and one now-unavailable node held, and that
leader overwrites the last intact copy. So a node built with a `Damage` starts *recovering*:

- it refuses every vote and pre-vote (answers reject) and never campaigns, so no election
  counts it. A leader is then elected by a majority of intact voters only; every committed
  entry is on a majority, a majority of intact voters intersects it in an intact holder
  (as long as one intact copy exists... which is all CTRL promises), and the ordinary
  up-to-date check makes the winner hold the entry (Raft's §5.4 argument, with the damaged
  node removed from both quorums).
- its acknowledgements only ever report the log it holds now (cut at the first damaged entry,
  CRC-checked), never `through_index`: a leader counts it as holding an index only once it
  really holds it again. A leader that still believes an older, larger match for it learns
  from its rejection (hint below match) and lowers the match (replication.py).
- it leaves recovery only as the follower of a live leader, once a successful append from that
  leader brought its durable log to `through_index` (the lost range re-fetched from a peer that
  has it) -- or, when how far the loss reached is unknown (a replica whose whole directory was
  lost), to the commit index that leader reported, holding there an entry of the leader's own
  term: a leader commits only through an entry of its term, which comes after everything
  committed before it, and its commit index covers what it committed itself, so the node then
  holds everything it can ever have acknowledged -- and, if its hard state was lost, once it has
  durably recorded a vote for that leader in that leader's term (never below `term_bound`, the
  last term of its log, which it starts in). That vote is safe to record and closes the term:
  the leader won without this node, so any majority that counted a vote it cast in that term
  before the loss would have to share with the leader's majority a node that voted twice; lower
  terms it ignores anyway. Until then the driver keeps the damage record on disk, so a restart
  mid-recovery resumes it.
  Residual risk after a lost hard state: a vote cast before the loss in a term above the term of
  the leader it recovers with cannot be known; a second candidate of exactly that term, still
  campaigning after that leader, could get a second vote. (While recovering, the node adopts
  every higher term it hears of, which narrows this to candidates it never heard from.)
Unavailability follows when the damaged node is needed for a majority: by design, since a
lost copy of a committed entry may be the one the majority lacks.
"""

from __future__ import annotations

from vdl_broker.raft.state import NodeState
from vdl_broker.raft.types import EXTENT_UNKNOWN, NONE, Damage, Role


def starts_recovering(damage: Damage | None, last_index: int) -> bool:
    """Whether a node built with `damage` over a log ending at `last_index` must recover first."""
    return damage is not None and (
        damage.hard_state_lost or damage.through_index == EXTENT_UNKNOWN or damage.through_index > last_index
    )


class Recovery(NodeState):
    @property
    def recovering(self) -> bool:
        """Damaged and not yet given back by a leader: no votes, no campaigns (module docstring)."""
        return self._recovering

    def _note_refetched(self, index: int, commit: int) -> None:
        """A leader's append succeeded: it brought our log to `index` and reported `commit`."""
        same_term = self._refetched[0] == self.term
        self._refetched = (self.term, max(index, self._refetched[1] if same_term else 0),
                           max(commit, self._refetched[2] if same_term else 0))

    def _note_log_reset(self, index: int) -> None:
        """The leader reset our log to start after `index`. Everything up to it is committed, but
        that is no commit index the leader reported: its start point may be an entry of its own
        term (its no-op) with more of that term committed after it, which we may have
        acknowledged before the loss. The appends that follow report its commit index."""
        self._refetched = (self.term, index, 0)

    def _maybe_end_recovery(self) -> None:
        damage = self.damage
        assert damage is not None
        term, index, commit = self._refetched
        if self.role != Role.FOLLOWER or self.leader_id == NONE or term != self.term:
            return
        if index < damage.through_index or self._durable_index() < index:
            return
        if damage.through_index == EXTENT_UNKNOWN and not (0 < commit <= index and self.log.term(commit) == term):
            return
        if damage.hard_state_lost:
            if self.term < damage.term_bound:
                return
            if self.voted_for != self.leader_id:
                # Record a vote for the leader of this term: a vote we may have cast in it before
                # the loss can no longer be doubled (this leader won without us: any majority
                # that did count us intersects its majority in a node that voted only once).
                self.voted_for = self.leader_id
                return
            if self._prev_hard.voted_for != self.leader_id or self._prev_hard.term != self.term:
                return  # recovered once that vote is durable (it was handed out in a Ready)
        self._recovering = False

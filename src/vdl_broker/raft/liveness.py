"""Node liveness: one failure detector per node pair for every Raft group (sans-IO, deterministic).

Quiescent groups (vdl_broker.raft.quiescence) send nothing, so a follower can no longer learn from
its own group that the leader died. Instead each node tracks its peers: every frame from a peer
counts (any group's message, or the node heartbeat the host sends a peer each tick when nothing
else went to it), and node heartbeats carry the sender's incarnation, a number new at every
process start. A peer is
- down once nothing came from it for `timeout_ticks` of this node's ticks (counted from this
  node's start); up again at its next frame;
- restarted when a frame names a new incarnation: the old process is gone with whatever it led.

What a group does about it (`react`), for every group this node holds with that peer as a voter:
- peer down or restarted, and it led the group: forget it (RaftNode.forget_leader) so pre-votes
  are granted at once; the surviving voter `successor()` picks campaigns (the host, shortly
  after) and the other survivors hold their own campaigns until it had its try (`leader_lost`):
  the leaders of a dead node's groups spread evenly over the survivors, the time to a new leader
  does not depend on the number of groups, and the leader elected is the one a cut-off leader
  names to its clients.
- peer down and this node leads: wake only when the live voters no longer make a majority, so
  CheckQuorum can step down (a quiescent leader checks nothing).
- peer up or restarted, and this node leads: wake, to catch that member (a voter or a learner)
  up (quiescence left it behind as presumed down, or it restarted with an older log); a
  restarted one is also probed again at its match (RaftNode.recheck_peer), in case its restart
  lost what it acknowledged.

Safety of forgetting a leader (quiescence docstring, "Safety"): down needs timeout_ticks >=
election_ticks of silence since this node's start, which outlasts every read lease the leader
drew from this node; a restarted peer's old incarnation serves nothing any more.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vdl_broker.raft.types import NONE, Role

if TYPE_CHECKING:
    from vdl_broker.raft.node import RaftNode


@dataclass(frozen=True)
class LivenessChange:
    """What one tick of NodeLiveness found out."""

    down: tuple[int, ...] = ()
    up: tuple[int, ...] = ()
    restarted: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.down or self.up or self.restarted)


@dataclass
class _Peer:
    last_heard: int = 0
    incarnation: int | None = None
    down: bool = False


@dataclass
class NodeLiveness:
    """This node's view of its peers, driven by `heard()` and `tick()`."""

    timeout_ticks: int
    now: int = 0
    _peers: dict[int, _Peer] = field(default_factory=dict)
    _up: list[int] = field(default_factory=list)
    _restarted: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.timeout_ticks <= 0:
            raise ValueError("timeout_ticks must be positive")

    def add_peer(self, peer: int) -> None:
        self._peers.setdefault(peer, _Peer(self.now))

    def heard(self, peer: int, incarnation: int | None = None) -> None:
        """A frame from `peer` arrived (a node heartbeat carries its incarnation)."""
        state = self._peers.get(peer)
        if state is None:
            state = self._peers[peer] = _Peer(self.now)
        state.last_heard = self.now
        if state.down:
            state.down = False
            self._up.append(peer)
        if incarnation is not None:
            if state.incarnation is not None and incarnation != state.incarnation:
                self._restarted.append(peer)
            state.incarnation = incarnation

    def tick(self) -> LivenessChange:
        self.now += 1
        down = []
        for peer, state in self._peers.items():
            if not state.down and self.now - state.last_heard >= self.timeout_ticks:
                state.down = True
                down.append(peer)
        change = LivenessChange(tuple(down), tuple(dict.fromkeys(self._up)), tuple(dict.fromkeys(self._restarted)))
        self._up.clear()
        self._restarted.clear()
        return change

    def is_alive(self, peer: int) -> bool:
        state = self._peers.get(peer)
        return state is not None and not state.down

    def is_down(self, peer: int) -> bool:
        """Known and silent for `timeout_ticks` (a peer never heard of is not down: unknown)."""
        state = self._peers.get(peer)
        return state is not None and state.down

    def in_contact_with_quorum(self, voters: Iterable[int], me: int) -> bool:
        """Whether node `me` hears from a majority of `voters` (itself counting when it is one).
        False means it has heard from no majority for `timeout_ticks`: a node cut off from the
        rest of the cluster, which will elect leaders without it."""
        members = set(voters)
        if not members:
            return True
        live = sum(1 for v in members if v == me or self.is_alive(v))
        return live >= len(members) // 2 + 1


# A designated successor campaigns this many ticks after it lost the leader's node: the other
# survivors notice the same silence within about a tick and must have forgotten the leader.
CAMPAIGN_DELAY_TICKS = 2
# One that noticed it later (a loaded machine, a frame from the leader still in flight) still
# holds the leader's lease and ignores the pre-vote without an answer: the successor asks again
# every CAMPAIGN_DELAY_TICKS while it knows no leader, this many times more, rather than waiting
# out its randomized election timeout (1-2 s more without a leader). A pre-vote changes no term:
# asking again disrupts nothing.
CAMPAIGN_RETRIES = 4
# The survivors that are not the successor hold their own campaign this much longer than the
# successor's delay: it may notice the silence up to a tick later, and its pre-vote and vote
# take a round trip each.
DEFER_MARGIN_TICKS = 3


def leader_lost(node: RaftNode, group: str, forgotten: int, alive: Iterable[int]) -> bool:
    """After `react` forgot `forgotten`, the leader of `group`: True when this node is its
    successor and campaigns (CAMPAIGN_DELAY_TICKS later, then again: the driver); otherwise its
    own campaign waits until the successor had its first try (RaftNode.defer_campaign), so the
    node that leads next is the one successor() names -- the one a cut-off leader sends clients
    to. If the successor's log is behind, the survivor it asks refuses and campaigns itself at
    once (election.py), so deferring costs no election timeout."""
    if successor(group, node.voters, forgotten, alive) == node.id:
        return True
    node.defer_campaign(CAMPAIGN_DELAY_TICKS + DEFER_MARGIN_TICKS)
    return False


def successor(group: str, voters: Sequence[int], dead: int, alive: Iterable[int]) -> int:
    """The voter of `group` that should campaign when `dead` (its leader's node) is gone: one of
    the live voters, chosen by a stable hash of the group's name so that the groups of one dead
    node spread evenly over the survivors; NONE when no voter is known alive."""
    live = set(alive)
    candidates = sorted(v for v in voters if v != dead and v in live)
    if not candidates:
        return NONE
    return candidates[zlib.crc32(group.encode()) % len(candidates)]


def react(node: RaftNode, change: LivenessChange, is_alive: Callable[[int], bool]) -> int:
    """Apply one LivenessChange to one group's core (module docstring). Returns the peer whose
    leadership this node just forgot (NONE if none): the caller decides who campaigns."""
    forgotten = NONE
    voters = set(node.voters)
    lost = [p for p in (*change.down, *change.restarted) if p in voters]
    if node.role == Role.FOLLOWER and node.leader_id in lost:
        forgotten = node.leader_id
        node.forget_leader()
    elif node.role == Role.LEADER:
        for peer in change.restarted:
            node.recheck_peer(peer)
        # Learners too: quiescence leaves a lagging learner behind as it does a voter.
        members = set(node.peers)
        back = any(p in members for p in (*change.up, *change.restarted))
        live = 1 + sum(1 for p in node.voters if p != node.id and is_alive(p))
        if back or (change.down and live < node.quorum):
            node.wake()
    return forgotten


def may_campaign_again(role: Role) -> bool:
    """Whether a designated successor that knows no leader campaigns (again) now: a follower
    does; a pre-candidate too (its own timeout may have started a campaign whose pre-vote a
    survivor that had not yet noticed the leader gone ignored); a candidate waits for its votes."""
    return role in (Role.FOLLOWER, Role.PRE_CANDIDATE)

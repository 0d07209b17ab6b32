"""Quiescence: an idle Raft group stops ticking, so a node with thousands of groups pays for the
ones that are written or read, not for the others (CockroachDB's quiescent ranges, TiKV's
hibernate regions). A room of RaftNode (state.py).

Quiescing
    A leader with nothing to replicate for `RaftConfig.quiesce_after_heartbeats` heartbeat rounds
    in a row -- everything committed in its own term, durable and applied here, no leadership
    transfer, every follower caught up (match = last index, nothing in flight) or silent since
    the last CheckQuorum round with its node down by the driver's node liveness, if it has one
    (presumed down), and a caught-up majority of voters heard from in this round -- sends its
    caught-up followers (learners too) one last HEARTBEAT with quiesce=True (commit = its last
    index) and quiesces: tick() does nothing, so it sends no heartbeats and runs no CheckQuorum.
    A follower receiving that heartbeat quiesces when it holds and has committed that index (and
    is not recovering from damage) and answers quiesce=True; otherwise its ordinary answer wakes
    the leader. A lagging follower gets nothing (it is presumed down): when its node comes back,
    the driver wakes the leader (`wake()`), which catches it up. A lagging member silent to the
    group whose node is alive keeps the leader awake: what the leader sent it was lost (a new
    leader's first appends and heartbeats, sent before its node's connection to that node was
    up, are dropped), and as its node never went down, no node liveness change would ever wake
    the leader for it; awake, the leader heartbeats it and its answer gets the probe sent again.

Waking
    Any message wakes a node but a quiesce heartbeat, its acknowledgement and a late answer to a
    heartbeat sent before quiescing (Quiescence._wakes); so do propose(),
    transfer_leadership(), campaign(), wake() and forget_leader(); so does every role or term
    change. A woken leader opens a fresh CheckQuorum window (what it heard before quiescing is
    old news) and heartbeats at once: that wakes the followers and renews the read lease. A
    follower woken by anyone but its leader (a candidate, the driver) sends its leader an empty
    HEARTBEAT_RESPONSE (index -1: no lease stamp), which wakes the leader too; a follower that
    ticks while its leader sleeps would otherwise campaign for nothing.

Safety
    Quiescence changes when ticks happen, never how an input is handled, and Raft's safety
    (election safety, log matching, leader completeness, state machine safety) holds whatever
    the timing: a quiescent node is a node whose clock runs slow. Two things do depend on time:
    - The read lease (RaftNode.read_lease_tick). A quiescent leader has none: it must be woken
      and hear a heartbeat round from a majority before it serves reads again (the driver's
      read path does that, within its short lease wait). Stamps echoed before quiescence expire
      by the driver's clock as usual, and the followers that echoed them still honour them: a
      follower that does not tick refuses votes for longer, never shorter -- with one exception,
      forget_leader(), which the driver may call only once the leader's node has been silent
      (no frame at all) for at least election_ticks of this node's ticks, counted from this
      node's start: by then every stamp this follower echoed is older than the lease's span.
    - CheckQuorum. A quiescent leader does not check its quorum, so one cut off from its
      followers stays leader until something wakes it; meanwhile it serves no read (no lease)
      and commits no write (no majority), and once woken it steps down after one election
      timeout as usual. On the other side the followers' driver sees the leader's node go
      silent, forgets the leader and elects another (below).

Liveness
    A group with a live majority gets a leader again once one is needed: a proposal or a read
    wakes it; when the leader's node goes silent the followers forget it (driver, node
    liveness), so pre-votes are granted at once and one of them campaigns; a follower woken
    without its leader wakes the leader. A lost quiesce heartbeat or wake-up degrades to one
    election timeout: the follower that missed it keeps ticking, and its pre-vote wakes
    everyone (a granted pre-vote changes nothing; a refused one leaves the leader in place).
"""

from __future__ import annotations

from vdl_broker.raft.progress import ProgressState
from vdl_broker.raft.state import NodeState
from vdl_broker.raft.types import NONE, Message, MessageType, Role

NUDGE = -1  # HEARTBEAT_RESPONSE.index of a follower waking its leader (no lease stamp)


class Quiescence(NodeState):
    """RaftNode's quiescence (module docstring)."""

    def wake(self) -> None:
        """Leave quiescence (the driver: a read needs the lease, a lagging peer came back)."""
        if self.quiescent:
            self._wake(NONE)

    def recheck_peer(self, peer: int) -> None:
        """The driver's node liveness says `peer` restarted: a leader checks its log again with
        an append at its match. A restart may have lost what it acknowledged (a lost directory,
        storage damage: vdl_broker.raft.recovery); its refusal lowers the match and gets the
        lost entries sent, at once rather than at the group's next write."""
        self.wake()
        if self.role == Role.LEADER and peer in self.progress and peer != self.id:
            self.progress[peer].become_probe()
            self._send_append(peer, send_if_empty=True)

    def forget_leader(self) -> None:
        """The driver's node liveness says the leader's node is gone: forget the leader (and
        wake), so this follower grants pre-votes and votes at once instead of after an election
        timeout (etcd's ForgetLeader). Only once that node was silent for election_ticks of this
        node's ticks since its start (module docstring, "Safety")."""
        if self.role == Role.FOLLOWER and self.leader_id != NONE:
            self.leader_id = NONE
            self._booting = False
        self.wake()

    def defer_campaign(self, ticks: int) -> None:
        """Hold this follower's own campaign for at least `ticks` more ticks (the host: another
        survivor of the leader's node is the designated successor and campaigns first,
        vdl_broker.raft.liveness). Its randomized timeout, counted from the same silence, may be
        about to run out; had it campaigned first, a cut-off leader's clients would be sent to
        the successor it named (server/cut_off.py) while another node won the term.

        If it campaigns all the same (the successor lags, or failed), it skips a term: a cut-off
        leader names the successor with the term after the one it knew as the leader epoch, and
        a client holding that answer takes a hint naming this node only with a newer epoch (the
        Java client's KIP-951 CurrentLeader, KIP-320's outdated-metadata check). Raft allows any
        term increase; the term's epoch gap is one OffsetForLeaderEpoch already handles."""
        if self.role == Role.FOLLOWER:
            self.election_elapsed = min(self.election_elapsed, self.randomized_timeout - ticks)
            self._term_step = 2

    def _wake(self, by: int) -> None:
        self.quiescent = False
        self._idle_heartbeats = 0
        if self.role == Role.LEADER:
            self.election_elapsed = self.heartbeat_elapsed = 0
            for peer, pr in self.progress.items():
                pr.recent_active = peer == self.id
            self._broadcast_heartbeat()
        elif by == NONE and self.role == Role.FOLLOWER and self.leader_id != NONE:
            self._nudge_leader()

    def _nudge_leader(self) -> None:
        """Wake our leader: a heartbeat response with no lease stamp (index NUDGE)."""
        self._send(MessageType.HEARTBEAT_RESPONSE, self.leader_id, index=NUDGE)

    def _wakes(self, m: Message) -> bool:
        """Whether message `m` wakes this quiescent node: anything but a quiesce heartbeat, its
        acknowledgement, and a late answer to a heartbeat sent before quiescing (its echoed tick
        is older than the quiesce heartbeat's; an answer declining that one wakes us)."""
        if m.quiesce:
            return False
        return not (m.type == MessageType.HEARTBEAT_RESPONSE and self.role == Role.LEADER
                    and 0 <= m.index < self.ticks)

    def _maybe_quiesce(self) -> bool:
        """Leader, at a heartbeat round: quiesce (True) or carry on (False)."""
        after = self.config.quiesce_after_heartbeats
        if not after or not self._nothing_to_replicate():
            self._idle_heartbeats = 0
            return False
        self._idle_heartbeats += 1
        if self._idle_heartbeats < after:
            return False
        self.quiescent = True
        last = self.log.last_index()
        for peer in self.peers:
            if self.progress[peer].match == last:
                self._send(MessageType.HEARTBEAT, peer, commit=last, index=self.ticks, quiesce=True)
        return True

    def _nothing_to_replicate(self) -> bool:
        log = self.log
        last = log.last_index()
        # Applied too: a driver may tell followers only of commits it applied (follower reads),
        # and a follower quiescing with an older commit than ours would serve an old end for good.
        if (self.transferee != NONE or log.committed != last or log.applied != last or log.term(last) != self.term
                or self.progress[self.id].match != last or self._broadcast or self._commit_changed):
            return False
        heard = 1
        alive = self._peer_alive
        for peer in self.peers:  # voters and learners
            pr = self.progress[peer]
            caught_up = pr.match == last and pr.state == ProgressState.REPLICATE and not pr.inflight
            if not caught_up and (pr.recent_active or (alive is not None and alive(peer))):
                return False  # a live member still catching up (module docstring)
            heard += caught_up and pr.recent_active and peer in self._voter_set
        # A caught-up majority heard from in this CheckQuorum round: a leader cut off from its
        # followers never quiesces, so CheckQuorum deposes it even while reads keep waking it.
        return heard >= self.quorum

"""RaftNode: the sans-IO Raft state machine (etcd-raft style). See vdl_broker.raft for the contract.

This module holds what the driver calls -- inputs (tick, step, propose), the Ready bundle and
its acknowledgement (ready, advance) -- and the role changes every room shares. The rest lives
in one room per concern (state.py lists them): a message is dispatched here by term and role,
then handled by the room that owns it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from vdl_broker.raft.confchange import ConfChanges
from vdl_broker.raft.config import RaftConfig
from vdl_broker.raft.election import Election
from vdl_broker.raft.follower import Follower
from vdl_broker.raft.log import RaftLog
from vdl_broker.raft.membership import ConfigChangeError, Membership
from vdl_broker.raft.progress import PeerStatus
from vdl_broker.raft.quiescence import Quiescence
from vdl_broker.raft.recovery import Recovery, starts_recovering
from vdl_broker.raft.replication import Replication
from vdl_broker.raft.storage import RaftStorage
from vdl_broker.raft.types import (
    NONE,
    ConfigRecord,
    ConfState,
    Damage,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    NotLeaderError,
    ProposalDroppedError,
    RaftError,
    Ready,
    Role,
    SoftState,
)

__all__ = ["PeerStatus", "RaftConfig", "RaftNode"]

# Sent only by a leader; they promise nothing about the sender's log being durable.
_LEADER_MESSAGES = frozenset(
    (MessageType.APPEND, MessageType.HEARTBEAT, MessageType.SNAPSHOT, MessageType.TIMEOUT_NOW)
)


class RaftNode(Election, Replication, Follower, Recovery, ConfChanges, Quiescence):
    def __init__(
        self,
        node_id: int,
        voters: Sequence[int],
        storage: RaftStorage,
        config: RaftConfig | None = None,
        *,
        hard_state: HardState | None = None,
        rng: random.Random | None = None,
        applied: int = 0,
        damage: Damage | None = None,
        membership: Sequence[ConfigRecord] = (),
        conf_lost: bool = False,
        lease_after_start: bool = False,
        peer_alive: Callable[[int], bool] | None = None,
    ) -> None:
        """`voters`: the configuration the group was created with, used while the log and the
        saved configuration records name none (membership.py); empty for a node joining an
        existing group: it knows no voters, so it never campaigns, until its leader tells it.

        `conf_lost`: the saved configuration records were unreadable (`membership` is then
        empty): its APPEND answers ask the leader for the configuration (confchange.py).

        `lease_after_start`: refuse votes for one election timeout after the start, as if a
        leader had just been heard: before a restart this node may have acknowledged a heartbeat
        that a leader still counts in its read lease (read_lease_tick), which must outlive any
        election. Drivers that serve reads under the lease turn it on (but for a brand-new
        replica, which acknowledged nothing); the simulations elect at once without it.

        `peer_alive`: the driver's node liveness (vdl_broker.raft.liveness), whether a peer's
        node is heard from; a leader never quiesces past a lagging member whose node is alive
        (quiescence.py). None: no node liveness, silence alone presumes a member down."""
        if node_id <= 0 or any(v <= 0 for v in voters):
            raise ValueError("node ids must be positive")
        config = config or RaftConfig()
        config.validate()
        self.config = config
        self.id = node_id
        self._rng = rng if rng is not None else random.Random(self.id)
        self.log = RaftLog(storage, applied)
        # Configurations: the saved records, checked against the log (membership.py).
        self.membership = Membership(ConfState(tuple(sorted(set(voters)))), membership,
                                     storage.first_index, storage.last_index, storage.term_at)
        self.log.membership = self.membership
        self.voters = ()
        self.learners = ()
        self.peers = ()
        self._voter_peers = ()
        self._voter_set = frozenset()
        self.quorum = 1
        self._conf_version = -1
        self._conf_lost = conf_lost
        hard_state = hard_state or HardState()
        self.term = hard_state.term
        self.voted_for = hard_state.voted_for
        self.role = Role.FOLLOWER
        self.leader_id = NONE
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.randomized_timeout = config.election_ticks
        self.ticks = 0
        self._booting = lease_after_start
        self._term_step = 1
        self.progress = {}
        self.votes = {}
        self.transferee = NONE
        self._msgs = []
        self._broadcast = False
        self._commit_changed = False
        self._prev_hard = HardState(self.term, self.voted_for)
        self._durable_term = self.term
        self._prev_soft = SoftState(Role.FOLLOWER, NONE)
        self._outstanding: Ready | None = None
        self.damage = damage
        self._recovering = starts_recovering(damage, self.log.last_index())
        # (term, index, commit) of the last successful append of a leader: the index it brought
        # us to, the commit index it reported (recovery.py).
        self._refetched = (0, 0, 0)
        # The first commit index a leader reported to this node since it started (an append's,
        # or a quiesced heartbeat's: a plain heartbeat's is capped by our match). A node holding
        # and having applied it knows the group's state as of after its start, not only as of its
        # own last saved commit point (a restart replays an older committed state first). The
        # first, not the highest: under steady writes a follower may never hold the latest.
        self.leader_commit = 0
        # A joiner (no configuration given or saved, an empty log) campaigns on its own only once
        # it holds leader_commit: the prefix it copies first may name it a voter of an old
        # placement (election.py).
        self._joining = not voters and not membership and self.log.last_index() == 0
        self.quiescent = False
        self._peer_alive = peer_alive
        self._idle_heartbeats = 0  # leader: heartbeat rounds in a row with nothing to replicate
        self._become_follower(self.term, NONE)
        self._sync_conf()

    # ------------------------------------------------------------------ observables

    @property
    def commit_index(self) -> int:
        return self.log.committed

    @property
    def applied_index(self) -> int:
        return self.log.applied

    @property
    def last_index(self) -> int:
        return self.log.last_index()

    @property
    def first_index(self) -> int:
        return self.log.first_index()

    @property
    def is_leader(self) -> bool:
        return self.role == Role.LEADER

    @property
    def current_term_committed(self) -> bool:
        """True once an entry of the current term (the leader's no-op) is committed: only then
        may a new leader publish a high watermark (it never goes backwards across elections)."""
        return self.log.term(self.log.committed) == self.term

    @property
    def hard_state(self) -> HardState:
        return HardState(self.term, self.voted_for)

    # ------------------------------------------------------------------ inputs

    def tick(self) -> None:
        """Advance logical time by one tick (the driver's timer, e.g. every 100 ms). The read
        lease assumes consecutive ticks are at least the timer's interval apart. A quiescent node
        ignores ticks (its driver need not deliver them)."""
        if self.quiescent:
            return
        self.ticks += 1
        if self.ticks >= self.config.election_ticks:
            self._booting = False
        if self.role == Role.LEADER:
            self._tick_heartbeat()
        else:
            self._tick_election()

    def propose(self, data: bytes | memoryview, type: EntryType = EntryType.DATA,
                known_crc: tuple[int, int] | None = None) -> int:
        """Append one entry to the leader's log; returns its index. Raises NotLeaderError.
        known_crc: see Entry.known_crc."""
        if self.role != Role.LEADER:
            raise NotLeaderError(self.leader_id)
        if self.transferee != NONE:
            raise ProposalDroppedError(self.transferee, "leadership transfer in progress")
        if type == EntryType.CONFIG:
            raise ConfigChangeError("configuration entries go through propose_conf_change()")
        return self._append_own(type, data, known_crc)

    def _append_own(self, type: EntryType, data: bytes | memoryview,
                    known_crc: tuple[int, int] | None = None) -> int:
        if self.quiescent:
            self._wake(NONE)
        index = self.log.last_index() + 1
        self.log.append([Entry(index, self.term, type, data, known_crc=known_crc)])
        self._broadcast = True
        self._idle_heartbeats = 0
        return index

    def step(self, m: Message) -> None:
        """Feed one message received from a peer."""
        if m.to != self.id or m.sender <= NONE or m.sender == self.id:
            return  # misrouted
        # Messages from nodes outside our configuration are handled like any other (thesis
        # §4.1): a leader added by an entry we have not appended yet must reach us; votes from
        # non-voters are never counted (_step_candidate), their acknowledgements never either.
        woken = self.quiescent and self._wakes(m)
        if woken:
            self._wake(m.sender)
        self._step(m)
        if self.membership.version != self._conf_version:
            self._sync_conf()
        if woken and self.role == Role.FOLLOWER and self.leader_id not in (NONE, m.sender):
            self._nudge_leader()  # woken by someone else: wake the leader too

    def _step(self, m: Message) -> None:
        if m.term > self.term:
            if m.type in (MessageType.VOTE, MessageType.PRE_VOTE) and self._in_leader_lease(m):
                return  # we heard from a live leader recently: do not let it be disrupted
            if m.type == MessageType.PRE_VOTE:
                pass  # a pre-vote never changes our term
            elif m.type == MessageType.PRE_VOTE_RESPONSE and not m.reject:
                pass  # granted pre-votes carry the term we will campaign for
            elif m.type in (MessageType.APPEND, MessageType.HEARTBEAT, MessageType.SNAPSHOT):
                self._become_follower(m.term, m.sender)
            else:
                self._become_follower(m.term, NONE)
        elif m.term < self.term:
            if m.type in (MessageType.APPEND, MessageType.HEARTBEAT) and (
                self.config.check_quorum or self.config.pre_vote
            ):
                # A deposed leader (maybe partitioned away) learns the newer term from us.
                self._send(MessageType.APPEND_RESPONSE, m.sender)
            elif m.type == MessageType.PRE_VOTE:
                self._send(MessageType.PRE_VOTE_RESPONSE, m.sender, reject=True)
            return

        if m.type in (MessageType.VOTE, MessageType.PRE_VOTE):
            self._handle_vote_request(m)
        elif self.role == Role.LEADER:
            self._step_leader(m)
        elif self.role == Role.FOLLOWER:
            self._step_follower(m)
        else:
            self._step_candidate(m)

    # ------------------------------------------------------------------ output

    def has_ready(self) -> bool:
        """Whether ready() has work (cheap: the driver calls it after every input)."""
        if self._outstanding is not None:
            return False
        log = self.log
        if self._msgs or log.unstable or self._broadcast or self._commit_changed or log.pending_snapshot:
            return True
        hard, soft = self._prev_hard, self._prev_soft
        if self.term != hard.term or self.voted_for != hard.voted_for:
            return True
        if self.role != soft.role or self.leader_id != soft.leader_id:
            return True
        return log.committed > log.applied and log.committed >= log.first_index()

    def ready(self) -> Ready:
        """Collect the pending work. Call advance(ready) before the next ready()."""
        if self._outstanding is not None:
            raise RaftError("advance() the previous Ready before asking for another")
        self._flush_appends()
        log = self.log
        soft = SoftState(self.role, self.leader_id)
        hard = HardState(self.term, self.voted_for)
        start = max(log.applied + 1, log.first_index())
        committed: list[Entry] = []
        if log.committed >= start:
            committed = log.entries(start, log.committed + 1, self.config.max_committed_bytes)
        rd = Ready(
            soft_state=soft if soft != self._prev_soft else None,
            hard_state=hard if hard != self._prev_hard else None,
            snapshot=log.pending_snapshot,
            entries=list(log.unstable),
            committed_entries=committed,
            messages=self._msgs,
            membership=self.membership.take_changed(log.first_index()),
        )
        self._msgs = []
        self._split_early(rd)
        self._prev_soft = soft
        self._prev_hard = hard
        self._outstanding = rd
        return rd

    def _split_early(self, rd: Ready) -> None:
        """Move leader messages of an already-durable term to rd.early_messages."""
        durable_term = self._durable_term
        early = [m for m in rd.messages if m.type in _LEADER_MESSAGES and m.term == durable_term]
        if early:
            rd.early_messages = early
            rd.messages = [m for m in rd.messages if not (m.type in _LEADER_MESSAGES and m.term == durable_term)]

    def advance(self, rd: Ready) -> None:
        """The driver persisted and synced rd's snapshot/entries/hard state, sent its messages
        and applied its committed entries."""
        if rd is not self._outstanding:
            raise RaftError("advance() takes the Ready returned by the last ready()")
        self._outstanding = None
        if rd.hard_state is not None:
            self._durable_term = rd.hard_state.term
        log = self.log
        if rd.snapshot is not None:
            log.snapshot_installed(rd.snapshot)
            log.applied_to(rd.snapshot.index)
        for entry in reversed(rd.entries):
            # Normally the last entry; if a conflicting append replaced some of them meanwhile,
            # the longest prefix still in our log is durable (the rest comes in the next Ready).
            if log.term(entry.index) == entry.term:
                log.stable_to(entry.index, entry.term)
                break
        if rd.committed_entries:
            log.applied_to(rd.committed_entries[-1].index)
        if self._recovering:
            self._maybe_end_recovery()
        if self.role == Role.LEADER:
            # The leader counts itself only once its own entries are durable.
            if self.progress[self.id].maybe_update(self._durable_index()) and self._maybe_commit():
                self._commit_changed = True

    # ------------------------------------------------------------------ roles

    def _reset(self, term: int) -> None:
        if term != self.term:
            self.term = term
            self.voted_for = NONE
        self.leader_id = NONE
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.randomized_timeout = self.config.election_ticks + self._rng.randrange(self.config.election_ticks)
        self._term_step = 1
        self._asked_as_voter = False
        self.votes = {}
        self.progress = {}
        self.transferee = NONE
        self._broadcast = False
        self._commit_changed = False
        self.quiescent = False
        self._idle_heartbeats = 0

    def _become_follower(self, term: int, leader: int) -> None:
        self._reset(term)
        self.role = Role.FOLLOWER
        self.leader_id = leader

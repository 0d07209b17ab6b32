"""RaftNode: the sans-IO Raft state machine (etcd-raft style). See vdl_broker.raft for the contract.

Corruption (protocol-aware recovery, CTRL, FAST '18)
----------------------------------------------------
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
  from its rejection (hint below match) and lowers the match (leader side, below).
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

import random
from collections.abc import Sequence
from dataclasses import dataclass

from vdl_broker.raft.log import RaftLog
from vdl_broker.raft.membership import ConfigChangeError, Membership, check_change, encode_conf
from vdl_broker.raft.progress import Progress, ProgressState
from vdl_broker.raft.quiescence import Quiescence
from vdl_broker.raft.storage import RaftStorage
from vdl_broker.raft.types import (
    EXTENT_UNKNOWN,
    NONE,
    CompactedError,
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
    SnapshotMeta,
    SoftState,
)

_VOTE_PENDING, _VOTE_WON, _VOTE_LOST = 0, 1, 2
# Sent only by a leader; they promise nothing about the sender's log being durable.
_LEADER_MESSAGES = frozenset(
    (MessageType.APPEND, MessageType.HEARTBEAT, MessageType.SNAPSHOT, MessageType.TIMEOUT_NOW)
)


@dataclass(frozen=True)
class RaftConfig:
    node_id: int
    # The configuration the group was created with (used while the log and the saved
    # configuration records name none: vdl_broker.raft.membership). Empty for a node joining
    # an existing group: it knows no voters, so it never campaigns, until its leader tells it.
    voters: Sequence[int]
    election_ticks: int = 10
    heartbeat_ticks: int = 1
    pre_vote: bool = True
    check_quorum: bool = True
    # Refuse votes for one election timeout after start, as if a leader had just been heard:
    # before a restart this node may have acknowledged a heartbeat that a leader still counts
    # in its read lease (read_lease_tick), which must outlive any election. Drivers that serve
    # reads under the lease turn it on; the simulations elect at once without it.
    lease_after_start: bool = False
    # Quiescence (vdl_broker.raft.quiescence): a leader with nothing to replicate stops ticking and
    # heartbeating after this many idle heartbeat rounds; 0 = never (the metadata group, tests).
    quiesce_after_heartbeats: int = 0
    max_inflight_messages: int = 256  # appends in flight per follower (replicate state)
    max_inflight_bytes: int = 32 << 20  # payload bytes in flight per follower
    max_append_bytes: int = 1 << 20  # payload bytes per append (at least one entry)
    max_committed_bytes: int | None = 64 << 20  # per Ready.committed_entries (at least one entry)

    def validate(self) -> None:
        if self.node_id <= 0 or any(v <= 0 for v in self.voters):
            raise ValueError("node ids must be positive")
        if self.heartbeat_ticks <= 0 or self.election_ticks <= self.heartbeat_ticks:
            raise ValueError("need 0 < heartbeat_ticks < election_ticks")
        if self.max_inflight_messages <= 0 or self.max_inflight_bytes <= 0 or self.max_append_bytes <= 0:
            raise ValueError("flow-control limits must be positive")
        if self.quiesce_after_heartbeats < 0:
            raise ValueError("quiesce_after_heartbeats must be >= 0")


@dataclass(frozen=True, slots=True)
class PeerStatus:
    """The leader's view of one member (itself included: match = its own durable index)."""

    match: int
    next: int
    state: ProgressState
    recent_active: bool
    learner: bool = False
    # Answered a heartbeat sent within the last election timeout (unlike recent_active, not
    # cleared at every CheckQuorum round): what membership changes count as "alive".
    alive: bool = False


class RaftNode(Quiescence):
    def __init__(
        self,
        config: RaftConfig,
        storage: RaftStorage,
        hard_state: HardState | None = None,
        rng: random.Random | None = None,
        applied: int = 0,
        damage: Damage | None = None,
        membership: Sequence[ConfigRecord] = (),
    ) -> None:
        config.validate()
        self.config = config
        self.id = config.node_id
        self._rng = rng if rng is not None else random.Random(self.id)
        self.log = RaftLog(storage, applied)
        # Configurations: the saved records, checked against the log (membership.py).
        self.membership = Membership(ConfState(tuple(sorted(set(config.voters)))), membership,
                                     storage.first_index, storage.last_index, storage.term_at)
        self.log.membership = self.membership
        self.voters: tuple[int, ...] = ()
        self.learners: tuple[int, ...] = ()
        self.peers: tuple[int, ...] = ()  # every other member: voters and learners
        self._voter_peers: tuple[int, ...] = ()
        self._voter_set: frozenset[int] = frozenset()
        self.quorum = 1
        self._conf_version = -1
        hard_state = hard_state or HardState()
        self.term = hard_state.term
        self.voted_for = hard_state.voted_for
        self.role = Role.FOLLOWER
        self.leader_id = NONE
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.randomized_timeout = config.election_ticks
        self.ticks = 0  # ticks since start: stamps heartbeats for the read lease
        self._booting = config.lease_after_start  # see RaftConfig.lease_after_start
        self.progress: dict[int, Progress] = {}
        self.votes: dict[int, bool] = {}
        self.transferee = NONE
        self._msgs: list[Message] = []
        self._broadcast = False  # new entries to replicate (batched until ready())
        self._commit_changed = False  # followers should learn the new commit index
        self._prev_hard = HardState(self.term, self.voted_for)
        self._durable_term = self.term  # the term of the last hard state known durable
        self._prev_soft = SoftState(Role.FOLLOWER, NONE)
        self._outstanding: Ready | None = None
        self.damage = damage
        self._recovering = damage is not None and (
            damage.hard_state_lost or damage.through_index == EXTENT_UNKNOWN
            or damage.through_index > self.log.last_index()
        )
        # (term, index, commit) of the last successful append of a leader: the index it brought
        # us to, the commit index it reported.
        self._refetched = (0, 0, 0)
        self.quiescent = False  # not ticking (vdl_broker.raft.quiescence)
        self._idle_heartbeats = 0  # leader: heartbeat rounds in a row with nothing to replicate
        self._become_follower(self.term, NONE)
        self._sync_conf()

    # ------------------------------------------------------------------ driver API

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
    def recovering(self) -> bool:
        """Damaged and not yet given back by a leader: no votes, no campaigns (module docstring)."""
        return self._recovering

    @property
    def hard_state(self) -> HardState:
        return HardState(self.term, self.voted_for)

    @property
    def conf(self) -> ConfState:
        """The configuration in force here: the latest one in the log, committed or not."""
        return self.membership.current

    @property
    def conf_pending(self) -> bool:
        """The latest configuration is not committed yet (no other change may start)."""
        return self.membership.last_index > self.log.committed

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
        return {
            peer: PeerStatus(pr.match, pr.next, pr.state, pr.recent_active or peer == self.id,
                             peer not in self._voter_set,
                             peer == self.id or pr.recent_active or (pr.lease_tick >= 0 and pr.lease_tick >= recent))
            for peer, pr in self.progress.items()
        }

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

    def campaign(self) -> None:
        """Start an election now (tests, or a single-node bootstrap); PreVote first if enabled."""
        self.quiescent = False
        self._hup(force=False)

    def propose(self, data: bytes | memoryview, type: EntryType = EntryType.DATA) -> int:
        """Append one entry to the leader's log; returns its index. Raises NotLeaderError."""
        if self.role != Role.LEADER:
            raise NotLeaderError(self.leader_id)
        if self.transferee != NONE:
            raise ProposalDroppedError(self.transferee, "leadership transfer in progress")
        if type == EntryType.CONFIG:
            raise ConfigChangeError("configuration entries go through propose_conf_change()")
        return self._append_own(type, data)

    def _append_own(self, type: EntryType, data: bytes | memoryview) -> int:
        if self.quiescent:
            self._wake(NONE)
        index = self.log.last_index() + 1
        self.log.append([Entry(index, self.term, type, data)])
        self._broadcast = True
        self._idle_heartbeats = 0
        return index

    def propose_conf_change(self, conf: ConfState) -> int:
        """Append a CONFIG entry switching to `conf`; returns its index. It takes effect at
        once (here, and on each follower as it appends it). Raises NotLeaderError, or
        ConfigChangeError when a rule of vdl_broker.raft.membership forbids it now."""
        if self.role != Role.LEADER:
            raise NotLeaderError(self.leader_id)
        if self.transferee != NONE:
            raise ProposalDroppedError(self.transferee, "leadership transfer in progress")
        if not self.current_term_committed:
            raise ConfigChangeError("the leader has not committed an entry of its term yet")
        if self.conf_pending:
            raise ConfigChangeError("the previous configuration change is not committed yet")
        check_change(self.conf, conf, self.id)
        index = self._append_own(EntryType.CONFIG, encode_conf(conf))
        self._sync_conf()
        return index

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
            self._send(MessageType.TIMEOUT_NOW, target)
        else:
            self._send_append(target)

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
            if m.type in (MessageType.VOTE, MessageType.PRE_VOTE):
                in_lease = (
                    self.config.check_quorum
                    and (self.leader_id != NONE or self._booting)
                    and self.election_elapsed < self.config.election_ticks
                )
                if in_lease and not m.force:
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

    # ------------------------------------------------------------------ roles

    def _reset(self, term: int) -> None:
        if term != self.term:
            self.term = term
            self.voted_for = NONE
        self.leader_id = NONE
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.randomized_timeout = self.config.election_ticks + self._rng.randrange(self.config.election_ticks)
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

    def _become_pre_candidate(self) -> None:
        # Raft thesis §9.6: no term change, no vote; just ask whether we could win.
        self.role = Role.PRE_CANDIDATE
        self.votes = {}
        self.leader_id = NONE
        self.progress = {}
        self.transferee = NONE

    def _become_candidate(self) -> None:
        self._reset(self.term + 1)
        self.voted_for = self.id
        self.role = Role.CANDIDATE

    def _become_leader(self) -> None:
        self._reset(self.term)
        self.role = Role.LEADER
        self.leader_id = self.id
        next_index = self.log.last_index() + 1
        for peer in (*self.voters, *self.learners):
            self.progress[peer] = Progress(next_index)
        me = self.progress[self.id]
        me.match = self._durable_index()
        me.recent_active = True
        # Raft §8: a no-op in the new term lets the leader commit (and learn) everything before it.
        self.log.append([Entry(next_index, self.term, EntryType.NOOP, b"")])
        self._broadcast = True

    def _durable_index(self) -> int:
        return self.log.offset - 1  # everything below the unstable offset is in storage

    # ------------------------------------------------------------------ elections

    def _tick_election(self) -> None:
        self.election_elapsed += 1
        # A node that may not campaign (a learner, a node outside the configuration, a damaged
        # one) lets the time since it last heard a leader grow: past an election timeout it no
        # longer claims the leader's lease, so it answers the votes of those who may campaign.
        if self.election_elapsed >= self.randomized_timeout and self._promotable():
            self.election_elapsed = 0
            self._hup(force=False)

    def _promotable(self) -> bool:
        return self.id in self._voter_set and not self._recovering

    def _tick_heartbeat(self) -> None:
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

    def _broadcast_heartbeat(self) -> None:
        for peer in self.peers:
            commit = min(self.progress[peer].match, self.log.committed)
            self._send(MessageType.HEARTBEAT, peer, commit=commit, index=self.ticks)

    def _quorum_active(self) -> bool:
        active = sum(1 for peer, pr in self.progress.items()
                     if peer in self._voter_set and (pr.recent_active or peer == self.id))
        return active >= self.quorum

    def _hup(self, force: bool) -> None:
        if self.role == Role.LEADER or self.id not in self.voters or self._recovering:
            return
        if self.config.pre_vote and not force:
            self._campaign(pre=True, force=False)
        else:
            self._campaign(pre=False, force=force)

    def _campaign(self, pre: bool, force: bool) -> None:
        if pre:
            self._become_pre_candidate()
            vote_term, kind = self.term + 1, MessageType.PRE_VOTE
        else:
            self._become_candidate()
            vote_term, kind = self.term, MessageType.VOTE
        if self._poll(self.id, True) == _VOTE_WON:  # single-voter group
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
        if can_vote and not self._recovering and self.log.is_up_to_date(m.index, m.log_term):
            # Granting a real vote is recorded in hard state, durable before this reply leaves.
            self._msgs.append(Message(kind, m.sender, self.id, m.term))
            if not pre:
                self.election_elapsed = 0
                self.voted_for = m.sender
        else:
            self._send(kind, m.sender, reject=True)

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

    # ------------------------------------------------------------------ follower

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
            # Quiesce only holding everything the leader committed; else the plain response wakes it.
            quiesce = m.quiesce and self.log.committed == m.commit and not self._recovering
            self.quiescent = quiesce
            # Echo the lease stamp (and whether we quiesced).
            self._send(MessageType.HEARTBEAT_RESPONSE, m.sender, index=m.index, quiesce=quiesce)
        elif t == MessageType.SNAPSHOT:
            self.election_elapsed = 0
            self.leader_id = m.sender
            self._handle_snapshot(m)
        elif t == MessageType.TIMEOUT_NOW:
            self._hup(force=True)  # leadership transfer: skip PreVote and the leader lease

    def _handle_append(self, m: Message) -> None:
        log = self.log
        if m.index < log.committed:
            self._send(MessageType.APPEND_RESPONSE, m.sender, index=log.committed)
            return
        entries = m.entries if isinstance(m.entries, list) else list(m.entries)
        last_new = log.maybe_append(m.index, m.log_term, m.commit, entries)
        if last_new is not None:
            same_term = self._refetched[0] == self.term
            self._refetched = (self.term, max(last_new, self._refetched[1] if same_term else 0),
                               max(m.commit, self._refetched[2] if same_term else 0))
            self._send(MessageType.APPEND_RESPONSE, m.sender, index=last_new)
            return
        # Fast backtracking: tell the leader the last index whose term is <= its prev term.
        hint_index, hint_term = log.find_conflict_by_term(min(m.index, log.last_index()), m.log_term)
        self._send(
            MessageType.APPEND_RESPONSE, m.sender, index=m.index, reject=True, reject_hint=hint_index, log_term=hint_term
        )

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
        self._refetched = (self.term, snap.index, snap.index)
        self._send(MessageType.APPEND_RESPONSE, m.sender, index=snap.index)

    # ------------------------------------------------------------------ leader

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

    def _handle_append_reject(self, m: Message, pr: Progress) -> None:
        hint = m.reject_hint
        if m.log_term > 0:
            hint, _ = self.log.find_conflict_by_term(m.reject_hint, m.log_term)
        if m.index >= pr.match > m.reject_hint:
            # The follower refuses an append at or after its match and its log ends below the
            # match: it lost entries it had acknowledged (storage damage, see the module
            # docstring). Stop counting it for them and probe from where its log ends.
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
            if m.sender == self.transferee and pr.match == self.log.last_index():
                self._send(MessageType.TIMEOUT_NOW, m.sender)

    def _handle_heartbeat_response(self, m: Message, pr: Progress) -> None:
        behind = pr.match < self.log.last_index()
        stalled = pr.match == pr.heartbeat_match
        pr.heartbeat_match = pr.match
        if pr.state == ProgressState.PROBE:
            pr.probe_sent = False  # the probe may have been lost: allow another
        elif pr.state == ProgressState.SNAPSHOT:
            pr.become_probe()  # the reset may have been lost: decide again
        elif behind and stalled:
            # Replicating, yet no progress over a whole heartbeat interval: appends were lost.
            pr.become_probe()
        else:
            return  # responses to the appends in flight drive the pipeline
        if behind or pr.state == ProgressState.PROBE:
            # Probing a follower that holds everything (recheck_peer) too: until an append
            # answers, it counts as catching up and the group never goes quiet.
            self._send_append(m.sender, send_if_empty=True)

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
            pr.become_snapshot(start)
            return True
        if not entries and not send_if_empty:
            return False
        nbytes = sum(len(e.data) for e in entries)
        self._send(MessageType.APPEND, peer, index=prev, log_term=prev_term, entries=entries, commit=log.committed)
        pr.sent(entries[-1].index if entries else prev, nbytes)
        return True

    def _flush_appends(self) -> None:
        """Turn batched proposals / commit changes into appends (one per follower per window)."""
        if self.role != Role.LEADER:
            self._broadcast = self._commit_changed = False
            return
        if not (self._broadcast or self._commit_changed):
            return
        for peer in self.peers:
            sent = False
            while self._send_append(peer):
                sent = True
                if self.progress[peer].state != ProgressState.REPLICATE:
                    break
            if not sent and self._commit_changed:
                self._send_append(peer, send_if_empty=True)
        self._broadcast = self._commit_changed = False

    def _maybe_commit(self) -> bool:
        matches = sorted((self.progress[v].match for v in self.voters), reverse=True)
        index = matches[self.quorum - 1]
        # Raft §5.4.2: only entries of the current term commit by counting replicas.
        if index > self.log.committed and self.log.term(index) == self.term:
            self.log.commit_to(index)
            return True
        return False

    # ------------------------------------------------------------------ membership

    def _sync_conf(self) -> None:
        """Adopt the latest configuration of the log (membership.py): quorum, peers, progress."""
        conf = self.membership.current
        self._conf_version = self.membership.version
        self.voters, self.learners = conf.voters, conf.learners
        self._voter_set = frozenset(conf.voters)
        self.peers = tuple(p for p in conf.members if p != self.id)
        self._voter_peers = tuple(p for p in conf.voters if p != self.id)
        self.quorum = len(conf.voters) // 2 + 1
        if self.role != Role.LEADER:
            return
        members = set(conf.members) | {self.id}
        for peer in members - set(self.progress):
            # Probe the newcomer with our last entry (the configuration that added it) at the
            # next ready(); its answer tells us where its log ends.
            self.progress[peer] = Progress(max(1, self.log.last_index()))
            self._broadcast = True
        for peer in set(self.progress) - members:
            del self.progress[peer]  # removed: no more entries for it
        if self.transferee not in self._voter_set:
            self.transferee = NONE
        if self._maybe_commit():  # a removed voter may have been the one holding it back
            self._commit_changed = True

    def _send(self, kind: MessageType, to: int, **fields: object) -> None:
        self._msgs.append(Message(kind, to, self.id, self.term, **fields))  # type: ignore[arg-type]

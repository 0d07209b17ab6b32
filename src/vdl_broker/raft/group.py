"""The asyncio driver of one Raft group: `RaftGroup` runs a RaftNode over one StreamLog (the
node's transport, ticker and groups are `vdl_broker.raft.host.RaftHost`).

A RaftGroup carries out the core's Ready bundles one at a time, in the contract's order
(vdl_broker.raft.types.Ready): install snapshot (StreamLog.reset), truncate/append entries, save
hard state, `await log.sync()`, send, apply, advance. Throughput comes from batching, not from
overlapping Readys: everything proposed or received while one Ready is being synced lands in the
next one, so a single fdatasync covers every proposal that arrived meanwhile (group commit).

Three refinements of the order:
- Committed entries are applied right after the append, before this Ready's sync: they are
  durable on a majority already, and the sync concerns only this Ready's new entries (saves one
  fsync of latency per commit; etcd's server does the same).
- The leader's own messages (APPEND, HEARTBEAT, SNAPSHOT, TIMEOUT_NOW) leave *before* its local
  sync, so followers persist in parallel with the leader (thesis §10.2.1). This is safe: they
  acknowledge nothing, the leader's term and vote were made durable when it campaigned, and the
  core counts the leader's own match only at advance(), i.e. after its sync.
- Everything else (APPEND_RESPONSE, votes) leaves only after the sync: a follower acknowledges
  only durable entries, a vote only after the durable term/vote.

A full disk (ENOSPC, EDQUOT) or an I/O error while writing a Ready's entries, its hard state or
syncing them is not fatal. The log is put back to what is durable (a failed append undoes itself;
after a failed sync or hard-state write, the entries past the durable index are truncated), none
of the Ready's late messages leave (no APPEND_RESPONSE or vote for what is not stored), its
unwritten proposals fail with ProposalStorageError (Kafka: KAFKA_STORAGE_ERROR), and the core
forgets the unwritten entries in one of two ways:

- A single-voter group's leader drops them from the core's unstable log and stays leader in its
  term. Safe because nobody else ever saw them: such a leader sends no entries, counts its own
  match only at advance() (so it never counted them), and commits nothing beyond its durable
  log, so the indexes they took can be proposed again in the same term. It keeps serving reads
  of committed data, with no election (whose hard-state write a full disk might refuse too).
- Every other case (a follower, a candidate, a leader with peers, a failed hard-state write) is
  a restart of this replica in memory: a new core built from the durable log and hard state,
  exactly as after a crash, which Raft tolerates by design. A leader with peers cannot simply
  drop the entries: its APPENDs left before its own sync, so followers may hold them, and
  re-proposing other data at the same (index, term) would break Log Matching. Restarted as a
  follower of its durable term it can never lead that term again (a new election takes a new
  term), so no (index, term) is ever reused; entries the followers hold commit under the next
  leader or are overwritten, as after a leader crash. A follower that cannot write never
  acknowledges (its APPEND_RESPONSE goes out only after a successful sync), so the leader's
  commits rely on the other replicas; every later APPEND retries the write, so writes resume
  once space returns. Entries already applied are not applied twice (`_applied_floor`).

Anything else (a failed snapshot install or conflict truncation, an append that could not be
undone, any other exception) still stops the group for good (`failure`).

The driver knows entries, not what they mean: Kafka offsets, batches and the high watermark
belong to the server's Partition, which proposes DATA entries and follows the commits through
the `apply` callback. The one thing it passes through is the log's start position when a
lagging follower's log is reset (SnapshotMeta.data: the StreamLog's start offset there).

Use by the server (a Partition per stream replica):
- host = RaftHost(node_id, raft_listen, peers); await host.start()
- group = host.create_group(stream, replicas, stream_log, apply=..., resume_from_commit_point=True)
- serve clients only while group.leader_ready (a leader whose own-term no-op committed, so its
  commit index is at least every earlier leader's)
- p = group.propose(payload, type) (synchronous; raises NotLeaderError); p.committed resolves
  once committed and applied here, p.durable once the leader's own log synced it;
  ProposalLostError / GroupStoppedError when the outcome is unknown
- long polls: group.add_commit_listener(cb) (after each applied batch); role changes:
  group.add_role_listener(cb); ISR: group.in_sync_replicas(max_lag_entries)
- shutdown: await host.stop(transfer=True) (leaders hand over first), then close the logs
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from vdl_broker.log import StreamLog
from vdl_broker.raft.liveness import LivenessChange, react
from vdl_broker.raft.log_storage import StreamLogStorage
from vdl_broker.raft.node import PeerStatus, RaftConfig, RaftNode
from vdl_broker.raft.persistence import (
    load_commit_point,
    load_membership,
    load_raft_state,
    save_commit_point,
    save_hard_state,
    save_membership,
)
from vdl_broker.raft.proposals import GroupStoppedError, Proposal, ProposalStorageError, ProposalTracker
from vdl_broker.raft.types import (
    ConfigRecord,
    ConfState,
    Entry,
    EntryType,
    Message,
    MessageType,
    NotLeaderError,
    RaftError,
    Ready,
    Role,
    SnapshotMeta,
)

log = logging.getLogger(__name__)

# The leader's messages: they acknowledge nothing, so they may leave before the leader's sync.
_EARLY = frozenset({MessageType.APPEND, MessageType.HEARTBEAT, MessageType.SNAPSHOT, MessageType.TIMEOUT_NOW})
_CARRIES_COMMIT = frozenset({MessageType.APPEND, MessageType.HEARTBEAT})  # the leader's commit index

# Write failures a replica survives (the disk fills up, a quota, a failing device): the Ready is
# undone and retried later. Any other error stops the group.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.EROFS})

_COMMIT_POINT_TICKS = 20  # save the commit point at most every 20 ticks (2 s at 100 ms)

SendFn = Callable[[str, Message], bool]
GroupFn = Callable[["RaftGroup"], None]
ApplyFn = Callable[[list[Entry]], None]
SnapshotFn = Callable[[SnapshotMeta], None]
LatencyFn = Callable[[float], None]  # seconds, for metrics (vdl_broker.metrics)


@dataclass(frozen=True)
class GroupConfig:
    """Core settings in ticks; one tick = RaftHost.tick_interval_s (default 100 ms)."""

    election_ticks: int = 10  # randomized by the core in [election, 2 * election)
    heartbeat_ticks: int = 1
    tick_interval_s: float = 0.1  # the host's timer (RaftHost sets it): turns the read lease into time
    max_append_bytes: int = 1 << 20
    max_inflight_messages: int = 256
    max_inflight_bytes: int = 32 << 20
    max_committed_bytes: int = 64 << 20
    # Idle heartbeat rounds before the leader quiesces the group (vdl_broker.raft.quiescence);
    # 0 = never (the metadata group).
    quiesce_after_heartbeats: int = 5
    # A replica more entries (or bytes, estimated from the log's average entry) behind the
    # leader than this is catching up: the entries it is sent go through the node's catch-up
    # throttle (recovery_rate_bytes). Kafka's ISR lag in entries; the bytes exceed what a
    # healthy follower has in flight (max_inflight_bytes).
    catchup_lag_entries: int = 1000
    catchup_lag_bytes: int = 128 << 20
    # A learner (a replica being added) is catching up until it is this close: only its last
    # stretch goes unthrottled, so that it keeps up with what producers add and gets promoted.
    learner_lag_entries: int = 64
    learner_lag_bytes: int = 8 << 20


class _WriteFailed(Exception):
    """A Ready's entries, hard state or sync failed with one of STORAGE_ERRNOS."""

    def __init__(self, error: OSError, applied: bool, hard_state_saved: bool) -> None:
        super().__init__(str(error))
        self.error = error
        self.applied = applied  # the Ready's committed entries were applied already
        self.hard_state_saved = hard_state_saved


def _is_storage_error(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in STORAGE_ERRNOS


class RaftGroup:
    """One Raft group (a stream, or the metadata group) on this node, over one StreamLog.

    Not thread-safe: use from the event loop that runs it. Incoming messages go to `step()`,
    the host's ticker calls `tick()`; both are synchronous and cheap (the work happens in the
    group's Ready task)."""

    def __init__(self, name: str, node_id: int, voters: Sequence[int], stream_log: StreamLog, send: SendFn,
                 *, config: GroupConfig | None = None, apply: ApplyFn | None = None,
                 on_snapshot: SnapshotFn | None = None, rng: random.Random | None = None,
                 resume_from_commit_point: bool = False, commit_latency: LatencyFn | None = None,
                 on_awake: GroupFn | None = None, peer_alive: Callable[[int], bool] | None = None,
                 send_catchup: SendFn | None = None) -> None:
        """`voters`: the configuration the group was created with, used only when this replica
        has saved none yet (then it is saved at once); empty for a replica joining an existing
        group, which learns its configuration from the leader (vdl_broker.raft.membership)."""
        cfg = config or GroupConfig()
        self.name = name
        self.node_id = node_id
        self.log = stream_log
        bootstrap, self._durable_membership = self._load_membership(tuple(sorted(set(voters))))
        self.config = cfg
        self._send_fn = send
        self._send_catchup = send_catchup or send  # APPENDs to replicas far behind (raft/throttle.py)
        self._apply_fn = apply
        self._snapshot_fn = on_snapshot
        raft_config = RaftConfig(
            node_id=node_id, voters=bootstrap, election_ticks=cfg.election_ticks,
            heartbeat_ticks=cfg.heartbeat_ticks, max_inflight_messages=cfg.max_inflight_messages,
            max_inflight_bytes=cfg.max_inflight_bytes, max_append_bytes=cfg.max_append_bytes,
            max_committed_bytes=cfg.max_committed_bytes, lease_after_start=True,
            quiesce_after_heartbeats=cfg.quiesce_after_heartbeats)
        self.storage = StreamLogStorage(stream_log)
        self._rng = rng or random.Random()
        # With resume_from_commit_point, entries up to the last saved commit point count as
        # applied: `apply` sees only later ones (streams rebuild their state from the log
        # directly); without it (the metadata group) every committed entry is replayed.
        self._commit_point = resume_from_commit_point
        applied = load_commit_point(stream_log) if resume_from_commit_point else 0
        # Storage damage makes the node start recovering (vdl_broker.raft.node, "Corruption").
        hard_state, damage = load_raft_state(stream_log, self._replica_count(bootstrap))
        first_config = raft_config
        if damage is None and hard_state.term == 0 and stream_log.last_index == 0:
            # A brand-new replica never acknowledged a heartbeat (that would have saved a term):
            # no leader's read lease counts on it, so it may vote at once -- the streams created
            # together elect their leaders without waiting out an election timeout.
            first_config = dataclasses.replace(raft_config, lease_after_start=False)
        self.node = RaftNode(first_config, self.storage, hard_state,
                             rng=self._rng, applied=applied, damage=damage, membership=self._durable_membership)
        self._saved_commit = applied
        self._ticks = 0
        self._tick_times: deque[float] = deque(maxlen=2 * cfg.election_ticks + 2)
        self._saving: asyncio.Task[None] | None = None
        self._proposals = ProposalTracker(name)
        self._change_waiters: list[asyncio.Future[None]] = []
        self._commit_listeners: list[Callable[[RaftGroup], None]] = []
        self._role_listeners: list[Callable[[RaftGroup], None]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self.failure: BaseException | None = None
        self._raft_config = raft_config
        self._applied_floor = 0  # entries up to here were applied (kept across core restarts)
        self._entry_bytes = 0  # the log's average entry size (_measure_entries)
        self._applied_through = applied  # the last entry applied here: the most followers may learn is committed
        self.write_failures = 0  # Readys whose writes failed and were undone (disk full, ...)
        self.write_failing = False  # the last write attempt failed
        # The host's ticker ticks only groups that are awake: it hears of every wake-up here.
        self._on_awake = on_awake
        self._peer_alive = peer_alive
        self.elections_won = 0  # times this node became the group's leader (metrics)
        self._leading = False
        self._leader_since = 0.0
        self._commit_latency = commit_latency  # told each committed proposal's propose-to-commit time

    def _load_membership(self, voters: tuple[int, ...]) -> tuple[tuple[int, ...], list[ConfigRecord]]:
        """(bootstrap voters, saved records): the records file, else the creation's voters
        (saved now, so a later start never mistakes them for the group's)."""
        try:
            records = load_membership(self.log.directory)
        except ValueError as error:
            # Guessing could make this node campaign among the wrong voters: it follows
            # (acknowledges its leader's entries) but never campaigns until a configuration
            # entry reaches it again.
            log.error("raft group %s: configuration unreadable (%s): not campaigning", self.name, error)
            return (), []
        if records is None:
            records = [ConfigRecord(0, 0, ConfState(voters))] if voters else []
            if records:
                save_membership(self.log.directory, records)
        return voters, records

    def _replica_count(self, bootstrap: tuple[int, ...]) -> int:
        """How many replicas the group has as far as this node knows (a joining one: several)."""
        records = self._durable_membership
        conf = records[-1].conf if records else ConfState(bootstrap)
        return len(set(conf.members) | {self.node_id}) if conf.voters else 2

    # ------------------------------------------------------------------ state

    @property
    def voters(self) -> tuple[int, ...]:
        """The voters of the configuration in force here (the latest in the log)."""
        return self.node.voters

    @property
    def conf(self) -> ConfState:
        return self.node.conf

    @property
    def leader_age_s(self) -> float:
        """How long this node has led the group (0 when it does not): its view of its peers'
        liveness (PeerStatus.alive) needs an election timeout or so to form."""
        return time.monotonic() - self._leader_since if self._leading and self.is_leader else 0.0

    @property
    def is_leader(self) -> bool:
        return self.node.role == Role.LEADER

    @property
    def leader_ready(self) -> bool:
        """Leader whose own-term no-op has committed: its commit index (and so the high
        watermark) is at least every previous leader's; only now may it serve clients."""
        node = self.node
        return node.role == Role.LEADER and node.log.term(node.commit_index) == node.term

    @property
    def leader_id(self) -> int:
        """The known leader's node id, or 0 (raft.NONE) when unknown."""
        return self.node.leader_id

    @property
    def role(self) -> Role:
        return self.node.role

    @property
    def term(self) -> int:
        return self.node.term

    @property
    def commit_index(self) -> int:
        return self.node.commit_index

    @property
    def applied_index(self) -> int:
        return self.node.applied_index

    @property
    def last_index(self) -> int:
        return self.node.last_index

    @property
    def stopped(self) -> bool:
        return self._stopped

    @property
    def applied_through(self) -> int:
        """The last entry applied here (a snapshot's start counts as applied)."""
        return max(self._applied_through, self.node.applied_index)

    def peer_status(self) -> dict[int, PeerStatus]:
        """Leader only (else empty): every voter's match/next/state/recent_active."""
        return self.node.peer_status()

    def match_index(self, peer: int) -> int:
        return self.node.match_index(peer)

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
        lease_s = (self.config.election_ticks - 2) * self.config.tick_interval_s
        return time.monotonic() - anchored < lease_s

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

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._task is not None:
            return
        if len(self.voters) == 1:
            self.node.campaign()  # nobody to wait for: a single-voter group elects itself now
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"raft:{self.name}")
        self._wake.set()
        self._poke()

    async def stop(self, transfer: bool = True, timeout_s: float = 2.0) -> None:
        """Stop driving the group; a leader first hands leadership to its most caught-up peer
        (waiting up to timeout_s). The StreamLog stays open: its owner closes it."""
        if self._stopped:
            return
        if transfer and self.is_leader and len(self.voters) > 1 and self._task is not None:
            with contextlib.suppress(RaftError, ValueError):
                self.transfer_leadership()
                await self.wait_for(lambda g: not g.is_leader, timeout_s)
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._saving is not None:
            with contextlib.suppress(Exception):
                await self._saving
        if self.failure is None:
            try:
                self.save_commit_point()
            except OSError as error:  # disk full: an older commit point means a longer replay
                log.warning("raft group %s: cannot save its commit point (%s)", self.name, error)
        self._proposals.fail_all(GroupStoppedError(f"raft group {self.name} stopped"))
        self._notify_change()

    # ------------------------------------------------------------------ inputs

    @property
    def quiescent(self) -> bool:
        return self.node.quiescent

    def tick(self) -> None:
        if self._stopped or self.node.quiescent:
            return  # a quiescent core ignores ticks: no tick time to record either
        self._measure_entries()
        # When each recent tick happened: the read lease is anchored at a tick's time.
        self._tick_times.append(time.monotonic())
        self.node.tick()
        self._poke()
        self._ticks += 1
        if self._commit_point and (self._ticks % _COMMIT_POINT_TICKS == 0 or self.node.quiescent):
            self._save_commit_point_soon()  # periodically, and when going quiet

    def _poke(self) -> None:
        """After an input: run the Ready loop if there is work, and have the host tick us if awake."""
        node = self.node
        if node.has_ready():
            self._wake.set()
        if not node.quiescent and self._on_awake is not None:
            self._on_awake(self)

    def wake(self) -> bool:
        """Leave quiescence (a read at a quiescent leader needs its lease back); False if it was
        awake. A leader also ticks now if its last tick is at least an interval old, so the
        heartbeats it sends carry a fresh tick (the lease is anchored at the echoed tick's time)."""
        if self._stopped or not self.node.quiescent:
            return False
        self.node.wake()
        self._poke()
        last = self._tick_times[-1] if self._tick_times else float("-inf")
        if self.node.role == Role.LEADER and time.monotonic() - last >= self.config.tick_interval_s:
            self.tick()
        return True

    def react(self, change: LivenessChange, is_alive: Callable[[int], bool]) -> int:
        """A change in node liveness (vdl_broker.raft.liveness.react); the leader forgotten, or 0."""
        if self._stopped:
            return 0
        forgotten = react(self.node, change, is_alive)
        self._poke()
        return forgotten

    def campaign(self) -> None:
        """Start an election now (PreVote first)."""
        if not self._stopped:
            self.node.campaign()
            self._poke()

    def _save_commit_point_soon(self) -> None:
        index = self.node.applied_index
        if index <= self._saved_commit or (self._saving is not None and not self._saving.done()):
            return
        term = self.node.log.term(index)
        if term is None:
            return
        previous, self._saved_commit = self._saved_commit, index
        self._saving = asyncio.get_running_loop().create_task(self._save_commit_point(index, term, previous))

    async def _save_commit_point(self, index: int, term: int, previous: int) -> None:
        while True:
            try:
                await asyncio.to_thread(save_commit_point, self.log.directory, index, term)
            except OSError as error:  # a full disk: only a longer replay at the next start; retried
                log.warning("raft group %s: cannot save the commit point (%s)", self.name, error)
                self._saved_commit = previous
                return
            # Entries applied while this save ran, by a group now quiet (no tick will save them).
            latest = self.node.applied_index
            latest_term = self.node.log.term(latest)
            if self._stopped or not self.node.quiescent or latest <= index or latest_term is None:
                return
            previous, index, term = index, latest, latest_term
            self._saved_commit = latest

    def save_commit_point(self) -> None:
        """Blocking: remember the applied index now (clean shutdown)."""
        index = self.node.applied_index
        term = self.node.log.term(index)
        if self._commit_point and term is not None and index > 0:
            save_commit_point(self.log.directory, index, term)

    def step(self, message: Message) -> None:
        if self._stopped:
            return
        self.node.step(message)
        self._poke()

    def propose(self, data: bytes | bytearray | memoryview, type: EntryType = EntryType.DATA) -> Proposal:
        """Propose one entry as is. Raises NotLeaderError (ProposalDroppedError during a
        leadership transfer) or GroupStoppedError."""
        self._check_running()
        index = self.node.propose(data, type)
        self._poke()
        proposal = self._proposals.track(index, self.node.term)
        if self._commit_latency is not None:
            proposal.committed.add_done_callback(partial(_observe_commit, self._commit_latency, time.perf_counter()))
        return proposal

    async def propose_and_wait(self, data: bytes | bytearray | memoryview,
                               type: EntryType = EntryType.DATA) -> int:
        """propose() and wait for the commit; returns the entry's Raft index."""
        return await self.propose(data, type).committed

    def propose_conf_change(self, conf: ConfState) -> Proposal:
        """Propose a configuration change (vdl_broker.raft.membership: one voter at a time, after
        the previous change and this leader's first entry committed). Raises NotLeaderError or
        ConfigChangeError (not now / not allowed) or GroupStoppedError."""
        self._check_running()
        index = self.node.propose_conf_change(conf)
        self._poke()
        return self._proposals.track(index, self.node.term)

    def transfer_leadership(self, target: int | None = None) -> int:
        """Start handing leadership to `target` (default: the most caught-up other voter)."""
        if target is None:
            status = self.node.peer_status()
            candidates = [(st.recent_active, st.match, peer) for peer, st in status.items()
                          if peer != self.node_id and not st.learner]
            if not candidates:
                raise NotLeaderError(self.node.leader_id, "no peer to transfer leadership to")
            target = max(candidates)[2]
        self.node.transfer_leadership(target)
        self._poke()
        return target

    # ------------------------------------------------------------------ waiting

    def add_commit_listener(self, listener: Callable[[RaftGroup], None]) -> None:
        """Called (synchronously) after every batch of newly applied committed entries."""
        self._commit_listeners.append(listener)

    def add_role_listener(self, listener: Callable[[RaftGroup], None]) -> None:
        """Called (synchronously) after a Ready that changed role or known leader (become leader:
        rebuild leader-only state; lose it: answer NOT_LEADER_OR_FOLLOWER)."""
        self._role_listeners.append(listener)

    def changed_future(self) -> asyncio.Future[None]:
        """Resolves after the next processed Ready (role, term, commit or log change) or stop."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._change_waiters.append(future)
        return future

    async def wait_for(self, predicate: Callable[[RaftGroup], bool], timeout_s: float) -> bool:
        """Wait until predicate(self) holds (re-checked after each Ready); False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not predicate(self):
            remaining = deadline - loop.time()
            if remaining <= 0 or self._stopped:
                return predicate(self)
            future = self.changed_future()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(future), remaining)
        return True

    # ------------------------------------------------------------------ the Ready loop

    async def _run(self) -> None:
        node = self.node
        try:
            while not self._stopped:
                if not node.has_ready():
                    self._wake.clear()
                    if not node.has_ready():
                        await self._wake.wait()
                    continue
                rd = node.ready()
                try:
                    await self._handle_ready(rd)
                except _WriteFailed as failed:
                    await self._drop_unsynced_tail()
                    self._write_failed(rd, failed)
                    node = self.node  # a restart replaced the core
                    self._poke()
                    self._proposals.role_changed(node.role, node.term, node.leader_id)
                    self._role_changed()
                    self._notify_change()
                    continue
                if self.write_failing and (rd.entries or rd.hard_state is not None):
                    self.write_failing = False
                    log.warning("raft group %s on node %d: writes succeed again", self.name, self.node_id)
                node.advance(rd)
                if node.quiescent and self._commit_point:
                    # Quiet groups are not ticked: a follower told to go quiet by its leader's
                    # message, or one applying after that, saves its commit point here instead.
                    self._save_commit_point_soon()
                if self.log.damage is not None and not node.recovering:
                    await asyncio.to_thread(self.log.clear_damage)  # the lost range is back
                self._proposals.role_changed(node.role, node.term, node.leader_id)
                if rd.soft_state is not None:
                    self._role_changed()
                self._notify_change()
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # a storage failure: stop this group, loudly
            log.exception("raft group %s on node %d failed", self.name, self.node_id)
            self.failure = error
            self._stopped = True
            self._proposals.fail_all(GroupStoppedError(f"raft group {self.name} failed: {error}"))
            self._notify_change()

    async def _handle_ready(self, rd: Ready) -> None:
        stream_log = self.log
        if rd.membership is not None:
            # Before the entries they describe: every saved CONFIG entry then has its record.
            # The union keeps records of entries a conflict is about to cut until that cut is
            # durable (the exact list is saved after the sync); at the next start, records the
            # log does not back are dropped (RaftNode checks them).
            union = {(r.index, r.term): r for r in self._durable_membership}
            union.update({(r.index, r.term): r for r in rd.membership})
            records = sorted(union.values(), key=lambda r: (r.index, r.term))
            await self._save_membership(rd, records)
        if rd.snapshot is not None:
            snap = rd.snapshot
            stream_log.reset(snap.index + 1, snap.term, _snapshot_offset(snap))
            if self._snapshot_fn is not None:
                self._snapshot_fn(snap)
        if rd.entries:
            first = rd.entries[0].index
            if first <= stream_log.last_index:
                stream_log.truncate_suffix(first)  # Raft conflict: the leader's entries win
            try:
                stream_log.append(rd.entries)  # all or nothing
            except OSError as error:
                if not _is_storage_error(error):
                    raise
                raise _WriteFailed(error, applied=False, hard_state_saved=rd.hard_state is None) from error
        # Committed entries are durable on a majority already and (appended above) readable
        # here: apply them now rather than after this Ready's own fsync, which would add one
        # sync to every commit's latency (etcd applies concurrently with its WAL write too).
        # Before any message leaves: a follower learns a commit index only once the leader has
        # applied it (see _send), so no follower's high watermark is ever ahead of the leader's.
        if rd.committed_entries:
            self._apply(rd.committed_entries)
        applied = bool(rd.committed_entries)
        # The core splits off the messages allowed to leave before the sync (Ready.early_messages,
        # leader messages of a durable term); belt and braces: only leader message types leave
        # early here, whatever the core says.
        early_messages = getattr(rd, "early_messages", None)
        candidates = early_messages if early_messages is not None else rd.messages
        late: list[Message] = []
        for message in candidates:
            if message.type in _EARLY:
                self._send(message)
            else:
                late.append(message)
        if early_messages is not None:
            late += rd.messages
        hard_state_saved = rd.hard_state is None
        try:
            if rd.hard_state is not None:
                await asyncio.to_thread(save_hard_state, stream_log.directory, rd.hard_state)
                hard_state_saved = True
            if rd.entries or rd.snapshot is not None:
                await stream_log.sync()
        except OSError as error:
            if not _is_storage_error(error):
                raise
            raise _WriteFailed(error, applied, hard_state_saved) from error
        if rd.entries or rd.snapshot is not None:
            self._proposals.durable_through(stream_log.durable_index)
        if rd.membership is not None and rd.membership != self._durable_membership:
            await self._save_membership(rd, rd.membership, applied=applied)
        for message in late:
            self._send(message)

    async def _save_membership(self, rd: Ready, records: list[ConfigRecord], applied: bool = False) -> None:
        try:
            await asyncio.to_thread(save_membership, self.log.directory, records)
        except OSError as error:
            if not _is_storage_error(error):
                raise
            raise _WriteFailed(error, applied, rd.hard_state is None) from error
        self._durable_membership = list(records)

    async def _drop_unsynced_tail(self) -> None:
        """After a failed write only what is durable stays: entries appended but not synced may
        be lost already (a failed fsync leaves the page cache's copy untrustworthy). If the cut
        itself cannot be written (a full disk while a reader still holds the tail's pages, so
        the file must be copied), the group waits and tries again: it must not die of it."""
        delay = 0.05
        while self.log.last_index > self.log.durable_index:
            try:
                self.log.truncate_suffix(self.log.durable_index + 1)
            except OSError as error:
                log.warning("raft group %s on node %d cannot drop its unsynced entries (%s): retrying",
                            self.name, self.node_id, error)
                await asyncio.sleep(delay)
                delay = min(2 * delay, 1.0)

    def _write_failed(self, rd: Ready, failed: _WriteFailed) -> None:
        """Undo a Ready whose writes failed (see the module docstring for why this is safe)."""
        self.write_failures += 1
        if not self.write_failing:
            self.write_failing = True
            log.warning("raft group %s on node %d cannot write (%s): refusing writes until it can",
                        self.name, self.node_id, failed.error)
        node = self.node
        stream_log = self.log
        if failed.applied:
            self._applied_floor = max(self._applied_floor, rd.committed_entries[-1].index)
        self._applied_floor = max(self._applied_floor, node.applied_index)
        kept = stream_log.last_index  # only what is durable (_drop_unsynced_tail)
        error = ProposalStorageError(node.leader_id, f"raft group {self.name} on node {self.node_id} "
                                     f"cannot write: {failed.error}")
        self._proposals.fail_from(kept + 1, error)
        stays_leader = (len(self.voters) == 1 and node.role == Role.LEADER and failed.hard_state_saved
                        and rd.snapshot is None and node.log.offset - 1 == kept)
        if stays_leader:
            if not failed.applied and rd.committed_entries:
                # Committed means durable here (a single voter counts only its synced entries).
                self._apply(rd.committed_entries)
            node.log.discard_unstable()
            node.advance(rd)
            return
        applied = min(self._applied_floor, kept)
        hard_state, damage = load_raft_state(stream_log, self._replica_count(self._raft_config.voters))
        self.node = RaftNode(self._raft_config, self.storage, hard_state, rng=self._rng, applied=applied,
                             damage=damage, membership=self._durable_membership)

    def _send(self, message: Message) -> None:
        if message.type in _CARRIES_COMMIT and message.commit > (applied := self.applied_through):
            # The core tells followers its commit index, which may run ahead of what this node
            # has applied (a Ready applies at most max_committed_bytes). Followers serve reads up
            # to the commit point they learn (KIP-392), so they learn only what the leader
            # applied: a follower's high watermark never passes the leader's. Telling less of
            # the commit is always safe in Raft (it only delays the followers' apply).
            message.commit = applied
        if message.type == MessageType.SNAPSHOT and message.snapshot is not None and message.snapshot.data is None:
            snap = message.snapshot
            # The follower's log will start at snap.index + 1 at our log's position there.
            message.snapshot = dataclasses.replace(snap, data=self.log.offset_for_index(snap.index))
        if message.type == MessageType.APPEND and message.entries and self._catching_up(message.to):
            self._send_catchup(self.name, message)
            return
        self._send_fn(self.name, message)

    def _catching_up(self, peer: int) -> bool:
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

    def _apply(self, entries: list[Entry]) -> None:
        if entries[0].index <= self._applied_floor:
            # Applied before a core restart (a failed write): committed entries never change.
            entries = [entry for entry in entries if entry.index > self._applied_floor]
            if not entries:
                return
        if self._apply_fn is not None:
            self._apply_fn(entries)
        self._applied_through = max(self._applied_through, entries[-1].index)
        self._proposals.applied(entries, self.node.leader_id)
        self._call(self._commit_listeners, "commit")

    def _role_changed(self) -> None:
        leading = self.node.role == Role.LEADER
        if leading and not self._leading:
            self.elections_won += 1
            self._leader_since = time.monotonic()
        self._leading = leading
        self._call(self._role_listeners, "role")

    def _call(self, listeners: list[Callable[[RaftGroup], None]], kind: str) -> None:
        for listener in listeners:
            try:
                listener(self)
            except Exception:
                log.exception("%s listener of raft group %s failed", kind, self.name)

    # ------------------------------------------------------------------ bookkeeping

    def _check_running(self) -> None:
        if self._stopped:
            raise GroupStoppedError(f"raft group {self.name} is stopped")

    def _notify_change(self) -> None:
        waiters, self._change_waiters = self._change_waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)


def _observe_commit(observe: LatencyFn, proposed: float, committed: asyncio.Future[int]) -> None:
    if not committed.cancelled() and committed.exception() is None:
        observe(time.perf_counter() - proposed)


def _snapshot_offset(snap: SnapshotMeta) -> int:
    data: Any = snap.data
    if isinstance(data, dict):
        data = data.get("start_offset")
    if not isinstance(data, int) or isinstance(data, bool) or data < 0:
        raise RaftError(f"snapshot at index {snap.index} carries no start offset: {snap.data!r}")
    return data

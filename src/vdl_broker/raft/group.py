"""The asyncio driver of one Raft group: `RaftGroup` runs a RaftNode over one StreamLog (the
node's transport, ticker and groups are `vdl_broker.raft.host.RaftHost`).

RaftGroup is assembled from one class per concern (group_state.py): this module holds its
construction, inputs (ticks, messages, proposals), lifecycle and the ways to wait on it; the
Ready loop is ready_loop.py, write-failure recovery write_failure.py, the read lease and the
in-sync replicas lease.py.

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
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial

from vdl_broker.log import DamagedEntry, StreamLog
from vdl_broker.raft.clock import DriftMonitor
from vdl_broker.raft.config import RaftConfig
from vdl_broker.raft.group_state import ApplyFn, GroupFn, LatencyFn, SendFn, SnapshotFn
from vdl_broker.raft.lease import LeaseAndIsr
from vdl_broker.raft.liveness import LivenessChange, leader_lost, react
from vdl_broker.raft.log_storage import StreamLogStorage
from vdl_broker.raft.node import RaftNode
from vdl_broker.raft.persistence import (
    load_commit_point,
    load_membership,
    load_raft_state,
    save_commit_point,
    save_membership,
)
from vdl_broker.raft.progress import PeerStatus
from vdl_broker.raft.proposals import GroupStoppedError, Proposal, ProposalTracker
from vdl_broker.raft.ready_loop import ReadyLoop
from vdl_broker.raft.snapshots import SnapshotStore
from vdl_broker.raft.snapshotting import Snapshotting, StateMachine
from vdl_broker.raft.types import (
    ConfigRecord,
    ConfState,
    EntryType,
    Message,
    NotLeaderError,
    RaftError,
    Role,
)
from vdl_broker.raft.write_failure import WriteFailureRecovery

__all__ = ["ApplyFn", "LatencyFn", "RaftGroup", "SnapshotFn"]

log = logging.getLogger(__name__)

_COMMIT_POINT_TICKS = 20  # save the commit point at most every 20 ticks (2 s at 100 ms)


class RaftGroup(ReadyLoop, WriteFailureRecovery, LeaseAndIsr, Snapshotting):
    """One Raft group (a stream, or the metadata group) on this node, over one StreamLog.

    Not thread-safe: use from the event loop that runs it. Incoming messages go to `step()`,
    the host's ticker calls `tick()`; both are synchronous and cheap (the work happens in the
    group's Ready task)."""

    def __init__(self, name: str, node_id: int, voters: Sequence[int], stream_log: StreamLog, send: SendFn,
                 *, config: RaftConfig | None = None, apply: ApplyFn | None = None,
                 on_snapshot: SnapshotFn | None = None, rng: random.Random | None = None,
                 resume_from_commit_point: bool = False, commit_latency: LatencyFn | None = None,
                 on_awake: GroupFn | None = None, peer_alive: Callable[[int], bool] | None = None,
                 send_catchup: SendFn | None = None, state_machine: StateMachine | None = None,
                 may_truncate: Callable[[], bool] | None = None,
                 peer_leaving: Callable[[int], bool] | None = None,
                 on_failure: Callable[[BaseException], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`voters`: the configuration the group was created with, used only when this replica
        has saved none yet (then it is saved at once); empty for a replica joining an existing
        group, which learns its configuration from the leader (vdl_broker.raft.membership).
        `state_machine`: snapshotted every RaftConfig.snapshot_entries / snapshot_bytes, the log
        truncated behind while `may_truncate()` (snapshotting.py). `clock`: the time the read
        lease and the leader's age are measured on (a test's virtual clock). `peer_leaving(node)`:
        that node said it is stopping (never chosen to take leadership over at a graceful stop).
        `on_failure`: the group stopped on its own (`failure`): a damaged entry of its log
        (storage_damaged) or an error its Ready loop could not recover from."""
        cfg = config or RaftConfig()
        self._clock = clock
        self.name = name
        self.node_id = node_id
        self.log = stream_log
        self._conf_lost = False
        self._bootstrap, self._durable_membership = self._load_membership(tuple(sorted(set(voters))))
        self.config = cfg
        self._send_fn = send
        # APPENDs and snapshots to replicas far behind (raft/throttle.py); without a throttle they
        # leave at once, which the core must hear (paced_left), or it waits for them for ever.
        self._send_catchup = send_catchup or partial(self._send_unpaced, send)
        self._apply_fn = apply
        self._snapshot_fn = on_snapshot
        self.storage = StreamLogStorage(stream_log)
        self._on_failure = on_failure
        stream_log.on_damaged = self.storage_damaged
        self._rng = rng or random.Random()
        # With resume_from_commit_point, entries up to the last saved commit point count as
        # applied: `apply` sees only later ones (streams rebuild their state from the log
        # directly); without it (the metadata group) every committed entry is replayed.
        self._commit_point = resume_from_commit_point
        applied = load_commit_point(stream_log) if resume_from_commit_point else 0
        self._machine = state_machine
        self._snapshots = SnapshotStore(stream_log.directory, stream_log.config.fsync) if state_machine else None
        self._latest = None
        self._since_entries = self._since_bytes = 0
        self._snapshotting = None
        self._may_truncate = may_truncate or (lambda: True)
        applied = max(applied, self._restore_latest())
        # Storage damage makes the node start recovering (vdl_broker.raft.recovery).
        hard_state, damage = load_raft_state(stream_log, self._replica_count(self._bootstrap))
        # Reads are served under the read lease: the core refuses votes for an election timeout
        # after a start -- but a brand-new replica never acknowledged a heartbeat (that would have
        # saved a term): no leader's read lease counts on it, so it may vote at once, and the
        # streams created together elect their leaders without waiting out an election timeout.
        fresh = damage is None and hard_state.term == 0 and stream_log.last_index == 0
        self.node = RaftNode(node_id, self._bootstrap, self.storage, cfg, hard_state=hard_state, rng=self._rng,
                             applied=applied, damage=damage, membership=self._durable_membership,
                             conf_lost=self._conf_lost, lease_after_start=not fresh, peer_alive=peer_alive)
        self._saved_commit = applied
        self._ticks = 0
        self._tick_times = deque(maxlen=2 * cfg.election_ticks + 2)
        self._drift = DriftMonitor(cfg.tick_interval_s, cfg.max_clock_drift)
        self._saving: asyncio.Task[None] | None = None
        self._proposals = ProposalTracker(name)
        self._change_waiters = []
        self._commit_listeners = []
        self._role_listeners = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self.failure = None
        self._applied_floor = 0
        self._entry_bytes = 0
        self._applied_through = applied
        self.write_failures = 0  # Readys whose writes failed and were undone (disk full, ...)
        self.write_failing = False  # the last write attempt failed
        # The host's ticker ticks only groups that are awake: it hears of every wake-up here.
        self._on_awake = on_awake
        self._peer_alive = peer_alive
        self._peer_leaving = peer_leaving or (lambda node: False)
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
            # entry reaches it again -- which its answers ask the leader for (conf_lost).
            log.error("raft group %s: configuration unreadable (%s): not campaigning until its leader has sent "
                      "the configuration again", self.name, error)
            self._conf_lost = True
            return (), []
        if records is None:
            records = [ConfigRecord(0, 0, ConfState(voters))] if voters else []
            if records:
                save_membership(self.log.directory, records)
        return voters, records

    # ------------------------------------------------------------------ state

    @property
    def conf(self) -> ConfState:
        return self.node.conf

    @property
    def leader_age_s(self) -> float:
        """How long this node has led the group (0 when it does not): its view of its peers'
        liveness (PeerStatus.alive) needs an election timeout or so to form."""
        return self._clock() - self._leader_since if self._leading and self.is_leader else 0.0

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

    def _send_unpaced(self, send: SendFn, group: str, message: Message) -> bool:
        self.paced_left(message)
        return send(group, message)

    def peer_status(self) -> dict[int, PeerStatus]:
        """Leader only (else empty): every voter's match/next/state/recent_active."""
        return self.node.peer_status()

    def match_index(self, peer: int) -> int:
        return self.node.match_index(peer)

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
        that is not leaving too (waiting up to timeout_s). The StreamLog stays open: its owner
        closes it."""
        if self._stopped and self.failure is None:
            return  # (a failed group still has its Ready task and saves to wait for)
        if transfer and self.is_leader and len(self.voters) > 1 and self._task is not None:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            with contextlib.suppress(RaftError, ValueError):
                # A transferee that says it is leaving has stopped its groups (it ignores
                # TIMEOUT_NOW): try the next one; none left (NotLeaderError), stop leading as is.
                while self.is_leader and not self._stopped and loop.time() < deadline:
                    target = self.transfer_leadership()

                    def over(g: RaftGroup, target: int = target) -> bool:
                        return not g.is_leader or g._peer_leaving(target)
                    await self.wait_for(over, deadline - loop.time())
        if transfer and self._leading and not self.is_leader and self._task is not None:
            # The core stepped down (a newer term reached it, the transfer's or not) and the
            # Ready loop has not carried that out yet: cancelling it now would leave the role
            # listeners believing this node leads. The step-down Ready comes next.
            await self.wait_for(lambda g: not g._leading, timeout_s)
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        for task in (self._saving, self._snapshotting):
            if task is not None:
                with contextlib.suppress(Exception):
                    await task
        if self.failure is None:
            try:
                self.save_commit_point()
            except OSError as error:  # disk full: an older commit point means a longer replay
                log.warning("raft group %s: cannot save its commit point (%s)", self.name, error)
        self._proposals.fail_all(GroupStoppedError(f"raft group {self.name} stopped"))
        self._notify_change()

    def storage_damaged(self, error: DamagedEntry) -> None:
        """An entry read from the log failed its CRC (StreamLog.on_damaged): the file changed
        after the log checked it. Stop now -- the core must not send, apply or wait on that
        entry (its reads of it come back empty: StreamLogStorage) -- and tell the owner, who
        closes the log and opens it again: the open cuts it at the damage and records it, and
        the node recovers the range from a peer (raft/recovery.py), voting for no one meanwhile."""
        if self._stopped:
            return
        log.error("raft group %s on node %d stops: %s", self.name, self.node_id, error)
        self.failure = error
        self._stopped = True
        self._wake.set()  # the Ready loop ends at its next turn
        self._proposals.fail_all(GroupStoppedError(f"raft group {self.name} stopped: {error}"))
        self._notify_change()
        if self._on_failure is not None:
            self._on_failure(error)

    # ------------------------------------------------------------------ inputs

    @property
    def quiescent(self) -> bool:
        return self.node.quiescent

    def tick(self) -> None:
        if self._stopped or self.node.quiescent:
            return  # a quiescent core ignores ticks: no tick time to record either
        self._measure_entries()
        self._record_tick()
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
        if self.node.role == Role.LEADER and self._clock() - last >= self.config.tick_interval_s:
            self.tick()
        return True

    def react(self, change: LivenessChange, is_alive: Callable[[int], bool]) -> int:
        """A change in node liveness (vdl_broker.raft.liveness.react); the leader forgotten, or 0."""
        if self._stopped:
            return 0
        forgotten = react(self.node, change, is_alive)
        self._poke()
        return forgotten

    def leader_lost(self, forgotten: int, alive: Sequence[int]) -> bool:
        """`react` forgot `forgotten`'s leadership: whether this node campaigns as its successor
        (vdl_broker.raft.liveness.leader_lost; otherwise its own campaign waits for that one's)."""
        return leader_lost(self.node, self.name, forgotten, alive)

    def peer_leaving(self, peer: int) -> None:
        """`peer` said it is stopping: a graceful stop waiting for it to take over stops waiting."""
        self._notify_change()

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
        self._check_clock(message)
        self.node.step(message)
        self._poke()

    def propose(self, data: bytes | memoryview, type: EntryType = EntryType.DATA,
                known_crc: tuple[int, int] | None = None) -> Proposal:
        """Propose one entry as is. Raises NotLeaderError (ProposalDroppedError during a
        leadership transfer) or GroupStoppedError. known_crc: see Entry.known_crc."""
        self._check_running()
        index = self.node.propose(data, type, known_crc)
        self._poke()
        proposal = self._proposals.track(index, self.node.term)
        if self._commit_latency is not None:
            proposal.committed.add_done_callback(partial(_observe_commit, self._commit_latency, time.perf_counter()))
        return proposal

    async def propose_and_wait(self, data: bytes | memoryview,
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
                          if peer != self.node_id and not st.learner and not self._peer_leaving(peer)]
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
        """Resolves after the next processed Ready (role, term, commit or log change), as soon as
        newly committed entries are applied (before that Ready's sync of new entries), or at stop."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._change_waiters.append(future)
        return future

    async def wait_for(self, predicate: Callable[[RaftGroup], bool], timeout_s: float) -> bool:
        """Wait until predicate(self) holds (re-checked after each Ready and after each apply of
        committed entries); False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not predicate(self):
            remaining = deadline - loop.time()
            if remaining <= 0 or self._stopped:
                return predicate(self)
            future = self.changed_future()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await asyncio.shield(future)
        return True

    # ------------------------------------------------------------------ bookkeeping

    def _check_running(self) -> None:
        if self._stopped:
            raise GroupStoppedError(f"raft group {self.name} is stopped")


# A new group's chosen first leader campaigns this soon (not after 1-2 s): the other replicas open
# theirs within milliseconds of it, applying the same metadata (3 nodes on loopback: within 2 ms) ...
FIRST_CAMPAIGN_DELAY_S = 0.005
FIRST_CAMPAIGN_ATTEMPTS = 9  # ... and again while leaderless, each wait twice the last: 2.5 s in all


def campaign_first(group: RaftGroup, attempts: int = FIRST_CAMPAIGN_ATTEMPTS) -> None:
    """A new group's replicas all start as followers: without this its first election waits
    1-2 election timeouts; the one replica chosen to lead first (a stream's preferred leader, a
    forming cluster's lowest node id) asks for votes soon instead, and again while no leader is
    known: the other replicas may not have opened theirs yet and the first pre-votes are lost (a
    pre-vote never changes a term, so asking again disturbs nothing). The waits double: a node
    slow to open (a restart, thousands of streams created at once) is asked a few times, not
    every few milliseconds."""
    asyncio.get_running_loop().call_later(FIRST_CAMPAIGN_DELAY_S, _campaign_if_leaderless, group, attempts,
                                          FIRST_CAMPAIGN_DELAY_S)


def _campaign_if_leaderless(group: RaftGroup, attempts: int, waited: float) -> None:
    if group.stopped or group.leader_id != 0:
        return
    # A pre-candidate whose pre-votes found nobody asks again too (else it waits its timeout).
    if group.role in (Role.FOLLOWER, Role.PRE_CANDIDATE):
        group.campaign()
    if attempts > 1:
        asyncio.get_running_loop().call_later(2 * waited, _campaign_if_leaderless, group, attempts - 1, 2 * waited)


def _observe_commit(observe: LatencyFn, proposed: float, committed: asyncio.Future[int]) -> None:
    if not committed.cancelled() and committed.exception() is None:
        observe(time.perf_counter() - proposed)


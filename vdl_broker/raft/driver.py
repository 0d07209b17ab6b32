"""asyncio drivers for the Raft core: `RaftGroup` (one group over one StreamLog) and `RaftHost`
(one node: the transport, a shared ticker and the groups it carries).

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

Kafka offsets: DATA entries of stream groups hold one RecordBatch v2 whose base offset the leader
assigns when proposing (`propose_batch`): the end offset of the last DATA entry in its Raft log,
unstable entries included. The commit offset (the high watermark) is the end offset of the last
committed DATA entry.

Use by the server (a RaftPartition per stream replica):
- host = RaftHost(node_id, raft_listen, node_config.raft_peers()); await host.start()
- group = host.create_group(stream, replicas, stream_log, apply=..., resume_from_commit_point=True)
- serve clients only while group.leader_ready (else NOT_LEADER_OR_FOLLOWER, naming
  group.leader_id, 0 = unknown); HW = group.commit_offset (monotonic; a new leader is
  leader_ready only once its no-op committed, so its HW is >= every earlier leader's)
- produce: p = group.propose_batch(batch) (synchronous: offsets contiguous; raises
  NotLeaderError / ValueError) -> p.base_offset now; acks=-1: await p.committed (timeout ->
  REQUEST_TIMED_OUT); acks=1: await p.durable; ProposalLostError / GroupStoppedError ->
  NOT_LEADER_OR_FOLLOWER
- long polls: group.add_commit_listener(cb) (after each applied batch); role changes:
  group.add_role_listener(cb); ISR: group.in_sync_replicas(max_lag_entries)
- shutdown: await host.stop(transfer=True) (leaders hand over first), then close the logs
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from vdl_broker.log import StreamLog
from vdl_broker.protocol.records.batch_header import batch_fields, check_batch, set_base_offset
from vdl_broker.raft.log_storage import StreamLogStorage
from vdl_broker.raft.node import PeerStatus, RaftConfig, RaftNode
from vdl_broker.raft.persistence import load_commit_point, load_hard_state, save_commit_point, save_hard_state
from vdl_broker.raft.transport import Address, RaftTransport, TransportConfig
from vdl_broker.raft.types import (
    NONE,
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

_COMMIT_POINT_TICKS = 20  # save the commit point at most every 20 ticks (2 s at 100 ms)

SendFn = Callable[[str, Message], bool]
ApplyFn = Callable[[list[Entry]], None]
SnapshotFn = Callable[[SnapshotMeta], None]


class ProposalLostError(NotLeaderError):
    """The proposal's outcome is unknown or it was discarded: leadership moved on (its entry may
    still commit under the new leader -- Kafka clients retry; idempotent producers deduplicate)."""


class GroupStoppedError(RaftError):
    """The group was stopped (or failed) while the proposal was pending."""


@dataclass(frozen=True)
class GroupConfig:
    """Core settings in ticks; one tick = RaftHost.tick_interval_s (default 100 ms)."""

    election_ticks: int = 10  # randomized by the core in [election, 2 * election)
    heartbeat_ticks: int = 1
    max_append_bytes: int = 1 << 20
    max_inflight_messages: int = 256
    max_inflight_bytes: int = 32 << 20
    max_committed_bytes: int = 64 << 20


@dataclass(slots=True)
class Proposal:
    """One proposed entry. `committed` resolves with `index` once committed (and applied here),
    or fails with ProposalLostError / GroupStoppedError. `durable` resolves once the leader's own
    log has synced it (acks=1)."""

    index: int
    term: int
    base_offset: int  # -1 for non-DATA entries
    last_offset: int  # -1 for non-DATA entries
    committed: asyncio.Future[int]
    durable: asyncio.Future[int]


class RaftGroup:
    """One Raft group (a stream, or the metadata group) on this node, over one StreamLog.

    Not thread-safe: use from the event loop that runs it. Incoming messages go to `step()`,
    the host's ticker calls `tick()`; both are synchronous and cheap (the work happens in the
    group's Ready task)."""

    def __init__(self, name: str, node_id: int, voters: Sequence[int], stream_log: StreamLog, send: SendFn,
                 *, config: GroupConfig | None = None, apply: ApplyFn | None = None,
                 on_snapshot: SnapshotFn | None = None, rng: random.Random | None = None,
                 resume_from_commit_point: bool = False) -> None:
        cfg = config or GroupConfig()
        self.name = name
        self.node_id = node_id
        self.voters = tuple(sorted(set(voters)))
        self.log = stream_log
        self.config = cfg
        self._send_fn = send
        self._apply_fn = apply
        self._snapshot_fn = on_snapshot
        raft_config = RaftConfig(
            node_id=node_id, voters=self.voters, election_ticks=cfg.election_ticks,
            heartbeat_ticks=cfg.heartbeat_ticks, max_inflight_messages=cfg.max_inflight_messages,
            max_inflight_bytes=cfg.max_inflight_bytes, max_append_bytes=cfg.max_append_bytes,
            max_committed_bytes=cfg.max_committed_bytes)
        self.storage = StreamLogStorage(stream_log)
        # With resume_from_commit_point, entries up to the last saved commit point count as
        # applied: `apply` sees only later ones (streams rebuild their state from the log
        # directly); without it (the metadata group) every committed entry is replayed.
        self._commit_point = resume_from_commit_point
        applied = load_commit_point(stream_log) if resume_from_commit_point else 0
        self.node = RaftNode(raft_config, self.storage, load_hard_state(stream_log.directory),
                             rng=rng or random.Random(), applied=applied)
        self._saved_commit = applied
        self._ticks = 0
        self._saving: asyncio.Task[None] | None = None
        # Everything up to the log start is committed: the high watermark starts there and grows
        # as this incarnation learns the commit index (it is never published before that).
        self._commit_offset = stream_log.offset_for_index(self.node.commit_index)
        self._pending: deque[tuple[int, int, asyncio.Future[int]]] = deque()  # (index, term, future)
        self._durable_waiters: deque[tuple[int, asyncio.Future[int]]] = deque()
        self._change_waiters: list[asyncio.Future[None]] = []
        self._commit_listeners: list[Callable[[RaftGroup], None]] = []
        self._role_listeners: list[Callable[[RaftGroup], None]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self.failure: BaseException | None = None

    # ------------------------------------------------------------------ state

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
    def commit_offset(self) -> int:
        """Kafka offset after the last committed-and-applied DATA entry: the high watermark."""
        return self._commit_offset

    @property
    def stopped(self) -> bool:
        return self._stopped

    def peer_status(self) -> dict[int, PeerStatus]:
        """Leader only (else empty): every voter's match/next/state/recent_active."""
        return self.node.peer_status()

    def match_index(self, peer: int) -> int:
        return self.node.match_index(peer)

    def in_sync_replicas(self, max_lag_entries: int = 1000) -> list[int]:
        """Leader only (else []): voters recently heard from whose match index is within
        `max_lag_entries` of the leader's last index (Kafka's ISR; the leader is always in it)."""
        status = self.node.peer_status()
        last = self.node.last_index
        return sorted(peer for peer, st in status.items()
                      if peer == self.node_id or (st.recent_active and st.match >= last - max_lag_entries))

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._task is not None:
            return
        if len(self.voters) == 1:
            self.node.campaign()  # nobody to wait for: a single-voter group elects itself now
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"raft:{self.name}")
        self._wake.set()

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
            self.save_commit_point()
        self._fail_all(GroupStoppedError(f"raft group {self.name} stopped"))
        self._notify_change()

    # ------------------------------------------------------------------ inputs

    def tick(self) -> None:
        if not self._stopped:
            self.node.tick()
            self._wake.set()
            self._ticks += 1
            if self._commit_point and self._ticks % _COMMIT_POINT_TICKS == 0:
                self._save_commit_point_soon()

    def _save_commit_point_soon(self) -> None:
        index = self.node.applied_index
        if index <= self._saved_commit or (self._saving is not None and not self._saving.done()):
            return
        term = self.node.log.term(index)
        if term is None:
            return
        self._saved_commit = index
        self._saving = asyncio.get_running_loop().create_task(
            asyncio.to_thread(save_commit_point, self.log.directory, index, term))

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
        self._wake.set()

    def propose(self, data: bytes | bytearray | memoryview, type: EntryType = EntryType.DATA) -> Proposal:
        """Propose one entry as is (DATA payloads must already carry the right base offset --
        use propose_batch for Kafka batches). Raises NotLeaderError (ProposalDroppedError during
        a leadership transfer)."""
        self._check_running()
        if type == EntryType.DATA:
            fields = check_batch(data)  # a bad batch must never reach the replicated log
            base, last = fields.base_offset, fields.last_offset
            if self.is_leader and base != self.tail_end_offset():
                raise ValueError(f"batch base offset {base}, expected {self.tail_end_offset()} "
                                 "(propose_batch assigns it)")
        else:
            base = last = -1
        index = self.node.propose(data, type)
        return self._track(index, base, last)

    def propose_batch(self, batch: bytes | bytearray | memoryview) -> Proposal:
        """Assign the next Kafka offset to one RecordBatch v2 and propose it (one copy of the
        batch). Raises NotLeaderError, or ValueError for a payload that is not one batch v2."""
        self._check_running()
        if not self.is_leader:
            raise NotLeaderError(self.node.leader_id)
        base = self.tail_end_offset()
        stored = bytearray(batch)
        if len(stored) < 8:
            raise ValueError("not a record batch")
        set_base_offset(stored, base)
        fields = check_batch(stored)
        index = self.node.propose(stored, EntryType.DATA)
        return self._track(index, base, fields.last_offset)

    async def propose_and_wait(self, data: bytes | bytearray | memoryview,
                               type: EntryType = EntryType.DATA) -> int:
        """propose() and wait for the commit; returns the entry's Raft index."""
        return await self.propose(data, type).committed

    def transfer_leadership(self, target: int | None = None) -> int:
        """Start handing leadership to `target` (default: the most caught-up other voter)."""
        if target is None:
            status = self.node.peer_status()
            candidates = [(st.recent_active, st.match, peer) for peer, st in status.items() if peer != self.node_id]
            if not candidates:
                raise NotLeaderError(self.node.leader_id, "no peer to transfer leadership to")
            target = max(candidates)[2]
        self.node.transfer_leadership(target)
        self._wake.set()
        return target

    def tail_end_offset(self) -> int:
        """Kafka end offset after the last DATA entry of the whole Raft log (unstable included):
        the base offset the next proposed batch gets."""
        raft_log = self.node.log
        index = raft_log.last_index()
        while index >= raft_log.offset:
            entry = raft_log.unstable[index - raft_log.offset]
            if entry.type == EntryType.DATA:
                return batch_fields(entry.data).last_offset + 1
            index -= 1
        pending = raft_log.pending_snapshot
        if pending is not None:
            return _snapshot_offset(pending)
        return self.log.offset_for_index(index)

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
                await self._handle_ready(rd)
                node.advance(rd)
                self._check_pending()
                if rd.soft_state is not None:
                    self._call(self._role_listeners, "role")
                self._notify_change()
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # a storage failure: stop this group, loudly
            log.exception("raft group %s on node %d failed", self.name, self.node_id)
            self.failure = error
            self._stopped = True
            self._fail_all(GroupStoppedError(f"raft group {self.name} failed: {error}"))
            self._notify_change()

    async def _handle_ready(self, rd: Ready) -> None:
        stream_log = self.log
        if rd.snapshot is not None:
            snap = rd.snapshot
            stream_log.reset(snap.index + 1, snap.term, _snapshot_offset(snap))
            self._commit_offset = max(self._commit_offset, _snapshot_offset(snap))
            if self._snapshot_fn is not None:
                self._snapshot_fn(snap)
        if rd.entries:
            first = rd.entries[0].index
            if first <= stream_log.last_index:
                stream_log.truncate_suffix(first)  # Raft conflict: the leader's entries win
            stream_log.append(rd.entries)
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
        # Committed entries are durable on a majority already and (appended above) readable
        # here: apply them now rather than after this Ready's own fsync, which would add one
        # sync to every commit's latency (etcd applies concurrently with its WAL write too).
        if rd.committed_entries:
            self._apply(rd.committed_entries)
        if rd.hard_state is not None:
            await asyncio.to_thread(save_hard_state, stream_log.directory, rd.hard_state)
        if rd.entries or rd.snapshot is not None:
            await stream_log.sync()
            self._resolve_durable(stream_log.durable_index)
        for message in late:
            self._send(message)

    def _send(self, message: Message) -> None:
        if message.type == MessageType.SNAPSHOT and message.snapshot is not None and message.snapshot.data is None:
            snap = message.snapshot
            # The follower's log will start at snap.index + 1 with our Kafka offset there.
            message.snapshot = SnapshotMeta(snap.index, snap.term, self.log.offset_for_index(snap.index))
        self._send_fn(self.name, message)

    def _apply(self, entries: list[Entry]) -> None:
        for entry in reversed(entries):
            if entry.type == EntryType.DATA:
                self._commit_offset = max(self._commit_offset, batch_fields(entry.data).last_offset + 1)
                break
        if self._apply_fn is not None:
            self._apply_fn(entries)
        last = entries[-1].index
        pending = self._pending
        while pending and pending[0][0] <= last:
            index, term, future = pending.popleft()
            if future.done():
                continue
            entry = entries[index - entries[0].index] if index >= entries[0].index else None
            if entry is not None and entry.term == term:
                future.set_result(index)
            else:
                future.set_exception(ProposalLostError(self.node.leader_id, f"entry {index} was replaced"))
        self._call(self._commit_listeners, "commit")

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

    def _track(self, index: int, base: int, last: int) -> Proposal:
        loop = asyncio.get_running_loop()
        committed: asyncio.Future[int] = loop.create_future()
        durable: asyncio.Future[int] = loop.create_future()
        # Callers often await only one of the two: never warn about an unretrieved failure.
        committed.add_done_callback(_retrieve)
        durable.add_done_callback(_retrieve)
        self._pending.append((index, self.node.term, committed))
        self._durable_waiters.append((index, durable))
        self._wake.set()
        return Proposal(index, self.node.term, base, last, committed, durable)

    def _resolve_durable(self, durable_index: int) -> None:
        waiters = self._durable_waiters
        while waiters and waiters[0][0] <= durable_index:
            index, future = waiters.popleft()
            if not future.done():
                future.set_result(index)

    def _check_pending(self) -> None:
        """Leadership lost (or a new term): this node's pending proposals have no known outcome."""
        if not self._pending and not self._durable_waiters:
            return
        if self.node.role == Role.LEADER:
            term = self.node.term
            if all(t == term for _, t, _ in self._pending):
                return
        error = ProposalLostError(self.node.leader_id, f"lost leadership of {self.name}")
        keep_term = self.node.term if self.node.role == Role.LEADER else -1
        survivors: deque[tuple[int, int, asyncio.Future[int]]] = deque()
        for index, term, future in self._pending:
            if term == keep_term:
                survivors.append((index, term, future))
            elif not future.done():
                future.set_exception(error)
        self._pending = survivors
        if keep_term < 0:
            for _, future in self._durable_waiters:
                if not future.done():
                    future.set_exception(error)
            self._durable_waiters.clear()

    def _fail_all(self, error: BaseException) -> None:
        for _, _, future in self._pending:
            if not future.done():
                future.set_exception(error)
        for _, future in self._durable_waiters:
            if not future.done():
                future.set_exception(error)
        self._pending.clear()
        self._durable_waiters.clear()

    def _notify_change(self) -> None:
        waiters, self._change_waiters = self._change_waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)


def _retrieve(future: asyncio.Future[int]) -> None:
    if not future.cancelled():
        future.exception()


def _snapshot_offset(snap: SnapshotMeta) -> int:
    data: Any = snap.data
    if isinstance(data, dict):
        data = data.get("start_offset")
    if not isinstance(data, int) or isinstance(data, bool) or data < 0:
        raise RaftError(f"snapshot at index {snap.index} carries no start offset: {snap.data!r}")
    return data


# ---------------------------------------------------------------------------------- the node


class RaftHost:
    """One node's Raft side: the transport (listening on the raft address), one ticker for all
    groups (so one tick's heartbeats to a peer leave as one frame), and the groups by name."""

    def __init__(self, node_id: int, raft_listen: Address, peers: dict[int, Address] | None = None, *,
                 tick_interval_s: float = 0.1, group_config: GroupConfig | None = None,
                 transport_config: TransportConfig | None = None,
                 on_unknown_group: Callable[[str, Message], None] | None = None) -> None:
        self.node_id = node_id
        self.tick_interval_s = tick_interval_s
        self.group_config = group_config or GroupConfig()
        self.groups: dict[str, RaftGroup] = {}
        self.on_unknown_group = on_unknown_group
        self.transport = RaftTransport(node_id, raft_listen, self._deliver,
                                       {p: a for p, a in (peers or {}).items() if p != node_id},
                                       transport_config)
        self._ticker: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.transport.start()
        self._ticker = asyncio.get_running_loop().create_task(self._tick_loop(), name=f"raft-ticker:{self.node_id}")

    @property
    def raft_port(self) -> int:
        return self.transport.port

    def add_peer(self, peer_id: int, address: Address) -> None:
        self.transport.add_peer(peer_id, address)

    def create_group(self, name: str, voters: Sequence[int], stream_log: StreamLog, *,
                     apply: ApplyFn | None = None, on_snapshot: SnapshotFn | None = None,
                     config: GroupConfig | None = None, resume_from_commit_point: bool = False) -> RaftGroup:
        """Create and start the group `name` over `stream_log` (this node must be a voter)."""
        if name in self.groups:
            raise ValueError(f"raft group {name} already exists")
        group = RaftGroup(name, self.node_id, voters, stream_log, self.transport.send,
                          config=config or self.group_config, apply=apply, on_snapshot=on_snapshot,
                          resume_from_commit_point=resume_from_commit_point)
        self.groups[name] = group
        group.start()
        return group

    async def remove_group(self, name: str, transfer: bool = False) -> None:
        group = self.groups.pop(name, None)
        if group is not None:
            await group.stop(transfer=transfer)

    async def stop(self, transfer: bool = True, timeout_s: float = 2.0) -> None:
        """Graceful: leaders hand over their groups first (concurrently), then everything stops."""
        groups = list(self.groups.values())
        if transfer:
            await asyncio.gather(*(g.stop(transfer=True, timeout_s=timeout_s) for g in groups),
                                 return_exceptions=True)
        for group in groups:
            await group.stop(transfer=False)
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        await self.transport.stop()

    def _deliver(self, name: str, message: Message) -> None:
        group = self.groups.get(name)
        if group is not None:
            group.step(message)
        elif self.on_unknown_group is not None:
            self.on_unknown_group(name, message)

    async def _tick_loop(self) -> None:
        loop = asyncio.get_running_loop()
        next_tick = loop.time() + self.tick_interval_s
        while True:
            await asyncio.sleep(max(0.0, next_tick - loop.time()))
            next_tick = max(next_tick + self.tick_interval_s, loop.time())
            for group in list(self.groups.values()):
                try:
                    group.tick()
                except Exception:  # one broken group must not stop the clock of every other
                    log.exception("node %d: tick of group %s failed", self.node_id, group.name)


__all__ = [
    "NONE",
    "GroupConfig",
    "GroupStoppedError",
    "Proposal",
    "ProposalLostError",
    "RaftGroup",
    "RaftHost",
]

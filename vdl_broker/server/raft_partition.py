"""StreamPartition's interface over a Raft group (issue 5): one RaftPartition per local replica.

The Kafka handlers see the same seam as on a single node (vdl_broker.server.partition): name,
log, is_leader, leader_id, high_watermark, log_start_offset, log_end_offset, producers,
append/append_batch/append_nowait, wait_durable, changed_future, closed. Here:

- is_leader: this node leads the group, its own-term no-op committed (RaftGroup.leader_ready)
  and everything committed before its term is applied here, so the high watermark and the
  producer state are complete. Only then does it take produce/fetch/list-offsets requests.
- append: idempotence check, `group.propose_batch` (the offset is assigned synchronously, so
  concurrent produce requests still get contiguous offsets), then `wait_durable` awaits the
  proposal's `durable` (acks=1) or `committed` (acks=-1) future within the request's timeout.
- high_watermark = group.commit_offset: committed data only, never backwards (driver contract).
- Producer state (KIP-98) follows the replicated log on every replica: committed entries are
  recorded as they are applied (after a restart, the log up to the saved commit point is scanned
  once). A leader checks batches against a copy of that table taken when its term began plus
  its own proposals, so a retry of an in-flight batch is recognised, and a proposal that another
  leader later replaces never pollutes the committed table.
- Long-poll fetches park on changed_future(), resolved after every commit and role change.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import weakref
from typing import Any

from vdl_broker.log import StreamLog
from vdl_broker.protocol.errors import ErrorCode
from vdl_broker.protocol.records.record_batch import BatchHeader, parse_batch_header
from vdl_broker.raft.driver import Proposal, RaftGroup
from vdl_broker.raft.types import Entry, EntryType, NotLeaderError, RaftError, SnapshotMeta
from vdl_broker.server.partition import (
    VERDICT_ERRORS,
    AppendingPartition,
    AppendResult,
    PartitionError,
)
from vdl_broker.server.producer_state import (
    ProducerStateTable,
    Verdict,
    last_sequence,
    record_batch,
    replay_producer_state,
)

log = logging.getLogger(__name__)

MAX_WAITERS = 256


class RaftPartition(AppendingPartition):
    """Partition 0 of one stream's topic, replicated by `group` (attach it right after creating
    the group with `apply=partition.on_apply, on_snapshot=partition.on_snapshot`)."""

    def __init__(self, name: str, stream_log: StreamLog, node_id: int) -> None:
        self.name = name
        self.log = stream_log
        self.node_id = node_id
        self.group: RaftGroup | None = None
        # KIP-98 state of every committed batch (all replicas, kept as entries are applied) and,
        # while leading, a copy of it taken when this term began plus this term's proposals:
        # a proposal another leader replaces never reaches the committed table.
        self.producers = ProducerStateTable()
        self._leader_producers = ProducerStateTable()
        self.closed = False
        self._serving_term = -1
        # What each produce request (its handler task) must wait for: the newest proposal its
        # batches made or, for a retried batch, the in-flight original (same term: it commits
        # no later). Keyed by task so a request never waits on, or is acked by, another's.
        self._awaited: weakref.WeakKeyDictionary[asyncio.Task[Any], Proposal] = weakref.WeakKeyDictionary()
        self._untracked: Proposal | None = None  # the same, for callers outside any task
        self._inflight: dict[int, Proposal] = {}  # base offset -> proposal not yet committed/lost
        self._waiters: list[asyncio.Future[None]] = []

    def attach(self, group: RaftGroup) -> None:
        """Bind the group (before its task first runs) and rebuild producer state from the
        entries it will not replay (those up to its saved commit point)."""
        self.group = group
        self._rebuild(group.applied_index)
        group.add_commit_listener(self._on_change)
        group.add_role_listener(self._on_change)

    # -- state -------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        group = self.group
        if group is None or self.closed or group.stopped or not group.leader_ready:
            return False
        if self._serving_term != group.term:
            if group.applied_index < group.commit_index:
                return False  # earlier terms' entries not applied yet: HW/producers incomplete
            self._start_serving(group.term)
        return True

    @property
    def leader_id(self) -> int:
        """The known leader (0 = unknown, as raft.NONE)."""
        return self.group.leader_id if self.group is not None else 0

    @property
    def high_watermark(self) -> int:
        return self.group.commit_offset if self.group is not None else self.log.log_start_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def in_sync_replicas(self, max_lag_entries: int) -> list[int]:
        return self.group.in_sync_replicas(max_lag_entries) if self.group is not None else []

    # -- producer state ----------------------------------------------------------------------

    def _start_serving(self, term: int) -> None:
        # Every committed entry is applied (is_leader checked it), so the committed table is
        # complete; this term's proposals are recorded on a copy of it.
        self._leader_producers = copy.deepcopy(self.producers)
        self._serving_term = term
        log.info("stream %s: node %d leads (term %d), high watermark %d", self.name, self.node_id, term,
                 self.high_watermark)

    def _rebuild(self, through_index: int) -> int:
        """The committed table from the log's DATA entries up to Raft index `through_index`
        (at open: the group replays only the entries after it)."""
        self.producers = ProducerStateTable()
        end = self.log.offset_for_index(max(through_index, self.log.first_index - 1))
        return replay_producer_state(self.log, self.producers, end)

    def on_apply(self, entries: list[Entry]) -> None:
        """RaftGroup apply callback: committed entries, in order, on every replica."""
        for entry in entries:
            if entry.type == EntryType.DATA:
                header = parse_batch_header(entry.data)
                record_batch(self.producers, header, header.base_offset)

    def on_snapshot(self, snapshot: SnapshotMeta) -> None:
        """The leader reset our log start (we lagged behind its retention): the producer state
        of the dropped prefix is gone, as after retention (KIP-360 accepts unknown producers)."""
        self.producers = ProducerStateTable()

    # -- append ------------------------------------------------------------------------------

    def append_nowait(self, batch: bytes | bytearray | memoryview,
                      header: BatchHeader | None = None) -> AppendResult:
        """Idempotence check and proposal, synchronously (offsets stay contiguous)."""
        if self.closed:
            raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"stream {self.name} was deleted")
        if not self.is_leader:
            raise self.not_leader_error()
        group = self.group
        assert group is not None
        if header is None:
            header = parse_batch_header(batch)
        idempotent = header.producer_id >= 0
        if idempotent:
            last_seq = last_sequence(header.base_sequence, header.last_offset_delta)
            check = self._leader_producers.check(header.producer_id, header.producer_epoch, header.base_sequence,
                                                 last_seq)
            if check.verdict is Verdict.DUPLICATE:
                # Its original is committed, or in flight in this term: then wait for it too.
                original = self._inflight.get(check.base_offset)
                if original is not None:
                    self._await_later(original)
                return AppendResult(check.base_offset, duplicate=True)
            if check.verdict is not Verdict.APPEND:
                raise PartitionError(VERDICT_ERRORS[check.verdict])
        try:
            proposal = group.propose_batch(batch)
        except NotLeaderError:
            raise self.not_leader_error() from None
        except ValueError as error:
            raise PartitionError(ErrorCode.CORRUPT_MESSAGE, str(error)) from None
        except RaftError:
            raise self.not_leader_error() from None
        if idempotent:
            record_batch(self._leader_producers, header, proposal.base_offset)
        self._inflight[proposal.base_offset] = proposal
        proposal.committed.add_done_callback(lambda _, base=proposal.base_offset: self._inflight.pop(base, None))
        self._await_later(proposal)
        return AppendResult(proposal.base_offset)

    def _await_later(self, proposal: Proposal) -> None:
        task = asyncio.current_task()
        current = self._awaited.get(task) if task is not None else self._untracked
        if current is None or proposal.index > current.index:
            if task is not None:
                self._awaited[task] = proposal
            else:
                self._untracked = proposal

    def not_leader_error(self) -> PartitionError:
        leader = self.leader_id
        where = f"node {leader}" if leader else "unknown"
        return PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                              f"node {self.node_id} does not lead stream {self.name} (leader: {where})")

    async def wait_durable(self, acks: int, timeout_ms: int | None = None) -> None:
        """acks=1: the leader's own sync of this request's batches (appended by the calling task
        since its last wait); acks=-1: their commit. Raises PartitionError REQUEST_TIMED_OUT /
        NOT_LEADER_OR_FOLLOWER."""
        task = asyncio.current_task()
        if task is not None:
            proposal = self._awaited.pop(task, None)
        else:
            proposal, self._untracked = self._untracked, None
        if acks == 0 or proposal is None:
            return
        future = proposal.committed if acks == -1 else proposal.durable
        if not future.done():
            timeout = None if timeout_ms is None or acks != -1 else max(0, timeout_ms) / 1000
            try:
                await asyncio.wait_for(asyncio.shield(future), timeout)
            except TimeoutError:
                raise PartitionError(ErrorCode.REQUEST_TIMED_OUT,
                                     f"stream {self.name}: not committed within {timeout_ms} ms") from None
            except RaftError:
                raise self.not_leader_error() from None
        elif future.exception() is not None:
            raise self.not_leader_error()

    # -- waiting for data (delayed fetch) ----------------------------------------------------

    def changed_future(self) -> asyncio.Future[None]:
        """Resolved at the next commit or role change (or when the stream goes away)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if len(self._waiters) >= MAX_WAITERS:
            self._waiters = [waiter for waiter in self._waiters if not waiter.done()]
        self._waiters.append(future)
        return future

    def _on_change(self, _group: RaftGroup) -> None:
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self, clean: bool = True) -> None:
        """The group must be stopped first (RaftHost.remove_group / stop)."""
        if self.closed:
            return
        self.closed = True
        self._on_change(self.group)  # type: ignore[arg-type]
        if clean:
            self.log.close()


class RemotePartition:
    """A stream with no replica on this node (or not opened yet): every client request gets
    NOT_LEADER_OR_FOLLOWER so the client refreshes its metadata and goes to the leader."""

    closed = False
    is_leader = False
    high_watermark = -1
    log_start_offset = -1
    log_end_offset = -1

    def __init__(self, name: str, leader_id: int) -> None:
        self.name = name
        self.leader_id = leader_id
        self.producers = ProducerStateTable()

    def append_nowait(self, batch: bytes | bytearray | memoryview,
                      header: BatchHeader | None = None) -> AppendResult:
        raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"this node holds no replica of stream {self.name}")

    async def wait_durable(self, acks: int, timeout_ms: int | None = None) -> None:
        return None

    def changed_future(self) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future

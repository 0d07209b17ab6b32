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
  recorded as they are applied; the leader also records its own proposals when it makes them
  (so a retry of an in-flight batch is recognised). A proposal that is later replaced by another
  leader's entry makes the table stale: it is then rebuilt from the log (committed part only).
- Long-poll fetches park on changed_future(), resolved after every commit and role change.
"""

from __future__ import annotations

import asyncio
import logging

from vdl_broker.log import StreamLog
from vdl_broker.protocol.errors import ErrorCode
from vdl_broker.protocol.records.record_batch import BatchHeader, parse_batch_header
from vdl_broker.raft.driver import Proposal, RaftGroup
from vdl_broker.raft.types import Entry, EntryType, NotLeaderError, RaftError, SnapshotMeta
from vdl_broker.server.partition import (
    _VERDICT_ERRORS,
    REBUILD_CHUNK_BYTES,
    AppendResult,
    PartitionError,
)
from vdl_broker.server.producer_state import ProducerStateTable, Verdict, last_sequence

log = logging.getLogger(__name__)

BATCH_HEADER_SIZE = 61  # Kafka protocol guide: RecordBatch header
MAX_WAITERS = 256


class RaftPartition:
    """Partition 0 of one stream's topic, replicated by `group` (attach it right after creating
    the group with `apply=partition.on_apply, on_snapshot=partition.on_snapshot`)."""

    def __init__(self, name: str, stream_log: StreamLog, node_id: int) -> None:
        self.name = name
        self.log = stream_log
        self.node_id = node_id
        self.group: RaftGroup | None = None
        self.producers = ProducerStateTable()
        self.closed = False
        self._recorded_through = 0  # Raft index up to which `producers` holds every DATA entry
        self._own: dict[int, int] = {}  # index -> term of this node's proposals not yet applied
        self._serving_term = -1
        self._last_proposal: Proposal | None = None
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
        assert self.group is not None
        if self._own:  # proposals of an earlier leadership that never got applied: stale
            self._rebuild(self.group.applied_index)
        self._last_proposal = None
        self._serving_term = term
        log.info("stream %s: node %d leads (term %d), high watermark %d", self.name, self.node_id, term,
                 self.high_watermark)

    def _rebuild(self, through_index: int) -> int:
        """Producer state from the log's DATA entries up to Raft index `through_index`."""
        self.producers = ProducerStateTable()
        self._own.clear()
        self._recorded_through = through_index
        end = self.log.offset_for_index(through_index)
        offset, seen = self.log.log_start_offset, 0
        while offset < end:
            result = self.log.read(offset, REBUILD_CHUNK_BYTES, end)
            if not result.buffers:
                break
            next_offset = offset
            for buffer in result.buffers:
                position = 0
                while position + BATCH_HEADER_SIZE <= len(buffer):
                    header = parse_batch_header(buffer, position)
                    position += 12 + header.batch_length
                    next_offset = header.next_offset
                    seen += 1
                    self._record(header)
            if next_offset <= offset:
                break
            offset = next_offset
        return seen

    def _record(self, header: BatchHeader) -> None:
        if header.producer_id >= 0 and not header.is_control:
            self.producers.record(header.producer_id, header.producer_epoch, header.base_sequence,
                                  last_sequence(header.base_sequence, header.last_offset_delta),
                                  header.base_offset)

    def on_apply(self, entries: list[Entry]) -> None:
        """RaftGroup apply callback: committed entries, in order, on every replica."""
        stale = False
        for entry in entries:
            own_term = self._own.pop(entry.index, None)
            if own_term is not None:
                stale |= own_term != entry.term  # our proposal was replaced by another leader's
                continue  # recorded when proposed
            if entry.index <= self._recorded_through:
                stale |= entry.type == EntryType.DATA
                continue
            if entry.type == EntryType.DATA:
                self._record(parse_batch_header(entry.data))
        last = entries[-1].index if entries else 0
        for index in [i for i in self._own if i <= last]:  # cannot happen in order; be safe
            del self._own[index]
            stale = True
        if stale:
            log.info("stream %s: producer state rebuilt after a replaced proposal", self.name)
            self._rebuild(last)
        else:
            self._recorded_through = max(self._recorded_through, last)

    def on_snapshot(self, snapshot: SnapshotMeta) -> None:
        """The leader reset our log start (we lagged behind its retention): the producer state
        of the dropped prefix is gone, as after retention (KIP-360 accepts unknown producers)."""
        self.producers = ProducerStateTable()
        self._own.clear()
        self._recorded_through = snapshot.index

    # -- append ------------------------------------------------------------------------------

    async def append(self, batch: bytes | bytearray | memoryview, acks: int, timeout_ms: int = 30_000,
                     header: BatchHeader | None = None) -> int:
        return (await self.append_batch(batch, acks, timeout_ms, header)).base_offset

    async def append_batch(self, batch: bytes | bytearray | memoryview, acks: int, timeout_ms: int = 30_000,
                           header: BatchHeader | None = None) -> AppendResult:
        result = self.append_nowait(batch, header)
        await self.wait_durable(acks, timeout_ms)
        return result

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
            check = self.producers.check(header.producer_id, header.producer_epoch, header.base_sequence, last_seq)
            if check.verdict is Verdict.DUPLICATE:
                # Its original is committed or among this term's proposals (wait_durable waits
                # for the newest proposal, which commits after it).
                return AppendResult(check.base_offset, duplicate=True)
            if check.verdict is not Verdict.APPEND:
                raise PartitionError(_VERDICT_ERRORS[check.verdict])
        try:
            proposal = group.propose_batch(batch)
        except NotLeaderError:
            raise self.not_leader_error() from None
        except ValueError as error:
            raise PartitionError(ErrorCode.CORRUPT_MESSAGE, str(error)) from None
        except RaftError:
            raise self.not_leader_error() from None
        self._own[proposal.index] = proposal.term
        self._recorded_through = max(self._recorded_through, proposal.index)
        if idempotent:
            self.producers.record(header.producer_id, header.producer_epoch, header.base_sequence,
                                  last_seq, proposal.base_offset)
        self._last_proposal = proposal
        return AppendResult(proposal.base_offset)

    def not_leader_error(self) -> PartitionError:
        leader = self.leader_id
        where = f"node {leader}" if leader else "unknown"
        return PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                              f"node {self.node_id} does not lead stream {self.name} (leader: {where})")

    async def wait_durable(self, acks: int, timeout_ms: int | None = None) -> None:
        """acks=1: the leader's own sync of every proposal so far; acks=-1: their commit. Raises
        PartitionError REQUEST_TIMED_OUT / NOT_LEADER_OR_FOLLOWER."""
        proposal = self._last_proposal
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

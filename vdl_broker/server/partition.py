"""The seam between Kafka handlers and replication: one StreamPartition per stream on this node.

Issue 4 implements it for a single node: append assigns the next Kafka offset, stores the batch
as a Raft DATA entry (index last+1, term 1), and the group-commit sync makes it durable; the
high watermark is the durable end offset, so consumers never see data a crash could take back.
Issue 5 replaces the append path with a Raft proposal and the HW with the commit index.

Hot path: everything here is per batch (a header parse, one copy to set the base offset, one
log append), never per record.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from vdl_broker.log import Entry, EntryType, StreamLog
from vdl_broker.protocol.errors import ErrorCode
from vdl_broker.protocol.records.record_batch import BatchHeader, parse_batch_header, with_base_offset
from vdl_broker.server.delayed import wait_for_any
from vdl_broker.server.producer_state import (
    ProducerStateTable,
    Verdict,
    last_sequence,
    replay_producer_state,
)

log = logging.getLogger(__name__)

# Single-node term until issue 5 brings Raft terms.
SINGLE_NODE_TERM = 1


class PartitionError(Exception):
    """An append refused with a Kafka error code (the batch was not stored)."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    duplicate: bool = False


# KIP-98: what a refused idempotent batch is answered.
VERDICT_ERRORS = {
    Verdict.DUPLICATE_SEQUENCE: ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
    Verdict.OUT_OF_ORDER: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    Verdict.INVALID_EPOCH: ErrorCode.INVALID_PRODUCER_EPOCH,
}


class AppendingPartition:
    """The append path every partition kind shares: a synchronous `append_nowait` (idempotence
    check and offset assignment, with no await in between) then `wait_durable` for the acks."""

    def append_nowait(self, batch: bytes | bytearray | memoryview,
                      header: BatchHeader | None = None) -> AppendResult:
        raise NotImplementedError

    async def wait_durable(self, acks: int, timeout_ms: int | None = None) -> None:
        raise NotImplementedError

    async def append(self, batch: bytes | bytearray | memoryview, acks: int, timeout_ms: int = 30_000,
                     header: BatchHeader | None = None) -> int:
        """Store one validated RecordBatch v2; returns its base offset (see `append_batch`)."""
        return (await self.append_batch(batch, acks, timeout_ms, header)).base_offset

    async def append_batch(self, batch: bytes | bytearray | memoryview, acks: int, timeout_ms: int = 30_000,
                           header: BatchHeader | None = None) -> AppendResult:
        result = self.append_nowait(batch, header)
        await self.wait_durable(acks, timeout_ms)
        return result


class StreamPartition(AppendingPartition):
    """Partition 0 of the topic that stands for one log stream, on a single node."""

    def __init__(self, name: str, stream_log: StreamLog, node_id: int) -> None:
        self.name = name
        self.log = stream_log
        self.leader_id = node_id
        self.is_leader = True
        self.producers = ProducerStateTable()
        self.closed = False
        self._high_watermark = stream_log.durable_end_offset
        self._waiters: list[asyncio.Future[None]] = []
        self._background_sync_scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()

    # -- state -------------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def rebuild_producer_state(self) -> int:
        """Replay batch headers from the log (per batch, no record decoding); returns batches seen."""
        return replay_producer_state(self.log, self.producers, self.log.log_end_offset)

    # -- append --------------------------------------------------------------------------------

    def append_nowait(self, batch: bytes | bytearray | memoryview,
                      header: BatchHeader | None = None) -> AppendResult:
        """The synchronous part of an append: idempotence check, offset assignment, log append.

        No await happens between reading the log end offset and appending, so concurrent
        produce requests cannot interleave and every base offset is contiguous.
        """
        if self.closed:
            raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"stream {self.name} was deleted")
        if header is None:
            header = parse_batch_header(batch)
        idempotent = header.producer_id >= 0
        if idempotent:
            last_seq = last_sequence(header.base_sequence, header.last_offset_delta)
            check = self.producers.check(header.producer_id, header.producer_epoch, header.base_sequence, last_seq)
            if check.verdict is Verdict.DUPLICATE:
                return AppendResult(check.base_offset, duplicate=True)
            if check.verdict is not Verdict.APPEND:
                raise PartitionError(VERDICT_ERRORS[check.verdict])
        base_offset = self.log.log_end_offset
        stored = with_base_offset(batch, base_offset)
        self.log.append([Entry(self.log.last_index + 1, SINGLE_NODE_TERM, EntryType.DATA, stored)])
        if idempotent:
            self.producers.record(header.producer_id, header.producer_epoch, header.base_sequence,
                                  last_seq, base_offset)
        return AppendResult(base_offset)

    async def wait_durable(self, acks: int, timeout_ms: int | None = None) -> None:
        """acks 1 and -1 wait for the group-commit sync (one node: the leader's durable append
        is the commit); acks 0 only makes sure a sync follows, so the HW still advances.
        `timeout_ms` (the request's) matters only to replicated streams (RaftPartition)."""
        if acks == 0:
            self._schedule_background_sync()
        else:
            await self.sync()

    async def sync(self) -> None:
        await self.log.sync()
        self._advance_high_watermark()

    def _schedule_background_sync(self) -> None:
        if self._background_sync_scheduled:
            return  # a sync not yet started covers this append too
        self._background_sync_scheduled = True
        task = asyncio.get_running_loop().create_task(self._background_sync())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _background_sync(self) -> None:
        self._background_sync_scheduled = False
        try:
            await self.sync()
        except Exception:  # the next append or sync retries; log so it is not silent
            log.exception("background sync of stream %s failed", self.name)

    def _advance_high_watermark(self) -> None:
        if self.closed:
            return
        durable = self.log.durable_end_offset
        if durable > self._high_watermark:
            self._high_watermark = durable
            self._wake()

    # -- waiting for data (delayed fetch, seed 003) -----------------------------------------------

    def changed_future(self) -> asyncio.Future[None]:
        """A future resolved at the next HW advance (or when the stream goes away)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if len(self._waiters) >= 256:  # idle long polls time out without a wake: drop the dead ones
            self._waiters = [waiter for waiter in self._waiters if not waiter.done()]
        self._waiters.append(future)
        return future

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)

    def available_bytes(self, offset: int, limit: int) -> int:
        """Bytes of whole batches readable from `offset` below the HW, counted up to `limit`."""
        if offset >= self._high_watermark:
            return 0
        if limit <= 1:
            return 1
        result = self.log.read(offset, limit, self._high_watermark)
        return sum(len(buffer) for buffer in result.buffers)

    async def wait_for_data(self, offset: int, min_bytes: int, deadline: float) -> None:
        """Return once `min_bytes` are readable from `offset` below the HW, or at `deadline`
        (event-loop time)."""
        while not self.closed and self.available_bytes(offset, min_bytes) < max(1, min_bytes):
            if not await wait_for_any([self], deadline):
                return

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self, clean: bool = True) -> None:
        if self.closed:
            return
        self.closed = True
        self._wake()
        for task in list(self._tasks):
            task.cancel()
        if clean:
            self.log.close()

"""Idempotent-producer state of one stream (KIP-98): the last batches of each producer.

Per producer id the broker keeps the current epoch and the (first sequence, last sequence,
base offset) of its last 5 batches. A retried batch matching one of them is acknowledged with
its original offset and not stored again; a batch older than those is DUPLICATE_SEQUENCE_NUMBER;
a gap is OUT_OF_ORDER_SEQUENCE_NUMBER. Pure bookkeeping: no I/O, rebuilt from the log at start.
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass, field
from enum import Enum

from vdl_broker.log import StreamLog
from vdl_broker.server.txn_index import StreamTxns, observe
from vdl_wire.records.batch_header import BATCH_HEADER_SIZE, BatchHeader, parse_batch_header

# Producer-state rebuild reads the log in chunks of this size.
REBUILD_CHUNK_BYTES = 8 * 1024 * 1024

# Kafka ProducerStateManager: the broker remembers 5 batches, matching
# max.in.flight.requests.per.connection <= 5 for idempotent producers.
BATCHES_KEPT = 5
INT32_MAX = 2**31 - 1
NO_PRODUCER_ID = -1


class Verdict(Enum):
    APPEND = "append"
    DUPLICATE = "duplicate"          # a retry of a stored batch: ack with its original offset
    DUPLICATE_SEQUENCE = "duplicate_sequence"   # older than the remembered window
    OUT_OF_ORDER = "out_of_order"
    INVALID_EPOCH = "invalid_epoch"  # fenced: an older epoch than the producer's current one


@dataclass(frozen=True, slots=True)
class Check:
    verdict: Verdict
    base_offset: int = -1


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    base_offset: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def last_sequence(first_seq: int, last_offset_delta: int) -> int:
    """Sequences wrap at Int32 max back to 0 (KIP-98: DefaultRecordBatch.incrementSequence)."""
    return (first_seq + last_offset_delta) % (INT32_MAX + 1)


def _in_sequence(last_seq: int, next_first_seq: int) -> bool:
    return next_first_seq == last_seq + 1 or (next_first_seq == 0 and last_seq == INT32_MAX)


class ProducerStateTable:
    """The producers of one stream."""

    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> Check:
        """Decide what to do with a batch; changes nothing (call `record` after the append)."""
        entry = self._producers.get(producer_id)
        if entry is None:
            # Unknown producer (new, or its batches fell to retention): any sequence is
            # accepted, as Kafka does since KIP-360.
            return Check(Verdict.APPEND)
        if epoch < entry.epoch:
            return Check(Verdict.INVALID_EPOCH)
        if epoch > entry.epoch:
            # A bumped epoch restarts sequences at 0.
            return Check(Verdict.APPEND if first_seq == 0 else Verdict.OUT_OF_ORDER)
        for batch in entry.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return Check(Verdict.DUPLICATE, batch.base_offset)
        if not entry.batches or _in_sequence(entry.last_seq, first_seq):
            return Check(Verdict.APPEND)
        oldest = entry.batches[0].first_seq
        if entry.last_seq >= last_seq or (oldest <= first_seq <= entry.last_seq):
            return Check(Verdict.DUPLICATE_SEQUENCE)
        return Check(Verdict.OUT_OF_ORDER)

    def record(self, producer_id: int, epoch: int, first_seq: int, last_seq: int, base_offset: int) -> None:
        entry = self._producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            entry = ProducerEntry(epoch)
            self._producers[producer_id] = entry
        entry.batches.append(BatchMetadata(first_seq, last_seq, base_offset))

    def producer_ids(self) -> list[int]:
        return list(self._producers)

    def epoch_of(self, producer_id: int) -> int:
        entry = self._producers.get(producer_id)
        return entry.epoch if entry else -1

    def last_batches(self, producer_id: int) -> list[BatchMetadata]:
        entry = self._producers.get(producer_id)
        return list(entry.batches) if entry else []


@dataclass
class ProducerIdAllocator:
    """Producer ids.

    `allocate`: a fresh id, above every id seen in the logs and distinct per broker start (the
    start time in ms scaled up), so ids are not reused after a restart.
    `derived`: an id derived from a writer key's hash (VdlWriterId), in its own id space (the top
    bit of the positive int64 range), epoch 0, so a restarted writer keyed the same gets the same id.
    """

    start_ms: int
    _next: int = -1

    WRITER_SPACE: int = 1 << 62

    def __post_init__(self) -> None:
        # Room for 2**20 ids per millisecond of start time before two starts could collide.
        self._next = (self.start_ms << 20) % self.WRITER_SPACE

    def observe(self, producer_id: int) -> None:
        if producer_id < self.WRITER_SPACE and producer_id >= self._next:
            self._next = producer_id + 1

    def allocate(self) -> int:
        producer_id = self._next
        self._next += 1
        return producer_id

    def derived(self, writer_key: str) -> tuple[int, int]:
        digest = hashlib.sha256(writer_key.encode()).digest()
        value = int.from_bytes(digest[:8], "big") % self.WRITER_SPACE
        return self.WRITER_SPACE + value, 0


def record_batch(table: ProducerStateTable, header: BatchHeader, base_offset: int) -> None:
    """Book one stored batch in `table` (idempotent producers only; control batches carry none)."""
    if header.producer_id >= 0 and not header.is_control:
        table.record(header.producer_id, header.producer_epoch, header.base_sequence,
                     last_sequence(header.base_sequence, header.last_offset_delta), base_offset)


def replay_producer_state(stream_log: StreamLog, table: ProducerStateTable, end_offset: int,
                          txns: StreamTxns | None = None) -> int:
    """Book every batch of the log below `end_offset` in `table` (and its transactions in
    `txns`), reading batch headers only (and markers' one record); returns the number of
    batches seen."""
    offset, seen = stream_log.log_start_offset, 0
    while offset < end_offset:
        result = stream_log.read(offset, REBUILD_CHUNK_BYTES, end_offset)
        if not result.buffers:
            break
        next_offset = offset
        for buffer in result.buffers:
            position = 0
            while position + BATCH_HEADER_SIZE <= len(buffer):
                header = parse_batch_header(buffer, position)
                end = position + 12 + header.batch_length  # base offset + length prefix, then the rest
                next_offset = header.next_offset
                seen += 1
                record_batch(table, header, header.base_offset)
                if txns is not None and header.is_transactional:
                    observe(txns, header, memoryview(buffer)[position:end])
                position = end
        if next_offset <= offset:
            break
        offset = next_offset
    return seen

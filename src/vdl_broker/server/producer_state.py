"""Idempotent-producer state of one stream (KIP-98): the last batches of each producer.

Per producer id the broker keeps the current epoch and the (first sequence, last sequence,
base offset, max timestamp) of its last 5 batches. A retried batch matching one of them is
acknowledged with its original offset (and, on a LogAppendTime stream, its original append
time: the stored batch's max timestamp, # Kafka: BatchMetadata.timestamp) and not stored again; a batch older than those is DUPLICATE_SEQUENCE_NUMBER;
a gap is OUT_OF_ORDER_SEQUENCE_NUMBER. Pure bookkeeping: no I/O, rebuilt from the log at start.

A restart does not read the whole log for it: the state (with the stream's transactions) is
saved as a log state snapshot at each segment roll and at a clean close (`encode_state`), and
`rebuild_producer_state` loads the newest usable one and replays only the batches after it, as
Kafka's ProducerStateManager does with its `<offset>.snapshot` files.

A producer without a batch for a while is forgotten (`expire`), as Kafka forgets it after
`producer.id.expiration.ms` (KIP-854), so the table does not grow with every producer id a stream
ever saw when retention never removes its batches.
"""

from __future__ import annotations

import hashlib
import logging
import struct
from collections import deque
from collections.abc import Container
from dataclasses import dataclass, field
from enum import Enum

from vdl_broker.log import StreamLog
from vdl_broker.server.txn_index import AbortedTxn, LastMarker, StreamTxns, observe
from vdl_wire.records.batch_header import BATCH_HEADER_SIZE, BatchHeader, parse_batch_header

log = logging.getLogger(__name__)

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
    max_timestamp: int = -1  # DUPLICATE: the stored original's


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    base_offset: int
    max_timestamp: int = -1  # the stored batch's (-1: read from a snapshot written before it was kept)


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    last_ms: int = 0  # the table's clock when its last batch was booked

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def last_sequence(first_seq: int, last_offset_delta: int) -> int:
    """Sequences wrap at Int32 max back to 0 (KIP-98: DefaultRecordBatch.incrementSequence)."""
    return (first_seq + last_offset_delta) % (INT32_MAX + 1)


def _in_sequence(last_seq: int, next_first_seq: int) -> bool:
    return next_first_seq == last_seq + 1 or (next_first_seq == 0 and last_seq == INT32_MAX)


class ProducerStateTable:
    """The producers of one stream. `now_ms` is the owner's wall clock (ms), set before it books
    batches: each producer's entry keeps the time of its last batch, for `expire`."""

    def __init__(self, now_ms: int) -> None:
        self._producers: dict[int, ProducerEntry] = {}
        self.now_ms = now_ms

    def __contains__(self, producer_id: object) -> bool:
        return producer_id in self._producers

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
                return Check(Verdict.DUPLICATE, batch.base_offset, batch.max_timestamp)
        if not entry.batches or _in_sequence(entry.last_seq, first_seq):
            return Check(Verdict.APPEND)
        oldest = entry.batches[0].first_seq
        if entry.last_seq >= last_seq or (oldest <= first_seq <= entry.last_seq):
            return Check(Verdict.DUPLICATE_SEQUENCE)
        return Check(Verdict.OUT_OF_ORDER)

    def record(self, producer_id: int, epoch: int, first_seq: int, last_seq: int, base_offset: int,
               max_timestamp: int = -1) -> None:
        entry = self._producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            entry = ProducerEntry(epoch)
            self._producers[producer_id] = entry
        entry.batches.append(BatchMetadata(first_seq, last_seq, base_offset, max_timestamp))
        entry.last_ms = self.now_ms

    def producer_ids(self) -> list[int]:
        return list(self._producers)

    def epoch_of(self, producer_id: int) -> int:
        entry = self._producers.get(producer_id)
        return entry.epoch if entry else -1

    def last_batches(self, producer_id: int) -> list[BatchMetadata]:
        entry = self._producers.get(producer_id)
        return list(entry.batches) if entry else []

    def entries(self) -> list[tuple[int, ProducerEntry]]:
        """(producer id, entry), by producer id."""
        return sorted(self._producers.items())

    def forget_batches_below(self, offset: int) -> None:
        """Drop the batches stored below `offset` (retention removed them) and the producers
        left with none: what a replay of the log from `offset` would not have seen (a replay
        keeps, per producer, the last batches of its newest epoch; those below `offset` are the
        oldest of them)."""
        for producer_id, entry in list(self._producers.items()):
            while entry.batches and entry.batches[0].base_offset < offset:
                entry.batches.popleft()
            if not entry.batches:
                del self._producers[producer_id]

    def expire(self, now_ms: int, idle_ms: int, writer_idle_ms: int, keep: Container[int]) -> list[int]:
        """Forget the producers whose last batch was booked `idle_ms` or more before `now_ms`
        (writer-keyed ids, `ProducerIdAllocator.derived`: `writer_idle_ms`), except those in `keep`
        (an open transaction's); returns their ids. Kafka: ProducerStateManager.removeExpiredProducers.
        A forgotten producer's next batch is accepted at any sequence (KIP-360), so a retry of a
        batch older than that is stored again."""
        self.now_ms = now_ms
        gone = [producer_id for producer_id, entry in self._producers.items()
                if producer_id not in keep
                and now_ms - entry.last_ms >= (writer_idle_ms if producer_id >= WRITER_SPACE else idle_ms)]
        for producer_id in gone:
            del self._producers[producer_id]
        return gone


# Writer-keyed producer ids (VdlWriterId) live in the top bit of the positive int64 range.
WRITER_SPACE = 1 << 62


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

    def __post_init__(self) -> None:
        # Room for 2**20 ids per millisecond of start time before two starts could collide.
        self._next = (self.start_ms << 20) % WRITER_SPACE

    def observe(self, producer_id: int) -> None:
        if producer_id < WRITER_SPACE and producer_id >= self._next:
            self._next = producer_id + 1

    def allocate(self) -> int:
        producer_id = self._next
        self._next += 1
        return producer_id

    def derived(self, writer_key: str) -> tuple[int, int]:
        digest = hashlib.sha256(writer_key.encode()).digest()
        value = int.from_bytes(digest[:8], "big") % WRITER_SPACE
        return WRITER_SPACE + value, 0


def record_batch(table: ProducerStateTable, header: BatchHeader, base_offset: int) -> None:
    """Book one stored batch in `table` (idempotent producers only; control batches carry none)."""
    if header.producer_id >= 0 and not header.is_control:
        table.record(header.producer_id, header.producer_epoch, header.base_sequence,
                     last_sequence(header.base_sequence, header.last_offset_delta), base_offset, header.max_timestamp)


def replay_producer_state(stream_log: StreamLog, table: ProducerStateTable, end_offset: int,
                          txns: StreamTxns | None = None, start: int | None = None) -> tuple[int, int]:
    """Book every batch of the log from `start` (a batch's base offset; default the log
    start) below `end_offset` in `table` (and its transactions in `txns`), reading batch
    headers only (and markers' one record); returns the number of batches and bytes seen."""
    offset, seen, size = stream_log.log_start_offset if start is None else start, 0, 0
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
                size += end - position
                record_batch(table, header, header.base_offset)
                if txns is not None and header.is_transactional:
                    observe(txns, header, memoryview(buffer)[position:end])
                position = end
        if next_offset <= offset:
            break
        offset = next_offset
    return seen, size


# -- snapshots (kept by the log: StreamLog.save_state_snapshot) ----------------------------------
# Payload (big-endian): version u8 | producers u32, each: id i64, epoch i16, (version 3) time of
# its last batch i64 (ms), batches u8, each: first sequence i32, last sequence i32, base offset
# i64, (version 4) max timestamp i64 | open transactions u32, each: producer id i64, first offset i64 | aborted transactions
# u32, each: last offset i64, producer id i64, first offset i64 | (version 2) last markers u32,
# each: producer id i64, coordinator epoch i32, offset i64. Versions 1 (no markers), 2 (no
# times: their producers count as seen when the snapshot is read) and 3 (no batch timestamps:
# -1) are still read.
STATE_VERSION = 4
_READS = (1, 2, 3, 4)
_U8, _U32 = struct.Struct(">B"), struct.Struct(">I")
_PRODUCER = struct.Struct(">qhqB")
_PRODUCER_V2 = struct.Struct(">qhB")
_BATCH = struct.Struct(">iiqq")
_BATCH_V3 = struct.Struct(">iiq")
_OPEN = struct.Struct(">qq")
_ABORTED = struct.Struct(">qqq")
_MARKER = struct.Struct(">qiq")


def encode_state(table: ProducerStateTable, txns: StreamTxns) -> bytes:
    parts = [_U8.pack(STATE_VERSION), _U32.pack(len(table))]
    for producer_id, entry in table.entries():
        parts.append(_PRODUCER.pack(producer_id, entry.epoch, entry.last_ms, len(entry.batches)))
        parts.extend(_BATCH.pack(b.first_seq, b.last_seq, b.base_offset, b.max_timestamp) for b in entry.batches)
    parts.append(_U32.pack(len(txns.open)))
    parts.extend(_OPEN.pack(pid, first) for pid, first in sorted(txns.open.items()))
    parts.append(_U32.pack(len(txns.aborted)))
    parts.extend(_ABORTED.pack(a.last_offset, a.producer_id, a.first_offset) for a in txns.aborted)
    parts.append(_U32.pack(len(txns.markers)))
    parts.extend(_MARKER.pack(pid, m.coordinator_epoch, m.offset) for pid, m in sorted(txns.markers.items()))
    return b"".join(parts)


def decode_state(data: bytes, now_ms: int) -> tuple[ProducerStateTable, StreamTxns]:
    """The state `encode_state` wrote, its table's clock at `now_ms`; ValueError (or
    struct.error, a ValueError too) when the payload is not one this version reads."""
    view = memoryview(data)
    position = 0

    def take(layout: struct.Struct) -> tuple[int, ...]:
        nonlocal position
        values = layout.unpack_from(view, position)
        position += layout.size
        return values

    (version,) = take(_U8)
    if version not in _READS:
        raise ValueError(f"producer state version {version}, this node reads versions "
                         f"{', '.join(map(str, _READS))}")
    table = ProducerStateTable(now_ms)
    for _ in range(take(_U32)[0]):
        if version >= 3:
            producer_id, epoch, last_ms, count = take(_PRODUCER)
        else:
            (producer_id, epoch, count), last_ms = take(_PRODUCER_V2), now_ms
        entry = ProducerEntry(epoch, last_ms=last_ms)
        for _ in range(count):
            entry.batches.append(BatchMetadata(*take(_BATCH if version >= 4 else _BATCH_V3)))
        table._producers[producer_id] = entry
    txns = StreamTxns()
    for _ in range(take(_U32)[0]):
        producer_id, first = take(_OPEN)
        txns.open[producer_id] = first
    for _ in range(take(_U32)[0]):
        last, producer_id, first = take(_ABORTED)
        txns.aborted.append(AbortedTxn(last, producer_id, first))
    if version >= 2:
        for _ in range(take(_U32)[0]):
            producer_id, epoch, offset = take(_MARKER)
            txns.markers[producer_id] = LastMarker(epoch, offset)
    if position != len(view):
        raise ValueError(f"{len(view) - position} bytes after the producer state")
    return table, txns


@dataclass(frozen=True)
class Rebuilt:
    table: ProducerStateTable
    txns: StreamTxns
    snapshot_offset: int  # -1: no snapshot used, the whole log was read
    batches_replayed: int
    bytes_replayed: int = 0


def rebuild_producer_state(stream_log: StreamLog, end_offset: int, now_ms: int) -> Rebuilt:
    """The producer and transaction state of the log's batches below `end_offset`: the newest
    usable state snapshot at or below it, then the batches from there on (the whole log without
    one). The same state a replay of the whole log gives, except that an open or aborted
    transaction straddling the log start keeps its true first offset. Producers the snapshot
    does not time, and those of the batches replayed, count as seen at `now_ms`."""
    start = stream_log.log_start_offset
    table, txns, snapshot_offset = ProducerStateTable(now_ms), StreamTxns(), -1
    while (found := stream_log.latest_state_snapshot(end_offset)) is not None:
        offset, payload = found
        try:
            table, txns = decode_state(payload, now_ms)
        except (ValueError, struct.error) as error:
            log.warning("%s: state snapshot at %d unreadable (%s): deleted", stream_log.directory, offset, error)
            stream_log.discard_state_snapshot(offset)
            continue
        table.forget_batches_below(start)
        txns.forget_before(start)
        snapshot_offset = start = offset
        break
    seen, size = replay_producer_state(stream_log, table, end_offset, txns, start=start)
    return Rebuilt(table, txns, snapshot_offset, seen, size)

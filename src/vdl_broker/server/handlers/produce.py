"""Produce (key 0): validate each partition's batch whole, append, answer per acks.

acks 0: no response at all; 1: after the leader's durable local append; -1: after the commit by
a majority of the stream's replicas (a cluster of one: its own durable append). A partition's
data is all-or-nothing: a bad batch is rejected whole with the error naming the problem, and
nothing of it becomes visible. A leader on a node cut off from the cluster answers
NOT_LEADER_OR_FOLLOWER (the client asks Metadata and goes to the new leader).

Hot path: per batch only (CRC32C over the batch, a header parse, one copy for the base offset).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from vdl_broker.cluster.transactions import TxnState
from vdl_broker.server import internal
from vdl_broker.server.authorizer import Operation, ResourceType, authorized
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.handlers.metadata import current_leader, leader_endpoints
from vdl_broker.server.node_view import NodeView
from vdl_broker.server.partition import AppendHandle, Partition, PartitionError, RemotePartition
from vdl_broker.transactions.coordinator import error_of
from vdl_wire.errors import DecodeError, ErrorCode
from vdl_wire.messages import AddPartitionsToTxnRequest, ProduceRequest, ProduceResponse
from vdl_wire.primitives import Buffer
from vdl_wire.records.batch_header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    MAGIC_OFFSET,
    BatchHeader,
    parse_batch_header,
)
from vdl_wire.records.compression import Compression
from vdl_wire.records.conversion import message_set_to_batches
from vdl_wire.records.record_batch import (
    Record,
    RecordBatchBuilder,
    read_records,
    rewrite_batch,
    validate_batch,
)

if TYPE_CHECKING:
    from vdl_broker.metrics import BrokerMetrics
    from vdl_broker.raft.group import RaftGroup

API_KEY = ProduceRequest.DECL.api_key
NAME = "Produce"

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse

class Rejected(Exception):
    def __init__(self, code: ErrorCode, message: str,
                 record_errors: list[ProduceResponse.BatchIndexAndErrorMessage] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.record_errors = record_errors or []


def _check_header(header: BatchHeader, max_batch_bytes: int) -> None:
    if header.size > max_batch_bytes:
        raise Rejected(ErrorCode.MESSAGE_TOO_LARGE,
                       f"batch of {header.size} bytes exceeds the stream's max.message.bytes {max_batch_bytes}")
    if header.record_count <= 0 or header.last_offset_delta != header.record_count - 1:
        raise Rejected(ErrorCode.INVALID_RECORD,
                       f"batch offsets: {header.record_count} records but last offset delta "
                       f"{header.last_offset_delta}")
    if header.is_control:
        raise Rejected(ErrorCode.INVALID_RECORD, "clients cannot write control batches")
    if header.base_timestamp < -1 or (header.max_timestamp != -1 and header.max_timestamp < header.base_timestamp):
        raise Rejected(ErrorCode.INVALID_TIMESTAMP,
                       f"batch timestamps {header.base_timestamp}..{header.max_timestamp}")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise Rejected(ErrorCode.INVALID_RECORD, "an idempotent batch needs a base sequence")


def _java_long(value: int) -> int:
    """`value` as Java's long arithmetic leaves it (Kafka's message prints the bounds so)."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def _record_text(record: Record, header: BatchHeader) -> str:
    """A record as Kafka's validator prints it: the records of a compressed batch are read
    without their keys and values (PartialDefaultRecord: a null one is -1 bytes)."""
    if header.compression:
        key, value = (-1 if b is None else len(b) for b in (record.key, record.value))
        return f"PartialDefaultRecord(offset={record.offset}, timestamp={record.timestamp}, key={key} bytes, " \
               f"value={value} bytes)"
    key, value = (0 if b is None else len(b) for b in (record.key, record.value))
    return f"DefaultRecord(offset={record.offset}, timestamp={record.timestamp}, key={key} bytes, value={value} bytes)"


def check_timestamps(batches: list[tuple[BatchHeader, Buffer]], limits: tuple[int, int], now_ms: int,
                     log_append_time: bool = False) -> None:
    """KIP-937: on a CreateTime stream a record more than message.timestamp.before.max.ms before
    `now_ms` or message.timestamp.after.max.ms after it fails its whole batch with
    INVALID_TIMESTAMP, each such record named in record_errors by its index (# Kafka:
    LogValidator.validateTimestamp). The header's max timestamp settles the usual batch without
    reading its records. A batch its producer marked LogAppendTime (the timestamp-type bit) reads
    its max timestamp in every record: on a CreateTime stream that is checked so; on a
    LogAppendTime stream (`log_append_time`), or when it is -1, every record is refused: the
    producer should not set the type."""
    before, after = limits
    errors: list[ProduceResponse.BatchIndexAndErrorMessage] = []
    index = 0
    for header, batch in batches:
        marked = header.timestamp_type == 1
        refused = marked and (log_append_time or header.max_timestamp == -1)
        if not refused and (log_append_time or (header.max_timestamp - now_ms <= after and before > now_ms)):
            index += header.record_count
            continue
        try:
            records = list(read_records(batch))
        except DecodeError as error:
            raise Rejected(ErrorCode.CORRUPT_MESSAGE, str(error)) from None
        for record in records:
            timestamp = record.timestamp
            if refused:
                errors.append(ProduceResponse.BatchIndexAndErrorMessage(
                    batch_index=index, batch_index_error_message=(
                        f"Invalid timestamp type in message {_record_text(record, header)}. Producer should not "
                        f"set timestamp type to LogAppendTime.")))
            elif timestamp != -1 and (now_ms - timestamp > before or timestamp - now_ms > after):
                errors.append(ProduceResponse.BatchIndexAndErrorMessage(
                    batch_index=index, batch_index_error_message=(
                        f"Timestamp {timestamp} of message with offset {record.offset} is out of range. The "
                        f"timestamp should be within [{_java_long(now_ms - before)}, {_java_long(now_ms + after)}]")))
            index += 1
    if errors:
        raise Rejected(ErrorCode.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp",
                       errors)


def stored_batches(batches: list[tuple[BatchHeader, Buffer]], recompression: tuple[Compression, int | None] | None,
                   log_append_time: int | None, max_batch_bytes: int) -> list[tuple[BatchHeader, Buffer]]:
    """The batches as the stream stores them: recompressed to its compression.type and stamped
    with `log_append_time` (LogAppendTime) as they ask, or (None: CreateTime) stored as
    CreateTime when their producer marked them LogAppendTime, their max timestamp kept (# Kafka:
    LogValidator sets the stream's timestamp type on every batch); raises Rejected. A batch
    larger than max.message.bytes once recompressed is refused, as Kafka does."""
    codec, level = recompression if recompression is not None else (None, None)
    stored = []
    for header, batch in batches:
        try:
            rewritten = rewrite_batch(batch, header, codec, level=level, log_append_time=log_append_time,
                                      create_time=log_append_time is None)
        except DecodeError as error:
            raise Rejected(ErrorCode.CORRUPT_MESSAGE, str(error)) from None
        if rewritten is not batch:
            header = validate_batch(rewritten)
            if header.size > max_batch_bytes:
                raise Rejected(ErrorCode.MESSAGE_TOO_LARGE, f"batch of {header.size} bytes once recompressed exceeds "
                                                            f"the stream's max.message.bytes {max_batch_bytes}")
        stored.append((header, rewritten))
    return stored


def _renumber(batch: bytes) -> bytes:
    """Legacy message sets may carry arbitrary inner offsets; give the records 0..n-1."""
    header = validate_batch(batch)
    builder = RecordBatchBuilder(header.compression)
    for record in read_records(batch):
        builder.append(record.timestamp, record.key, record.value, record.headers)
    return builder.build()


def _one_buffer(records: bytes | bytearray | memoryview | Sequence[bytes | bytearray | memoryview] | None) -> Buffer | None:
    """A decoded request's records are one buffer; a list of buffers is the codec's form for
    records to encode, joined here should one ever arrive."""
    if records is None or isinstance(records, bytes | bytearray | memoryview):
        return records
    return b"".join(records)


def parse_batches(records: Buffer | None, version: int,
                  max_batch_bytes: int) -> list[tuple[BatchHeader, Buffer]]:
    """The batches of one partition's `records`, validated; raises Rejected."""
    if records is None or len(records) == 0:
        raise Rejected(ErrorCode.INVALID_RECORD, "no records")
    # Message sets (magic 0/1) keep their magic byte at the same position as RecordBatch v2.
    magic = records[MAGIC_OFFSET] if len(records) > MAGIC_OFFSET else -1
    try:
        if version < 3:
            # Produce v0-2 carry MessageSet magic 0/1: converted up, stored as v2 only.
            if magic not in (0, 1):
                raise Rejected(ErrorCode.INVALID_RECORD, f"produce v{version} needs magic 0 or 1, got {magic}")
            batches: list[tuple[BatchHeader, Buffer]] = []
            for converted in message_set_to_batches(records):
                header = validate_batch(converted)
                if header.last_offset_delta != header.record_count - 1:
                    converted = _renumber(converted)
                    header = validate_batch(converted)
                batches.append((header, converted))
        else:
            if magic != 2:
                raise Rejected(ErrorCode.INVALID_RECORD, f"produce v{version} needs RecordBatch v2, got magic {magic}")
            header = validate_batch(records)  # exactly one batch, CRC32C, sizes
            batches = [(header, records)]
    except DecodeError as error:
        # Kafka answers a batch that fails its CRC or does not parse with CORRUPT_MESSAGE.
        raise Rejected(ErrorCode.CORRUPT_MESSAGE, str(error)) from None
    if not batches:
        raise Rejected(ErrorCode.INVALID_RECORD, "no records")
    for header, _ in batches:
        _check_header(header, max_batch_bytes)
    return batches


def _count(metrics: BrokerMetrics, stream: str, batches: list[tuple[BatchHeader, Buffer]],
           handles: list[AppendHandle]) -> None:
    """Per batch stored (a retried duplicate is not stored again)."""
    size = records = 0
    for (header, _), handle in zip(batches, handles, strict=True):
        if not handle.duplicate:
            size += header.size
            records += header.record_count
    if records:
        metrics.produced(stream, size, records)


def _partition_error(index: int, code: ErrorCode,
                     message: str | None = None) -> ProduceResponse.PartitionProduceResponse:
    return PartitionResponse(index=index, error_code=int(code), base_offset=-1, log_append_time_ms=-1,
                             log_start_offset=-1, error_message=message)


# How long a stream leader waits for its copy of the cluster metadata to show a transaction's
# partitions (added on the metadata leader a moment before) before refusing the batch.
TXN_VISIBLE_WAIT_S = 2.0


def _in_transaction(node: NodeView, transactional_id: str | None, stream: str, header: BatchHeader) -> None:
    """KIP-890 part 1: a transactional batch is stored only for a partition added to its
    producer's ongoing transaction (the coordinator's state, replicated to every node); raises
    Rejected otherwise. A batch outside transactions must not claim to be in one."""
    if not header.is_transactional:
        return
    if transactional_id is None:
        raise Rejected(ErrorCode.INVALID_TXN_STATE, "a transactional batch without a transactional id")
    meta = node.metadata.state.transactions.get(transactional_id)
    if meta is None or meta.producer_id != header.producer_id:
        raise Rejected(ErrorCode.INVALID_TXN_STATE, f"producer {header.producer_id} has no transaction "
                                                    f"{transactional_id!r}")
    if header.producer_epoch < meta.epoch:
        raise Rejected(ErrorCode.INVALID_PRODUCER_EPOCH, f"producer epoch {header.producer_epoch} is fenced "
                                                         f"(current {meta.epoch})")
    if meta.state is not TxnState.ONGOING or meta.epoch != header.producer_epoch or stream not in meta.streams:
        raise Rejected(ErrorCode.INVALID_TXN_STATE, f"stream {stream} is not in an ongoing transaction of "
                                                    f"{transactional_id!r}")


async def _await_transaction(node: NodeView, request: ProduceRequest) -> None:
    """Let this node's metadata catch up with an AddPartitionsToTxn the client saw answered."""
    txn = request.transactional_id
    group = node.metadata.group
    if txn is None or group is None:
        return
    wanted = {topic.name for topic in request.topic_data}
    first = _first_transactional(request)

    def visible(metadata: RaftGroup) -> bool:
        meta = node.metadata.state.transactions.get(txn)
        if meta is not None and first is not None and meta.producer_id == first[0] and first[1] < meta.epoch:
            return True  # fenced (a timeout's or a new instance's bump): refused now, nothing to wait for
        if meta is not None and meta.state is TxnState.ONGOING and wanted <= set(meta.streams):
            return True
        # The metadata leader, its own term's entry committed and everything committed applied,
        # holds every AddPartitionsToTxn any coordinator answered (Raft's leader completeness):
        # a stream missing now was never added, so the batch is refused at once, as Kafka does.
        return metadata.leader_ready and metadata.applied_index >= metadata.commit_index

    await group.wait_for(visible, TXN_VISIBLE_WAIT_S)


# Produce v12 (KIP-890 part 2, ProduceRequest.json): a transaction.version 2 client sends no
# AddPartitionsToTxn; the stream leader asks the coordinator to add the partition when the
# transaction does not hold it yet. Older versions keep part 1's check (the partition must be added).
IMPLICIT_ADD_VERSION = 12
ADD_VERSION = 4  # the broker's AddPartitionsToTxn (batched), sent to the coordinator on another node
COORDINATOR_TIMEOUT_S = 15.0  # the coordinator may wait for the previous transaction's markers (10 s)
# Coordinator errors the producer retries: Kafka answers them as NOT_ENOUGH_REPLICAS to a produce
# (its ReplicaManager's mapping of AddPartitionsToTxn errors).
_RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS})


def _first_transactional(request: ProduceRequest) -> tuple[int, int] | None:
    """The producer id and epoch of the request's first transactional batch (None: none)."""
    for topic in request.topic_data:
        for data in topic.partition_data:
            records = _one_buffer(data.records)
            if records is None or len(records) <= MAGIC_OFFSET or records[MAGIC_OFFSET] != 2:
                continue
            try:
                header = parse_batch_header(records)
            except DecodeError:
                continue  # refused with its reason by the append path
            if header.is_transactional:
                return header.producer_id, header.producer_epoch
    return None


async def _ask_coordinator(node: NodeView, context: RequestContext, txn: str, producer_id: int, epoch: int,
                           streams: list[str]) -> ErrorCode:
    if node.transactions.active():
        return error_of(await node.transactions.add_partitions(txn, producer_id, epoch, streams))
    leader = node.metadata.leader_id
    if not leader or leader == node.node_id or context.forwarded:
        return ErrorCode.NOT_COORDINATOR
    request = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
        transactional_id=txn, producer_id=producer_id, producer_epoch=epoch, verify_only=False,
        topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=s, partitions=[0]) for s in streams])])
    try:
        # On behalf of the client's principal: the coordinator authorizes it as its own request.
        response = await internal.call(node, leader, request, ADD_VERSION, COORDINATOR_TIMEOUT_S, context)
    except (OSError, ValueError, TimeoutError):
        return ErrorCode.NOT_COORDINATOR
    if response.error_code:
        return ErrorCode(response.error_code)
    codes = [ErrorCode(p.partition_error_code) for t in response.results_by_transaction
             for r in t.topic_results for p in r.results_by_partition]
    return next((code for code in codes if code is not ErrorCode.NONE), ErrorCode.NONE)


async def _add_implicitly(node: NodeView, context: RequestContext, request: ProduceRequest) -> dict[str, ErrorCode]:
    """Produce v12: add the request's streams to its producer's transaction (on the coordinator)
    unless they are in it; the streams refused, with the error to answer."""
    txn = request.transactional_id
    first = _first_transactional(request)
    if txn is None or first is None:
        return {}
    producer_id, epoch = first
    known = node.metadata.state.streams
    wanted = sorted({t.name for t in request.topic_data if t.name in known
                     and authorized(node, context, Operation.WRITE, ResourceType.TOPIC, t.name)})
    meta = node.metadata.state.transactions.get(txn)
    if not wanted or (meta is not None and meta.state is TxnState.ONGOING
                      and (meta.producer_id, meta.epoch) == first and set(wanted) <= set(meta.streams)):
        return {}
    if meta is not None and meta.producer_id == producer_id and epoch < meta.epoch:
        return {}  # an older epoch: fenced by the append path's check, never added
    code = await _ask_coordinator(node, context, txn, producer_id, epoch, wanted)
    if code is ErrorCode.NONE:
        return {}
    if code in _RETRIABLE:
        code = ErrorCode.NOT_ENOUGH_REPLICAS
    elif code is ErrorCode.PRODUCER_FENCED:
        code = ErrorCode.INVALID_PRODUCER_EPOCH  # what a produce answers a fenced producer
    return dict.fromkeys(wanted, code)


def _ready(node: NodeView, request: ProduceRequest, version: int) -> bool:
    """True when the request's transactional batches may be appended now: the transaction is
    ongoing with every stream of the request (and, from v12, under the batches' epoch)."""
    txn = request.transactional_id
    meta = node.metadata.state.transactions.get(txn) if txn is not None else None
    if meta is None or meta.state is not TxnState.ONGOING:
        return False
    if version >= IMPLICIT_ADD_VERSION and _first_transactional(request) not in (None, (meta.producer_id, meta.epoch)):
        return False
    return {topic.name for topic in request.topic_data} <= set(meta.streams)


LEADER_HINT_VERSION = 10  # Produce v10 added CurrentLeader and NodeEndpoints (KIP-951)


async def handle(node: NodeView, context: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    response = await _answer(node, context, request)
    if response is not None and context.api_version >= LEADER_HINT_VERSION:
        add_leader_hints(node, context.protocol, response)
    return response


def add_leader_hints(node: NodeView, protocol: str, response: ProduceResponse) -> None:
    """Name the current leader (and its address on the client's listener) in every
    NOT_LEADER_OR_FOLLOWER partition answer, as Kafka 3.7+ does (KIP-951): the Java client and
    librdkafka then send the batch there at once instead of asking Metadata first."""
    leaders: set[int] = set()
    for topic in response.responses:
        for part in topic.partition_responses:
            if part.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                continue
            leader, epoch = current_leader(node, topic.name)
            if leader > 0:
                part.current_leader = ProduceResponse.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
                leaders.add(leader)
    if leaders:
        response.node_endpoints = [ProduceResponse.NodeEndpoint(node_id=b.node_id, host=b.host, port=b.port,
                                                                rack=b.rack)
                                   for b in leader_endpoints(node, protocol, leaders)]


async def _answer(node: NodeView, context: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    acks = request.acks
    version = context.api_version
    if acks not in (0, 1, -1):
        return error_response(request, version, ErrorCode.INVALID_REQUIRED_ACKS)
    txn = request.transactional_id
    if txn is None:
        return await _durable(request, await _append_in_order(node, context, request, version, {}))
    if not authorized(node, context, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, txn):
        return error_response(request, version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    chain = node.transactions.produce_chain
    if txn not in chain and _ready(node, request, version):
        return await _durable(request, await _append_in_order(node, context, request, version, {}))
    # This request waits (the coordinator adds its streams, or this node's metadata catches up):
    # the producer's later requests wait behind it, so its batches are appended in the order it
    # sent them (a client pipelines them: a later batch appended first is out of sequence).
    before = chain.get(txn)
    mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    chain[txn] = mine
    try:
        if before is not None:
            await before
        refused: dict[str, ErrorCode] = {}
        if version >= IMPLICIT_ADD_VERSION:
            refused = await _add_implicitly(node, context, request)
        if not refused:
            await _await_transaction(node, request)
        appended = await _append_in_order(node, context, request, version, refused)
    finally:
        mine.set_result(None)
        if chain.get(txn) is mine:
            del chain[txn]
    return await _durable(request, appended)


Appended = tuple[list[tuple[str, list[ProduceResponse.PartitionProduceResponse]]], dict[str, list[AppendHandle]]]
Prepared = Mapping[tuple[str, int], Buffer]  # (stream, partition index) -> its records recompressed


def _recompressed(records: Buffer, codec: Compression, level: int | None, max_batch_bytes: int) -> Buffer | None:
    """On a worker thread: `records` (one RecordBatch v2) recompressed, or None to leave it to
    the append (whose checks refuse it with their reason, or which has nothing to do)."""
    try:
        header = validate_batch(records)
        if header.size > max_batch_bytes or header.is_control:
            return None
        return rewrite_batch(records, header, codec, level=level)
    except DecodeError:
        return None


async def _append_in_order(node: NodeView, context: RequestContext, request: ProduceRequest, version: int,
                           refused: dict[str, ErrorCode]) -> Appended:
    """`_append`, with every batch that needs recompressing (compression.type) recompressed on
    a worker thread first: gzip of a 1 MB batch takes hundreds of ms, which the event loop must
    not spend. Each stream's produces still append in the order they started (a pipelining
    idempotent producer's sequences stay in order): a produce that waits for a worker, and any
    later one to the same stream, is queued on the stream (Partition.produce_queue). A request
    to streams whose batches need none of it pays two attribute reads per stream."""
    jobs: list[tuple[tuple[str, int], Buffer, Compression, int | None, int]] = []
    partitions: list[Partition | RemotePartition] = []
    queued = False
    for topic in request.topic_data:
        partition = node.replicas.get(topic.name)
        if partition is None:
            continue
        partitions.append(partition)
        queued = queued or partition.produce_queue is not None
        recompression = partition.recompression
        if (recompression is None or version < 3 or not partition.is_leader
                or not authorized(node, context, Operation.WRITE, ResourceType.TOPIC, topic.name)):
            continue  # v0-2's message sets are converted, then recompressed by the append
        limit = partition.max_message_bytes
        for data in topic.partition_data:
            records = _one_buffer(data.records)
            if (records is not None and len(records) > ATTRIBUTES_OFFSET + 1 and records[MAGIC_OFFSET] == 2
                    and records[ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK != recompression[0]):
                jobs.append(((topic.name, data.index), records, recompression[0], recompression[1],
                             node.config.max_batch_bytes if limit is None else limit))
    if not jobs and not queued:
        return _append(node, context, request, version, refused)
    loop = asyncio.get_running_loop()
    mine: asyncio.Future[None] = loop.create_future()
    before = [p.produce_queue for p in partitions if p.produce_queue is not None]
    for partition in partitions:
        partition.produce_queue = mine
    try:
        executor = node.recompress_executor()
        work = [loop.run_in_executor(executor, _recompressed, records, codec, level, limit)
                for _, records, codec, level, limit in jobs]
        done = await asyncio.gather(*work)
        for earlier in before:
            await earlier
        prepared = {key: out for (key, *_), out in zip(jobs, done, strict=True) if out is not None}
        return _append(node, context, request, version, refused, prepared)
    finally:
        mine.set_result(None)
        for partition in partitions:
            if partition.produce_queue is mine:
                partition.produce_queue = None


def _append(node: NodeView, context: RequestContext, request: ProduceRequest, version: int,
            refused: dict[str, ErrorCode], prepared: Prepared | None = None) -> Appended:
    results: list[tuple[str, list[ProduceResponse.PartitionProduceResponse]]] = []
    appended: dict[str, list[AppendHandle]] = {}
    # No node cut off from the cluster appends (server/cut_off.py): what it accepted could not
    # commit, and the client would wait out its timeout instead of going to the new leader. The
    # read lease is not asked for here: a lease that lapses and comes back within one producer's
    # window would refuse a batch and accept the next, and an idempotent producer unknown to the
    # leader (any first sequence is accepted, KIP-360) would then have its refused batch taken
    # for a duplicate when it is sent again: lost.
    cut_off = node.cut_off
    # Phase 1, synchronous: validate and append every partition's data (no await, so requests
    # on other connections cannot interleave inside one append).
    for topic in request.topic_data:
        responses: list[ProduceResponse.PartitionProduceResponse] = []
        results.append((topic.name, responses))
        if not authorized(node, context, Operation.WRITE, ResourceType.TOPIC, topic.name):
            responses += [_partition_error(d.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for d in topic.partition_data]
            continue
        for data in topic.partition_data:
            partition = node.replicas.get(topic.name)
            if partition is None or data.index != 0:
                responses.append(_partition_error(data.index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                  f"unknown stream {topic.name!r} partition {data.index}"))
                continue
            if topic.name in refused:
                responses.append(_partition_error(data.index, refused[topic.name],
                                                  f"the transaction coordinator refused to add {topic.name}"))
                continue
            if partition.is_leader and cut_off:
                responses.append(_partition_error(data.index, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                                  f"node {node.node_id} is cut off from the cluster"))
                continue
            if not partition.is_leader and not partition.closed:
                # Refused before its data is looked at, as Kafka does (ReplicaManager.appendToLocalLog):
                # a node without a replica checked timestamps against no settings and answered
                # INVALID_TIMESTAMP, which a producer does not retry -- the batch failed.
                refusal = partition.not_leader_error()
                responses.append(_partition_error(data.index, refusal.code, refusal.message or None))
                continue
            limit = partition.max_message_bytes
            max_batch_bytes = node.config.max_batch_bytes if limit is None else limit
            records = prepared.get((topic.name, data.index)) if prepared else None
            now_ms = int(time.time() * 1000)
            append_time = now_ms if partition.log_append_time else None
            try:
                batches = parse_batches(_one_buffer(data.records) if records is None else records, version,
                                        max_batch_bytes)
                check_timestamps(batches, partition.timestamp_limits, now_ms, append_time is not None)
                for header, _ in batches:
                    _in_transaction(node, request.transactional_id, topic.name, header)
                recompression = partition.recompression
                if (recompression is not None or append_time is not None
                        or any(header.timestamp_type for header, _ in batches)):
                    batches = stored_batches(batches, recompression, append_time, max_batch_bytes)
                handles = [partition.append(batch, header) for header, batch in batches]
            except Rejected as error:
                response = _partition_error(data.index, error.code, error.message)
                if error.record_errors:
                    response.record_errors = error.record_errors
                    response.log_start_offset = partition.log_start_offset
                responses.append(response)
                continue
            except PartitionError as error:
                responses.append(_partition_error(data.index, error.code, error.message or None))
                continue
            appended.setdefault(partition.name, []).extend(handles)
            if node.metrics is not None:
                _count(node.metrics, partition.name, batches, handles)
            # LogAppendTime: the time stamped on the batch; a retried duplicate's is its original's,
            # kept with the producer's state (# Kafka: UnifiedLog.append, BatchMetadata.timestamp).
            stamped = -1 if append_time is None else handles[0].max_timestamp
            responses.append(PartitionResponse(index=data.index, error_code=0, base_offset=handles[0].base_offset,
                                               log_append_time_ms=stamped, log_start_offset=partition.log_start_offset))
    return results, appended


async def _durable(request: ProduceRequest, done: Appended) -> ProduceResponse | None:
    results, appended = done
    acks = request.acks
    # Phase 2: durability, as acks asks. One group-commit sync covers all of this request's data.
    # It may fail: REQUEST_TIMED_OUT (not committed within the request's timeout) or
    # NOT_LEADER_OR_FOLLOWER (leadership lost meanwhile: the outcome is unknown).
    failed: dict[str, PartitionError] = {}
    for name, handles in appended.items():
        try:
            for handle in handles:
                await handle.wait(acks, request.timeout_ms)
        except PartitionError as error:
            failed[name] = error
    if acks == 0:
        return None
    for name, parts in results:
        failure = failed.get(name)
        if failure is not None:
            parts[:] = [_partition_error(part.index, failure.code, failure.message or None) if part.error_code == 0
                        else part for part in parts]
    return ProduceResponse(responses=[TopicResponse(name=name, partition_responses=parts) for name, parts in results])


def error_response(request: ProduceRequest, version: int, code: ErrorCode) -> ProduceResponse | None:
    if request.acks == 0:
        return None
    return ProduceResponse(responses=[
        TopicResponse(name=topic.name, partition_responses=[_partition_error(d.index, code)
                                                            for d in topic.partition_data])
        for topic in request.topic_data])

"""Produce (key 0): validate each partition's batch whole, append, answer per acks.

acks 0: no response at all; 1: after the leader's durable local append; -1: after the commit by
a majority of the stream's replicas (a cluster of one: its own durable append). A partition's
data is all-or-nothing: a bad batch is rejected whole with the error naming the problem, and
nothing of it becomes visible. A leader without its read lease, or on a node cut off from the
cluster, answers NOT_LEADER_OR_FOLLOWER (the client asks Metadata and goes to the new leader).

Hot path: per batch only (CRC32C over the batch, a header parse, one copy for the base offset).
"""

from __future__ import annotations

from collections.abc import Sequence

from vdl_broker.metrics import BrokerMetrics
from vdl_broker.server.authorizer import Operation, ResourceType, authorized
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_broker.server.partition import AppendHandle, PartitionError, await_read_lease
from vdl_wire.errors import DecodeError, ErrorCode
from vdl_wire.messages import ProduceRequest, ProduceResponse
from vdl_wire.primitives import Buffer
from vdl_wire.records.batch_header import MAGIC_OFFSET, BatchHeader
from vdl_wire.records.conversion import message_set_to_batches
from vdl_wire.records.record_batch import RecordBatchBuilder, read_records, validate_batch

API_KEY = ProduceRequest.DECL.api_key
NAME = "Produce"

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse

class Rejected(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


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
    if header.is_transactional:
        raise Rejected(ErrorCode.INVALID_TXN_STATE, "VDL does not support transactions")
    if header.base_timestamp < -1 or (header.max_timestamp != -1 and header.max_timestamp < header.base_timestamp):
        raise Rejected(ErrorCode.INVALID_TIMESTAMP,
                       f"batch timestamps {header.base_timestamp}..{header.max_timestamp}")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise Rejected(ErrorCode.INVALID_RECORD, "an idempotent batch needs a base sequence")


def _renumber(batch: bytes) -> bytes:
    """Legacy message sets may carry arbitrary inner offsets; give the records 0..n-1."""
    header = validate_batch(batch)
    builder = RecordBatchBuilder(header.compression)
    for record in read_records(batch):
        builder.append(record.timestamp, record.key, record.value, record.headers)
    return builder.build()


def _one_buffer(records: bytes | memoryview | Sequence[bytes | memoryview] | None) -> Buffer | None:
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


async def handle(node: NodeView, context: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    acks = request.acks
    version = context.api_version
    if acks not in (0, 1, -1):
        return error_response(request, version, ErrorCode.INVALID_REQUIRED_ACKS)
    results: list[tuple[str, list[ProduceResponse.PartitionProduceResponse]]] = []
    appended: dict[str, list[AppendHandle]] = {}
    # A leader answers only under its read lease, and no node cut off from the cluster does
    # (server/cut_off.py): what it accepted could not commit, and the client would wait out its
    # timeout instead of going to the new leader. A lease just taken comes back within a beat.
    await await_read_lease([p for p in (node.replicas.get(t.name) for t in request.topic_data) if p is not None])
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
            if partition.is_leader and (cut_off or not partition.serves_reads):
                responses.append(_partition_error(data.index, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                                  f"node {node.node_id} is cut off from the cluster" if cut_off
                                                  else f"node {node.node_id} lost its lease on {topic.name}"))
                continue
            limit = partition.max_message_bytes
            try:
                batches = parse_batches(_one_buffer(data.records), version,
                                        node.config.max_batch_bytes if limit is None else limit)
                handles = [partition.append(batch, header) for header, batch in batches]
            except Rejected as error:
                responses.append(_partition_error(data.index, error.code, error.message))
                continue
            except PartitionError as error:
                responses.append(_partition_error(data.index, error.code, error.message or None))
                continue
            appended.setdefault(partition.name, []).extend(handles)
            if node.metrics is not None:
                _count(node.metrics, partition.name, batches, handles)
            responses.append(PartitionResponse(index=data.index, error_code=0, base_offset=handles[0].base_offset,
                                               log_append_time_ms=-1, log_start_offset=partition.log_start_offset))
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

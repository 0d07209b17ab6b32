"""ListOffsets (key 2): earliest (-2), latest (-1, the high watermark), the record with the
largest timestamp (-3, KIP-734), or by timestamp: the first record (in offset order) whose
timestamp is at or after the one asked for, with its timestamp, as Kafka answers it (the log's
time index finds the batch; its records are read to find the record). Nothing at or above the
high watermark is ever answered.

Tiered storage's sentinels are answered as by a Kafka broker without it: earliest local (-4) is
the log start, latest tiered (-5) and earliest pending upload (-6) have no offset (-1). Each
sentinel needs the version that introduced it (Kafka: UNSUPPORTED_VERSION otherwise).

A v4+ current_leader_epoch older than the replica's (the stream's Raft term) is answered
FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH (KIP-320); -1 is not checked."""

from __future__ import annotations

from vdl_broker.log import DamagedEntry
from vdl_broker.server.authorizer import Operation, ResourceType, authorized
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_broker.server.partition import NO_LEADER_EPOCH, Partition, await_read_lease, leader_epoch_error
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import ListOffsetsRequest, ListOffsetsResponse
from vdl_wire.records.record_batch import iter_batches, read_records

API_KEY = ListOffsetsRequest.DECL.api_key
NAME = "ListOffsets"

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
# The first ListOffsets version each sentinel exists in (# message defs: ListOffsetsRequest.json).
SENTINEL_VERSIONS = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
                     EARLIEST_PENDING_UPLOAD: 11}
TopicResponse = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse


def _lookup(node: NodeView, name: str, index: int, timestamp: int, version: int,
            read_committed: bool = False, current_leader_epoch: int = NO_LEADER_EPOCH) -> tuple[ErrorCode, int, int]:
    partition = node.replicas.get(name)
    if partition is None or index != 0:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
    if timestamp < 0 and SENTINEL_VERSIONS.get(timestamp, version + 1) > version:
        return ErrorCode.UNSUPPORTED_VERSION if timestamp in SENTINEL_VERSIONS else ErrorCode.INVALID_REQUEST, -1, -1
    # v4+ (KIP-320): the client's leader epoch is checked before leadership, as Kafka's
    # Partition.fetchOffsetForTimestamp does.
    fenced = leader_epoch_error(current_leader_epoch, partition.leader_epoch)
    if fenced is not ErrorCode.NONE:
        return fenced, -1, -1
    # Led elsewhere (a RemotePartition), or a leader without its read lease.
    if not isinstance(partition, Partition) or not partition.serves_reads:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1
    # read_committed (v2+ isolation_level 1) sees the log up to the last stable offset (KIP-98).
    high_watermark = partition.last_stable_offset if read_committed else partition.high_watermark
    if timestamp == LATEST:
        return ErrorCode.NONE, high_watermark, -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return ErrorCode.NONE, partition.log_start_offset, -1
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return ErrorCode.NONE, -1, -1
    found = (partition.log.max_timestamp_batch() if timestamp == MAX_TIMESTAMP
             else partition.log.offset_for_timestamp(timestamp))
    if found is None or found[0] >= high_watermark:
        return ErrorCode.NONE, -1, -1  # Kafka: no such record -> offset -1, timestamp -1
    offset = max(found[0], partition.log_start_offset)
    wanted = found[1] if timestamp == MAX_TIMESTAMP else timestamp
    record_offset, record_timestamp = _first_record_at(partition, offset, wanted, high_watermark, found[1])
    if record_offset >= high_watermark:
        return ErrorCode.NONE, -1, -1
    return ErrorCode.NONE, record_offset, record_timestamp


def _first_record_at(partition: Partition, batch_offset: int, timestamp: int, high_watermark: int,
                     batch_max_timestamp: int) -> tuple[int, int]:
    """(offset, timestamp) of the first record of the batch at `batch_offset` (from that offset
    on) whose timestamp is >= `timestamp`. The batch's max timestamp is, so one is there unless
    the producer's max timestamp overstated its records': then the batch itself answers."""
    read = partition.log.read(batch_offset, 1, high_watermark)
    data = b"".join(bytes(buffer) for buffer in read.buffers)
    for _, batch in iter_batches(data):
        for record in read_records(batch):
            if record.offset >= batch_offset and record.timestamp >= timestamp:
                return record.offset, record.timestamp
        break
    return batch_offset, batch_max_timestamp


async def handle(node: NodeView, context: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    version = context.api_version
    await await_read_lease([p for p in (node.replicas.get(t.name) for t in request.topics) if p is not None])
    read_committed = version >= 2 and request.isolation_level == 1
    topics = []
    for topic in request.topics:
        partitions = []
        # DESCRIBE, as Kafka's KafkaApis.handleListOffsetRequest: lag monitors read offsets, not records.
        allowed = authorized(node, context, Operation.DESCRIBE, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            try:
                code, offset, timestamp = (_lookup(node, topic.name, p.partition_index, p.timestamp, version,
                                                   read_committed, p.current_leader_epoch) if allowed
                                           else (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1))
                # Kafka: the latest epoch for the latest offset, else the epoch of the offset's
                # batch (a consumer reset there validates its position with this epoch: KIP-320)
                partition = node.replicas.get(topic.name)
                epoch = -1
                if offset >= 0 and isinstance(partition, Partition):
                    epoch = partition.leader_epoch if p.timestamp == LATEST else partition.epoch_at(offset)
            except DamagedEntry:  # as Fetch: the replica stopped to have its log checked again
                code, offset, timestamp, epoch = ErrorCode.KAFKA_STORAGE_ERROR, -1, -1, -1
            partitions.append(PartitionResponse(
                partition_index=p.partition_index, error_code=int(code),
                # v0 answers a list of offsets ("old style"); v1+ one offset and its timestamp.
                old_style_offsets=[offset] if version == 0 and offset >= 0 else [],
                timestamp=timestamp, offset=offset, leader_epoch=epoch))
        topics.append(TopicResponse(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(topics=topics)


def error_response(request: ListOffsetsRequest, version: int, code: ErrorCode) -> ListOffsetsResponse:
    return ListOffsetsResponse(topics=[TopicResponse(name=t.name, partitions=[
        PartitionResponse(partition_index=p.partition_index, error_code=int(code)) for p in t.partitions])
        for t in request.topics])

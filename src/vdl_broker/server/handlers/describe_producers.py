"""DescribeProducers (key 61): a stream's active producers (KIP-664), at any of its replicas, as
Kafka's Partition.activeProducerState answers wherever the log is (kafka-transactions
find-hanging --broker-id N asks node N about every replica it holds): producer id, epoch, last
sequence, the max timestamp of its last batch (as Kafka's ProducerStateEntry.lastTimestamp), and
the first offset of its open transaction (-1: none), from the committed batches every replica
applies (a follower's view may lag its leader's by a heartbeat). A node without a replica answers
NOT_LEADER_OR_FOLLOWER. READ on the stream.

A VDL client may name the producers it asks about (the request's `vdl_producer_ids`, a tagged
field of VDL's own): the answer then holds only those the stream knows, however many producers
it remembers (the Spark sink's exactly-once writers leave one per task and micro-batch)."""

from __future__ import annotations

from vdl_broker.server.authorizer import Operation, ResourceType, authorized
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_broker.server.partition import Partition
from vdl_broker.server.producer_state import BatchMetadata
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import DescribeProducersRequest, DescribeProducersResponse
from vdl_wire.records.batch_header import parse_batch_header

API_KEY = DescribeProducersRequest.DECL.api_key
NAME = "DescribeProducers"
R = DescribeProducersResponse


def _last_timestamp(partition: Partition, batch: BatchMetadata) -> int:
    """The max timestamp of the producer's last batch (find-hanging compares it with its
    transaction timeout): the one the table booked from the stored batch, which every replica
    applied from the same bytes; read from the log only for a batch booked from a snapshot
    written before the table kept it."""
    if batch.max_timestamp != -1:
        return batch.max_timestamp
    high_watermark = partition.high_watermark
    if not partition.log_start_offset <= batch.base_offset < high_watermark:
        return -1
    read = partition.log.read(batch.base_offset, 1, high_watermark)
    if not read.buffers:
        return -1
    header = parse_batch_header(read.buffers[0])
    return header.max_timestamp if header.base_offset == batch.base_offset else -1


def _partition(node: NodeView, context: RequestContext, name: str, index: int,
               only: list[int] | None) -> R.PartitionResponse:
    def refused(code: ErrorCode) -> R.PartitionResponse:
        return R.PartitionResponse(partition_index=index, error_code=int(code), active_producers=[])

    if not authorized(node, context, Operation.READ, ResourceType.TOPIC, name):
        return refused(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    partition = node.replicas.get(name)
    if partition is None or index != 0:
        return refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if not isinstance(partition, Partition):
        return refused(ErrorCode.NOT_LEADER_OR_FOLLOWER)  # no replica here
    table = partition.producers
    wanted = table.producer_ids() if only is None else [p for p in set(only) if p in table]
    producers = []
    for producer_id in sorted(wanted):
        batches = table.last_batches(producer_id)
        marker = partition.txns.markers.get(producer_id)  # its last marker's (server/txn_index.py)
        producers.append(R.ProducerState(
            producer_id=producer_id, producer_epoch=table.epoch_of(producer_id),
            last_sequence=batches[-1].last_seq if batches else -1,
            last_timestamp=_last_timestamp(partition, batches[-1]) if batches else -1,
            coordinator_epoch=marker.coordinator_epoch if marker is not None else -1,
            current_txn_start_offset=partition.txns.open.get(producer_id, -1)))
    return R.PartitionResponse(partition_index=index, error_code=0, active_producers=producers)


def handle(node: NodeView, context: RequestContext, request: DescribeProducersRequest) -> DescribeProducersResponse:
    return R(topics=[R.TopicResponse(name=t.name, partitions=[
        _partition(node, context, t.name, p, request.vdl_producer_ids) for p in t.partition_indexes])
        for t in request.topics])


def error_response(request: DescribeProducersRequest, version: int, code: ErrorCode) -> DescribeProducersResponse:
    return R(topics=[R.TopicResponse(name=t.name, partitions=[
        R.PartitionResponse(partition_index=p, error_code=int(code), active_producers=[])
        for p in t.partition_indexes]) for t in request.topics])

"""DescribeTopicPartitions (key 75, KIP-966): Metadata's description of streams (one partition
each: its leader, leader epoch, replicas and ISR, from `metadata.partition_view`), paged as Kafka's
broker pages it (DescribeTopicPartitionsRequestHandler, KRaftMetadataCache
.getTopicMetadataForDescribeTopicResponse): topics in name order from the cursor's, at most
ResponsePartitionLimit partitions (capped at Kafka's max.request.partition.size.limit, 2000, and
at least 1), and NextCursor naming the first topic left out.

An empty topic list asks for every stream: those the principal may not DESCRIBE are left out;
named ones are answered TOPIC_AUTHORIZATION_FAILED (after the others, with no topic id), unknown
ones UNKNOWN_TOPIC_OR_PARTITION. A cursor whose topic is not among those named, or whose partition
is negative, is INVALID_REQUEST. VDL has no eligible leader replicas (KIP-966's ELR: a Raft
majority elects a leader, never an unclean election), so both ELR lists are empty, as Kafka's are
for a partition whose ISR never shrank below min.insync.replicas."""

from __future__ import annotations

from vdl_broker.cluster import topic_ids
from vdl_broker.cluster.metadata import validate_stream_name
from vdl_broker.server.authorizer import Operation, ResourceType, authorized, authorized_operations
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.handlers.metadata import VIEW_REFRESH_S, partition_view
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse
from vdl_wire.messages.describe_topic_partitions import DEFAULT_PARTITION_LIMIT

API_KEY = DescribeTopicPartitionsRequest.DECL.api_key
NAME = "DescribeTopicPartitions"

Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
Partition = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition
Cursor = DescribeTopicPartitionsResponse.Cursor


def _partitions(node: NodeView, name: str, first: int) -> list[DescribeTopicPartitionsResponse
                                                                .DescribeTopicPartitionsResponsePartition]:
    """The stream's partitions from index `first`: its one partition, or none past it. Kafka sets
    no partition error here, even without a leader (Metadata says LEADER_NOT_AVAILABLE)."""
    if first > 0:
        return []
    view = partition_view(node, name, node.cut_off)
    return [Partition(error_code=0, partition_index=0, leader_id=view.leader, leader_epoch=view.leader_epoch,
                      replica_nodes=view.replicas, isr_nodes=view.isr, eligible_leader_replicas=[],
                      last_known_elr=[], offline_replicas=[])]


async def handle(node: NodeView, context: RequestContext,
                 request: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    streams = node.metadata.state.streams
    every = not request.topics
    cursor = request.cursor
    start = cursor.topic_name if cursor is not None else ""
    asked = streams if every else {topic.name for topic in request.topics}
    names = sorted(name for name in asked if name >= start)
    if cursor is not None and ((not every and cursor.topic_name not in names) or cursor.partition_index < 0):
        return error_response(request, context.api_version, ErrorCode.INVALID_REQUEST)
    if not node.cut_off:
        await node.replicas.refresh_stale_views([name for name in names if name in streams], VIEW_REFRESH_S)
    streams = node.metadata.state.streams
    limit = max(min(DEFAULT_PARTITION_LIMIT, request.response_partition_limit), 1)
    topics: list[DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic] = []
    denied: list[DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic] = []
    next_cursor = None
    for name in names:
        # Kafka checks DESCRIBE lazily, as its walk reaches each topic: a named topic past the
        # page's end is neither described nor refused.
        if not authorized(node, context, Operation.DESCRIBE, ResourceType.TOPIC, name):
            if not every:
                denied.append(Topic(error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), name=name,
                                    topic_id=topic_ids.ZERO, partitions=[]))
            continue
        if limit == 0:
            next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        if name in streams:
            first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
            partitions = _partitions(node, name, first)
            topics.append(Topic(error_code=0, name=name, topic_id=node.metadata.state.topic_id(name),
                                is_internal=False, partitions=partitions,
                                topic_authorized_operations=_operations(node, context, name)))
            # One partition a stream: a page never ends inside a topic.
            limit -= len(partitions)
        elif not every:
            topics.append(Topic(error_code=int(_unknown_error(node, name)), name=name, topic_id=topic_ids.ZERO,
                                partitions=[], topic_authorized_operations=_operations(node, context, name)))
    return DescribeTopicPartitionsResponse(topics=topics + denied, next_cursor=next_cursor)


def _operations(node: NodeView, context: RequestContext, name: str) -> int:
    """Kafka answers every topic it walked with the principal's operations on it (KIP-430), the
    request cannot leave them out; refused topics keep the "not asked" default."""
    return authorized_operations(node, context, ResourceType.TOPIC, name)


def _unknown_error(node: NodeView, name: str) -> ErrorCode:
    if validate_stream_name(name) is not None:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    if node.replicas.registry.catching_up:
        # As Metadata: a node whose data directory was lost does not know every stream yet.
        return ErrorCode.LEADER_NOT_AVAILABLE
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def error_response(request: DescribeTopicPartitionsRequest, version: int,
                   code: ErrorCode) -> DescribeTopicPartitionsResponse:
    """Kafka's DescribeTopicPartitionsRequest.getErrorResponse: every named topic with the error."""
    return DescribeTopicPartitionsResponse(topics=[Topic(error_code=int(code), name=topic.name, partitions=[])
                                                   for topic in request.topics])

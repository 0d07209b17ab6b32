"""OffsetForLeaderEpoch (key 23, KIP-101/KIP-320): where a leader epoch ends in the leader's
log. A stream's leader epoch is its Raft term (batches carry it, Metadata reports it), so the
end of an older epoch is where the first entry of a later term begins: a consumer whose last
records came from that epoch and whose position lies beyond that end knows the log it read was
truncated by a leader change (Partition.end_offset_for_epoch).

As a Kafka broker answers: a current leader epoch older than this replica's is
FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH (the client refreshes its metadata);
then only the leader answers (NOT_LEADER_OR_FOLLOWER elsewhere). A client (replica id -1, or -2
before v3) needs DESCRIBE on the stream; a replica id >= 0 is a Kafka follower, which needs
CLUSTER_ACTION on the cluster."""

from __future__ import annotations

from vdl_broker.log import DamagedEntry
from vdl_broker.server.authorizer import Operation, ResourceType, authorized, authorized_cluster
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_broker.server.partition import NO_LEADER_EPOCH, Partition, await_read_lease, leader_epoch_error
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

API_KEY = OffsetForLeaderEpochRequest.DECL.api_key
NAME = "OffsetForLeaderEpoch"

TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = OffsetForLeaderEpochResponse.EpochEndOffset


def _answer(node: NodeView, name: str, p: OffsetForLeaderEpochRequest.OffsetForLeaderPartition,
            version: int) -> EpochEndOffset:
    def failed(code: ErrorCode) -> EpochEndOffset:
        return EpochEndOffset(error_code=int(code), partition=p.partition)

    partition = node.replicas.get(name)
    if partition is None or p.partition != 0:
        return failed(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    fenced = leader_epoch_error(p.current_leader_epoch if version >= 2 else NO_LEADER_EPOCH, partition.leader_epoch)
    if fenced is not ErrorCode.NONE:
        return failed(fenced)
    # Led elsewhere (a RemotePartition), or a leader without its read lease.
    if not isinstance(partition, Partition) or not partition.serves_reads:
        return failed(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    try:
        epoch, end_offset = partition.end_offset_for_epoch(p.leader_epoch)
    except DamagedEntry:  # as Fetch: the replica stopped to have its log checked again
        return failed(ErrorCode.KAFKA_STORAGE_ERROR)
    return EpochEndOffset(error_code=0, partition=p.partition, leader_epoch=epoch, end_offset=end_offset)


async def handle(node: NodeView, context: RequestContext,
                 request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    version = context.api_version
    follower = version >= 3 and request.replica_id >= 0
    if follower and not authorized_cluster(node, context, Operation.CLUSTER_ACTION):
        return error_response(request, version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    await await_read_lease([p for p in (node.replicas.get(t.topic) for t in request.topics) if p is not None])
    topics = []
    for topic in request.topics:
        if follower or authorized(node, context, Operation.DESCRIBE, ResourceType.TOPIC, topic.topic):
            partitions = [_answer(node, topic.topic, p, version) for p in topic.partitions]
        else:
            partitions = [EpochEndOffset(error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), partition=p.partition)
                          for p in topic.partitions]
        topics.append(TopicResult(topic=topic.topic, partitions=partitions))
    return OffsetForLeaderEpochResponse(topics=topics)


def error_response(request: OffsetForLeaderEpochRequest, version: int,
                   code: ErrorCode) -> OffsetForLeaderEpochResponse:
    return OffsetForLeaderEpochResponse(topics=[TopicResult(topic=t.topic, partitions=[
        EpochEndOffset(error_code=int(code), partition=p.partition) for p in t.partitions]) for t in request.topics])

"""OffsetCommit (key 8): stores a group's offsets in the cluster metadata (replicated, so they
survive any node and a change of coordinator). Members commit in their current generation;
a commit with no generation to a group without members is a standalone commit, as in Kafka.
Every stream has one partition: any other partition index is UNKNOWN_TOPIC_OR_PARTITION."""

from __future__ import annotations

from collections.abc import Callable

from vdl_broker.groups.service import OffsetToCommit
from vdl_broker.server.authorizer import (
    Operation,
    ResourceType,
    authorized,
    authorized_group,
)
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import OffsetCommitRequest, OffsetCommitResponse

API_KEY = OffsetCommitRequest.DECL.api_key
NAME = "OffsetCommit"
MEMBER_EPOCH_VERSION = 9  # KIP-848: the first version members of a consumer group commit with


async def handle(node: NodeView, context: RequestContext,
                 request: OffsetCommitRequest) -> OffsetCommitResponse:
    if not request.group_id:
        return _response(request, lambda stream, partition: ErrorCode.INVALID_GROUP_ID)
    if not authorized_group(node, context, Operation.READ, request.group_id):
        return _response(request, lambda stream, partition: ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if node.groups.active() is None:
        return _response(request, lambda stream, partition: ErrorCode.NOT_COORDINATOR)
    denied = {t.name for t in request.topics if not authorized(node, context, Operation.READ, ResourceType.TOPIC,
                                                                t.name)}
    offsets = [OffsetToCommit(topic.name, p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
               for topic in request.topics for p in topic.partitions
               if p.partition_index == 0 and topic.name not in denied]
    # v0 has no generation: it is always a standalone commit (Kafka: generation -1, no member).
    generation = request.generation_id_or_member_epoch if context.api_version >= 1 else -1
    results = await node.groups.commit(request.group_id, generation, request.member_id or "", offsets,
                                       version_with_epoch=context.api_version >= MEMBER_EPOCH_VERSION,
                                       instance_id=request.group_instance_id)

    def code(stream: str, partition: int) -> ErrorCode:
        if stream in denied:
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return results.get(stream, ErrorCode.NONE) if partition == 0 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    return _response(request, code)


def _response(request: OffsetCommitRequest, code: Callable[[str, int], ErrorCode]) -> OffsetCommitResponse:
    topics = [OffsetCommitResponse.OffsetCommitResponseTopic(
        name=topic.name,
        partitions=[OffsetCommitResponse.OffsetCommitResponsePartition(
            partition_index=p.partition_index, error_code=int(code(topic.name, p.partition_index)))
            for p in topic.partitions])
        for topic in request.topics]
    return OffsetCommitResponse(topics=topics)


def error_response(request: OffsetCommitRequest, version: int, code: ErrorCode) -> OffsetCommitResponse:
    return _response(request, lambda stream, partition: code)

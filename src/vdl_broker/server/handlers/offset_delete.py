"""OffsetDelete (key 47, KIP-496): removes a group's committed offsets of some streams. Allowed
for a group without members, and for a consumer group's streams none of its members
subscribes to (GROUP_SUBSCRIBED_TO_TOPIC otherwise), classic or KIP-848."""

from __future__ import annotations

from vdl_broker.server.authorizer import (
    Operation,
    ResourceType,
    authorized,
    authorized_group,
)
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.consumer_protocol import subscribed_topics
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import OffsetDeleteRequest, OffsetDeleteResponse

API_KEY = OffsetDeleteRequest.DECL.api_key
NAME = "OffsetDelete"

Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
Partition = OffsetDeleteResponse.OffsetDeleteResponsePartition


async def handle(node: NodeView, context: RequestContext,
                 request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    if not request.group_id:
        return error_response(request, 0, ErrorCode.INVALID_GROUP_ID)
    if not authorized_group(node, context, Operation.DELETE, request.group_id):
        return error_response(request, 0, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coordinator = node.groups.active()
    if coordinator is None:
        return error_response(request, 0, ErrorCode.NOT_COORDINATOR)
    if not node.groups.known(request.group_id):
        return error_response(request, 0, ErrorCode.GROUP_ID_NOT_FOUND)
    group = coordinator.group(request.group_id)
    subscribed: set[str] = set()
    if group is not None and group.members:
        for member in group.members.values():
            topics = subscribed_topics(group.protocol_type, member.metadata_for(group.protocol_name or ""))
            if topics is None:
                # Not a consumer group: whose offsets are in use cannot be told.
                return error_response(request, 0, ErrorCode.NON_EMPTY_GROUP)
            subscribed |= topics
    consumer_group = node.groups.consumer_groups.group(request.group_id)
    if consumer_group is not None:
        # A KIP-848 group's subscriptions are the members' own (a regex's as resolved), as Kafka's
        # ConsumerGroup.isSubscribedToTopic reads them.
        subscribed |= {stream for member in consumer_group.members.values() for stream in member.subscribed}
    codes: dict[tuple[str, int], ErrorCode] = {}
    deletable = []
    for topic in request.topics:
        for p in topic.partitions:
            if not authorized(node, context, Operation.READ, ResourceType.TOPIC, topic.name):
                codes[topic.name, p.partition_index] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif p.partition_index != 0 or topic.name not in node.metadata.state.streams:
                codes[topic.name, p.partition_index] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif topic.name in subscribed:
                codes[topic.name, p.partition_index] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                deletable.append(topic.name)
    code = await node.groups.delete_offsets(request.group_id, deletable) if deletable else ErrorCode.NONE
    if code is not ErrorCode.NONE:
        return error_response(request, 0, code)
    return OffsetDeleteResponse(error_code=0, topics=[Topic(name=topic.name, partitions=[
        Partition(partition_index=p.partition_index,
                  error_code=int(codes.get((topic.name, p.partition_index), ErrorCode.NONE)))
        for p in topic.partitions]) for topic in request.topics])


def error_response(request: OffsetDeleteRequest, version: int, code: ErrorCode) -> OffsetDeleteResponse:
    return OffsetDeleteResponse(error_code=int(code))

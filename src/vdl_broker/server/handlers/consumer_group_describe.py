"""ConsumerGroupDescribe (key 69): a KIP-848 group's state, epochs, assignor and members with
their current and target assignments; one whose members all left is Empty while it has offsets.
A classic group -- also one known only by offsets committed without a generation -- or no group
at all is GROUP_ID_NOT_FOUND, as Kafka's GroupMetadataManager.consumerGroupDescribe answers (its
admin client then asks DescribeGroups)."""

from __future__ import annotations

from vdl_broker.server.authorizer import Operation, ResourceType, authorized_group, authorized_operations
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse

API_KEY = ConsumerGroupDescribeRequest.DECL.api_key
NAME = "ConsumerGroupDescribe"

Described = ConsumerGroupDescribeResponse.DescribedGroup
Member = ConsumerGroupDescribeResponse.Member
Assignment = ConsumerGroupDescribeResponse.Assignment
TopicPartitions = ConsumerGroupDescribeResponse.TopicPartitions
CONSUMER_MEMBER_TYPE = 1  # KIP-1099: 0 classic, 1 consumer


def handle(node: NodeView, context: RequestContext,
           request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    if node.groups.active() is None:
        return error_response(request, context.api_version, ErrorCode.NOT_COORDINATOR)
    described = [_describe(node, context, group_id) for group_id in request.group_ids]
    if request.include_authorized_operations:  # KIP-430, for every group the principal may describe
        for answer in described:
            if answer.error_code not in (ErrorCode.INVALID_GROUP_ID, ErrorCode.GROUP_AUTHORIZATION_FAILED):
                answer.authorized_operations = authorized_operations(node, context, ResourceType.GROUP,
                                                                     answer.group_id)
    return ConsumerGroupDescribeResponse(groups=described)


def _describe(node: NodeView, context: RequestContext, group_id: str) -> Described:
    if not group_id:
        return Described(error_code=int(ErrorCode.INVALID_GROUP_ID), group_id=group_id)
    if not authorized_group(node, context, Operation.DESCRIBE, group_id):
        return Described(error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED), group_id=group_id)
    group = node.groups.consumer_group(group_id)
    if group is None:
        return Described(error_code=int(ErrorCode.GROUP_ID_NOT_FOUND), group_id=group_id,
                         error_message=f"Group {group_id} is not a consumer group." if node.groups.known(group_id)
                         else f"Group {group_id} not found.")
    state = node.metadata.state

    def assignment(streams: frozenset[str]) -> Assignment:
        return Assignment(topic_partitions=[TopicPartitions(topic_id=state.topic_id(name), topic_name=name,
                                                            partitions=[0]) for name in sorted(streams)])

    members = [Member(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.epoch,
                      client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=list(m.subscribed),
                      subscribed_topic_regex=m.regex,
                      assignment=assignment(m.owned), target_assignment=assignment(group.target.get(m.member_id,
                                                                                                     frozenset())),
                      member_type=CONSUMER_MEMBER_TYPE)
               for m in group.members.values()]
    return Described(error_code=0, group_id=group_id, group_state=group.state.value, group_epoch=group.group_epoch,
                     assignment_epoch=group.assignment_epoch, assignor_name=group.assignor, members=members)


def error_response(request: ConsumerGroupDescribeRequest, version: int,
                   code: ErrorCode) -> ConsumerGroupDescribeResponse:
    return ConsumerGroupDescribeResponse(groups=[Described(error_code=int(code), group_id=g)
                                                 for g in request.group_ids])

"""DescribeGroups (key 15): each group's state, protocol and members (their subscription and
assignment as the clients sent them). A group only known by its committed offsets is Empty;
an unknown one is Dead, with no error before v6 and GROUP_ID_NOT_FOUND from v6 (KIP-1043), as
Kafka answers."""

from __future__ import annotations

from vdl_broker.groups.consumer import ConsumerGroup, consumer_assignment, consumer_subscription
from vdl_broker.groups.coordinator import GroupState
from vdl_broker.server.authorizer import (
    Operation,
    ResourceType,
    authorized_group,
    authorized_operations,
)
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import DescribeGroupsRequest, DescribeGroupsResponse

API_KEY = DescribeGroupsRequest.DECL.api_key
NAME = "DescribeGroups"

NOT_FOUND_VERSION = 6
Described = DescribeGroupsResponse.DescribedGroup
DescribedMember = DescribeGroupsResponse.DescribedGroupMember


def handle(node: NodeView, context: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    coordinator = node.groups.active()
    if coordinator is None:
        return error_response(request, context.api_version, ErrorCode.NOT_COORDINATOR)
    described = []
    for group_id in request.groups:
        if not group_id:
            described.append(Described(error_code=int(ErrorCode.INVALID_GROUP_ID), group_id=group_id))
            continue
        if not authorized_group(node, context, Operation.DESCRIBE, group_id):
            described.append(Described(error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED), group_id=group_id))
            continue
        consumer_group = node.groups.consumer_group(group_id)
        if consumer_group is not None:
            described.append(_consumer_group(consumer_group))
            continue
        group = coordinator.group(group_id)
        if group is None and not node.groups.known(group_id):
            described.append(_dead(group_id, context.api_version, f"Group {group_id} not found."))
            continue
        if group is None:
            state = "Empty"
            stored = node.metadata.state.groups.groups.get(group_id)
            described.append(Described(error_code=0, group_id=group_id, group_state=state,
                                       protocol_type=(stored.protocol_type or "") if stored else ""))
            continue
        stable = group.state is GroupState.STABLE
        members = [DescribedMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                   client_id=m.client_id, client_host=m.client_host,
                                   member_metadata=m.metadata_for(group.protocol_name or "") if stable else b"",
                                   member_assignment=m.assignment if stable else b"")
                   for m in group.members.values()]
        described.append(Described(error_code=0, group_id=group_id, group_state=group.state.value,
                                   protocol_type=group.protocol_type or "",
                                   protocol_data=(group.protocol_name or "") if stable else "", members=members))
    if request.include_authorized_operations:  # v3+ (KIP-430), for every group the principal may describe
        for answer in described:
            if answer.error_code not in (ErrorCode.INVALID_GROUP_ID, ErrorCode.GROUP_AUTHORIZATION_FAILED):
                answer.authorized_operations = authorized_operations(node, context, ResourceType.GROUP,
                                                                     answer.group_id)
    return DescribeGroupsResponse(groups=described)


def _consumer_group(group: ConsumerGroup) -> DescribeGroupsResponse.DescribedGroup:
    """A KIP-848 group as DescribeGroups shows it (Kafka's admin client asks ConsumerGroupDescribe
    instead, but older tools do not): protocol type "consumer", the assignor as the protocol,
    each member's subscription and assignment in the classic consumer protocol's encoding."""
    members = [DescribedMember(member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
                               client_host=m.client_host, member_metadata=consumer_subscription(m.subscribed),
                               member_assignment=consumer_assignment(m.owned))
               for m in group.members.values()]
    return Described(error_code=0, group_id=group.group_id, group_state=group.state.value, protocol_type="consumer",
                     protocol_data=group.assignor, members=members)


def _dead(group_id: str, version: int, message: str) -> DescribeGroupsResponse.DescribedGroup:
    """A group DescribeGroups cannot describe: Dead, with GROUP_ID_NOT_FOUND and why from v6."""
    if version >= NOT_FOUND_VERSION:
        return Described(error_code=int(ErrorCode.GROUP_ID_NOT_FOUND), error_message=message, group_id=group_id,
                         group_state="Dead")
    return Described(error_code=0, group_id=group_id, group_state="Dead")


def error_response(request: DescribeGroupsRequest, version: int, code: ErrorCode) -> DescribeGroupsResponse:
    return DescribeGroupsResponse(groups=[Described(error_code=int(code), group_id=g) for g in request.groups])

"""LeaveGroup (key 13): v0-2 name one member, v3+ a list of members (KIP-345). v3+ removes
members of a KIP-848 consumer group too (Admin.removeMembersFromConsumerGroup), as Kafka 4 does."""

from __future__ import annotations

from vdl_broker.server.authorizer import (
    Operation,
    authorized_group,
)
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import LeaveGroupRequest, LeaveGroupResponse

API_KEY = LeaveGroupRequest.DECL.api_key
NAME = "LeaveGroup"


def handle(node: NodeView, context: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    if not authorized_group(node, context, Operation.READ, request.group_id):
        return LeaveGroupResponse(error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    coordinator = node.groups.active()
    if coordinator is None:
        return LeaveGroupResponse(error_code=int(ErrorCode.NOT_COORDINATOR))
    if context.api_version < 3:
        return LeaveGroupResponse(error_code=int(coordinator.leave_group(request.group_id, request.member_id)))
    groups = node.groups
    consumer_group = groups.consumer_groups.group(request.group_id) is not None
    members = []
    for member in request.members:
        if consumer_group:  # KIP-848 group: the admin removing members (Kafka answers these too)
            code = groups.consumer_groups.remove_member(request.group_id, member.member_id,
                                                        member.group_instance_id, groups.streams())
        else:
            code = coordinator.leave_group(request.group_id, member.member_id, member.group_instance_id)
        members.append(LeaveGroupResponse.MemberResponse(
            member_id=member.member_id, group_instance_id=member.group_instance_id, error_code=int(code)))
    return LeaveGroupResponse(error_code=0, members=members)


def error_response(request: LeaveGroupRequest, version: int, code: ErrorCode) -> LeaveGroupResponse:
    return LeaveGroupResponse(error_code=int(code))

"""JoinGroup (key 11): parked until the rebalance completes; the leader gets every member's
metadata and computes the assignment itself (the broker never looks inside it)."""

from __future__ import annotations

from vdl_broker.server.authorizer import (
    Operation,
    authorized_group,
)
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import JoinGroupRequest, JoinGroupResponse

API_KEY = JoinGroupRequest.DECL.api_key
NAME = "JoinGroup"


async def handle(node: NodeView, context: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    if not authorized_group(node, context, Operation.READ, request.group_id):
        return error_response(request, context.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coordinator = node.groups.active()
    if coordinator is None:
        return error_response(request, context.api_version, ErrorCode.NOT_COORDINATOR)
    result = await coordinator.join_group(
        request.group_id, request.member_id, request.group_instance_id, context.client_id,
        context.client_host, request.session_timeout_ms,
        request.rebalance_timeout_ms if context.api_version >= 1 else -1,
        request.protocol_type, [(p.name, bytes(p.metadata)) for p in request.protocols],
        # KIP-394: JoinGroup v4+ with an empty member id gets MEMBER_ID_REQUIRED first.
        require_known_member_id=context.api_version >= 4)
    members = [JoinGroupResponse.JoinGroupResponseMember(member_id=member_id, group_instance_id=instance,
                                                         metadata=metadata)
               for member_id, instance, metadata in result.members]
    # v7+ carry the protocol type and a nullable protocol name (KIP-559).
    name = result.protocol_name if context.api_version >= 7 else result.protocol_name or ""
    return JoinGroupResponse(error_code=int(result.error), generation_id=result.generation_id,
                             protocol_type=result.protocol_type, protocol_name=name, leader=result.leader,
                             member_id=result.member_id, members=members)


def error_response(request: JoinGroupRequest, version: int, code: ErrorCode) -> JoinGroupResponse:
    return JoinGroupResponse(error_code=int(code), generation_id=-1, protocol_name=None if version >= 7 else "",
                             leader="", member_id=request.member_id)

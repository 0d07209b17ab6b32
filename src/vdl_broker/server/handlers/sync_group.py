"""SyncGroup (key 14): the leader's assignment, passed through to each member unchanged."""

from __future__ import annotations

from vdl_broker.server.authorizer import (
    Operation,
    authorized_group,
)
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import SyncGroupRequest, SyncGroupResponse

API_KEY = SyncGroupRequest.DECL.api_key
NAME = "SyncGroup"


async def handle(node: NodeView, context: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    if not authorized_group(node, context, Operation.READ, request.group_id):
        return error_response(request, context.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coordinator = node.groups.active()
    if coordinator is None:
        return error_response(request, context.api_version, ErrorCode.NOT_COORDINATOR)
    result = await coordinator.sync_group(
        request.group_id, request.generation_id, request.member_id,
        [(a.member_id, bytes(a.assignment)) for a in request.assignments],
        request.protocol_type, request.protocol_name, request.group_instance_id)
    return SyncGroupResponse(error_code=int(result.error), protocol_type=result.protocol_type,
                             protocol_name=result.protocol_name, assignment=result.assignment)


def error_response(request: SyncGroupRequest, version: int, code: ErrorCode) -> SyncGroupResponse:
    return SyncGroupResponse(error_code=int(code), assignment=b"")

"""Heartbeat (key 12): keeps a member's session alive; REBALANCE_IN_PROGRESS asks it to rejoin."""

from __future__ import annotations

from vdl_broker.server.authorizer import (
    Operation,
    authorized_group,
)
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import HeartbeatRequest, HeartbeatResponse

API_KEY = HeartbeatRequest.DECL.api_key
NAME = "Heartbeat"


def handle(node: NodeView, context: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    if not authorized_group(node, context, Operation.READ, request.group_id):
        return HeartbeatResponse(error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    coordinator = node.groups.active()
    if coordinator is None:
        return HeartbeatResponse(error_code=int(ErrorCode.NOT_COORDINATOR))
    code = coordinator.heartbeat(request.group_id, request.generation_id, request.member_id,
                                 request.group_instance_id)
    return HeartbeatResponse(error_code=int(code))


def error_response(request: HeartbeatRequest, version: int, code: ErrorCode) -> HeartbeatResponse:
    return HeartbeatResponse(error_code=int(code))

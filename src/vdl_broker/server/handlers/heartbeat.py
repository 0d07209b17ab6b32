"""Heartbeat (key 12): keeps a member's session alive; REBALANCE_IN_PROGRESS asks it to rejoin."""

from __future__ import annotations

from typing import Any

from vdl_broker.server.authorizer import (
    Operation,
    authorized_group,
)
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import HeartbeatRequest, HeartbeatResponse

API_KEY = HeartbeatRequest.DECL.api_key
NAME = "Heartbeat"


def handle(broker: Any, context: Any, request: Any) -> Any:
    if not authorized_group(broker, context, Operation.READ, request.group_id):
        return HeartbeatResponse(error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    coordinator = broker.groups.active()
    if coordinator is None:
        return HeartbeatResponse(error_code=int(ErrorCode.NOT_COORDINATOR))
    code = coordinator.heartbeat(request.group_id, request.generation_id, request.member_id)
    return HeartbeatResponse(error_code=int(code))


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    return HeartbeatResponse(error_code=int(code))

"""FindCoordinator (key 10): the metadata leader coordinates every consumer group (one
well-known node, so members bootstrapped from different nodes meet in one group); this node
while no leader is known."""

from __future__ import annotations

from typing import Any

from vdl_broker.config import split_host_port
from vdl_broker.server.authorizer import Operation, ResourceType, authorized
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import FindCoordinatorRequest, FindCoordinatorResponse

API_KEY = FindCoordinatorRequest.DECL.api_key
NAME = "FindCoordinator"


def handle(broker: Any, context: Any, request: Any) -> Any:
    # Kafka: DESCRIBE on the group (key type 0) or on the transactional id (key type 1).
    kind, code = ((ResourceType.TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                  if request.key_type == 1 else (ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    if not authorized(broker, context, Operation.DESCRIBE, kind, request.key):
        return error_response(request, context.api_version, code)
    leader = broker.metadata.leader_id
    address = broker.node_client_address(leader, context.protocol) if leader else None
    if address is None:
        leader, address = broker.node_id, broker.own_address(context.protocol)
    host, port = split_host_port(address, "client")
    return FindCoordinatorResponse(error_code=0, node_id=leader, host=host, port=port)


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    return FindCoordinatorResponse(error_code=int(code), node_id=-1, host="", port=-1)

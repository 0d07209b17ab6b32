"""FindCoordinator (key 10): the metadata leader coordinates every consumer group (one
well-known node, so members bootstrapped from different nodes meet in one group); this node
while no leader is known."""

from __future__ import annotations

from typing import Any

from vdl_broker.config import split_host_port
from vdl_broker.protocol.errors import ErrorCode
from vdl_broker.protocol.messages import FindCoordinatorRequest, FindCoordinatorResponse

API_KEY = FindCoordinatorRequest.DECL.api_key
NAME = "FindCoordinator"


def handle(broker: Any, context: Any, request: Any) -> Any:
    leader = broker.metadata.leader_id
    address = broker.node_client_address(leader) if leader else None
    if address is None:
        return FindCoordinatorResponse(error_code=0, node_id=broker.node_id, host=broker.advertised_host,
                                       port=broker.port)
    host, port = split_host_port(address, "client")
    return FindCoordinatorResponse(error_code=0, node_id=leader, host=host, port=port)


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    return FindCoordinatorResponse(error_code=int(code), node_id=-1, host="", port=-1)

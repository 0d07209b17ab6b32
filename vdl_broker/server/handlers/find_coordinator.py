"""FindCoordinator (key 10): this node coordinates every group (single node)."""

from __future__ import annotations

from typing import Any

from vdl_broker.protocol.errors import ErrorCode
from vdl_broker.protocol.messages import FindCoordinatorResponse

API_KEY = 10
NAME = "FindCoordinator"


def handle(broker: Any, context: Any, request: Any) -> Any:
    return FindCoordinatorResponse(error_code=0, node_id=broker.node_id, host=broker.advertised_host,
                                   port=broker.port)


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    return FindCoordinatorResponse(error_code=int(code), node_id=-1, host="", port=-1)

"""ApiVersions (key 18): exactly the APIs and versions this broker implements (DESIGN.md table)."""

from __future__ import annotations

from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire import api
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import ApiVersionsRequest, ApiVersionsResponse

API_KEY = ApiVersionsRequest.DECL.api_key
NAME = "ApiVersions"


def supported_response(error: ErrorCode = ErrorCode.NONE) -> ApiVersionsResponse:
    response: ApiVersionsResponse = api.api_versions_response(error)
    return response


def handle(node: NodeView, context: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    return supported_response()


def error_response(request: ApiVersionsRequest, version: int, code: ErrorCode) -> ApiVersionsResponse:
    return supported_response(code)

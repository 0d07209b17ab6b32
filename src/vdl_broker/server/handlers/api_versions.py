"""ApiVersions (key 18): exactly the APIs and versions this broker implements (DESIGN.md table)."""

from __future__ import annotations

from typing import Any

from vdl_wire import api
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import ApiVersionsRequest

API_KEY = ApiVersionsRequest.DECL.api_key
NAME = "ApiVersions"


def supported_response(error: ErrorCode = ErrorCode.NONE) -> Any:
    return api.api_versions_response(error)


def handle(broker: Any, context: Any, request: Any) -> Any:
    return supported_response()


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    return supported_response(code)

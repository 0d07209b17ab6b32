"""Request headers v0-2 and response headers v0-1.

# message defs: RequestHeader.json / ResponseHeader.json. Request header v1 adds client_id
# (nullable int16 string, kept non-compact even in v2); v2 adds tagged fields. Response header
# v1 adds tagged fields. Which header version an API uses follows its flexible versions, except
# that ApiVersions responses always use header v0 (a client must parse it before it knows our
# versions).
"""

from __future__ import annotations

from .codec import build_message
from .schema import INT16, INT32, STRING, Field, message

REQUEST_HEADER = message(
    "RequestHeader",
    -1,
    "0-2",
    "2+",
    Field("request_api_key", INT16),
    Field("request_api_version", INT16),
    Field("correlation_id", INT32),
    Field("client_id", STRING, versions="1+", nullable_versions="1+", flexible_versions="none", default=None),
)
RESPONSE_HEADER = message("ResponseHeader", -1, "0-1", "1+", Field("correlation_id", INT32))

# Generated slots dataclasses: RequestHeader(request_api_key, request_api_version,
# correlation_id, client_id=None); ResponseHeader(correlation_id).
RequestHeader = build_message(REQUEST_HEADER, __name__)
ResponseHeader = build_message(RESPONSE_HEADER, __name__)

API_VERSIONS_KEY = 18


def request_header_version(flexible: bool) -> int:
    """Header version for a request whose body version is (non-)flexible."""
    return 2 if flexible else 1


def response_header_version(api_key: int, flexible: bool) -> int:
    """Header version for a response; ApiVersions always answers with header v0 (KIP-511)."""
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if flexible else 0

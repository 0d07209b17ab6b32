"""FindCoordinator (key 10), versions 0-2, non-flexible. # message defs: FindCoordinatorRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT8, INT16, INT32, STRING, Field, message

FIND_COORDINATOR_REQUEST = message(
    "FindCoordinatorRequest",
    10,
    "0-2",
    "3+",
    Field("key", STRING, versions="0-3"),
    Field("key_type", INT8, versions="1+", default=0),  # 0 = group, 1 = transaction
)

FIND_COORDINATOR_RESPONSE = message(
    "FindCoordinatorResponse",
    10,
    "0-2",
    "3+",
    Field("throttle_time_ms", INT32, versions="1+"),
    Field("error_code", INT16, versions="0-3"),
    Field("error_message", STRING, versions="1-3", nullable_versions="1-3", default=None),
    Field("node_id", INT32, versions="0-3"),
    Field("host", STRING, versions="0-3"),
    Field("port", INT32, versions="0-3"),
)

FindCoordinatorRequest = build_message(FIND_COORDINATOR_REQUEST, __name__)
FindCoordinatorResponse = build_message(FIND_COORDINATOR_RESPONSE, __name__)

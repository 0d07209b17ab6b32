"""FindCoordinator (key 10), versions 0-6, flexible from 3. # message defs: FindCoordinatorRequest.json

v4+ look up several keys at once (KIP-699); key type 0 = group, 1 = transaction, 2 = share
group (v6, KIP-932).
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT8, INT16, INT32, STRING, Array, Field, message, struct

FIND_COORDINATOR_REQUEST = message(
    "FindCoordinatorRequest",
    10,
    "0-6",
    "3+",
    Field("key", STRING, versions="0-3"),
    Field("key_type", INT8, versions="1+", default=0),
    Field("coordinator_keys", Array(STRING), versions="4+"),
)

FIND_COORDINATOR_RESPONSE = message(
    "FindCoordinatorResponse",
    10,
    "0-6",
    "3+",
    Field("throttle_time_ms", INT32, versions="1+"),
    Field("error_code", INT16, versions="0-3"),
    Field("error_message", STRING, versions="1-3", nullable_versions="1-3", default=None),
    Field("node_id", INT32, versions="0-3"),
    Field("host", STRING, versions="0-3"),
    Field("port", INT32, versions="0-3"),
    Field(
        "coordinators",
        Array(
            struct(
                "Coordinator",
                Field("key", STRING, versions="4+"),
                Field("node_id", INT32, versions="4+"),
                Field("host", STRING, versions="4+"),
                Field("port", INT32, versions="4+"),
                Field("error_code", INT16, versions="4+"),
                Field("error_message", STRING, versions="4+", nullable_versions="4+", default=None),
            )
        ),
        versions="4+",
    ),
)

FindCoordinatorRequest = build_message(FIND_COORDINATOR_REQUEST, __name__)
FindCoordinatorResponse = build_message(FIND_COORDINATOR_RESPONSE, __name__)

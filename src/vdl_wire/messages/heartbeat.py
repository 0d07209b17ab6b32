"""Heartbeat (key 12), versions 0-4, flexible from 4. # message defs: HeartbeatRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, STRING, Field, message

HEARTBEAT_REQUEST = message(
    "HeartbeatRequest",
    12,
    "0-4",
    "4+",
    Field("group_id", STRING),
    Field("generation_id", INT32),
    Field("member_id", STRING),
    Field("group_instance_id", STRING, versions="3+", nullable_versions="3+", default=None),
)

HEARTBEAT_RESPONSE = message(
    "HeartbeatResponse",
    12,
    "0-4",
    "4+",
    Field("throttle_time_ms", INT32, versions="1+"),
    Field("error_code", INT16),
)

HeartbeatRequest = build_message(HEARTBEAT_REQUEST, __name__)
HeartbeatResponse = build_message(HEARTBEAT_RESPONSE, __name__)

"""SyncGroup (key 14), versions 0-5, flexible from 4. # message defs: SyncGroupRequest.json

v5 carries the protocol type and name both ways (KIP-559).
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BYTES, INT16, INT32, STRING, Array, Field, message, struct

SYNC_GROUP_REQUEST = message(
    "SyncGroupRequest",
    14,
    "0-5",
    "4+",
    Field("group_id", STRING),
    Field("generation_id", INT32),
    Field("member_id", STRING),
    Field("group_instance_id", STRING, versions="3+", nullable_versions="3+", default=None),
    Field("protocol_type", STRING, versions="5+", nullable_versions="5+", default=None),
    Field("protocol_name", STRING, versions="5+", nullable_versions="5+", default=None),
    Field(
        "assignments",
        Array(struct("SyncGroupRequestAssignment", Field("member_id", STRING), Field("assignment", BYTES))),
    ),
)

SYNC_GROUP_RESPONSE = message(
    "SyncGroupResponse",
    14,
    "0-5",
    "4+",
    Field("throttle_time_ms", INT32, versions="1+"),
    Field("error_code", INT16),
    Field("protocol_type", STRING, versions="5+", nullable_versions="5+", default=None),
    Field("protocol_name", STRING, versions="5+", nullable_versions="5+", default=None),
    Field("assignment", BYTES),
)

SyncGroupRequest = build_message(SYNC_GROUP_REQUEST, __name__)
SyncGroupResponse = build_message(SYNC_GROUP_RESPONSE, __name__)

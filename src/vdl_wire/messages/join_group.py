"""JoinGroup (key 11), versions 0-9, flexible from 6. # message defs: JoinGroupRequest.json

v7 answers the protocol type, v8 carries the reason for a (re)join (KIP-800), v9 the
skip_assignment flag of a static leader (KIP-814).
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, BYTES, INT16, INT32, STRING, Array, Field, message, struct

JOIN_GROUP_REQUEST = message(
    "JoinGroupRequest",
    11,
    "0-9",
    "6+",
    Field("group_id", STRING),
    Field("session_timeout_ms", INT32),
    Field("rebalance_timeout_ms", INT32, versions="1+", default=-1),
    Field("member_id", STRING),
    Field("group_instance_id", STRING, versions="5+", nullable_versions="5+", default=None),
    Field("protocol_type", STRING),
    Field(
        "protocols",
        Array(struct("JoinGroupRequestProtocol", Field("name", STRING), Field("metadata", BYTES))),
    ),
    Field("reason", STRING, versions="8+", nullable_versions="8+", default=None),
)

JOIN_GROUP_RESPONSE = message(
    "JoinGroupResponse",
    11,
    "0-9",
    "6+",
    Field("throttle_time_ms", INT32, versions="2+"),
    Field("error_code", INT16),
    Field("generation_id", INT32, default=-1),
    Field("protocol_type", STRING, versions="7+", nullable_versions="7+", default=None),
    Field("protocol_name", STRING, nullable_versions="7+"),
    Field("leader", STRING),
    Field("skip_assignment", BOOL, versions="9+", default=False),
    Field("member_id", STRING),
    Field(
        "members",
        Array(
            struct(
                "JoinGroupResponseMember",
                Field("member_id", STRING),
                Field("group_instance_id", STRING, versions="5+", nullable_versions="5+", default=None),
                Field("metadata", BYTES),
            )
        ),
    ),
)

JoinGroupRequest = build_message(JOIN_GROUP_REQUEST, __name__)
JoinGroupResponse = build_message(JOIN_GROUP_RESPONSE, __name__)

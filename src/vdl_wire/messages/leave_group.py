"""LeaveGroup (key 13), versions 0-5, flexible from 4. # message defs: LeaveGroupRequest.json

v0-2 name one member_id; v3 (KIP-345) carries a members array instead; v5 a reason (KIP-800).
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, STRING, Array, Field, message, struct

LEAVE_GROUP_REQUEST = message(
    "LeaveGroupRequest",
    13,
    "0-5",
    "4+",
    Field("group_id", STRING),
    Field("member_id", STRING, versions="0-2"),
    Field(
        "members",
        Array(
            struct(
                "MemberIdentity",
                Field("member_id", STRING, versions="3+"),
                Field("group_instance_id", STRING, versions="3+", nullable_versions="3+", default=None),
                Field("reason", STRING, versions="5+", nullable_versions="5+", default=None),
            )
        ),
        versions="3+",
    ),
)

LEAVE_GROUP_RESPONSE = message(
    "LeaveGroupResponse",
    13,
    "0-5",
    "4+",
    Field("throttle_time_ms", INT32, versions="1+"),
    Field("error_code", INT16),
    Field(
        "members",
        Array(
            struct(
                "MemberResponse",
                Field("member_id", STRING, versions="3+"),
                Field("group_instance_id", STRING, versions="3+", nullable_versions="3+", default=None),
                Field("error_code", INT16, versions="3+"),
            )
        ),
        versions="3+",
    ),
)

LeaveGroupRequest = build_message(LEAVE_GROUP_REQUEST, __name__)
LeaveGroupResponse = build_message(LEAVE_GROUP_RESPONSE, __name__)

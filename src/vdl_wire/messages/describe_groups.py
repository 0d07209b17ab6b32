"""DescribeGroups (key 15), versions 0-6, flexible from 5; v6 adds a per-group error message
(KIP-1043). # message defs: DescribeGroupsRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, BYTES, INT16, INT32, STRING, Array, Field, message, struct

DESCRIBE_GROUPS_REQUEST = message(
    "DescribeGroupsRequest",
    15,
    "0-6",
    "5+",
    Field("groups", Array(STRING)),
    Field("include_authorized_operations", BOOL, versions="3+"),
)

DESCRIBE_GROUPS_RESPONSE = message(
    "DescribeGroupsResponse",
    15,
    "0-6",
    "5+",
    Field("throttle_time_ms", INT32, versions="1+"),
    Field(
        "groups",
        Array(
            struct(
                "DescribedGroup",
                Field("error_code", INT16),
                Field("error_message", STRING, versions="6+", nullable_versions="6+", default=None),
                Field("group_id", STRING),
                Field("group_state", STRING),
                Field("protocol_type", STRING),
                Field("protocol_data", STRING),
                Field(
                    "members",
                    Array(
                        struct(
                            "DescribedGroupMember",
                            Field("member_id", STRING),
                            Field("group_instance_id", STRING, versions="4+", nullable_versions="4+", default=None),
                            Field("client_id", STRING),
                            Field("client_host", STRING),
                            Field("member_metadata", BYTES),
                            Field("member_assignment", BYTES),
                        )
                    ),
                ),
                Field("authorized_operations", INT32, versions="3+", default=-2147483648),
            )
        ),
    ),
)

DescribeGroupsRequest = build_message(DESCRIBE_GROUPS_REQUEST, __name__)
DescribeGroupsResponse = build_message(DESCRIBE_GROUPS_RESPONSE, __name__)

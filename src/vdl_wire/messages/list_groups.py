"""ListGroups (key 16), versions 0-5; v3+ are flexible, v4 adds a state filter (KIP-518), v5 a
type filter and each group's type, classic or consumer (KIP-848).
# message defs: ListGroupsRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, STRING, Array, Field, message, struct

LIST_GROUPS_REQUEST = message(
    "ListGroupsRequest",
    16,
    "0-5",
    "3+",
    Field("states_filter", Array(STRING), versions="4+"),
    Field("types_filter", Array(STRING), versions="5+"),
)

LIST_GROUPS_RESPONSE = message(
    "ListGroupsResponse",
    16,
    "0-5",
    "3+",
    Field("throttle_time_ms", INT32, versions="1+"),
    Field("error_code", INT16),
    Field(
        "groups",
        Array(
            struct(
                "ListedGroup",
                Field("group_id", STRING),
                Field("protocol_type", STRING),
                Field("group_state", STRING, versions="4+"),
                Field("group_type", STRING, versions="5+"),
            )
        ),
    ),
)

ListGroupsRequest = build_message(LIST_GROUPS_REQUEST, __name__)
ListGroupsResponse = build_message(LIST_GROUPS_RESPONSE, __name__)

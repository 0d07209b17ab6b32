"""DeleteGroups (key 42), versions 0-2; v2 is flexible. # message defs: DeleteGroupsRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, STRING, Array, Field, message, struct

DELETE_GROUPS_REQUEST = message(
    "DeleteGroupsRequest",
    42,
    "0-2",
    "2+",
    Field("groups_names", Array(STRING)),
)

DELETE_GROUPS_RESPONSE = message(
    "DeleteGroupsResponse",
    42,
    "0-2",
    "2+",
    Field("throttle_time_ms", INT32),
    Field("results", Array(struct("DeletableGroupResult", Field("group_id", STRING), Field("error_code", INT16)))),
)

DeleteGroupsRequest = build_message(DELETE_GROUPS_REQUEST, __name__)
DeleteGroupsResponse = build_message(DELETE_GROUPS_RESPONSE, __name__)

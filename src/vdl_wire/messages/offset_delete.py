"""OffsetDelete (key 47), version 0, non-flexible (KIP-496). # message defs: OffsetDeleteRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, STRING, Array, Field, message, struct

OFFSET_DELETE_REQUEST = message(
    "OffsetDeleteRequest",
    47,
    "0",
    "none",
    Field("group_id", STRING),
    Field(
        "topics",
        Array(
            struct(
                "OffsetDeleteRequestTopic",
                Field("name", STRING),
                Field("partitions", Array(struct("OffsetDeleteRequestPartition", Field("partition_index", INT32)))),
            )
        ),
    ),
)

OFFSET_DELETE_RESPONSE = message(
    "OffsetDeleteResponse",
    47,
    "0",
    "none",
    Field("error_code", INT16),
    Field("throttle_time_ms", INT32),
    Field(
        "topics",
        Array(
            struct(
                "OffsetDeleteResponseTopic",
                Field("name", STRING),
                Field(
                    "partitions",
                    Array(
                        struct(
                            "OffsetDeleteResponsePartition",
                            Field("partition_index", INT32),
                            Field("error_code", INT16),
                        )
                    ),
                ),
            )
        ),
    ),
)

OffsetDeleteRequest = build_message(OFFSET_DELETE_REQUEST, __name__)
OffsetDeleteResponse = build_message(OFFSET_DELETE_RESPONSE, __name__)

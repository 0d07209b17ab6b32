"""OffsetFetch (key 9), versions 1-5, non-flexible (flexible from 6). # message defs: OffsetFetchRequest.json

The broker answers the offsets stored in the cluster metadata (-1 for a partition without one).
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, INT64, STRING, Array, Field, message, struct

OFFSET_FETCH_REQUEST = message(
    "OffsetFetchRequest",
    9,
    "1-5",
    "6+",
    Field("group_id", STRING, versions="0-7"),
    Field(
        "topics",
        Array(
            struct(
                "OffsetFetchRequestTopic",
                Field("name", STRING, versions="0-7"),
                Field("partition_indexes", Array(INT32), versions="0-7"),
            )
        ),
        versions="0-7",
        nullable_versions="2-7",  # null = all topics (v2+)
    ),
)

OFFSET_FETCH_RESPONSE = message(
    "OffsetFetchResponse",
    9,
    "1-5",
    "6+",
    Field("throttle_time_ms", INT32, versions="3+"),
    Field(
        "topics",
        Array(
            struct(
                "OffsetFetchResponseTopic",
                Field("name", STRING, versions="0-7"),
                Field(
                    "partitions",
                    Array(
                        struct(
                            "OffsetFetchResponsePartition",
                            Field("partition_index", INT32, versions="0-7"),
                            Field("committed_offset", INT64, versions="0-7", default=-1),
                            Field("committed_leader_epoch", INT32, versions="5-7", default=-1),
                            Field("metadata", STRING, versions="0-7", nullable_versions="0-7", default=None),
                            Field("error_code", INT16, versions="0-7"),
                        )
                    ),
                    versions="0-7",
                ),
            )
        ),
        versions="0-7",
    ),
    Field("error_code", INT16, versions="2-7", default=0),
)

OffsetFetchRequest = build_message(OFFSET_FETCH_REQUEST, __name__)
OffsetFetchResponse = build_message(OFFSET_FETCH_RESPONSE, __name__)

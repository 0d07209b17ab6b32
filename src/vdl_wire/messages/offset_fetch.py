"""OffsetFetch (key 9), versions 0-9, flexible from 6. # message defs: OffsetFetchRequest.json

The broker answers the offsets stored in the cluster metadata (-1 for a partition without one).
v8 asks for several groups in one request; v9 carries the member id and epoch of a consumer
group member (KIP-848).
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, INT16, INT32, INT64, STRING, Array, Field, message, struct

OFFSET_FETCH_REQUEST = message(
    "OffsetFetchRequest",
    9,
    "0-9",
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
    Field(
        "groups",
        Array(
            struct(
                "OffsetFetchRequestGroup",
                Field("group_id", STRING, versions="8+"),
                Field("member_id", STRING, versions="9+", nullable_versions="9+", default=None),
                Field("member_epoch", INT32, versions="9+", default=-1),
                Field(
                    "topics",
                    Array(
                        struct(
                            "OffsetFetchRequestTopics",
                            Field("name", STRING, versions="8+"),
                            Field("partition_indexes", Array(INT32), versions="8+"),
                        )
                    ),
                    versions="8+",
                    nullable_versions="8+",
                ),
            )
        ),
        versions="8+",
    ),
    Field("require_stable", BOOL, versions="7+", default=False),
)

OFFSET_FETCH_RESPONSE = message(
    "OffsetFetchResponse",
    9,
    "0-9",
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
    Field(
        "groups",
        Array(
            struct(
                "OffsetFetchResponseGroup",
                Field("group_id", STRING, versions="8+"),
                Field(
                    "topics",
                    Array(
                        struct(
                            "OffsetFetchResponseTopics",
                            Field("name", STRING, versions="8+"),
                            Field(
                                "partitions",
                                Array(
                                    struct(
                                        "OffsetFetchResponsePartitions",
                                        Field("partition_index", INT32, versions="8+"),
                                        Field("committed_offset", INT64, versions="8+", default=-1),
                                        Field("committed_leader_epoch", INT32, versions="8+", default=-1),
                                        Field("metadata", STRING, versions="8+", nullable_versions="8+",
                                              default=None),
                                        Field("error_code", INT16, versions="8+"),
                                    )
                                ),
                                versions="8+",
                            ),
                        )
                    ),
                    versions="8+",
                ),
                Field("error_code", INT16, versions="8+", default=0),
            )
        ),
        versions="8+",
    ),
)

OffsetFetchRequest = build_message(OFFSET_FETCH_REQUEST, __name__)
OffsetFetchResponse = build_message(OFFSET_FETCH_RESPONSE, __name__)

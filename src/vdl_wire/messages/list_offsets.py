"""ListOffsets (key 2), versions 0-11, flexible from 6. # message defs: ListOffsetsRequest.json

Timestamp -2 = earliest, -1 = latest; -3 = the record with the largest timestamp (v7+, KIP-734);
-4 earliest local (v8+), -5 latest tiered (v9+), -6 earliest pending upload (v11+): tiered
storage (KIP-405, KIP-1005, KIP-1023). v0 answers with old_style_offsets, v1+ with
timestamp/offset; v10 adds the request's timeout_ms.
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT8, INT16, INT32, INT64, STRING, Array, Field, message, struct

LIST_OFFSETS_REQUEST = message(
    "ListOffsetsRequest",
    2,
    "0-11",
    "6+",
    Field("replica_id", INT32),
    Field("isolation_level", INT8, versions="2+"),
    Field(
        "topics",
        Array(
            struct(
                "ListOffsetsTopic",
                Field("name", STRING),
                Field(
                    "partitions",
                    Array(
                        struct(
                            "ListOffsetsPartition",
                            Field("partition_index", INT32),
                            Field("current_leader_epoch", INT32, versions="4+", default=-1),
                            Field("timestamp", INT64),
                            Field("max_num_offsets", INT32, versions="0", default=1),
                        )
                    ),
                ),
            )
        ),
    ),
    Field("timeout_ms", INT32, versions="10+"),
)

LIST_OFFSETS_RESPONSE = message(
    "ListOffsetsResponse",
    2,
    "0-11",
    "6+",
    Field("throttle_time_ms", INT32, versions="2+"),
    Field(
        "topics",
        Array(
            struct(
                "ListOffsetsTopicResponse",
                Field("name", STRING),
                Field(
                    "partitions",
                    Array(
                        struct(
                            "ListOffsetsPartitionResponse",
                            Field("partition_index", INT32),
                            Field("error_code", INT16),
                            Field("old_style_offsets", Array(INT64), versions="0"),
                            Field("timestamp", INT64, versions="1+", default=-1),
                            Field("offset", INT64, versions="1+", default=-1),
                            Field("leader_epoch", INT32, versions="4+", default=-1),
                        )
                    ),
                ),
            )
        ),
    ),
)

ListOffsetsRequest = build_message(LIST_OFFSETS_REQUEST, __name__)
ListOffsetsResponse = build_message(LIST_OFFSETS_RESPONSE, __name__)

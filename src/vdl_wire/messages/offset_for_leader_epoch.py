"""OffsetForLeaderEpoch (key 23), versions 0-4; v4 is flexible (KIP-101, KIP-320).
# message defs: OffsetForLeaderEpochRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, INT64, STRING, Array, Field, message, struct

CONSUMER_REPLICA_ID = -1  # a client; -2 (the default before v3) is a debugging client

OFFSET_FOR_LEADER_EPOCH_REQUEST = message(
    "OffsetForLeaderEpochRequest",
    23,
    "0-4",
    "4+",
    Field("replica_id", INT32, versions="3+", default=-2),
    Field(
        "topics",
        Array(
            struct(
                "OffsetForLeaderTopic",
                Field("topic", STRING),
                Field(
                    "partitions",
                    Array(
                        struct(
                            "OffsetForLeaderPartition",
                            Field("partition", INT32),
                            Field("current_leader_epoch", INT32, versions="2+", default=-1),
                            Field("leader_epoch", INT32),
                        )
                    ),
                ),
            )
        ),
    ),
)

OFFSET_FOR_LEADER_EPOCH_RESPONSE = message(
    "OffsetForLeaderEpochResponse",
    23,
    "0-4",
    "4+",
    Field("throttle_time_ms", INT32, versions="2+"),
    Field(
        "topics",
        Array(
            struct(
                "OffsetForLeaderTopicResult",
                Field("topic", STRING),
                Field(
                    "partitions",
                    Array(
                        struct(
                            "EpochEndOffset",
                            Field("error_code", INT16),
                            Field("partition", INT32),
                            Field("leader_epoch", INT32, versions="1+", default=-1),
                            Field("end_offset", INT64, default=-1),
                        )
                    ),
                ),
            )
        ),
    ),
)

OffsetForLeaderEpochRequest = build_message(OFFSET_FOR_LEADER_EPOCH_REQUEST, __name__)
OffsetForLeaderEpochResponse = build_message(OFFSET_FOR_LEADER_EPOCH_RESPONSE, __name__)

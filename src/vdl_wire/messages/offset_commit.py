"""OffsetCommit (key 8), versions 0-9; v8+ are flexible. # message defs: OffsetCommitRequest.json

v1 adds generation, member id and a per-partition commit timestamp (v1 only); v2-4 carry a
retention time (ignored: retention is the broker's offsets_retention_minutes); v6 adds the
leader epoch, v7 the group instance id; v9 is v8 for members of KIP-848 groups (the generation is
their member epoch; a stale one is STALE_MEMBER_EPOCH).
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, INT64, STRING, Array, Field, message, struct

OFFSET_COMMIT_REQUEST = message(
    "OffsetCommitRequest",
    8,
    "0-9",
    "8+",
    Field("group_id", STRING),
    Field("generation_id_or_member_epoch", INT32, versions="1+", default=-1),  # KIP-848 name
    Field("member_id", STRING, versions="1+"),
    Field("group_instance_id", STRING, versions="7+", nullable_versions="7+", default=None),
    Field("retention_time_ms", INT64, versions="2-4", default=-1),
    Field(
        "topics",
        Array(
            struct(
                "OffsetCommitRequestTopic",
                Field("name", STRING),
                Field(
                    "partitions",
                    Array(
                        struct(
                            "OffsetCommitRequestPartition",
                            Field("partition_index", INT32),
                            Field("committed_offset", INT64),
                            Field("committed_leader_epoch", INT32, versions="6+", default=-1),
                            Field("commit_timestamp", INT64, versions="1", default=-1),
                            Field("committed_metadata", STRING, nullable_versions="0+", default=None),
                        )
                    ),
                ),
            )
        ),
    ),
)

OFFSET_COMMIT_RESPONSE = message(
    "OffsetCommitResponse",
    8,
    "0-9",
    "8+",
    Field("throttle_time_ms", INT32, versions="3+"),
    Field(
        "topics",
        Array(
            struct(
                "OffsetCommitResponseTopic",
                Field("name", STRING),
                Field(
                    "partitions",
                    Array(
                        struct(
                            "OffsetCommitResponsePartition",
                            Field("partition_index", INT32),
                            Field("error_code", INT16),
                        )
                    ),
                ),
            )
        ),
    ),
)

OffsetCommitRequest = build_message(OFFSET_COMMIT_REQUEST, __name__)
OffsetCommitResponse = build_message(OFFSET_COMMIT_RESPONSE, __name__)

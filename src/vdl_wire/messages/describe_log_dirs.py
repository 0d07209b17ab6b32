"""DescribeLogDirs (key 35), versions 0-5; v2+ are flexible, v3 adds the top-level error code,
v4 the volume's total and usable bytes (KIP-827), v5 whether the directory is cordoned (KIP-1066). # message defs: DescribeLogDirsRequest.json,
DescribeLogDirsResponse.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, INT16, INT32, INT64, STRING, Array, Field, message, struct

DESCRIBE_LOG_DIRS_REQUEST = message(
    "DescribeLogDirsRequest",
    35,
    "0-5",
    "2+",
    Field(
        "topics",
        Array(struct("DescribableLogDirTopic", Field("topic", STRING), Field("partitions", Array(INT32)))),
        nullable_versions="0+",
    ),
)

DESCRIBE_LOG_DIRS_RESPONSE = message(
    "DescribeLogDirsResponse",
    35,
    "0-5",
    "2+",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16, versions="3+"),
    Field(
        "results",
        Array(
            struct(
                "DescribeLogDirsResult",
                Field("error_code", INT16),
                Field("log_dir", STRING),
                Field(
                    "topics",
                    Array(
                        struct(
                            "DescribeLogDirsTopic",
                            Field("name", STRING),
                            Field(
                                "partitions",
                                Array(
                                    struct(
                                        "DescribeLogDirsPartition",
                                        Field("partition_index", INT32),
                                        Field("partition_size", INT64),
                                        Field("offset_lag", INT64),
                                        Field("is_future_key", BOOL),
                                    )
                                ),
                            ),
                        )
                    ),
                ),
                Field("total_bytes", INT64, versions="4+", default=-1),
                Field("usable_bytes", INT64, versions="4+", default=-1),
                Field("is_cordoned", BOOL, versions="5+"),
            )
        ),
    ),
)

DescribeLogDirsRequest = build_message(DESCRIBE_LOG_DIRS_REQUEST, __name__)
DescribeLogDirsResponse = build_message(DESCRIBE_LOG_DIRS_RESPONSE, __name__)

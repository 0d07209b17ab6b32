"""CreatePartitions (key 37), versions 0-3; v2 is the first flexible one (KIP-195).
# message defs: CreatePartitionsRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, INT16, INT32, STRING, Array, Field, message, struct

CREATE_PARTITIONS_REQUEST = message(
    "CreatePartitionsRequest",
    37,
    "0-3",
    "2+",
    Field(
        "topics",
        Array(
            struct(
                "CreatePartitionsTopic",
                Field("name", STRING),
                Field("count", INT32),  # the partition count wanted in total
                Field(
                    "assignments",
                    Array(struct("CreatePartitionsAssignment", Field("broker_ids", Array(INT32)))),
                    nullable_versions="0+",
                    default=None,
                ),
            )
        ),
    ),
    Field("timeout_ms", INT32),
    Field("validate_only", BOOL),
)

CREATE_PARTITIONS_RESPONSE = message(
    "CreatePartitionsResponse",
    37,
    "0-3",
    "2+",
    Field("throttle_time_ms", INT32),
    Field(
        "results",
        Array(
            struct(
                "CreatePartitionsTopicResult",
                Field("name", STRING),
                Field("error_code", INT16),
                Field("error_message", STRING, nullable_versions="0+", default=None),
            )
        ),
    ),
)

CreatePartitionsRequest = build_message(CREATE_PARTITIONS_REQUEST, __name__)
CreatePartitionsResponse = build_message(CREATE_PARTITIONS_RESPONSE, __name__)

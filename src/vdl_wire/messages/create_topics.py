"""CreateTopics (key 19), versions 0-4, non-flexible (flexible from 5). # message defs: CreateTopicsRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, INT16, INT32, STRING, Array, Field, message, struct

CREATE_TOPICS_REQUEST = message(
    "CreateTopicsRequest",
    19,
    "0-4",
    "5+",
    Field(
        "topics",
        Array(
            struct(
                "CreatableTopic",
                Field("name", STRING),
                Field("num_partitions", INT32),
                Field("replication_factor", INT16),
                Field(
                    "assignments",
                    Array(
                        struct(
                            "CreatableReplicaAssignment",
                            Field("partition_index", INT32),
                            Field("broker_ids", Array(INT32)),
                        )
                    ),
                ),
                Field(
                    "configs",
                    Array(
                        struct(
                            "CreatableTopicConfig",
                            Field("name", STRING),
                            Field("value", STRING, nullable_versions="0+", default=None),
                        )
                    ),
                ),
            )
        ),
    ),
    Field("timeout_ms", INT32, default=60000),
    Field("validate_only", BOOL, versions="1+", default=False),
)

CREATE_TOPICS_RESPONSE = message(
    "CreateTopicsResponse",
    19,
    "0-4",
    "5+",
    Field("throttle_time_ms", INT32, versions="2+"),
    Field(
        "topics",
        Array(
            struct(
                "CreatableTopicResult",
                Field("name", STRING),
                Field("error_code", INT16),
                Field("error_message", STRING, versions="1+", nullable_versions="0+", default=None),
            )
        ),
    ),
)

CreateTopicsRequest = build_message(CREATE_TOPICS_REQUEST, __name__)
CreateTopicsResponse = build_message(CREATE_TOPICS_RESPONSE, __name__)

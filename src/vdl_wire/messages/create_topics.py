"""CreateTopics (key 19), versions 0-7, flexible from 5. # message defs: CreateTopicsRequest.json

v5+ answer the created topic's partitions, replication factor and configs (KIP-525); v7 its id
(KIP-516).
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, INT8, INT16, INT32, STRING, UUID, Array, Field, message, struct

CREATE_TOPICS_REQUEST = message(
    "CreateTopicsRequest",
    19,
    "0-7",
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
    "0-7",
    "5+",
    Field("throttle_time_ms", INT32, versions="2+"),
    Field(
        "topics",
        Array(
            struct(
                "CreatableTopicResult",
                Field("name", STRING),
                Field("topic_id", UUID, versions="7+"),
                Field("error_code", INT16),
                Field("error_message", STRING, versions="1+", nullable_versions="0+", default=None),
                Field("topic_config_error_code", INT16, versions="5+", tagged_versions="5+", tag=0),
                Field("num_partitions", INT32, versions="5+", default=-1),
                Field("replication_factor", INT16, versions="5+", default=-1),
                Field(
                    "configs",
                    Array(
                        struct(
                            "CreatableTopicConfigs",
                            Field("name", STRING, versions="5+"),
                            Field("value", STRING, versions="5+", nullable_versions="5+", default=None),
                            Field("read_only", BOOL, versions="5+"),
                            Field("config_source", INT8, versions="5+", default=-1),
                            Field("is_sensitive", BOOL, versions="5+"),
                        )
                    ),
                    versions="5+",
                    nullable_versions="5+",
                ),
            )
        ),
    ),
)

CreateTopicsRequest = build_message(CREATE_TOPICS_REQUEST, __name__)
CreateTopicsResponse = build_message(CREATE_TOPICS_RESPONSE, __name__)

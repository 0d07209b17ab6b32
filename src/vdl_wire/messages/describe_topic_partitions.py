"""DescribeTopicPartitions (key 75, KIP-966), version 0, flexible: Metadata's topic and partition
description paged by a partition limit and a cursor, with each partition's eligible leader
replicas. # message defs: DescribeTopicPartitionsRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, INT16, INT32, STRING, UUID, Array, Field, message, struct

# Kafka's default ResponsePartitionLimit, and its broker's max.request.partition.size.limit.
DEFAULT_PARTITION_LIMIT = 2000

DESCRIBE_TOPIC_PARTITIONS_REQUEST = message(
    "DescribeTopicPartitionsRequest",
    75,
    "0",
    "0+",
    # An empty list asks for every topic (the field is not nullable).
    Field("topics", Array(struct("TopicRequest", Field("name", STRING)))),
    Field("response_partition_limit", INT32, default=DEFAULT_PARTITION_LIMIT),
    Field(
        "cursor",
        struct("Cursor", Field("topic_name", STRING), Field("partition_index", INT32)),
        nullable_versions="0+",
        default=None,
    ),
)

DESCRIBE_TOPIC_PARTITIONS_RESPONSE = message(
    "DescribeTopicPartitionsResponse",
    75,
    "0",
    "0+",
    Field("throttle_time_ms", INT32),
    Field(
        "topics",
        Array(
            struct(
                "DescribeTopicPartitionsResponseTopic",
                Field("error_code", INT16),
                Field("name", STRING, nullable_versions="0+"),
                Field("topic_id", UUID),
                Field("is_internal", BOOL, default=False),
                Field(
                    "partitions",
                    Array(
                        struct(
                            "DescribeTopicPartitionsResponsePartition",
                            Field("error_code", INT16),
                            Field("partition_index", INT32),
                            Field("leader_id", INT32),
                            Field("leader_epoch", INT32, default=-1),
                            Field("replica_nodes", Array(INT32)),
                            Field("isr_nodes", Array(INT32)),
                            Field("eligible_leader_replicas", Array(INT32), nullable_versions="0+", default=None),
                            Field("last_known_elr", Array(INT32), nullable_versions="0+", default=None),
                            Field("offline_replicas", Array(INT32)),
                        )
                    ),
                ),
                Field("topic_authorized_operations", INT32, default=-(2**31)),
            )
        ),
    ),
    Field(
        "next_cursor",
        struct("Cursor", Field("topic_name", STRING), Field("partition_index", INT32)),
        nullable_versions="0+",
        default=None,
    ),
)

DescribeTopicPartitionsRequest = build_message(DESCRIBE_TOPIC_PARTITIONS_REQUEST, __name__)
DescribeTopicPartitionsResponse = build_message(DESCRIBE_TOPIC_PARTITIONS_RESPONSE, __name__)

"""ElectLeaders (key 43), versions 0-2; v2 is flexible. # message defs: ElectLeadersRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT8, INT16, INT32, STRING, Array, Field, message, struct

ELECT_LEADERS_REQUEST = message(
    "ElectLeadersRequest",
    43,
    "0-2",
    "2+",
    Field("election_type", INT8, versions="1+"),  # 0 = preferred replica, 1 = unclean
    Field(
        "topic_partitions",
        Array(
            struct(
                "TopicPartitions",
                Field("topic", STRING),
                Field("partitions", Array(INT32)),  # Kafka's "PartitionId" before 3.x renamed it
            )
        ),
        nullable_versions="0+",
        default=None,  # null: every partition
    ),
    Field("timeout_ms", INT32, default=60000),
)

ELECT_LEADERS_RESPONSE = message(
    "ElectLeadersResponse",
    43,
    "0-2",
    "2+",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16, versions="1+"),
    Field(
        "replica_election_results",
        Array(
            struct(
                "ReplicaElectionResult",
                Field("topic", STRING),
                Field(
                    "partition_result",
                    Array(
                        struct(
                            "PartitionResult",
                            Field("partition_id", INT32),
                            Field("error_code", INT16),
                            Field("error_message", STRING, nullable_versions="0+", default=None),
                        )
                    ),
                ),
            )
        ),
    ),
)

ElectLeadersRequest = build_message(ELECT_LEADERS_REQUEST, __name__)
ElectLeadersResponse = build_message(ELECT_LEADERS_RESPONSE, __name__)

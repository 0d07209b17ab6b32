"""AlterPartitionReassignments (key 45), versions 0-1, flexible; v1 may forbid changing the
replication factor (KIP-860). # message defs: AlterPartitionReassignmentsRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, INT16, INT32, STRING, Array, Field, message, struct

ALTER_PARTITION_REASSIGNMENTS_REQUEST = message(
    "AlterPartitionReassignmentsRequest",
    45,
    "0-1",
    "0+",
    Field("timeout_ms", INT32, default=60000),
    Field("allow_replication_factor_change", BOOL, versions="1+", default=True),
    Field(
        "topics",
        Array(
            struct(
                "ReassignableTopic",
                Field("name", STRING),
                Field(
                    "partitions",
                    Array(
                        struct(
                            "ReassignablePartition",
                            Field("partition_index", INT32),
                            # null: cancel the pending reassignment of this partition
                            Field("replicas", Array(INT32), nullable_versions="0+", default=None),
                        )
                    ),
                ),
            )
        ),
    ),
)

ALTER_PARTITION_REASSIGNMENTS_RESPONSE = message(
    "AlterPartitionReassignmentsResponse",
    45,
    "0-1",
    "0+",
    Field("throttle_time_ms", INT32),
    Field("allow_replication_factor_change", BOOL, versions="1+", default=True),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable_versions="0+", default=None),
    Field(
        "responses",
        Array(
            struct(
                "ReassignableTopicResponse",
                Field("name", STRING),
                Field(
                    "partitions",
                    Array(
                        struct(
                            "ReassignablePartitionResponse",
                            Field("partition_index", INT32),
                            Field("error_code", INT16),
                            Field("error_message", STRING, nullable_versions="0+", default=None),
                        )
                    ),
                ),
            )
        ),
    ),
)

AlterPartitionReassignmentsRequest = build_message(ALTER_PARTITION_REASSIGNMENTS_REQUEST, __name__)
AlterPartitionReassignmentsResponse = build_message(ALTER_PARTITION_REASSIGNMENTS_RESPONSE, __name__)

"""ListPartitionReassignments (key 46), version 0, flexible. # message defs: ListPartitionReassignmentsRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, STRING, Array, Field, message, struct

LIST_PARTITION_REASSIGNMENTS_REQUEST = message(
    "ListPartitionReassignmentsRequest",
    46,
    "0",
    "0+",
    Field("timeout_ms", INT32, default=60000),
    Field(
        "topics",
        Array(
            struct(
                "ListPartitionReassignmentsTopics",
                Field("name", STRING),
                Field("partition_indexes", Array(INT32)),
            )
        ),
        nullable_versions="0+",
        default=None,  # null: every reassignment
    ),
)

LIST_PARTITION_REASSIGNMENTS_RESPONSE = message(
    "ListPartitionReassignmentsResponse",
    46,
    "0",
    "0+",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable_versions="0+", default=None),
    Field(
        "topics",
        Array(
            struct(
                "OngoingTopicReassignment",
                Field("name", STRING),
                Field(
                    "partitions",
                    Array(
                        struct(
                            "OngoingPartitionReassignment",
                            Field("partition_index", INT32),
                            Field("replicas", Array(INT32)),
                            Field("adding_replicas", Array(INT32)),
                            Field("removing_replicas", Array(INT32)),
                        )
                    ),
                ),
            )
        ),
    ),
)

ListPartitionReassignmentsRequest = build_message(LIST_PARTITION_REASSIGNMENTS_REQUEST, __name__)
ListPartitionReassignmentsResponse = build_message(LIST_PARTITION_REASSIGNMENTS_RESPONSE, __name__)

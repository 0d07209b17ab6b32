"""ConsumerGroupDescribe (key 69), versions 0-1, flexible: a KIP-848 group's epochs, members,
their assignments and targets. v1 adds each member's type (KIP-1099).
# message defs: ConsumerGroupDescribeRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, INT8, INT16, INT32, STRING, UUID, Array, Field, message, struct

CONSUMER_GROUP_DESCRIBE_REQUEST = message(
    "ConsumerGroupDescribeRequest",
    69,
    "0-1",
    "0+",
    Field("group_ids", Array(STRING)),
    Field("include_authorized_operations", BOOL),
)

_ASSIGNMENT = struct(
    "Assignment",
    Field("topic_partitions", Array(struct("TopicPartitions", Field("topic_id", UUID), Field("topic_name", STRING),
                                           Field("partitions", Array(INT32))))),
)

CONSUMER_GROUP_DESCRIBE_RESPONSE = message(
    "ConsumerGroupDescribeResponse",
    69,
    "0-1",
    "0+",
    Field("throttle_time_ms", INT32),
    Field(
        "groups",
        Array(
            struct(
                "DescribedGroup",
                Field("error_code", INT16),
                Field("error_message", STRING, nullable_versions="0+", default=None),
                Field("group_id", STRING),
                Field("group_state", STRING),
                Field("group_epoch", INT32),
                Field("assignment_epoch", INT32),
                Field("assignor_name", STRING),
                Field(
                    "members",
                    Array(
                        struct(
                            "Member",
                            Field("member_id", STRING),
                            Field("instance_id", STRING, nullable_versions="0+", default=None),
                            Field("rack_id", STRING, nullable_versions="0+", default=None),
                            Field("member_epoch", INT32),
                            Field("client_id", STRING),
                            Field("client_host", STRING),
                            Field("subscribed_topic_names", Array(STRING)),
                            Field("subscribed_topic_regex", STRING, nullable_versions="0+", default=None),
                            Field("assignment", _ASSIGNMENT),
                            Field("target_assignment", _ASSIGNMENT),
                            Field("member_type", INT8, versions="1+", default=-1),
                        )
                    ),
                ),
                Field("authorized_operations", INT32, default=-2147483648),
            )
        ),
    ),
)

ConsumerGroupDescribeRequest = build_message(CONSUMER_GROUP_DESCRIBE_REQUEST, __name__)
ConsumerGroupDescribeResponse = build_message(CONSUMER_GROUP_DESCRIBE_RESPONSE, __name__)

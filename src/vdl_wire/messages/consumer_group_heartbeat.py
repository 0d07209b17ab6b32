"""ConsumerGroupHeartbeat (key 68), versions 0-1, flexible: the member side of KIP-848's
consumer group protocol. v1 adds SubscribedTopicRegex, and the client names itself (KIP-1082).
# message defs: ConsumerGroupHeartbeatRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, STRING, UUID, Array, Field, message, struct

CONSUMER_GROUP_HEARTBEAT_REQUEST = message(
    "ConsumerGroupHeartbeatRequest",
    68,
    "0-1",
    "0+",
    Field("group_id", STRING),
    Field("member_id", STRING),
    Field("member_epoch", INT32),
    Field("instance_id", STRING, nullable_versions="0+", default=None),
    Field("rack_id", STRING, nullable_versions="0+", default=None),
    Field("rebalance_timeout_ms", INT32, default=-1),
    Field("subscribed_topic_names", Array(STRING), nullable_versions="0+", default=None),
    Field("subscribed_topic_regex", STRING, versions="1+", nullable_versions="1+", default=None),
    Field("server_assignor", STRING, nullable_versions="0+", default=None),
    Field(
        "topic_partitions",
        Array(struct("TopicPartitions", Field("topic_id", UUID), Field("partitions", Array(INT32)))),
        nullable_versions="0+",
        default=None,
    ),
)

CONSUMER_GROUP_HEARTBEAT_RESPONSE = message(
    "ConsumerGroupHeartbeatResponse",
    68,
    "0-1",
    "0+",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable_versions="0+", default=None),
    Field("member_id", STRING, nullable_versions="0+", default=None),
    Field("member_epoch", INT32),
    Field("heartbeat_interval_ms", INT32),
    Field(
        "assignment",
        struct(
            "Assignment",
            Field("topic_partitions",
                  Array(struct("TopicPartitions", Field("topic_id", UUID), Field("partitions", Array(INT32))))),
        ),
        nullable_versions="0+",
        default=None,
    ),
)

ConsumerGroupHeartbeatRequest = build_message(CONSUMER_GROUP_HEARTBEAT_REQUEST, __name__)
ConsumerGroupHeartbeatResponse = build_message(CONSUMER_GROUP_HEARTBEAT_RESPONSE, __name__)

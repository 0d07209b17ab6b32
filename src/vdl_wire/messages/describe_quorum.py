"""DescribeQuorum (key 55), versions 0-2; every version is flexible. v1 adds each replica's last
fetch and last caught-up timestamps (KIP-836); v2 the error messages, each replica's directory
id and the quorum's nodes with their listeners (KIP-853). The request is the same in every
version. # message defs: DescribeQuorumRequest.json, DescribeQuorumResponse.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, INT32, INT64, STRING, UINT16, UUID, Array, Field, message, struct

# KRaft's metadata log, the one partition this API describes (Kafka's CLUSTER_METADATA_TOPIC_*).
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
CLUSTER_METADATA_PARTITION = 0
UNKNOWN_TIMESTAMP = -1  # LastFetchTimestamp / LastCaughtUpTimestamp not known

DESCRIBE_QUORUM_REQUEST = message(
    "DescribeQuorumRequest",
    55,
    "0-2",
    "0+",
    Field(
        "topics",
        Array(
            struct(
                "TopicData",
                Field("topic_name", STRING),
                Field("partitions", Array(struct("PartitionData", Field("partition_index", INT32)))),
            )
        ),
    ),
)

_REPLICA_STATE = struct(
    "ReplicaState",
    Field("replica_id", INT32),
    Field("replica_directory_id", UUID, versions="2+"),
    Field("log_end_offset", INT64),
    Field("last_fetch_timestamp", INT64, versions="1+", default=UNKNOWN_TIMESTAMP),
    Field("last_caught_up_timestamp", INT64, versions="1+", default=UNKNOWN_TIMESTAMP),
)

DESCRIBE_QUORUM_RESPONSE = message(
    "DescribeQuorumResponse",
    55,
    "0-2",
    "0+",
    Field("error_code", INT16),
    Field("error_message", STRING, versions="2+", nullable_versions="2+", default=None),
    Field(
        "topics",
        Array(
            struct(
                "TopicData",
                Field("topic_name", STRING),
                Field(
                    "partitions",
                    Array(
                        struct(
                            "PartitionData",
                            Field("partition_index", INT32),
                            Field("error_code", INT16),
                            Field("error_message", STRING, versions="2+", nullable_versions="2+", default=None),
                            Field("leader_id", INT32),
                            Field("leader_epoch", INT32),
                            Field("high_watermark", INT64),
                            Field("current_voters", Array(_REPLICA_STATE)),
                            Field("observers", Array(_REPLICA_STATE)),
                        )
                    ),
                ),
            )
        ),
    ),
    Field(
        "nodes",
        Array(
            struct(
                "Node",
                Field("node_id", INT32, versions="2+"),
                Field(
                    "listeners",
                    Array(
                        struct(
                            "Listener",
                            Field("name", STRING, versions="2+"),
                            Field("host", STRING, versions="2+"),
                            Field("port", UINT16, versions="2+"),
                        )
                    ),
                    versions="2+",
                ),
            )
        ),
        versions="2+",
    ),
)

DescribeQuorumRequest = build_message(DESCRIBE_QUORUM_REQUEST, __name__)
DescribeQuorumResponse = build_message(DESCRIBE_QUORUM_RESPONSE, __name__)

"""Metadata (key 3), versions 0-13, flexible from 9. # message defs: MetadataRequest.json

v10+ carry topic ids (KIP-516), v12 lets a request name topics by id only, v13 adds a top-level
error code (KIP-1102).
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, INT16, INT32, STRING, UUID, Array, Field, message, struct

METADATA_REQUEST = message(
    "MetadataRequest",
    3,
    "0-13",
    "9+",
    # v0: an empty array means all topics; v1+: null means all topics, empty means none.
    Field(
        "topics",
        Array(
            struct(
                "MetadataRequestTopic",
                Field("topic_id", UUID, versions="10+"),
                Field("name", STRING, nullable_versions="10+"),
            )
        ),
        nullable_versions="1+",
    ),
    Field("allow_auto_topic_creation", BOOL, versions="4+", default=True),
    Field("include_cluster_authorized_operations", BOOL, versions="8-10"),
    Field("include_topic_authorized_operations", BOOL, versions="8+"),
)

METADATA_RESPONSE = message(
    "MetadataResponse",
    3,
    "0-13",
    "9+",
    Field("throttle_time_ms", INT32, versions="3+"),
    Field(
        "brokers",
        Array(
            struct(
                "MetadataResponseBroker",
                Field("node_id", INT32),
                Field("host", STRING),
                Field("port", INT32),
                Field("rack", STRING, versions="1+", nullable_versions="1+", default=None),
            )
        ),
    ),
    Field("cluster_id", STRING, versions="2+", nullable_versions="2+", default=None),
    Field("controller_id", INT32, versions="1+", default=-1),
    Field(
        "topics",
        Array(
            struct(
                "MetadataResponseTopic",
                Field("error_code", INT16),
                Field("name", STRING, nullable_versions="12+"),
                Field("topic_id", UUID, versions="10+"),
                Field("is_internal", BOOL, versions="1+", default=False),
                Field(
                    "partitions",
                    Array(
                        struct(
                            "MetadataResponsePartition",
                            Field("error_code", INT16),
                            Field("partition_index", INT32),
                            Field("leader_id", INT32),
                            Field("leader_epoch", INT32, versions="7+", default=-1),
                            Field("replica_nodes", Array(INT32)),
                            Field("isr_nodes", Array(INT32)),
                            Field("offline_replicas", Array(INT32), versions="5+"),
                        )
                    ),
                ),
                Field("topic_authorized_operations", INT32, versions="8+", default=-(2**31)),
            )
        ),
    ),
    Field("cluster_authorized_operations", INT32, versions="8-10", default=-(2**31)),
    Field("error_code", INT16, versions="13+"),
)

MetadataRequest = build_message(METADATA_REQUEST, __name__)
MetadataResponse = build_message(METADATA_RESPONSE, __name__)

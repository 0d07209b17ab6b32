"""DescribeCluster (key 60), versions 0-1; every version is flexible (KIP-700; v1 endpoint
type, KIP-919). # message defs: DescribeClusterRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, INT8, INT16, INT32, STRING, Array, Field, message, struct

ENDPOINT_BROKER = 1  # v1 endpoint_type: 1 brokers, 2 controllers
ENDPOINT_CONTROLLER = 2
AUTHORIZED_OPERATIONS_OMITTED = -(1 << 31)  # Kafka's INT32_MIN: "not asked for"

DESCRIBE_CLUSTER_REQUEST = message(
    "DescribeClusterRequest",
    60,
    "0-1",
    "0+",
    Field("include_cluster_authorized_operations", BOOL),
    Field("endpoint_type", INT8, versions="1+", default=ENDPOINT_BROKER),
)

DESCRIBE_CLUSTER_RESPONSE = message(
    "DescribeClusterResponse",
    60,
    "0-1",
    "0+",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable_versions="0+", default=None),
    Field("endpoint_type", INT8, versions="1+", default=ENDPOINT_BROKER),
    Field("cluster_id", STRING),
    Field("controller_id", INT32, default=-1),
    Field(
        "brokers",
        Array(
            struct(
                "DescribeClusterBroker",
                Field("broker_id", INT32),
                Field("host", STRING),
                Field("port", INT32),
                Field("rack", STRING, nullable_versions="0+", default=None),
            )
        ),
    ),
    Field("cluster_authorized_operations", INT32, default=AUTHORIZED_OPERATIONS_OMITTED),
)

DescribeClusterRequest = build_message(DESCRIBE_CLUSTER_REQUEST, __name__)
DescribeClusterResponse = build_message(DESCRIBE_CLUSTER_RESPONSE, __name__)

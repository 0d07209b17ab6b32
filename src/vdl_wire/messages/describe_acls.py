"""DescribeAcls (key 29), versions 0-3; v2+ flexible; v1 adds the pattern type (KIP-290).
# message defs: DescribeAclsRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT8, INT16, INT32, STRING, Array, Field, message, struct

DESCRIBE_ACLS_REQUEST = message(
    "DescribeAclsRequest",
    29,
    "0-3",
    "2+",
    Field("resource_type_filter", INT8),
    Field("resource_name_filter", STRING, nullable_versions="0+", default=None),
    Field("pattern_type_filter", INT8, versions="1+", default=3),
    Field("principal_filter", STRING, nullable_versions="0+", default=None),
    Field("host_filter", STRING, nullable_versions="0+", default=None),
    Field("operation", INT8),
    Field("permission_type", INT8),
)

DESCRIBE_ACLS_RESPONSE = message(
    "DescribeAclsResponse",
    29,
    "0-3",
    "2+",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable_versions="0+", default=None),
    Field(
        "resources",
        Array(
            struct(
                "DescribeAclsResource",
                Field("resource_type", INT8),
                Field("resource_name", STRING),
                Field("pattern_type", INT8, versions="1+", default=3),
                Field(
                    "acls",
                    Array(
                        struct(
                            "AclDescription",
                            Field("principal", STRING),
                            Field("host", STRING),
                            Field("operation", INT8),
                            Field("permission_type", INT8),
                        )
                    ),
                ),
            )
        ),
    ),
)

DescribeAclsRequest = build_message(DESCRIBE_ACLS_REQUEST, __name__)
DescribeAclsResponse = build_message(DESCRIBE_ACLS_RESPONSE, __name__)

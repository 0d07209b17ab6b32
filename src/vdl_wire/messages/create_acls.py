"""CreateAcls (key 30), versions 0-3; v2+ flexible; v1 adds the pattern type (KIP-290).
# message defs: CreateAclsRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT8, INT16, INT32, STRING, Array, Field, message, struct

CREATE_ACLS_REQUEST = message(
    "CreateAclsRequest",
    30,
    "0-3",
    "2+",
    Field(
        "creations",
        Array(
            struct(
                "AclCreation",
                Field("resource_type", INT8),
                Field("resource_name", STRING),
                Field("resource_pattern_type", INT8, versions="1+", default=3),
                Field("principal", STRING),
                Field("host", STRING),
                Field("operation", INT8),
                Field("permission_type", INT8),
            )
        ),
    ),
)

CREATE_ACLS_RESPONSE = message(
    "CreateAclsResponse",
    30,
    "0-3",
    "2+",
    Field("throttle_time_ms", INT32),
    Field(
        "results",
        Array(
            struct(
                "AclCreationResult",
                Field("error_code", INT16),
                Field("error_message", STRING, nullable_versions="0+", default=None),
            )
        ),
    ),
)

CreateAclsRequest = build_message(CREATE_ACLS_REQUEST, __name__)
CreateAclsResponse = build_message(CREATE_ACLS_RESPONSE, __name__)

"""DeleteAcls (key 31), versions 0-3; v2+ flexible; v1 adds the pattern type (KIP-290).
# message defs: DeleteAclsRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT8, INT16, INT32, STRING, Array, Field, message, struct

DELETE_ACLS_REQUEST = message(
    "DeleteAclsRequest",
    31,
    "0-3",
    "2+",
    Field(
        "filters",
        Array(
            struct(
                "DeleteAclsFilter",
                Field("resource_type_filter", INT8),
                Field("resource_name_filter", STRING, nullable_versions="0+", default=None),
                Field("pattern_type_filter", INT8, versions="1+", default=3),
                Field("principal_filter", STRING, nullable_versions="0+", default=None),
                Field("host_filter", STRING, nullable_versions="0+", default=None),
                Field("operation", INT8),
                Field("permission_type", INT8),
            )
        ),
    ),
)

DELETE_ACLS_RESPONSE = message(
    "DeleteAclsResponse",
    31,
    "0-3",
    "2+",
    Field("throttle_time_ms", INT32),
    Field(
        "filter_results",
        Array(
            struct(
                "DeleteAclsFilterResult",
                Field("error_code", INT16),
                Field("error_message", STRING, nullable_versions="0+", default=None),
                Field(
                    "matching_acls",
                    Array(
                        struct(
                            "DeleteAclsMatchingAcl",
                            Field("error_code", INT16),
                            Field("error_message", STRING, nullable_versions="0+", default=None),
                            Field("resource_type", INT8),
                            Field("resource_name", STRING),
                            Field("pattern_type", INT8, versions="1+", default=3),
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

DeleteAclsRequest = build_message(DELETE_ACLS_REQUEST, __name__)
DeleteAclsResponse = build_message(DELETE_ACLS_RESPONSE, __name__)

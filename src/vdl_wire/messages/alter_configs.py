"""AlterConfigs (key 33), versions 0-2; v2 is flexible. The whole config of a resource: what
is not listed returns to its default (IncrementalAlterConfigs, key 44, changes single keys).
# message defs: AlterConfigsRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, INT8, INT16, INT32, STRING, Array, Field, message, struct

ALTER_CONFIGS_REQUEST = message(
    "AlterConfigsRequest",
    33,
    "0-2",
    "2+",
    Field(
        "resources",
        Array(
            struct(
                "AlterConfigsResource",
                Field("resource_type", INT8),
                Field("resource_name", STRING),
                Field(
                    "configs",
                    Array(
                        struct(
                            "AlterableConfig",
                            Field("name", STRING),
                            Field("value", STRING, nullable_versions="0+", default=None),
                        )
                    ),
                ),
            )
        ),
    ),
    Field("validate_only", BOOL),
)

ALTER_CONFIGS_RESPONSE = message(
    "AlterConfigsResponse",
    33,
    "0-2",
    "2+",
    Field("throttle_time_ms", INT32),
    Field(
        "responses",
        Array(
            struct(
                "AlterConfigsResourceResponse",
                Field("error_code", INT16),
                Field("error_message", STRING, nullable_versions="0+", default=None),
                Field("resource_type", INT8),
                Field("resource_name", STRING),
            )
        ),
    ),
)

AlterConfigsRequest = build_message(ALTER_CONFIGS_REQUEST, __name__)
AlterConfigsResponse = build_message(ALTER_CONFIGS_RESPONSE, __name__)

"""IncrementalAlterConfigs (key 44), versions 0-1; v1 is flexible (KIP-339).
# message defs: IncrementalAlterConfigsRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, INT8, INT16, INT32, STRING, Array, Field, message, struct

INCREMENTAL_ALTER_CONFIGS_REQUEST = message(
    "IncrementalAlterConfigsRequest",
    44,
    "0-1",
    "1+",
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
                            Field("config_operation", INT8),  # 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT
                            Field("value", STRING, nullable_versions="0+", default=None),
                        )
                    ),
                ),
            )
        ),
    ),
    Field("validate_only", BOOL),
)

INCREMENTAL_ALTER_CONFIGS_RESPONSE = message(
    "IncrementalAlterConfigsResponse",
    44,
    "0-1",
    "1+",
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

IncrementalAlterConfigsRequest = build_message(INCREMENTAL_ALTER_CONFIGS_REQUEST, __name__)
IncrementalAlterConfigsResponse = build_message(INCREMENTAL_ALTER_CONFIGS_RESPONSE, __name__)

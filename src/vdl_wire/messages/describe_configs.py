"""DescribeConfigs (key 32), versions 0-4; v4 is flexible. # message defs: DescribeConfigsRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, INT8, INT16, INT32, STRING, Array, Field, message, struct

DESCRIBE_CONFIGS_REQUEST = message(
    "DescribeConfigsRequest",
    32,
    "0-4",
    "4+",
    Field(
        "resources",
        Array(
            struct(
                "DescribeConfigsResource",
                Field("resource_type", INT8),
                Field("resource_name", STRING),
                Field("configuration_keys", Array(STRING), nullable_versions="0+", default=None),
            )
        ),
    ),
    Field("include_synonyms", BOOL, versions="1+", default=False),
    Field("include_documentation", BOOL, versions="3+", default=False),
)

DESCRIBE_CONFIGS_RESPONSE = message(
    "DescribeConfigsResponse",
    32,
    "0-4",
    "4+",
    Field("throttle_time_ms", INT32),
    Field(
        "results",
        Array(
            struct(
                "DescribeConfigsResult",
                Field("error_code", INT16),
                Field("error_message", STRING, nullable_versions="0+", default=None),
                Field("resource_type", INT8),
                Field("resource_name", STRING),
                Field(
                    "configs",
                    Array(
                        struct(
                            "DescribeConfigsResourceResult",
                            Field("name", STRING),
                            Field("value", STRING, nullable_versions="0+", default=None),
                            Field("read_only", BOOL),
                            Field("is_default", BOOL, versions="0"),
                            Field("config_source", INT8, versions="1+", default=-1),
                            Field("is_sensitive", BOOL),
                            Field(
                                "synonyms",
                                Array(
                                    struct(
                                        "DescribeConfigsSynonym",
                                        Field("name", STRING),
                                        Field("value", STRING, nullable_versions="0+", default=None),
                                        Field("source", INT8),
                                    )
                                ),
                                versions="1+",
                            ),
                            Field("config_type", INT8, versions="3+", default=0),
                            Field("documentation", STRING, versions="3+", nullable_versions="0+", default=None),
                        )
                    ),
                ),
            )
        ),
    ),
)

DescribeConfigsRequest = build_message(DESCRIBE_CONFIGS_REQUEST, __name__)
DescribeConfigsResponse = build_message(DESCRIBE_CONFIGS_RESPONSE, __name__)

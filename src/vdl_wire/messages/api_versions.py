"""ApiVersions (key 18), versions 0-4; v3+ are flexible, v4 is v3 unchanged (it lets a broker list
a minimum version of 0 for a feature). # message defs: ApiVersionsRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, INT16, INT32, INT64, STRING, Array, Field, message, struct

API_VERSIONS_REQUEST = message(
    "ApiVersionsRequest",
    18,
    "0-4",
    "3+",
    Field("client_software_name", STRING, versions="3+"),
    Field("client_software_version", STRING, versions="3+"),
)

API_VERSIONS_RESPONSE = message(
    "ApiVersionsResponse",
    18,
    "0-4",
    "3+",
    Field("error_code", INT16),
    Field(
        "api_keys",
        Array(
            struct(
                "ApiVersion",
                Field("api_key", INT16),
                Field("min_version", INT16),
                Field("max_version", INT16),
            )
        ),
    ),
    Field("throttle_time_ms", INT32, versions="1+"),
    Field(
        "supported_features",
        Array(
            struct(
                "SupportedFeatureKey",
                Field("name", STRING, versions="3+"),
                Field("min_version", INT16, versions="3+"),
                Field("max_version", INT16, versions="3+"),
            )
        ),
        versions="3+",
        tagged_versions="3+",
        tag=0,
    ),
    Field("finalized_features_epoch", INT64, versions="3+", tagged_versions="3+", tag=1, default=-1),
    Field(
        "finalized_features",
        Array(
            struct(
                "FinalizedFeatureKey",
                Field("name", STRING, versions="3+"),
                Field("max_version_level", INT16, versions="3+"),
                Field("min_version_level", INT16, versions="3+"),
            )
        ),
        versions="3+",
        tagged_versions="3+",
        tag=2,
    ),
    Field("zk_migration_ready", BOOL, versions="3+", tagged_versions="3+", tag=3, default=False),
)

ApiVersionsRequest = build_message(API_VERSIONS_REQUEST, __name__)
ApiVersionsResponse = build_message(API_VERSIONS_RESPONSE, __name__)

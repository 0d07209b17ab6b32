"""UpdateFeatures (key 57), versions 0-1, all flexible (KIP-584; v1: upgrade_type and
validate_only, KIP-778). # message defs: UpdateFeaturesRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, INT8, INT16, INT32, STRING, Array, Field, message, struct

UPGRADE = 1  # upgrade_type values (KIP-778): 1 upgrade, 2 safe downgrade, 3 unsafe downgrade
METADATA_FEATURE = "vdl.metadata.version"  # VDL's one feature: the level of its metadata commands

UPDATE_FEATURES_REQUEST = message(
    "UpdateFeaturesRequest",
    57,
    "0-1",
    "0+",
    Field("timeout_ms", INT32, default=60_000),
    Field(
        "feature_updates",
        Array(
            struct(
                "FeatureUpdateKey",
                Field("feature", STRING),
                Field("max_version_level", INT16),
                Field("allow_downgrade", BOOL, versions="0", default=False),
                Field("upgrade_type", INT8, versions="1+", default=UPGRADE),
            )
        ),
    ),
    Field("validate_only", BOOL, versions="1+", default=False),
)

UPDATE_FEATURES_RESPONSE = message(
    "UpdateFeaturesResponse",
    57,
    "0-1",
    "0+",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable_versions="0+", default=None),
    Field(
        "results",
        Array(
            struct(
                "UpdatableFeatureResult",
                Field("feature", STRING),
                Field("error_code", INT16),
                Field("error_message", STRING, nullable_versions="0+", default=None),
            )
        ),
    ),
)

UpdateFeaturesRequest = build_message(UPDATE_FEATURES_REQUEST, __name__)
UpdateFeaturesResponse = build_message(UPDATE_FEATURES_RESPONSE, __name__)

"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), versions 0-1, flexible from v1
(KIP-546). # message defs: DescribeClientQuotasRequest.json, AlterClientQuotasRequest.json

A filter component's match type: 0 the exact name in `match`, 1 the entity type's default
(`match` null), 2 any name the entity type has (`match` null).
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BOOL, FLOAT64, INT8, INT16, INT32, STRING, Array, Field, message, struct

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2

DESCRIBE_CLIENT_QUOTAS_REQUEST = message(
    "DescribeClientQuotasRequest",
    48,
    "0-1",
    "1+",
    Field(
        "components",
        Array(
            struct(
                "ComponentData",
                Field("entity_type", STRING),
                Field("match_type", INT8),
                Field("match", STRING, nullable_versions="0+", default=None),
            )
        ),
    ),
    Field("strict", BOOL),
)

_ENTITY = struct(
    "EntityData",
    Field("entity_type", STRING),
    Field("entity_name", STRING, nullable_versions="0+", default=None),
)

DESCRIBE_CLIENT_QUOTAS_RESPONSE = message(
    "DescribeClientQuotasResponse",
    48,
    "0-1",
    "1+",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable_versions="0+", default=None),
    Field(
        "entries",
        Array(
            struct(
                "EntryData",
                Field("entity", Array(_ENTITY)),
                Field("values", Array(struct("ValueData", Field("key", STRING), Field("value", FLOAT64)))),
            )
        ),
        nullable_versions="0+",
        default=None,
    ),
)

ALTER_CLIENT_QUOTAS_REQUEST = message(
    "AlterClientQuotasRequest",
    49,
    "0-1",
    "1+",
    Field(
        "entries",
        Array(
            struct(
                "EntryData",
                Field("entity", Array(_ENTITY)),
                Field(
                    "ops",
                    Array(struct("OpData", Field("key", STRING), Field("value", FLOAT64), Field("remove", BOOL))),
                ),
            )
        ),
    ),
    Field("validate_only", BOOL),
)

ALTER_CLIENT_QUOTAS_RESPONSE = message(
    "AlterClientQuotasResponse",
    49,
    "0-1",
    "1+",
    Field("throttle_time_ms", INT32),
    Field(
        "entries",
        Array(
            struct(
                "EntryData",
                Field("error_code", INT16),
                Field("error_message", STRING, nullable_versions="0+", default=None),
                Field("entity", Array(_ENTITY)),
            )
        ),
    ),
)

DescribeClientQuotasRequest = build_message(DESCRIBE_CLIENT_QUOTAS_REQUEST, __name__)
DescribeClientQuotasResponse = build_message(DESCRIBE_CLIENT_QUOTAS_RESPONSE, __name__)
AlterClientQuotasRequest = build_message(ALTER_CLIENT_QUOTAS_REQUEST, __name__)
AlterClientQuotasResponse = build_message(ALTER_CLIENT_QUOTAS_RESPONSE, __name__)

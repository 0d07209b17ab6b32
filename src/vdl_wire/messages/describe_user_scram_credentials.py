"""DescribeUserScramCredentials (key 50), version 0, flexible (KIP-554).
# message defs: DescribeUserScramCredentialsRequest.json

Mechanism codes: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512 (0 unknown).
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT8, INT16, INT32, STRING, Array, Field, message, struct

DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST = message(
    "DescribeUserScramCredentialsRequest",
    50,
    "0",
    "0+",
    Field("users", Array(struct("UserName", Field("name", STRING))), nullable_versions="0+", default=None),
)

DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE = message(
    "DescribeUserScramCredentialsResponse",
    50,
    "0",
    "0+",
    Field("throttle_time_ms", INT32),
    Field("error_code", INT16),
    Field("error_message", STRING, nullable_versions="0+", default=None),
    Field(
        "results",
        Array(
            struct(
                "DescribeUserScramCredentialsResult",
                Field("user", STRING),
                Field("error_code", INT16),
                Field("error_message", STRING, nullable_versions="0+", default=None),
                Field(
                    "credential_infos",
                    Array(struct("CredentialInfo", Field("mechanism", INT8), Field("iterations", INT32))),
                ),
            )
        ),
    ),
)

DescribeUserScramCredentialsRequest = build_message(DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST, __name__)
DescribeUserScramCredentialsResponse = build_message(DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE, __name__)

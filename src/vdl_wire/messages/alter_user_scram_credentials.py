"""AlterUserScramCredentials (key 51), version 0, flexible (KIP-554).
# message defs: AlterUserScramCredentialsRequest.json

An upsertion carries the salt and the salted password (PBKDF2 done by the client); the broker
keeps only the stored and server keys derived from it (RFC 5802).
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BYTES, INT8, INT16, INT32, STRING, Array, Field, message, struct

ALTER_USER_SCRAM_CREDENTIALS_REQUEST = message(
    "AlterUserScramCredentialsRequest",
    51,
    "0",
    "0+",
    Field("deletions", Array(struct("ScramCredentialDeletion", Field("name", STRING), Field("mechanism", INT8)))),
    Field(
        "upsertions",
        Array(
            struct(
                "ScramCredentialUpsertion",
                Field("name", STRING),
                Field("mechanism", INT8),
                Field("iterations", INT32),
                Field("salt", BYTES),
                Field("salted_password", BYTES),
            )
        ),
    ),
)

ALTER_USER_SCRAM_CREDENTIALS_RESPONSE = message(
    "AlterUserScramCredentialsResponse",
    51,
    "0",
    "0+",
    Field("throttle_time_ms", INT32),
    Field(
        "results",
        Array(
            struct(
                "AlterUserScramCredentialsResult",
                Field("user", STRING),
                Field("error_code", INT16),
                Field("error_message", STRING, nullable_versions="0+", default=None),
            )
        ),
    ),
)

AlterUserScramCredentialsRequest = build_message(ALTER_USER_SCRAM_CREDENTIALS_REQUEST, __name__)
AlterUserScramCredentialsResponse = build_message(ALTER_USER_SCRAM_CREDENTIALS_RESPONSE, __name__)

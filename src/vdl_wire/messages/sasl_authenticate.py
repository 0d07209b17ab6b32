"""SaslAuthenticate (key 36), versions 0-2; v2 is flexible. # message defs: SaslAuthenticateRequest.json"""

from __future__ import annotations

from ..codec import build_message
from ..schema import BYTES, INT16, INT64, STRING, Field, message

SASL_AUTHENTICATE_REQUEST = message(
    "SaslAuthenticateRequest",
    36,
    "0-2",
    "2+",
    Field("auth_bytes", BYTES),
)

SASL_AUTHENTICATE_RESPONSE = message(
    "SaslAuthenticateResponse",
    36,
    "0-2",
    "2+",
    Field("error_code", INT16),
    Field("error_message", STRING, nullable_versions="0+", default=None),
    Field("auth_bytes", BYTES),
    Field("session_lifetime_ms", INT64, versions="1+"),  # 0: no re-authentication (KIP-368)
)

SaslAuthenticateRequest = build_message(SASL_AUTHENTICATE_REQUEST, __name__)
SaslAuthenticateResponse = build_message(SASL_AUTHENTICATE_RESPONSE, __name__)

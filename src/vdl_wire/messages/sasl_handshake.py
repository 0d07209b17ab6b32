"""SaslHandshake (key 17), versions 0-1, never flexible. # message defs: SaslHandshakeRequest.json

v0: the SASL tokens that follow travel as bare size-prefixed frames (no Kafka header); v1: they
travel in SaslAuthenticate requests (KIP-152).
"""

from __future__ import annotations

from ..codec import build_message
from ..schema import INT16, STRING, Array, Field, message

SASL_HANDSHAKE_REQUEST = message(
    "SaslHandshakeRequest",
    17,
    "0-1",
    "none",
    Field("mechanism", STRING),
)

SASL_HANDSHAKE_RESPONSE = message(
    "SaslHandshakeResponse",
    17,
    "0-1",
    "none",
    Field("error_code", INT16),
    Field("mechanisms", Array(STRING)),
)

SaslHandshakeRequest = build_message(SASL_HANDSHAKE_REQUEST, __name__)
SaslHandshakeResponse = build_message(SASL_HANDSHAKE_RESPONSE, __name__)

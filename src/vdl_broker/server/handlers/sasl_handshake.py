"""SaslHandshake (key 17): pick the SASL mechanism of a connection on a SASL listener (KIP-43).

An unsupported mechanism is answered UNSUPPORTED_SASL_MECHANISM with the enabled ones, and the
connection closed; a second handshake, or one on a listener without SASL, ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import SaslHandshakeRequest, SaslHandshakeResponse

API_KEY = SaslHandshakeRequest.DECL.api_key
NAME = "SaslHandshake"


def handle(node: NodeView, context: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    mechanisms = list(node.config.sasl_mechanisms)
    connection = context.connection
    session = connection.sasl if connection is not None else None
    if connection is None or session is None:
        return SaslHandshakeResponse(error_code=int(ErrorCode.ILLEGAL_SASL_STATE), mechanisms=mechanisms)
    if session.mechanism is not None or session.authenticated:
        connection.close_after_response()
        return SaslHandshakeResponse(error_code=int(ErrorCode.ILLEGAL_SASL_STATE), mechanisms=mechanisms)
    if not session.handshake(request.mechanism, context.api_version):
        connection.close_after_response()
        return SaslHandshakeResponse(error_code=int(ErrorCode.UNSUPPORTED_SASL_MECHANISM), mechanisms=mechanisms)
    return SaslHandshakeResponse(error_code=0, mechanisms=mechanisms)


def error_response(request: SaslHandshakeRequest, version: int, code: ErrorCode) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=int(code), mechanisms=[])

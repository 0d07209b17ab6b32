"""SaslAuthenticate (key 36): one SASL token each way (KIP-152), after SaslHandshake v1.

A failure answers SASL_AUTHENTICATION_FAILED with a message that holds no secret, and the
connection is closed once the answer is sent. session_lifetime_ms is 0: no re-authentication
(KIP-368) is asked for.
"""

from __future__ import annotations

from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import SaslAuthenticateRequest, SaslAuthenticateResponse
from vdl_wire.sasl import SaslError

API_KEY = SaslAuthenticateRequest.DECL.api_key
NAME = "SaslAuthenticate"


async def handle(node: NodeView, context: RequestContext,
                 request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    connection = context.connection
    session = connection.sasl if connection is not None else None
    if connection is None or session is None or session.mechanism is None or session.authenticated or session.raw_tokens:
        if connection is not None:
            connection.close_after_response()
        return SaslAuthenticateResponse(error_code=int(ErrorCode.ILLEGAL_SASL_STATE),
                                        error_message="SaslAuthenticate is only valid after SaslHandshake v1")
    try:
        reply, done = await session.step(bytes(request.auth_bytes))
    except SaslError as error:
        connection.close_after_response()
        return SaslAuthenticateResponse(error_code=int(ErrorCode.SASL_AUTHENTICATION_FAILED), error_message=str(error))
    if done and session.user is not None:
        connection.authenticated_as(session.user)
    return SaslAuthenticateResponse(error_code=0, auth_bytes=reply, session_lifetime_ms=0)


def error_response(request: SaslAuthenticateRequest, version: int,
                   code: ErrorCode) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(error_code=int(code))

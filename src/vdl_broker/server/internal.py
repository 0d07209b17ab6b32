"""Kafka requests between nodes, over the Raft connection (mutual TLS when TLS is configured).

A node forwards admin requests to the metadata leader (CreateTopics, CreateAcls, user changes
...) and asks other replicas for their view of a stream with ordinary Kafka requests, but not
through their client listeners, which may demand SASL the node has no password for. The
request travels in a call of the Raft transport (raft/transport.py) with an envelope naming
the principal it is made for (Kafka's forwarding, KIP-590, does the same with its Envelope
API): the client's, checked again by the receiving node's authorizer, or the node's own
(`Node:<id>`, which only this path can carry, for requests of the broker itself).

    payload := envelope length u16 | envelope (JSON: principal, host, protocol) | request frame
    answer  := response frame (without the size prefix)
"""

from __future__ import annotations

import inspect
import json
import struct
from typing import TYPE_CHECKING, Any

from vdl_broker.listeners import PLAINTEXT
from vdl_broker.server.connection import RequestContext
from vdl_wire.api import decode_request, decode_response, encode_request, encode_response

if TYPE_CHECKING:
    from vdl_broker.server.broker import Broker
    from vdl_broker.server.node_view import NodeView

CLIENT_ID = "vdl-node"
NODE_PRINCIPAL_PREFIX = "Node:"
_LENGTH = struct.Struct(">H")


def node_principal(node_id: int) -> str:
    return f"{NODE_PRINCIPAL_PREFIX}{node_id}"


async def call(node: NodeView, node_id: int, request: Any, version: int, timeout_s: float,
               context: RequestContext | None = None) -> Any:
    """`request` handled by node `node_id` on behalf of `context`'s principal (None: this node's
    own request); its decoded response. ConnectionError / TimeoutError when it cannot be had."""
    transport = node.host.transport
    if transport is None:
        raise ConnectionError("a cluster of one has no other node")
    envelope = {"principal": context.principal if context is not None else node_principal(node.node_id),
                "host": context.client_host if context is not None else "",
                "protocol": context.protocol if context is not None else PLAINTEXT}
    head = json.dumps(envelope, separators=(",", ":")).encode()
    api_key = type(request).DECL.api_key
    frame = b"".join(bytes(p) for p in encode_request(api_key, version, 1, CLIENT_ID, request))[4:]
    answer = await transport.call(node_id, _LENGTH.pack(len(head)) + head + frame, timeout_s)
    return decode_response(api_key, version, answer)[1]


async def serve(broker: Broker, peer_id: int, payload: bytes) -> bytes:
    """Answer a request another node sent (the transport's call handler)."""
    (length,) = _LENGTH.unpack_from(payload, 0)
    envelope = json.loads(payload[2:2 + length])
    header, request = decode_request(memoryview(payload)[2 + length:])
    handler = broker.handlers[header.request_api_key]
    principal = str(envelope["principal"])
    if principal.startswith(NODE_PRINCIPAL_PREFIX) and principal != node_principal(peer_id):
        raise ValueError(f"node {peer_id} sent a request as {principal}")
    context = RequestContext(header, str(envelope.get("host", "")), None, principal,
                             str(envelope.get("protocol", PLAINTEXT)), forwarded=True)
    response = handler.handle(broker, context, request)
    if inspect.isawaitable(response):
        response = await response
    return b"".join(bytes(p) for p in encode_response(header, response))[4:]

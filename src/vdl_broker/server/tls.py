"""TLS contexts of a node (Python's ssl module) and the identities certificates carry.

- Client listeners (SSL, SASL_SSL): the node's certificate; client certificates per
  `ssl_client_auth` (none | requested | required), checked against `ssl_cafile`; a verified
  client certificate makes the principal `User:<its subject CN>`.
- Raft between nodes, when the node has a certificate, key and CA: mutual TLS both ways, the
  peer's certificate signed by the same CA and naming the node id it claims: its subject CN is
  `node-<id>` (see `node_common_name`). Host names are not checked between nodes (nodes are
  named by id, and local clusters share one address); a client checks the node's host name
  against its subjectAltName as usual.
"""

from __future__ import annotations

import ssl
from typing import Any

from vdl_broker.config import NodeConfig

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def node_common_name(node_id: int) -> str:
    """The subject CN a node's certificate carries (its Raft identity)."""
    return f"node-{node_id}"


def certificate_cn(peercert: dict[str, Any] | None) -> str | None:
    """The subject CN of a verified peer certificate (`SSLSocket.getpeercert()` form)."""
    for rdn in (peercert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def node_id_of(peercert: dict[str, Any] | None) -> int | None:
    """The node id a verified certificate names (CN `node-<id>`), else None."""
    cn = certificate_cn(peercert) or ""
    number = cn.removeprefix("node-")
    return int(number) if cn.startswith("node-") and number.isdigit() else None


def _base(purpose: int, config: NodeConfig) -> ssl.SSLContext:
    context = ssl.SSLContext(purpose)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    assert config.ssl_certfile and config.ssl_keyfile
    context.load_cert_chain(config.ssl_certfile, config.ssl_keyfile)
    if config.ssl_cafile:
        context.load_verify_locations(config.ssl_cafile)
    return context


def client_listener_context(config: NodeConfig) -> ssl.SSLContext:
    context = _base(ssl.PROTOCOL_TLS_SERVER, config)
    context.verify_mode = _CLIENT_AUTH[config.ssl_client_auth]
    return context


def raft_contexts(config: NodeConfig) -> tuple[ssl.SSLContext, ssl.SSLContext] | None:
    """(server side, dialing side) for Raft mutual TLS, or None when TLS is not configured."""
    if not config.raft_tls:
        return None
    server = _base(ssl.PROTOCOL_TLS_SERVER, config)
    server.verify_mode = ssl.CERT_REQUIRED
    client = _base(ssl.PROTOCOL_TLS_CLIENT, config)
    client.check_hostname = False  # identity = the node id in the CN, checked by the transport
    client.verify_mode = ssl.CERT_REQUIRED
    return server, client

"""Raft transport over mutual TLS (real sockets on loopback): nodes with certificates of the
cluster's CA connect and carry messages and calls; a node whose certificate another CA signed,
or that claims another node's id, is refused and logged."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import struct
from pathlib import Path

import pytest

from tests.support.security import TlsMaterial
from tests.support.waiting import within
from tests.unit.raft.test_wire_transport import FAST, Inbox, _until
from vdl_broker.config import NodeConfig
from vdl_broker.raft.transport import RaftTransport
from vdl_broker.raft.types import Message, MessageType
from vdl_broker.raft.wire import encode_hello
from vdl_broker.server.tls import node_id_of, raft_contexts

TIER = "component"  # real sockets, threads or sleeps in this process
pytestmark = pytest.mark.timeout(30)


def contexts(directory: Path, cert_of: int, ca: Path) -> tuple:
    config = NodeConfig(Path("/tmp"), ssl_certfile=str(directory / f"node{cert_of}.pem"),
                        ssl_keyfile=str(directory / f"node{cert_of}.key"), ssl_cafile=str(ca))
    pair = raft_contexts(config)
    assert pair is not None
    return pair


def transport(node_id: int, inbox: Inbox, tls: tuple) -> RaftTransport:
    return RaftTransport(node_id, ("127.0.0.1", 0), inbox, config=FAST, tls=tls, identify=node_id_of)


def test_nodes_of_the_cluster_ca_talk_and_impostors_are_refused(tls_material: TlsMaterial,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    trusted, foreign = tls_material.directory, tls_material.foreign_directory

    async def scenario() -> None:
        inbox1, inbox2 = Inbox(), Inbox()
        one = transport(1, inbox1, contexts(trusted, 1, tls_material.ca))
        two = transport(2, inbox2, contexts(trusted, 2, tls_material.ca))
        await one.start()
        await two.start()

        async def echo(peer: int, payload: bytes) -> bytes:
            return b"node 2 got " + payload + f" from {peer}".encode()

        two.call_handler = echo
        one.add_peer(2, ("127.0.0.1", two.port))
        two.add_peer(1, ("127.0.0.1", one.port))
        await _until(lambda: one.is_connected(2) and two.is_connected(1))
        assert one.send("g", Message(MessageType.HEARTBEAT, 2, 1, 3))
        await inbox2.wait_count(1)
        assert inbox2.items[0][1].term == 3
        assert await one.call(2, b"ping", 5) == b"node 2 got ping from 1"

        # Impostors dial node 2 as "node 1": one with a certificate another CA signed, one with
        # a certificate of this CA that names node 3.
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="vdl_broker.raft.transport"):
            for cert_dir, cert_of, ca, why in ((foreign, 1, tls_material.ca, "TLS failed"),
                                               (trusted, 3, tls_material.ca, "its certificate names node 3")):
                impostor = transport(1, Inbox(), contexts(cert_dir, cert_of, ca))
                await impostor.start()
                impostor.add_peer(2, ("127.0.0.1", two.port))
                await _until(lambda why=why: any(why in r.getMessage() and "refused" in r.getMessage()
                                                 for r in caplog.records), timeout=10)
                await impostor.stop()
        # The genuine node 1 is still the one connected, and still talks.
        assert two.stats(1).connects == 1
        assert await one.call(2, b"again", 5) == b"node 2 got again from 1"
        await one.stop()
        await two.stop()

    asyncio.run(scenario())


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_a_client_hello_waiting_when_the_connection_is_accepted_is_not_lost(tls_material: TlsMaterial,
                                                                            loop_kind: str) -> None:
    """The dialer's ClientHello is in the socket before the accepting node has even accepted the
    connection (a fast dialer, a busy acceptor). It must start the handshake, not be read as plain
    bytes and leave both sides waiting out the handshake timeout."""
    trusted = tls_material.directory

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        two = transport(2, Inbox(), contexts(trusted, 2, tls_material.ca))
        await two.start()
        two.add_peer(1, None)
        dialing = contexts(trusted, 1, tls_material.ca)[1]
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = dialing.wrap_bio(incoming, outgoing, server_hostname="node2")
        # Blocking connect and send: both done before the acceptor's loop runs again.
        raw = socket.create_connection(("127.0.0.1", two.port))
        with contextlib.suppress(ssl.SSLWantReadError):
            tls.do_handshake()
        raw.sendall(outgoing.read())
        raw.setblocking(False)
        deadline = loop.time() + FAST.connect_timeout_s / 2  # well inside the handshake timeout
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                pending = outgoing.read()
                if pending:
                    await loop.sock_sendall(raw, pending)
                try:
                    data = await within(loop.sock_recv(raw, 65536), max(0.0, deadline - loop.time()))
                except TimeoutError:
                    raise AssertionError("the accepting node never answered the ClientHello") from None
                assert data, "the accepting node closed the connection during the handshake"
                incoming.write(data)
        await loop.sock_sendall(raw, outgoing.read())
        hello = encode_hello(1)
        tls.write(struct.pack(">I", len(hello)) + hello)
        await loop.sock_sendall(raw, outgoing.read())
        await _until(lambda: two.is_connected(1))
        raw.close()
        await two.stop()

    if loop_kind == "uvloop":
        uvloop = pytest.importorskip("uvloop", reason="uvloop is not installed on this platform")
        uvloop.run(scenario())
    else:
        asyncio.run(scenario())

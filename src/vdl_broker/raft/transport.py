"""asyncio TCP transport between Raft nodes: one connection per pair of nodes for every group.

Exactly one connection per pair: the node with the lower id dials, the higher id accepts (a
restarted dialer's new connection replaces the old one). The connection carries frames both
ways: a 4-byte big-endian length, then a body from vdl_broker.raft.wire. The dialer's first
frame is a HELLO naming itself.

Where a peer is dialed: the address last given by `add_peer` (what the cluster metadata says
of it) and, when the two differ, the one `peers` gave at construction (the node's own
configuration), tried in turn until one answers. A whole cluster moved to new addresses has
only stale ones in its metadata until its nodes register again, which needs a metadata leader,
which needs the configured addresses; a single node moved has the new address in the metadata
while the other nodes' configurations may still name the old one. A connection that reaches
another node than the one dialed (a stale address now used by another node) is dropped at its
first frame (the sender id differs) and the other address tried.

With TLS (`tls` = server and dialing SSL contexts, `identify` = the node id a verified peer
certificate names) every connection is mutual TLS and a peer must hold a certificate naming the
node id it claims; anything else is refused and logged. The same connection carries calls
(`call()`: one payload out, one back, for the layers above) both ways.

Sending never blocks and never waits for a peer: messages queue per peer (bounded) and a writer
task flushes everything queued in one frame, so the heartbeats of all groups from one tick reach
a peer as one frame (coalescing). When the peer is down or the queue is full the message is
dropped -- Raft retransmits (heartbeat stall detection, probes, election timeouts).

Node liveness (vdl_broker.raft.liveness): `send_heartbeats()` (the host, every tick) writes a small
HEARTBEAT frame to every connected peer that got no other frame since the last call, carrying
this process's incarnation (a new connection starts with one too, so a restarted peer shows at
once); every frame received counts as hearing from its sender (`heard_from()`), whatever the
number of Raft groups.

A node stopping gracefully says so (`announce_leaving()`: a leaving notice to every connected
peer, vdl_broker.raft.wire); a peer that said so is `is_leaving()` until it connects again (a
restart), and `on_leaving` hears of it. Leaders handing a group over stop counting on it
(RaftGroup.stop): when a whole cluster stops at once, no leader waits out its transfer timeout for
a transferee that stopped too.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from vdl_broker.log.entry import FrozenBuffer
from vdl_broker.raft.types import EntryType, Message
from vdl_broker.raft.wire import (
    CHECKSUMMED,
    ENTRY_CHECKSUMS,
    KIND_HEARTBEAT,
    KIND_HELLO,
    KIND_MESSAGES,
    KIND_REQUEST,
    KIND_RESPONSE,
    VERSION,
    WireError,
    checksummed,
    decode_frame,
    encode_call,
    encode_frame,
    encode_heartbeat,
    encode_hello,
    encode_leaving,
)
from vdl_wire.errors import DecodeError
from vdl_wire.framing import FrameReader, ReadWatermark
from vdl_wire.records.batch_header import CRC_OFFSET
from vdl_wire.records.record_batch import crc_matches

log = logging.getLogger(__name__)

_LENGTH = struct.Struct(">I")

Handler = Callable[[str, Message], None]
Address = tuple[str, int]
CallHandler = Callable[[int, bytes], Awaitable[bytes]]  # (caller's node id, payload) -> answer
Identify = Callable[[Any], "int | None"]  # a verified peer certificate -> the node id it names
TlsContexts = tuple[ssl.SSLContext, ssl.SSLContext]  # (accepting side, dialing side)


@dataclass
class TransportConfig:
    max_frame_bytes: int = 128 << 20  # a frame holds at most ~one append per group; refuse more
    max_queue_messages: int = 65_536  # per peer; beyond it new messages are dropped
    max_queue_bytes: int = 64 << 20  # per peer, entry payload bytes (the core bounds in-flight too)
    connect_timeout_s: float = 2.0
    backoff_min_s: float = 0.05
    backoff_max_s: float = 0.5


@dataclass
class PeerStats:
    """Counters per peer (tests observe coalescing through them)."""

    frames_sent: int = 0
    messages_sent: int = 0
    bytes_sent: int = 0
    frames_received: int = 0
    messages_received: int = 0
    dropped: int = 0
    connects: int = 0
    heartbeats_sent: int = 0
    heartbeats_received: int = 0
    refused: int = 0  # malformed frames (a record batch failing its CRC among them), each with its connection


@dataclass
class _Peer:
    id: int
    address: Address | None  # the latest given (the cluster metadata's)
    configured: Address | None = None  # from the node's configuration, tried when `address` fails
    queue: list[tuple[str, Message]] = field(default_factory=list)
    queue_bytes: int = 0
    writer: asyncio.StreamWriter | None = None
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)
    stats: PeerStats = field(default_factory=PeerStats)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    wrote: bool = False  # a message frame went out since the last send_heartbeats()
    heartbeat_due: bool = False
    incarnation: int | None = None  # the peer's, from its last HEARTBEAT frame
    calls: dict[int, asyncio.Future[bytes]] = field(default_factory=dict)
    leaving: bool = False  # it said it is stopping (the leaving notice), on its current connection


class _FrameProtocol(asyncio.BufferedProtocol):
    """Reads an attached connection's frames in place of its StreamReader (which read the HELLO).

    A buffered protocol reading with vdl_wire's FrameReader: the entries of an append longer
    than one read are read by the kernel straight into a FrozenBuffer of the frame's length and
    handed on as they are (reading into fresh bytes per read and joining them cost the follower
    a third of its CPU); small frames come as bytes of their own. The log keeps views of the
    entries in either without a copy (tail_cache._kept).

    Each frame goes to `on_frame` from the transport's callback, with no task wake-up per frame.
    Writing stays with the StreamWriter: flow control and the connection's loss are passed on
    to its original protocol, which its drain() and close() rely on. `on_end` is called once,
    when the connection ends (with the error, if any); nothing is read after."""

    def __init__(self, inner: asyncio.BaseProtocol, max_frame_bytes: int, on_frame: Callable[[memoryview], None],
                 on_end: Callable[[BaseException | None], None]) -> None:
        self._inner = inner
        # Its peers are the cluster's nodes: a frame's buffer is allocated whole from its size.
        self._reader = FrameReader(max_frame_bytes, FrozenBuffer.unfilled, eager_bytes=max_frame_bytes)
        self._on_frame = on_frame
        self._on_end = on_end
        self.ended = False
        self.watermark = ReadWatermark(None)  # a plain TCP connection's, once attached (_read_loop)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if self.ended:
            return
        try:
            self._reader.buffer_updated(nbytes, self._frame_read)
        except DecodeError as error:  # a malformed frame: the connection's error, as Raft's own
            self._finish(WireError(error.message, error.position))
        except Exception as error:  # a broken handler: close
            self._finish(error)
        if not self.ended:
            self.watermark.update(self._reader)

    def _frame_read(self, body: memoryview) -> None:
        if not self.ended:
            self._on_frame(body)

    def data_received(self, data: bytes) -> None:
        """Bytes read before this protocol took over (and tests): as if read into our buffers."""
        view = memoryview(data)
        while view and not self.ended:
            target = self.get_buffer(len(view))
            taken = min(len(target), len(view))
            target[:taken] = view[:taken]
            view = view[taken:]
            self.buffer_updated(taken)

    def _finish(self, error: BaseException | None) -> None:
        if not self.ended:
            self.ended = True
            self._on_end(error)

    def eof_received(self) -> bool | None:
        self._finish(None)
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish(exc)
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


def _payload_bytes(message: Message) -> int:
    return sum(len(e.data) for e in message.entries) + 64


class RaftTransport:
    """Carries (group, Message) between this node and its peers; delivers incoming ones to `handler`."""

    def __init__(self, node_id: int, listen: Address, handler: Handler,
                 peers: dict[int, Address] | None = None, config: TransportConfig | None = None, *,
                 tls: TlsContexts | None = None, identify: Identify | None = None) -> None:
        self.node_id = node_id
        self.listen = listen
        self.handler = handler
        self.config = config or TransportConfig()
        if tls is not None and identify is None:
            raise ValueError("TLS between nodes needs `identify` (which node a certificate names)")
        self.tls = tls
        self.identify = identify
        self.call_handler: CallHandler | None = None
        self.on_leaving: Callable[[int], None] | None = None  # a peer said it is stopping
        # The newest frame version every peer reads (wire.VERSION, CHECKSUMMED, ENTRY_CHECKSUMS): the
        # cluster's feature level says so (set by the broker); until then, frames any release reads.
        self.frame_version: Callable[[], int] = lambda: VERSION
        self._call_ids = itertools.count(1)
        self._call_tasks: set[asyncio.Task[None]] = set()
        self._peers: dict[int, _Peer] = {}
        self._server: asyncio.Server | None = None
        self._listener: socket.socket | None = None  # with TLS we accept ourselves (see start())
        self._accepting: asyncio.Task[None] | None = None
        self._closed = False
        self._readers: set[asyncio.Task[None]] = set()
        self._pending_peers = dict(peers or {})
        self._configured = dict(peers or {})
        self.incarnation = random.getrandbits(63)  # new at every start: peers see a restart

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        host, port = self.listen
        if self.tls is None:
            self._server = await asyncio.start_server(self._accept, host, port)
        else:
            # A stream server reads each new connection at once; a dialer's ClientHello that
            # arrived before the accepting side called start_tls() was consumed as plain bytes,
            # and both sides waited out the handshake timeout. So we accept the sockets and open
            # each with TLS in place before anything reads it.
            family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                        flags=socket.AI_PASSIVE)[0][0]
            self._listener = socket.create_server((host, port), family=family, backlog=128)
            self._listener.setblocking(False)
            self._accepting = asyncio.get_running_loop().create_task(self._accept_loop(self._listener))
        for peer_id, address in self._pending_peers.items():
            self.add_peer(peer_id, address)

    @property
    def port(self) -> int:
        """The bound port (useful when listening on port 0)."""
        if self._listener is not None:
            return int(self._listener.getsockname()[1])
        assert self._server is not None and self._server.sockets
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def _started(self) -> bool:
        return self._server is not None or self._listener is not None

    async def stop(self) -> None:
        self._closed = True
        if self._server is not None:
            self._server.close()
        if self._accepting is not None:
            self._accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accepting
        if self._listener is not None:
            self._listener.close()
        tasks: list[asyncio.Task[None]] = list(self._readers) + list(self._call_tasks)
        for peer in self._peers.values():
            if peer.writer is not None:
                peer.writer.close()
            tasks += peer.tasks
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    def add_peer(self, peer_id: int, address: Address | None) -> None:
        """Register (or re-address) a peer; the lower id of the pair dials the other."""
        if peer_id == self.node_id:
            return
        if not self._started:
            self._pending_peers[peer_id] = address  # type: ignore[assignment]
            return
        peer = self._peers.get(peer_id)
        if peer is None:
            peer = _Peer(peer_id, address, self._configured.get(peer_id))
            self._peers[peer_id] = peer
            loop = asyncio.get_running_loop()
            peer.tasks.append(loop.create_task(self._write_loop(peer)))
            if self.node_id < peer_id:
                peer.tasks.append(loop.create_task(self._dial_loop(peer)))
        else:
            peer.address = address

    # ------------------------------------------------------------------ sending

    def send(self, group: str, message: Message) -> bool:
        """Queue one message; False when it was dropped (peer unknown, down or backlogged)."""
        peer = self._peers.get(message.to)
        if peer is None or self._closed:
            return False
        size = _payload_bytes(message)
        cfg = self.config
        if (peer.writer is None or len(peer.queue) >= cfg.max_queue_messages
                or peer.queue_bytes + size > cfg.max_queue_bytes):
            peer.stats.dropped += 1
            return False
        peer.queue.append((group, message))
        peer.queue_bytes += size
        peer.wake.set()
        return True

    def send_heartbeats(self) -> None:
        """A HEARTBEAT frame to every connected peer that got no frame since the last call."""
        for peer in self._peers.values():
            if peer.writer is not None and not peer.wrote:
                peer.heartbeat_due = True
                peer.wake.set()
            peer.wrote = False

    def heard_from(self, peer_id: int) -> tuple[int, int | None]:
        """(frames received so far, the peer's incarnation if known): the host's liveness input."""
        peer = self._peers.get(peer_id)
        if peer is None:
            return 0, None
        return peer.stats.frames_received + peer.stats.heartbeats_received, peer.incarnation

    def peer_ids(self) -> list[int]:
        return list(self._peers)

    def announce_leaving(self) -> None:
        """Tell every connected peer that this node is stopping (best effort). Written now, not
        queued: closing the connection at stop() still sends what was written."""
        frame = encode_leaving(self.node_id)
        for peer in self._peers.values():
            if peer.writer is not None and not self._closed:
                with contextlib.suppress(ConnectionError):
                    self._write_parts(peer.writer, [frame])

    def is_leaving(self, peer_id: int) -> bool:
        """The peer said it is stopping (and has not connected again since)."""
        peer = self._peers.get(peer_id)
        return peer is not None and peer.leaving

    def stats(self, peer_id: int) -> PeerStats:
        peer = self._peers.get(peer_id)
        return peer.stats if peer is not None else PeerStats()

    def is_connected(self, peer_id: int) -> bool:
        peer = self._peers.get(peer_id)
        return peer is not None and peer.writer is not None

    async def wait_connected(self, peer_id: int) -> None:
        while peer_id not in self._peers:
            await asyncio.sleep(0.01)
        await self._peers[peer_id].connected.wait()

    async def call(self, peer_id: int, payload: bytes, timeout_s: float) -> bytes:
        """Send `payload` to the peer's call handler and return its answer. ConnectionError when
        the peer is not connected or the connection drops, TimeoutError past `timeout_s`."""
        peer = self._peers.get(peer_id)
        writer = peer.writer if peer is not None else None
        if peer is None or writer is None or self._closed:
            raise ConnectionError(f"node {peer_id} is not connected")
        call_id = next(self._call_ids) & 0xFFFFFFFF
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        peer.calls[call_id] = future
        try:
            self._write_parts(writer, encode_call(self.node_id, KIND_REQUEST, call_id, payload))
            async with asyncio.timeout(timeout_s):
                return await future
        finally:
            peer.calls.pop(call_id, None)

    def _framed(self, body: list[Any], sealed: bool = False) -> list[Any]:
        """A frame body's buffers with its length before them (one writelines: a write() of the
        length alone may reach the socket alone, one more syscall and TCP segment), checksummed
        once the cluster has checksums, unless `sealed` (it carries its own: ENTRY_CHECKSUMS)."""
        if not sealed and self.frame_version() >= CHECKSUMMED:
            body = checksummed(body)
        return [_LENGTH.pack(sum(len(p) for p in body)), *body]

    def _write_parts(self, writer: asyncio.StreamWriter, parts: list[Any]) -> None:
        try:
            writer.writelines(self._framed(parts))
        except (OSError, RuntimeError) as error:  # uvloop: RuntimeError on a closed handle
            raise ConnectionError(str(error)) from error

    async def _answer_call(self, peer: _Peer, writer: asyncio.StreamWriter, call_id: int, payload: bytes) -> None:
        handler = self.call_handler
        if handler is None:
            return  # the caller times out
        try:
            answer = await handler(peer.id, payload)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("node %d: answering a call from node %d failed", self.node_id, peer.id)
            return
        if peer.writer is writer:
            with contextlib.suppress(ConnectionError):
                self._write_parts(writer, encode_call(self.node_id, KIND_RESPONSE, call_id, answer))

    def _on_call_frame(self, peer: _Peer, writer: asyncio.StreamWriter, kind: int, call_id: int,
                       payload: memoryview) -> None:
        if kind == KIND_RESPONSE:
            future = peer.calls.get(call_id)
            if future is not None and not future.done():
                future.set_result(bytes(payload))
            return
        task = asyncio.get_running_loop().create_task(self._answer_call(peer, writer, call_id, bytes(payload)))
        self._call_tasks.add(task)
        task.add_done_callback(self._call_tasks.discard)

    async def _write_loop(self, peer: _Peer) -> None:
        while not self._closed:
            await peer.wake.wait()
            # Let every task made runnable by the same tick enqueue first: one frame for all.
            await asyncio.sleep(0)
            peer.wake.clear()
            batch, peer.queue, peer.queue_bytes = peer.queue, [], 0
            heartbeat, peer.heartbeat_due = peer.heartbeat_due, False
            writer = peer.writer
            if not (batch or heartbeat) or writer is None:
                continue
            peer.wrote = peer.wrote or bool(batch)
            try:
                if heartbeat:
                    writer.write(b"".join(self._framed([encode_heartbeat(self.node_id, self.incarnation)])))
                    peer.stats.heartbeats_sent += 1
                if batch:
                    await self._write_batch(peer, writer, batch)
                else:
                    await writer.drain()
            except (ConnectionError, OSError, RuntimeError) as error:
                # uvloop raises RuntimeError ("the handler is closed"), not OSError, when we write
                # to a connection it closed after a reset our read loop has not seen yet. This
                # loop must survive any write failure: if it ends, nothing is written to this
                # peer again while its new connections look up (no leader elected, a restarted
                # follower never catching up).
                log.debug("node %d -> %d: write failed: %r", self.node_id, peer.id, error)
                self._disconnect(peer, writer)
            except Exception:
                log.exception("node %d -> %d: write failed", self.node_id, peer.id)
                self._disconnect(peer, writer)

    async def _write_batch(self, peer: _Peer, writer: asyncio.StreamWriter, batch: list[tuple[str, Message]]) -> None:
        start = 0
        limit = self.config.max_frame_bytes
        while start < len(batch):
            # Split so that no frame exceeds the receiver's limit (greedy by payload bytes).
            end, size = start, 0
            while end < len(batch):
                size += _payload_bytes(batch[end][1])
                if end > start and size > limit // 2:
                    break
                end += 1
            sealed = self.frame_version() >= ENTRY_CHECKSUMS
            parts = self._framed(encode_frame(self.node_id, batch[start:end], sealed), sealed)
            writer.writelines(parts)
            peer.stats.frames_sent += 1
            peer.stats.messages_sent += end - start
            peer.stats.bytes_sent += _LENGTH.size + _LENGTH.unpack(parts[0])[0]
            start = end
        await writer.drain()

    # ------------------------------------------------------------------ connections

    async def _dial_loop(self, peer: _Peer) -> None:
        """Keep one connection to `peer` up. Nothing may end this loop but closing the
        transport: if it ended, this node would never reach that peer again (a restarted
        follower never catching up, a node never learning the metadata)."""
        backoff = self.config.backoff_min_s
        loop = asyncio.get_running_loop()
        dropped_at_once: Address | None = None  # tried last next time (another node may answer there)
        attached: Address | None = None
        while not self._closed:
            if peer.writer is None and peer.address is not None:
                attached = None
                addresses = self._addresses(peer)
                if dropped_at_once in addresses:
                    addresses.remove(dropped_at_once)
                    addresses.append(dropped_at_once)
                for address in addresses:
                    try:
                        if await self._dial_once(peer, address):
                            attached = address
                    except Exception:  # uvloop raises odd types on sockets reset mid-setup
                        log.exception("node %d -> %d: dialing failed", self.node_id, peer.id)
                    if attached is not None or self._closed or peer.writer is not None:
                        break
                if attached is None:
                    await asyncio.sleep(backoff * (0.5 + random.random()))
                    backoff = min(backoff * 2, self.config.backoff_max_s)
                    continue
                dropped_at_once = None
            if peer.writer is not None:
                since = loop.time()
                await peer.disconnected.wait()  # then dial again
                if loop.time() - since < self.config.backoff_max_s:
                    # Accepted, then closed at once (a peer resetting every connection, a
                    # restarting node's backlog, another node at a stale address): back off as
                    # for a failed dial, not spin, and try the other address first.
                    dropped_at_once = attached
                    await asyncio.sleep(backoff * (0.5 + random.random()))
                    backoff = min(backoff * 2, self.config.backoff_max_s)
                else:
                    backoff = self.config.backoff_min_s
            elif peer.address is None:
                await asyncio.sleep(self.config.backoff_max_s)

    @staticmethod
    def _addresses(peer: _Peer) -> list[Address]:
        """Where to dial `peer`: the metadata's address, then the configured one if it differs."""
        return [a for a in dict.fromkeys((peer.address, peer.configured)) if a is not None]

    async def _dial_once(self, peer: _Peer, address: Address) -> bool:
        """Connect to `address`, say HELLO and attach; False when the peer cannot be reached there now."""
        try:
            # asyncio.timeout, never asyncio.wait_for, in the broker: on Python 3.11 wait_for
            # swallows a cancellation that arrives as the awaited call completes (CPython
            # gh-86296), and a stopped transport's dial loop then ran on, holding up stop().
            async with asyncio.timeout(self.config.connect_timeout_s):
                reader, writer = await asyncio.open_connection(*address)
        except (TimeoutError, OSError):
            return False
        try:
            if writer.get_extra_info("sockname") == writer.get_extra_info("peername"):
                # TCP self-connect (source port = the down peer's port): it would hold the
                # port the peer needs to restart on.
                writer.close()
                return False
        except (OSError, RuntimeError, AttributeError):
            writer.close()
            return False
        if self.tls is not None and not await self._dial_tls(peer, address, writer):
            return False
        try:
            writer.write(b"".join(self._framed([encode_hello(self.node_id)])))
        except (OSError, RuntimeError, AttributeError) as error:
            # Reset before we got here (e.g. accepted by the backlog of a peer being killed):
            # uvloop raises RuntimeError on the write and AttributeError on get_extra_info.
            log.debug("node %d -> %d: connection lost at once: %r", self.node_id, peer.id, error)
            writer.close()
            return False
        self._attach(peer, reader, writer)
        return True

    async def _dial_tls(self, peer: _Peer, address: Address, writer: asyncio.StreamWriter) -> bool:
        """TLS over a fresh connection; the peer's certificate must name the node we dialed."""
        assert self.tls is not None and self.identify is not None
        try:
            async with asyncio.timeout(self.config.connect_timeout_s):
                await writer.start_tls(self.tls[1])
        except (TimeoutError, OSError, ssl.SSLError, ConnectionError, RuntimeError, AttributeError) as error:
            # A certificate problem is worth a warning; a peer going away mid-handshake is not.
            log.log(logging.WARNING if isinstance(error, ssl.SSLError) else logging.DEBUG,
                    "node %d: TLS to node %d at %s:%s failed, refused: %s", self.node_id, peer.id,
                    *address, error)
            writer.close()
            return False
        named = self.identify(writer.get_extra_info("peercert"))
        if named != peer.id:
            log.warning("node %d: refused node %d at %s:%s: its certificate names node %s", self.node_id, peer.id,
                        *address, named)
            writer.close()
            return False
        return True

    async def _accept_loop(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                connection, _ = await loop.sock_accept(listener)
            except OSError as error:  # e.g. out of file descriptors: keep accepting
                log.warning("node %d: raft accept failed: %r", self.node_id, error)
                await asyncio.sleep(0.1)
                continue
            task = loop.create_task(self._accept_tls(connection))
            self._readers.add(task)
            task.add_done_callback(self._readers.discard)

    async def _accept_tls(self, connection: socket.socket) -> None:
        assert self.tls is not None
        loop = asyncio.get_running_loop()
        try:
            remote = connection.getpeername()
        except OSError:  # reset while it waited in the backlog
            connection.close()
            return
        reader = asyncio.StreamReader()
        protocol = asyncio.StreamReaderProtocol(reader)
        try:
            async with asyncio.timeout(self.config.connect_timeout_s):
                transport, _ = await loop.connect_accepted_socket(
                    lambda: protocol, connection, ssl=self.tls[0], ssl_handshake_timeout=self.config.connect_timeout_s)
        except (TimeoutError, OSError, ssl.SSLError, ConnectionError, RuntimeError, AttributeError) as error:
            # A refused certificate (ours or the dialer's) is worth a warning; a handshake that
            # timed out (a node busy starting up) is not.
            log.log(logging.DEBUG if isinstance(error, TimeoutError) else logging.WARNING,
                    "node %d: refused raft connection from %s: TLS failed: %r", self.node_id, remote, error)
            connection.close()
            return
        await self._accept(reader, asyncio.StreamWriter(transport, protocol, reader, loop))

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A new connection (with TLS: already through its handshake): the dialer's HELLO."""
        remote = writer.get_extra_info("peername")
        named: int | None = None
        if self.tls is not None:
            assert self.identify is not None
            named = self.identify(writer.get_extra_info("peercert"))
        try:
            async with asyncio.timeout(self.config.connect_timeout_s):
                body = await self._read_body(reader)
            frame = decode_frame(body)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, WireError) as error:
            log.warning("node %d: rejected raft connection: %s", self.node_id, error)
            writer.close()
            return
        peer = self._peers.get(frame.sender)
        if frame.kind != KIND_HELLO or peer is None or frame.sender >= self.node_id:
            log.warning("node %d: rejected raft connection from node %d", self.node_id, frame.sender)
            writer.close()
            return
        if self.tls is not None and named != frame.sender:
            log.warning("node %d: refused raft connection from %s: claims node %d, its certificate names node %s",
                        self.node_id, remote, frame.sender, named)
            writer.close()
            return
        if peer.writer is not None:
            peer.writer.close()  # the peer restarted: its new connection wins
        self._attach(peer, reader, writer)

    def _attach(self, peer: _Peer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._closed:  # a dial or accept finishing as stop() ran: no reader stop() would miss
            writer.close()
            return
        peer.writer = writer
        peer.leaving = False  # a new connection: the peer restarted (or never left)
        peer.stats.connects += 1
        peer.heartbeat_due = True  # every connection starts with our incarnation (a restart shows)
        peer.wake.set()
        peer.disconnected.clear()
        peer.connected.set()
        task = asyncio.get_running_loop().create_task(self._read_loop(peer, reader, writer))
        self._readers.add(task)
        task.add_done_callback(self._readers.discard)
        log.debug("node %d: connected to node %d", self.node_id, peer.id)

    def _disconnect(self, peer: _Peer, writer: asyncio.StreamWriter) -> None:
        writer.close()
        if peer.writer is writer:
            peer.writer = None
            peer.connected.clear()
            peer.disconnected.set()
            peer.queue, peer.queue_bytes = [], 0
            for future in peer.calls.values():
                if not future.done():
                    future.set_exception(ConnectionError(f"connection to node {peer.id} lost"))

    async def _read_body(self, reader: asyncio.StreamReader) -> bytes:
        (length,) = _LENGTH.unpack(await reader.readexactly(4))
        if length > self.config.max_frame_bytes:
            raise WireError(f"frame of {length} bytes exceeds the limit {self.config.max_frame_bytes}", 0)
        return await reader.readexactly(length)

    async def _read_loop(self, peer: _Peer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[BaseException | None] = loop.create_future()
        transport = writer.transport
        frames = _FrameProtocol(transport.get_protocol(), self.config.max_frame_bytes,
                                lambda body: self._on_body(peer, writer, body),
                                lambda end: None if done.done() else done.set_result(end))
        error: BaseException | None = None
        try:
            # From here on frames are read by _FrameProtocol; what the StreamReader holds already
            # (frames right behind the HELLO) goes first. With its end fed, read() returns that
            # at once (nothing in it awaits the loop), so no byte can overtake it.
            at_eof = reader.at_eof()
            transport.set_protocol(frames)
            if self.tls is None:
                frames.watermark = ReadWatermark(transport.get_extra_info("socket"))
            reader.feed_eof()
            leftover = await reader.read()
            if at_eof or transport.is_closing():
                return  # lost before we took over (its protocol heard of it, not ours)
            if leftover:
                frames.data_received(leftover)
            error = await done
        except (OSError, asyncio.IncompleteReadError) as failure:
            error = failure
        finally:
            if isinstance(error, WireError):
                peer.stats.refused += 1
                log.warning("node %d: bad frame from node %d: %s", self.node_id, peer.id, error)
            elif isinstance(error, (OSError, asyncio.IncompleteReadError)) or error is None:
                log.debug("node %d: connection to node %d closed: %s", self.node_id, peer.id, error)
            else:
                log.error("node %d: reading from node %d failed: %r", self.node_id, peer.id, error)
            self._disconnect(peer, writer)

    def _on_body(self, peer: _Peer, writer: asyncio.StreamWriter, body: memoryview) -> None:
        """One frame from an attached peer (WireError: close the connection)."""
        if self._closed:
            return
        frame = decode_frame(body)
        if frame.kind in (KIND_REQUEST, KIND_RESPONSE) and frame.sender == peer.id:
            assert frame.payload is not None
            self._on_call_frame(peer, writer, frame.kind, frame.call_id, frame.payload)
            return
        if frame.kind not in (KIND_MESSAGES, KIND_HEARTBEAT) or frame.sender != peer.id:
            raise WireError(f"unexpected frame kind {frame.kind} from node {frame.sender}", 0)
        if frame.kind == KIND_HEARTBEAT:
            peer.stats.heartbeats_received += 1
            peer.incarnation = frame.incarnation
            return
        if not frame.entries_checked:
            _check_batches(frame.messages)
        peer.stats.frames_received += 1
        peer.stats.messages_received += len(frame.messages)
        if frame.leaving and peer.writer is writer and not peer.leaving:
            peer.leaving = True
            log.info("node %d: node %d is stopping", self.node_id, peer.id)
            if self.on_leaving is not None:
                self.on_leaving(peer.id)
        for group, message in frame.messages:
            if message.to != self.node_id:
                continue
            try:
                self.handler(group, message)
            except Exception:  # one bad group must not take the connection down
                log.exception("node %d: handling a message for group %s failed", self.node_id, group)


def _check_batches(messages: list[tuple[str, Message]]) -> None:
    """WireError for the first DATA entry whose record batch fails its CRC32C.

    The leader stored each batch only after checking its CRC (a produced batch that fails it is
    answered CORRUPT_MESSAGE), so a copy that fails it here was damaged since: in the sender's
    memory before it framed it (a checksummed frame's CRC covers only what was framed), or on the
    way in a frame without a checksum -- a flipped bit TCP's 16-bit checksum let through, a faulty
    NIC. Stored, it would get an entry checksum of its own and pass every later check. The frame
    is refused with its connection, as any malformed frame, and the leader sends the entries
    again (# Kafka: a follower checks each fetched batch's CRC, UnifiedLog.analyzeAndValidateRecords).
    A frame with entry checksums (wire.ENTRY_CHECKSUMS) needs none of this: each entry came with
    the checksum the leader's log stored it under, which the decoder checked, so what is stored
    here is what the leader stored, damage in its memory after its append included."""
    for group, message in messages:
        for entry in message.entries:
            if entry.type is EntryType.DATA and not crc_matches(entry.data):
                raise WireError(f"entry {entry.index} of group {group} fails its record batch's CRC32C",
                                entry.start + CRC_OFFSET)

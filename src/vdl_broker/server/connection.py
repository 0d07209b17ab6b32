"""One client connection: frames in, responses out, in request order.

Kafka clients pipeline requests and match responses by correlation id, but expect them in
request order (Kafka protocol guide: "the server guarantees that on a single TCP connection,
requests will be processed in the order they are sent"). Each decoded request takes a slot in a
queue; a handler fills its slot when done (at once, or later for a delayed produce/fetch), and
the queue is written out from the head as slots complete.

Processed in order, too: a request sees the effects of every request sent before it, as on
Kafka, whose broker handles a connection's requests one at a time (librdkafka's admin pipelines
a ListOffsets behind a DeleteRecords and reads the new start from it; a consumer's committed()
follows its asynchronous commit on the coordinator's connection). So a request does not start
while a write sent before it is unanswered (`Order`, each handler's: what it changes). Reads do
not hold later requests (a write pipelined behind a long-poll Fetch starts at once; the fetch
may then see it, never miss an earlier one), and Produce requests pipeline behind each other:
each appends when it starts, so their batches keep the order they were sent in.

Security: a connection belongs to one listener (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) and
carries a principal: `User:ANONYMOUS`, `User:<certificate CN>` after mutual TLS, `User:<name>`
after SASL. Until SASL succeeds on a SASL listener, only ApiVersions, SaslHandshake and
SaslAuthenticate are served; anything else closes the connection (as Kafka does).

Back-pressure: reading pauses while MAX_INFLIGHT_REQUESTS requests are unanswered, while their
bytes exceed max_inflight_bytes, or while the transport's write buffer is above its high-water
mark (a client that sends but never reads), so one connection cannot make the broker buffer
without bound.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from vdl_broker.config import NodeConfig
from vdl_broker.listeners import PLAINTEXT, Listener
from vdl_broker.log import FrozenBuffer
from vdl_broker.server.authorizer import ANONYMOUS
from vdl_broker.server.sasl import SaslSession
from vdl_broker.server.tls import certificate_cn
from vdl_wire import api
from vdl_wire.errors import DecodeError, ErrorCode
from vdl_wire.framing import FrameReader, FrameTooLargeError, ReadWatermark
from vdl_wire.messages import ApiVersionsRequest, SaslAuthenticateRequest, SaslHandshakeRequest
from vdl_wire.response_errors import response_error
from vdl_wire.sasl import SaslError

log = logging.getLogger(__name__)

Buffers = Sequence[bytes | bytearray | memoryview]
WRITE_HIGH_WATER = 4 * 1024 * 1024
# Unanswered requests a connection may have before the broker stops reading it. Kafka reads a
# connection's next request only once it answered the last (SocketServer mutes the channel);
# here Produce requests pipeline, and an idempotent producer keeps up to 5 in flight. Beyond a
# few, reading on only queues work here: a producer that pipelines without bound (librdkafka
# allows a million requests in flight; at linger.ms=0 each takes the records that came since the
# last) then sends thousands of tiny requests, each a Raft append and its answer, waiting
# seconds in line. Held in its own queue instead, the records are batched (2x the records/s,
# answers in ms).
MAX_INFLIGHT_REQUESTS = 16
_CLOSE = object()  # sentinel: the connection was closed instead of answering
# What an unauthenticated connection on a SASL listener may send (KIP-43).
PRE_AUTHENTICATION_KEYS = frozenset(c.DECL.api_key for c in (ApiVersionsRequest, SaslHandshakeRequest,
                                                              SaslAuthenticateRequest))


@dataclass(slots=True)
class RequestContext:
    header: Any  # protocol RequestHeader
    client_host: str
    connection: KafkaConnection | None  # None: a request another node forwarded (server/internal.py)
    principal: str = ANONYMOUS
    protocol: str = PLAINTEXT  # the listener's: Metadata answers with that listener's addresses
    forwarded: bool = False

    @property
    def api_version(self) -> int:
        return self.header.request_api_version

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""


class Order(Enum):
    """What a request is to the requests sent after it on its connection (module docstring)."""

    READ = "read"  # changes nothing: later requests need not wait for it
    PRODUCE = "produce"  # a write that later Produce requests pipeline behind
    WRITE = "write"  # later requests start once it is answered


class _Slot:
    __slots__ = ("api", "buffers", "done", "order", "size", "started")

    def __init__(self, size: int) -> None:
        self.buffers: Buffers | None = None
        self.done = False
        self.size = size
        self.api = ""  # with metrics on: the handler's name and when the request arrived
        self.started = 0.0
        self.order: Order | None = None  # set while the request runs and holds later ones back


class ConnectionOwner(Protocol):
    """What a connection needs of its broker: its settings, its handlers (one per API key,
    called with the owner as their first argument), the set of open connections and its metrics
    (None: off)."""

    config: NodeConfig
    handlers: dict[int, Any]
    connections: set[KafkaConnection]
    metrics: Any  # vdl_broker.metrics.BrokerMetrics | None

    def sasl_session(self, peer: str) -> SaslSession: ...


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, broker: ConnectionOwner, listener: Listener | None = None) -> None:
        self.broker = broker
        self.listener = listener or Listener(PLAINTEXT, broker.config.host, broker.config.port)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.client_host = ""
        self.principal = ANONYMOUS
        self.sasl: SaslSession | None = None  # set on SASL listeners
        self._close_when_flushed = False
        self._quickack: Any = None  # TLS: the socket whose delayed ACK is sent at once after each read
        # Requests are read into buffers of their own (FrozenBuffer: the log may keep them).
        self._reader = FrameReader(broker.config.max_request_bytes, FrozenBuffer.unfilled)
        self._watermark = ReadWatermark(None)  # a plain TCP connection's (connection_made)
        self._slots: deque[_Slot] = deque()
        # Requests waiting for the writes sent before them (module docstring), in arrival order,
        # and the writes running: Produce requests, and the others.
        self._waiting: deque[tuple[Any, RequestContext, Any, _Slot]] = deque()
        self._running_produces = 0
        self._running_writes = 0
        self._starting = False
        self._inflight_bytes = 0
        self._max_inflight = broker.config.max_inflight_bytes
        self._write_paused = False
        self._read_paused = False
        self._closed = False
        self._eof = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._metrics = broker.metrics

    # -- asyncio.Protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport
        peer = transport.get_extra_info("peername")
        if peer:
            self.client_host, self.peer = str(peer[0]), f"{peer[0]}:{peer[1]}"
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)  # type: ignore[attr-defined]
        if self.listener.tls:  # connection_made comes after the TLS handshake
            cn = certificate_cn(transport.get_extra_info("peercert"))
            if cn:
                self.principal = f"User:{cn}"
            if hasattr(socket, "TCP_QUICKACK"):
                self._quickack = transport.get_extra_info("socket")
        else:
            self._watermark = ReadWatermark(transport.get_extra_info("socket"))
        if self.listener.sasl:
            self.sasl = self.broker.sasl_session(self.peer)
        self.broker.connections.add(self)

    @property
    def authenticated(self) -> bool:
        return self.sasl is None or self.sasl.authenticated

    def authenticated_as(self, user: str) -> None:
        self.principal = f"User:{user}"

    def close_after_response(self) -> None:
        """Answer what is queued (an authentication failure), then close; read nothing more."""
        self._close_when_flushed = True

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self.broker.connections.discard(self)
        for task in list(self._tasks):
            task.cancel()
        self._slots.clear()
        self._waiting.clear()

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if self._closed:
            return
        if self._quickack is not None:
            # A TLS client writes a request as several records; with Nagle on (librdkafka's
            # default) the later ones wait for the ACK of the first, which Linux delays up to
            # 40 ms. Asking for a quick ACK sends the pending one now (one syscall per read).
            try:
                self._quickack.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
            except OSError:
                self._quickack = None
        try:
            self._reader.buffer_updated(nbytes, self._frame_read)
        except FrameTooLargeError as error:
            self.close(f"request of {error.size} bytes exceeds max_request_bytes={error.limit}")
        except DecodeError as error:
            self.close(f"bad frame: {error}")
        if not self._closed:
            self._watermark.update(self._reader)

    def _frame_read(self, frame: memoryview) -> None:
        if self._closed or self._close_when_flushed:
            return
        if self.sasl is not None and self.sasl.raw_tokens and not self.sasl.authenticated:
            self._raw_token(bytes(frame))
        else:
            self._on_frame(frame)

    def eof_received(self) -> bool | None:
        # The client half-closed: answer what is in flight, then close (see _flush).
        self._eof = True
        if self.listener.tls:
            return None  # TLS has no half-close: the transport closes (asyncio warns about True)
        return bool(self._slots)  # True keeps the transport open for the pending answers

    # -- requests --------------------------------------------------------------------------------

    def _on_frame(self, frame: memoryview) -> None:
        try:
            header, request = api.decode_request(frame)
        except api.UnsupportedVersionError as error:
            self._unsupported_version(error, len(frame))
            return
        except api.UnsupportedApiError as error:
            self.close(f"unsupported API: {error}")
            return
        except DecodeError as error:
            self.close(f"request does not decode: {error}")
            return
        except Exception as error:  # the codec must never take the broker down
            log.exception("decoder failure from %s", self.peer)
            self.close(f"request does not decode: {error!r}")
            return
        self.dispatch(header, request, len(frame) + 4)

    def _unsupported_version(self, error: api.UnsupportedVersionError, size: int) -> None:
        if error.api_key == 18:
            # KIP-511: an ApiVersions request of an unknown version gets a v0-encoded answer
            # with UNSUPPORTED_VERSION and our ranges, so the client can pick a version.
            slot = self._new_slot(size)
            slot.buffers = api.encode_unsupported_version_response(error)
            slot.done = True
            self._flush()
            return
        # Kafka closes the connection on an unsupported version of any other API.
        self.close(f"unsupported version: {error}")

    def _raw_token(self, token: bytes) -> None:
        """A SASL token after a v0 handshake: a bare frame, answered with a bare frame."""
        slot = self._new_slot(len(token) + 4)
        task = asyncio.get_running_loop().create_task(self._run_raw_token(token, slot))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_raw_token(self, token: bytes, slot: _Slot) -> None:
        assert self.sasl is not None
        try:
            reply, done = await self.sasl.step(token)
        except SaslError:
            self.close("SASL authentication failed")  # v0 has no error frame: Kafka closes too
            return
        if done and self.sasl.user is not None:
            self.authenticated_as(self.sasl.user)
        slot.buffers = [len(reply).to_bytes(4, "big"), reply]
        slot.done = True
        self._flush()

    def dispatch(self, header: Any, request: Any, size: int) -> None:
        handler = self.broker.handlers.get(header.request_api_key)
        if handler is None:
            self.close(f"no handler for API key {header.request_api_key}")
            return
        if not self.authenticated and header.request_api_key not in PRE_AUTHENTICATION_KEYS:
            self.close(f"{handler.name} before SASL authentication completed")
            return
        context = RequestContext(header, self.client_host, self, self.principal, self.listener.protocol)
        slot = self._new_slot(size)
        if self._metrics is not None:
            slot.api = handler.name
            slot.started = time.perf_counter()
        if self._waiting or self._must_wait(handler.order):
            self._waiting.append((handler, context, request, slot))
            return
        self._start(handler, context, request, slot)

    def _must_wait(self, order: Order) -> bool:
        """A request of `order` waits while a write sent before it runs (Produce behind Produce
        excepted)."""
        return self._running_writes > 0 or (order is not Order.PRODUCE and self._running_produces > 0)

    def _start_waiting(self) -> None:
        """Start the waiting requests, in order, as far as the running writes allow. A request
        answered at once completes (and calls this) inside the loop: that call returns, the loop
        goes on."""
        if self._starting:
            return
        self._starting = True
        try:
            while self._waiting and not self._closed and not self._must_wait(self._waiting[0][0].order):
                self._start(*self._waiting.popleft())
        finally:
            self._starting = False

    def _start(self, handler: Any, context: RequestContext, request: Any, slot: _Slot) -> None:
        header = context.header
        if handler.order is Order.PRODUCE:
            self._running_produces += 1
            slot.order = Order.PRODUCE
        elif handler.order is Order.WRITE:
            self._running_writes += 1
            slot.order = Order.WRITE
        if handler.is_async:
            task = asyncio.get_running_loop().create_task(self._run_async(handler, context, request, slot))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        try:
            response = handler.handle(self.broker, context, request)
        except Exception:
            log.exception("%s v%d from %s failed", handler.name, header.request_api_version, self.peer)
            response = self._error_response(handler, request, header)
            if response is _CLOSE:
                return
        self._complete(slot, header, response)

    def _error_response(self, handler: Any, request: Any, header: Any) -> Any:
        """UNKNOWN_SERVER_ERROR for every part of the request; if even that fails, close."""
        try:
            return handler.error_response(request, header.request_api_version, ErrorCode.UNKNOWN_SERVER_ERROR)
        except Exception:
            log.exception("cannot build the error response of %s", handler.name)
            self.close(f"{handler.name} failed and its error response too")
            return _CLOSE

    async def _run_async(self, handler: Any, context: RequestContext, request: Any, slot: _Slot) -> None:
        header = context.header
        try:
            response = await handler.handle(self.broker, context, request)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s v%d from %s failed", handler.name, header.request_api_version, self.peer)
            response = self._error_response(handler, request, header)
            if response is _CLOSE:
                return
        self._complete(slot, header, response)

    # -- responses -------------------------------------------------------------------------------

    def _new_slot(self, size: int) -> _Slot:
        slot = _Slot(size)
        self._slots.append(slot)
        self._inflight_bytes += size
        self._update_reading()
        return slot

    def _complete(self, slot: _Slot, header: Any, response: Any) -> None:
        """Fill a slot; `response` None means no answer at all (Produce with acks=0)."""
        if self._closed:
            return
        if slot.order is Order.PRODUCE:
            self._running_produces -= 1
        elif slot.order is Order.WRITE:
            self._running_writes -= 1
        slot.order = None
        if self._metrics is not None and slot.api:
            # Per request: the error the answer carries, for vdl_requests_total.
            self._metrics.request_done(slot.api, header.request_api_version, response_error(response),
                                       time.perf_counter() - slot.started)
        if response is not None:
            try:
                slot.buffers = api.encode_response(header, response)
            except Exception:
                log.exception("cannot encode the response to API %d from %s", header.request_api_key, self.peer)
                self.close("response encoding failed")
                return
        slot.done = True
        self._flush()
        self._start_waiting()

    def _flush(self) -> None:
        transport = self.transport
        slots = self._slots
        while slots and slots[0].done:
            slot = slots.popleft()
            self._inflight_bytes -= slot.size
            if slot.buffers is not None and transport is not None:
                transport.writelines(slot.buffers)
        if (self._eof or self._close_when_flushed) and not slots and transport is not None:
            transport.close()  # flushes the write buffer first
            return
        self._update_reading()

    def _update_reading(self) -> None:
        if self.transport is None or self._closed:
            return
        should_pause = (self._write_paused or self._inflight_bytes > self._max_inflight
                        or len(self._slots) >= MAX_INFLIGHT_REQUESTS)
        if should_pause and not self._read_paused:
            self._read_paused = True
            self.transport.pause_reading()
        elif not should_pause and self._read_paused:
            self._read_paused = False
            self.transport.resume_reading()

    def close(self, reason: str) -> None:
        if self._closed:
            return
        log.warning("closing connection from %s: %s", self.peer, reason)
        self._closed = True
        if self.transport is not None:
            self.transport.abort()

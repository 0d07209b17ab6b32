"""The `metrics_listen` endpoint: GET /metrics answers the broker's metrics as Prometheus text
(OpenMetrics when the scraper's Accept header asks for it).

It runs on the broker's own event loop, so the collectors read the broker's state between two
event-loop steps, never while a handler is half-way through a change (prometheus_client's
threaded HTTP server would read it from another thread). The HTTP it speaks is what scrapers
use: GET or HEAD, HTTP/1.1 keep-alive or HTTP/1.0, no request body.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket

from vdl_broker.metrics.registry import BrokerMetrics

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 16 * 1024  # request line and headers; a longer head is refused
IDLE_TIMEOUT_S = 120.0  # a kept-alive connection idle this long is closed
PATH = "/metrics"


class MetricsEndpoint:
    def __init__(self, metrics: BrokerMetrics, host: str, port: int) -> None:
        self.metrics = metrics
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True,
                                                  limit=MAX_HEAD_BYTES)
        sockets: tuple[socket.socket, ...] | list[socket.socket] = self._server.sockets or []
        if sockets:
            self.port = sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._clients):
            writer.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2):
                await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._clients.add(writer)
        try:
            while await self._answer_one(reader, writer):
                pass
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
            pass
        except asyncio.LimitOverrunError:
            await self._write(writer, "431 Request Header Fields Too Large", b"request head too large\n",
                              "text/plain; charset=utf-8", keep_alive=False)
        except Exception:  # a scrape must never take the broker down
            log.exception("metrics request failed")
        finally:
            self._clients.discard(writer)
            writer.close()

    async def _answer_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection is to be closed."""
        async with asyncio.timeout(IDLE_TIMEOUT_S):
            head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            await self._write(writer, "400 Bad Request", b"bad request line\n", "text/plain; charset=utf-8",
                              keep_alive=False)
            return False
        method, target, version = parts
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name:
                headers[name.strip().lower()] = value.strip()
        connection = headers.get("connection", "").lower()
        keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
        if method not in ("GET", "HEAD"):
            await self._write(writer, "405 Method Not Allowed", b"only GET and HEAD\n", "text/plain; charset=utf-8",
                              keep_alive, extra="Allow: GET, HEAD\r\n")
        elif target.split("?", 1)[0] != PATH:
            await self._write(writer, "404 Not Found", f"metrics are at {PATH}\n".encode(),
                              "text/plain; charset=utf-8", keep_alive)
        else:
            body, content_type = self.metrics.exposition(headers.get("accept"))
            await self._write(writer, "200 OK", body if method == "GET" else b"", content_type, keep_alive,
                              length=len(body))
        return keep_alive

    @staticmethod
    async def _write(writer: asyncio.StreamWriter, status: str, body: bytes, content_type: str, keep_alive: bool,
                     extra: str = "", length: int | None = None) -> None:
        head = (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body) if length is None else length}\r\n"
                f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n{extra}\r\n")
        writer.write(head.encode("latin-1") + body)
        await writer.drain()

"""One blocking Kafka-protocol connection: framing, correlation ids, version choice.

Which API a request belongs to comes from its class (`type(request).DECL.api_key`, declared in
vdl_wire.messages), and the version sent defaults to the highest one the protocol
package declares, so no caller writes an API key or version number.
"""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from vdl_client.bootstrap import DEFAULT_CLIENT_ID, BootstrapError, parse_bootstrap, split_address
from vdl_wire.api import api_spec, decode_response, default_version, encode_request

if TYPE_CHECKING:
    from vdl_client.security import SecuritySettings

__all__ = ["DEFAULT_CLIENT_ID", "BootstrapError", "Connection", "connect_first", "parse_bootstrap", "request_once",
           "split_address"]

MAX_RESPONSE_BYTES = 1 << 30
_SIZE = struct.Struct(">i")
_JOIN_BELOW = 64 * 1024  # smaller requests are joined and sent in one call: copying costs less
_IOV_MAX = 1024  # buffers per sendmsg (Linux's IOV_MAX)


class Connection:
    """A TCP connection to one broker. Answers come back in request order, so several requests
    may be sent before their answers are read (send() then receive())."""

    def __init__(self, address: str, timeout_s: float, client_id: str | None = DEFAULT_CLIENT_ID,
                 security: SecuritySettings | None = None) -> None:
        host, port = split_address(address)
        self._sock = socket.create_connection((host, port), timeout=timeout_s)
        self._client_id = client_id
        self._correlation = 0
        self.address = address
        try:
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if security is not None:
                self._sock = security.wrap(self._sock, host)
                security.authenticate(lambda request: self.request(request, timeout_s))
        except BaseException:
            self._sock.close()
            raise

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, request: Any, timeout_s: float, version: int | None = None) -> Any:
        """Send one request and return its decoded response."""
        version = default_version(type(request)) if version is None else version
        correlation = self.send(request, timeout_s, version)
        return self.receive(type(request), correlation, timeout_s, version)

    def send(self, request: Any, timeout_s: float, version: int | None = None) -> int:
        """Send one request; returns its correlation id, for receive()."""
        spec = api_spec(type(request))
        version = default_version(type(request)) if version is None else version
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        buffers = encode_request(spec.api_key, version, self._correlation, self._client_id, request)
        self._sock.settimeout(timeout_s)
        self._send_buffers(buffers)
        return self._correlation

    def _send_buffers(self, buffers: Sequence[Any]) -> None:
        """The buffers in order; a large one (a Produce's records) is not copied into a joint one."""
        if len(buffers) == 1 or sum(len(b) for b in buffers) < _JOIN_BELOW:
            self._sock.sendall(b"".join(buffers))
            return
        if not hasattr(self._sock, "sendmsg") or isinstance(self._sock, ssl.SSLSocket):  # TLS: no sendmsg
            for buffer in buffers:
                self._sock.sendall(buffer)
            return
        views = [memoryview(b).cast("B") for b in buffers]
        while views:
            sent = self._sock.sendmsg(views[:_IOV_MAX])
            while views and sent >= len(views[0]):
                sent -= len(views[0])
                views.pop(0)
            if sent:
                views[0] = views[0][sent:]

    def receive(self, request_class: type, correlation: int, timeout_s: float, version: int | None = None) -> Any:
        """Read the answer to the request sent with `correlation` (the next frame on the wire)."""
        spec = api_spec(request_class)
        version = default_version(request_class) if version is None else version
        self._sock.settimeout(timeout_s)
        frame = self.read_frame()
        got, response = decode_response(spec.api_key, version, frame)
        if got != correlation:
            raise OSError(f"correlation id {got} from {self.address}, expected {correlation}")
        return response

    def read_frame(self) -> memoryview:
        """One whole response frame body (without its size prefix)."""
        (length,) = _SIZE.unpack(self._read_exact(4))
        if not 0 <= length <= MAX_RESPONSE_BYTES:
            raise OSError(f"bad response size {length} from {self.address}")
        return memoryview(self._read_exact(length))

    def _read_exact(self, size: int) -> bytearray:
        buffer = bytearray(size)
        view = memoryview(buffer)
        got = 0
        while got < size:
            n = self._sock.recv_into(view[got:])
            if n == 0:
                raise OSError(f"connection to {self.address} closed")
            got += n
        return buffer

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass


def connect_first(servers: str | Sequence[str], timeout_s: float,
                  client_id: str | None = DEFAULT_CLIENT_ID, security: SecuritySettings | None = None) -> Connection:
    """A connection to the first reachable server of a bootstrap list; OSError naming every
    failure when none answers."""
    errors = []
    for address in parse_bootstrap(servers):
        try:
            return Connection(address, timeout_s, client_id, security)
        except OSError as error:
            errors.append(f"{address}: {error.strerror or error}")
    raise OSError("cannot connect to " + "; ".join(errors))


def request_once(address: str, request: Any, timeout_s: float = 5.0, version: int | None = None,
                 client_id: str | None = DEFAULT_CLIENT_ID, security: SecuritySettings | None = None) -> Any:
    """One request on a fresh connection to `address` (or the first reachable of a bootstrap
    list); the decoded response."""
    with connect_first(address, timeout_s, client_id, security) as connection:
        return connection.request(request, timeout_s, version)

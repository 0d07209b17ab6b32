"""`host:port` strings, as Kafka's settings spell addresses (listeners, bootstrap.servers)."""

from __future__ import annotations


class AddressError(ValueError):
    """Not a `host:port` address; the message names the setting."""


def split_host_port(value: str, setting: str = "address", *, listening: bool = False) -> tuple[str, int]:
    """("host", port) of "HOST:PORT" (an IPv6 host may be bracketed: "[::1]:9092").

    An address to listen on may leave the host empty (":9092": every interface) and use port 0
    (any free port); an address to connect to needs both."""
    host, separator, port = str(value).strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not separator or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise AddressError(f"{setting}: expected HOST:PORT, got {value!r}")
    if listening:
        return host or "0.0.0.0", int(port)
    if not host or int(port) == 0:
        raise AddressError(f"{setting}: expected HOST:PORT, got {value!r}")
    return host, int(port)

"""Bootstrap lists (`host:port,host:port`) and the default client id: what settings and option
parsing need, apart from connection.py, which loads every protocol message class (vdl_wire.api):
Spark's Python workers that only parse the connector's options need not pay for those."""

from __future__ import annotations

from collections.abc import Sequence

from vdl_wire.address import AddressError, split_host_port

DEFAULT_CLIENT_ID = "vdl-client"


class BootstrapError(ValueError):
    """A bootstrap list that is not `host:port[,host:port...]`."""


def split_address(address: str) -> tuple[str, int]:
    """"host:port" -> (host, port); IPv6 hosts may be bracketed ("[::1]:9092")."""
    try:
        return split_host_port(address)
    except AddressError:
        raise BootstrapError(f"expected HOST:PORT, got {address!r}") from None


def parse_bootstrap(servers: str | Sequence[str]) -> tuple[str, ...]:
    """A comma-separated `host:port,host:port` (or a sequence of them) -> validated addresses,
    in the order given (clients try them in that order, as Kafka's tools do)."""
    parts = servers.split(",") if isinstance(servers, str) else [p for s in servers for p in s.split(",")]
    addresses = tuple(p.strip() for p in parts if p.strip())
    if not addresses:
        raise BootstrapError("expected a comma-separated list of HOST:PORT, got nothing")
    for address in addresses:
        try:
            split_address(address)
        except BootstrapError:
            raise BootstrapError(
                f"expected a comma-separated list of HOST:PORT, got {servers!r}") from None
    return addresses

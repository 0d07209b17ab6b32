"""One Kafka request to another node's client listener over a fresh asyncio connection.

For a node that is not a member yet (joining asks a member over its client port): it has no Raft
connection to carry the request (internal.py), and a blocking client would stall the event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

from vdl_wire.address import split_host_port
from vdl_wire.api import api_spec, decode_response, encode_request

CLIENT_ID = "vdl-broker"
MAX_RESPONSE_BYTES = 1 << 30


async def request(address: str, request: Any, timeout_s: float, *, version: int | None = None,
                  client_id: str | None = CLIENT_ID) -> Any:
    """Send `request` (a vdl_wire.messages request object) to `address`
    ("host:port") on a fresh connection and return the decoded response.

    `version` defaults to the highest one the protocol package declares for that API; a caller
    relaying a client's request passes the client's version so the answer can be relayed as is.
    Raises ConnectionError if the peer closes early, TimeoutError past `timeout_s` (per step),
    OSError for other network failures.
    """
    spec = api_spec(type(request))
    version = spec.max_version if version is None else version
    host, port = split_host_port(address)
    async with asyncio.timeout(timeout_s):
        reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(b"".join(encode_request(spec.api_key, version, 1, client_id, request)))
        async with asyncio.timeout(timeout_s):
            await writer.drain()
        async with asyncio.timeout(timeout_s):
            size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
        if not 0 <= size <= MAX_RESPONSE_BYTES:
            raise OSError(f"bad response size {size} from {address}")
        async with asyncio.timeout(timeout_s):
            body = await reader.readexactly(size)
    except asyncio.IncompleteReadError as error:
        raise ConnectionError(f"{address} closed the connection") from error
    finally:
        writer.close()
    correlation, response = decode_response(spec.api_key, version, body)
    if correlation != 1:
        raise OSError(f"correlation id {correlation} from {address}, expected 1")
    return response

"""Delivering bytes to an asyncio.BufferedProtocol as its transport does, without a socket."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence


def read_into(protocol: asyncio.BufferedProtocol, stream: bytes, cuts: Sequence[int] = ()) -> None:
    """Deliver `stream` read by read into the protocol's own buffers (get_buffer, then
    buffer_updated), each read cut at the next point of `cuts` (ascending) or at the end of the
    buffer handed out."""
    position = 0
    for cut in [*cuts, len(stream)]:
        while position < cut:
            buffer = protocol.get_buffer(-1)
            assert len(buffer) > 0
            size = min(len(buffer), cut - position)
            buffer[:size] = stream[position:position + size]
            protocol.buffer_updated(size)
            position += size

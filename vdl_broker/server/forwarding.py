"""Admin requests run on the metadata leader: CreateTopics/DeleteTopics/IncrementalAlterConfigs
reaching another node
are forwarded to the leader's client port, with vdl_client's asyncio request.

A node that does not lead the metadata group forwards the request to the leader's client port
once: a forwarded request (client id FORWARD_CLIENT_ID) is not forwarded again; the caller
answers NOT_CONTROLLER then, which clients retry.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from vdl_broker.protocol.errors import ErrorCode
from vdl_broker.raft.types import NotLeaderError
from vdl_client import aio

if TYPE_CHECKING:
    from vdl_broker.server.broker import Broker

log = logging.getLogger(__name__)

FORWARD_CLIENT_ID = "vdl-forward"
MAX_CONTROLLER_WAIT_S = 5.0  # how long a create/delete waits for a metadata leader to exist
DEFAULT_TIMEOUT_MS = 30_000  # for requests without a timeout of their own (IncrementalAlterConfigs)


async def on_metadata_leader(broker: Broker, version: int, request: Any,
                             local: Callable[[Broker, Any], Awaitable[Any]],
                             error_response: Callable[[Any, int, ErrorCode], Any], forwarded: bool) -> Any:
    """`local(broker, request)` run on the metadata leader: here when this node leads the
    metadata group, else forwarded to the leader's client address (unless `forwarded` already)."""
    loop = asyncio.get_running_loop()
    timeout_s = min(MAX_CONTROLLER_WAIT_S, max(0.5, getattr(request, "timeout_ms", DEFAULT_TIMEOUT_MS) / 1000))
    deadline = loop.time() + timeout_s
    metadata = broker.metadata
    while True:
        if metadata.is_leader:
            try:
                return await local(broker, request)
            except NotLeaderError:
                pass  # lost the leadership meanwhile: find the new leader
        leader = metadata.leader_id
        if leader and leader != broker.node_id and not forwarded:
            address = broker.node_client_address(leader)
            if address is not None:
                try:
                    return await aio.request(address, request, max(0.5, deadline - loop.time()), version=version,
                                             client_id=FORWARD_CLIENT_ID)
                except (OSError, ValueError, TimeoutError) as error:
                    log.info("forwarding %s to node %d failed: %s", type(request).__name__, leader, error)
        if loop.time() >= deadline or (forwarded and leader and leader != broker.node_id):
            return error_response(request, version, ErrorCode.NOT_CONTROLLER)
        await asyncio.sleep(0.05)

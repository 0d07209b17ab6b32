"""Admin requests run on the metadata leader: CreateTopics, DeleteTopics, IncrementalAlterConfigs,
ACL and user changes reaching another node are forwarded to the leader over the node-to-node
channel (server/internal.py), on behalf of the client's principal.

A node that does not lead the metadata group forwards the request once: a forwarded request is
not forwarded again; the caller answers NOT_CONTROLLER then, which clients retry.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar, cast

from vdl_broker.raft.types import NotLeaderError
from vdl_broker.server import internal
from vdl_wire.errors import ErrorCode

if TYPE_CHECKING:
    from vdl_broker.server.connection import RequestContext
    from vdl_broker.server.node_view import NodeView

log = logging.getLogger(__name__)

MAX_CONTROLLER_WAIT_S = 5.0  # how long a create/delete waits for a metadata leader to exist
DEFAULT_TIMEOUT_MS = 30_000  # for requests without a timeout of their own (IncrementalAlterConfigs)


Request = TypeVar("Request")
Response = TypeVar("Response")


async def on_metadata_leader(node: NodeView, version: int, request: Request,
                             local: Callable[[NodeView, Request], Awaitable[Response]],
                             error_response: Callable[[Request, int, ErrorCode], Response],
                             context: RequestContext | None) -> Response:
    """`local(node, request)` run on the metadata leader: here when this node leads the
    metadata group, else forwarded to the leader for `context`'s principal (None: the broker's
    own request), unless the request was forwarded here already."""
    forwarded = context is not None and context.forwarded
    loop = asyncio.get_running_loop()
    timeout_s = min(MAX_CONTROLLER_WAIT_S, max(0.5, getattr(request, "timeout_ms", DEFAULT_TIMEOUT_MS) / 1000))
    deadline = loop.time() + timeout_s
    metadata = node.metadata
    while True:
        if metadata.is_leader:
            try:
                return await local(node, request)
            except NotLeaderError:
                pass  # lost the leadership meanwhile: find the new leader
        leader = metadata.leader_id
        if leader and leader != node.node_id and not forwarded:
            try:
                # The leader's answer decodes as the response of the request's own API.
                return cast(Response, await internal.call(node, leader, request, version,
                                                          max(0.5, deadline - loop.time()), context))
            except (OSError, ValueError, TimeoutError) as error:
                log.info("forwarding %s to node %d failed: %s", type(request).__name__, leader, error)
        if loop.time() >= deadline or (forwarded and leader and leader != node.node_id):
            return error_response(request, version, ErrorCode.NOT_CONTROLLER)
        await asyncio.sleep(0.05)

"""VdlNodes (key 10000, VDL's own; protocol/messages/vdl_nodes.py): list the nodes, let a new one
join, decommission or remove one, and let a stream leader report a finished reassignment. Runs
on the metadata leader (forwarded there from any node), except a list another node asks for,
answered from what this node has applied; the work itself is done by the membership controller
and the stream leaders (cluster/membership.py says who does what)."""

from __future__ import annotations

import logging
from typing import Any

from vdl_broker.cluster.membership import (
    DECOMMISSIONING,
    REMOVING,
    complete_reassignment_command,
    join_node_command,
    set_node_state_command,
)
from vdl_broker.cluster.metadata import Outcome, register_node_command
from vdl_broker.config import ConfigError, split_host_port
from vdl_broker.server.authorizer import Operation, authorized_cluster
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.forwarding import on_metadata_leader
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import VdlNodesRequest, VdlNodesResponse

API_KEY = VdlNodesRequest.DECL.api_key
NAME = "VdlNodes"

log = logging.getLogger(__name__)

Node = VdlNodesResponse.VdlNode
ACTIONS = ("list", "join", "register", "decommission", "remove", "reassignment_done")


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def node_list(node: NodeView) -> list[VdlNodesResponse.VdlNode]:
    """Every node: addresses, state, role in the metadata group, reachable from its leader."""
    state = node.metadata.state
    group = node.metadata.group
    conf = group.conf if group is not None else None
    status = group.peer_status() if group is not None else {}
    nodes = []
    for node_id in sorted(state.nodes):
        info = state.nodes[node_id]
        role = "none"
        if conf is not None and node_id in conf.voters:
            role = "voter"
        elif conf is not None and node_id in conf.learners:
            role = "learner"
        peer = status.get(node_id)
        nodes.append(Node(node_id=node_id, client=info.client, raft=info.raft, rack=info.rack,
                          state=state.membership.state_of(node_id), metadata_role=role,
                          reachable=node_id == node.node_id or (peer is not None and peer.alive)))
    return nodes


async def _on_leader(node: NodeView, request: VdlNodesRequest) -> VdlNodesResponse:
    try:
        await _act(node, request)
    except _Refused as refused:
        return VdlNodesResponse(error_code=int(refused.code), error_message=str(refused))
    metadata_log = node.metadata.log
    return VdlNodesResponse(nodes=node_list(node), removed_nodes=sorted(node.metadata.state.membership.removed),
                            metadata_last_index=metadata_log.last_index if metadata_log is not None else -1)


def _known(node: NodeView, node_id: int) -> None:
    state = node.metadata.state
    if node_id in state.membership.removed:
        raise _Refused(ErrorCode.BROKER_ID_NOT_REGISTERED, f"node {node_id} was removed from the cluster")
    if node_id not in state.nodes:
        raise _Refused(ErrorCode.BROKER_ID_NOT_REGISTERED, f"no node {node_id} in the cluster")


async def _submit(node: NodeView, command: dict[str, Any]) -> None:
    result = await node.metadata.submit(command)
    if result.outcome is not Outcome.OK:
        raise _Refused(ErrorCode.INVALID_REQUEST, result.message)


async def _act(node: NodeView, request: VdlNodesRequest) -> None:
    action, node_id = request.action, request.node_id
    state = node.metadata.state
    if action == "list":
        return
    if action == "join":
        await _join(node, request)
    elif action == "register":
        await _register(node, request)
    elif action in ("decommission", "remove"):
        _known(node, node_id)
        current = state.membership.state_of(node_id)
        wanted = DECOMMISSIONING if action == "decommission" else REMOVING
        if current == wanted or current == REMOVING:
            return  # asked again: already on its way out
        if not any(n != node_id for n in state.membership.placeable(state.nodes)):
            # Nothing could take its replicas or carry the cluster metadata on: it would stay
            # "removing" for good (and a cluster of one would remove itself).
            raise _Refused(ErrorCode.INVALID_REQUEST,
                           f"node {node_id} is the cluster's last active node: {action} it after another node "
                           "has joined")
        if action == "decommission":
            _check_room(node, node_id)
        log.info("node %d: %s asked", node_id, action)
        await _submit(node, set_node_state_command(node_id, wanted))
    elif action == "reassignment_done":
        await _submit(node, complete_reassignment_command(request.stream or "", request.created_index,
                                                            list(request.replicas)))
    else:
        raise _Refused(ErrorCode.INVALID_REQUEST, f"unknown action {action!r}; accepted: {', '.join(ACTIONS)}")


def _check_addresses(request: VdlNodesRequest, raft_optional: bool = False) -> tuple[str, str]:
    """(client, raft) of a join or register request, both host:port (raft may be empty when
    `raft_optional`: a node with no raft_listen, a cluster of one, has no raft address)."""
    client, raft = request.client or "", request.raft or ""
    if request.node_id <= 0:
        raise _Refused(ErrorCode.INVALID_REQUEST, f"node id must be positive, got {request.node_id}")
    for value, what in ((client, "client"), (raft, "raft")):
        if what == "raft" and raft_optional and not value:
            continue
        try:
            split_host_port(value, what)
        except ConfigError as error:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"{request.action}: {error}") from None
    return client, raft


async def _join(node: NodeView, request: VdlNodesRequest) -> None:
    client, raft = _check_addresses(request)
    node_id = request.node_id
    state = node.metadata.state
    if node_id in state.membership.removed:
        raise _Refused(ErrorCode.BROKER_ID_NOT_REGISTERED,
                       f"node {node_id} was removed from the cluster: join under a new node id")
    known = state.nodes.get(node_id)
    if known is None:
        log.info("node %d asks to join (client %s, raft %s)", node_id, client, raft)
        await _submit(node, join_node_command(node_id, client, raft, tuple(request.listeners or ()),
                                              request.rack or None, own=state.nodes_register_themselves))
    else:
        await _register(node, request)  # it moved


async def _register(node: NodeView, request: VdlNodesRequest) -> None:
    """A known node describing itself from its own config (at every start: server/joining.py).
    A node registered without a raft address (a cluster of one, no raft_listen) registers
    without one too; any other node must keep one."""
    state = node.metadata.state
    registered = state.nodes.get(request.node_id)
    client, raft = _check_addresses(request, raft_optional=registered is not None and not registered.raft)
    node_id = request.node_id
    _known(node, node_id)
    known = state.nodes[node_id]
    listeners, rack = tuple(request.listeners or ()), request.rack or None
    own = state.nodes_register_themselves  # below that level: as the metadata leader's config would
    if (own and not known.own) or (known.client, known.raft, known.listeners, known.rack) != (client, raft,
                                                                                             listeners, rack):
        log.info("node %d registers itself (client %s, raft %s, listeners %s, rack %s)", node_id, client, raft,
                 ",".join(listeners) or "-", rack or "-")
        await _submit(node, register_node_command(node_id, client, raft, listeners, rack, own=own))


def _check_room(node: NodeView, node_id: int) -> None:
    """Decommissioning must leave room for every replica the node holds."""
    state = node.metadata.state
    others = [n for n in state.membership.placeable(state.nodes) if n != node_id]
    for stream in state.streams_on(node_id):
        needed = len(state.membership.target_of(stream))
        if len(others) < needed:
            raise _Refused(ErrorCode.INVALID_REPLICATION_FACTOR,
                           f"decommissioning node {node_id} leaves {len(others)} active node(s) for stream "
                           f"{stream.name} of {needed} replicas: add a node first")


async def handle(node: NodeView, context: RequestContext, request: VdlNodesRequest) -> VdlNodesResponse:
    # Listing describes the cluster; anything else changes it (Kafka's DESCRIBE / ALTER on the
    # cluster resource). A node's own requests between nodes are always allowed.
    operation = Operation.DESCRIBE if request.action == "list" else Operation.ALTER
    if not authorized_cluster(node, context, operation):
        return error_response(request, context.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if request.action == "list" and context.forwarded and not node.metadata.is_leader:
        # Another node asking over the node-to-node channel (a node starting: server/joining.py):
        # what this node has applied is enough, and it may not reach the metadata leader yet.
        return await _on_leader(node, request)
    return await run(node, request, context.api_version, context)


async def run(node: NodeView, request: VdlNodesRequest, version: int = 0,
              context: RequestContext | None = None) -> VdlNodesResponse:
    """The request answered by the metadata leader (here, or forwarded to it); `context` None:
    this node's own request."""
    return await on_metadata_leader(node, version, request, _on_leader, error_response, context)


def error_response(request: VdlNodesRequest, version: int, code: ErrorCode) -> VdlNodesResponse:
    return VdlNodesResponse(error_code=int(code))

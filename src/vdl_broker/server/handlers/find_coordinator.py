"""FindCoordinator (key 10): the metadata leader coordinates every consumer group (one
well-known node, so members bootstrapped from different nodes meet in one group); this node
while no leader is known, unless this node is cut off from the cluster: then the node the rest
of the cluster most likely follows (server/cut_off.py), never itself, which could coordinate
nothing and would be asked again after each NOT_COORDINATOR. v4+ look up several keys in one
request (KIP-699), each answered on its own; share groups (key type 2) do not exist here."""

from __future__ import annotations

from vdl_broker.config import split_host_port
from vdl_broker.server.authorizer import Operation, ResourceType, authorized
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.cut_off import leader_elsewhere
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import FindCoordinatorRequest, FindCoordinatorResponse

API_KEY = FindCoordinatorRequest.DECL.api_key
NAME = "FindCoordinator"

BATCHED_VERSION = 4
GROUP, TRANSACTION = 0, 1
Coordinator = FindCoordinatorResponse.Coordinator


def metadata_leader(node: NodeView) -> int:
    """The metadata leader (it coordinates groups and transactions, and is the controller) as
    this node knows it, 0 when it knows none; on a node cut off from the cluster, the one the
    rest of the cluster most likely follows, never this node (server/cut_off.py)."""
    group = node.metadata.group
    if node.cut_off and group is not None:
        return leader_elsewhere(group.name, group.voters, node.node_id, node.metadata.last_leader,
                                node.host.liveness.is_alive)
    return node.metadata.leader_id


def _find(node: NodeView, context: RequestContext, key_type: int,
          key: str) -> FindCoordinatorResponse.Coordinator:
    if key_type not in (GROUP, TRANSACTION):
        return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=int(ErrorCode.INVALID_REQUEST),
                           error_message=f"unknown coordinator key type {key_type} (0 = group, 1 = transaction)")
    # Kafka: DESCRIBE on the group (key type 0) or on the transactional id (key type 1).
    kind, code = ((ResourceType.TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                  if key_type == TRANSACTION else (ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    if not authorized(node, context, Operation.DESCRIBE, kind, key):
        return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=int(code))
    leader = metadata_leader(node)
    address = node.node_client_address(leader, context.protocol) if leader else None
    if address is None:
        leader, address = node.node_id, node.own_address(context.protocol)
    host, port = split_host_port(address, "client")
    return Coordinator(key=key, node_id=leader, host=host, port=port, error_code=0)


def handle(node: NodeView, context: RequestContext,
           request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if context.api_version >= BATCHED_VERSION:
        return FindCoordinatorResponse(coordinators=[_find(node, context, request.key_type, key)
                                                     for key in request.coordinator_keys])
    found = _find(node, context, request.key_type, request.key)
    return FindCoordinatorResponse(error_code=found.error_code, error_message=found.error_message,
                                   node_id=found.node_id, host=found.host, port=found.port)


def error_response(request: FindCoordinatorRequest, version: int, code: ErrorCode) -> FindCoordinatorResponse:
    if version >= BATCHED_VERSION:
        return FindCoordinatorResponse(coordinators=[Coordinator(key=key, node_id=-1, host="", port=-1,
                                                                 error_code=int(code))
                                                     for key in request.coordinator_keys])
    return FindCoordinatorResponse(error_code=int(code), node_id=-1, host="", port=-1)

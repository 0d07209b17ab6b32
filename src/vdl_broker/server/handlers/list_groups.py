"""ListGroups (key 16): the groups this node coordinates, with members or only committed offsets
(those are Empty: a KIP-848 group whose members all left is still a consumer group, one known
only by offsets committed without a generation a classic one); v4 filters by state (KIP-518), v5 by type (KIP-848); an empty filter lists
them all. As in Kafka, every node answers with the groups it coordinates: the metadata leader
all of them, any other node none (an empty list is not an error), so a client asking every node
(Kafka's admin clients do) finds each group once."""

from __future__ import annotations

from vdl_broker.server.authorizer import (
    Operation,
    authorized_cluster,
    authorized_group,
)
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import ListGroupsRequest, ListGroupsResponse

API_KEY = ListGroupsRequest.DECL.api_key
NAME = "ListGroups"

CLASSIC, CONSUMER = "classic", "consumer"  # ListGroups v5 group types (KIP-848)


def handle(node: NodeView, context: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    coordinator = node.groups.active()
    if coordinator is None:
        # No metadata leader yet (an election): the groups are nowhere to be listed for now.
        leader = node.metadata.leader_id
        if not leader or leader == node.node_id:
            return error_response(request, context.api_version, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return ListGroupsResponse(error_code=0, groups=[])
    listed: dict[str, tuple[str, str, str]] = {}
    stored = node.metadata.state.groups
    for group_id in stored.group_ids():
        kept = stored.groups.get(group_id)
        if stored.empty_consumer_group(group_id) is not None:
            listed[group_id] = (CONSUMER, "Empty", CONSUMER)  # a KIP-848 group whose members all left
        else:  # offsets committed without a generation make a classic group (protocol type "")
            listed[group_id] = ((kept.protocol_type or "") if kept else "", "Empty", CLASSIC)
    for group in coordinator.groups():
        listed[group.group_id] = (group.protocol_type or "", group.state.value, CLASSIC)
    # A KIP-848 group's protocol type is "consumer", as Kafka lists it.
    for consumer_group in node.groups.consumer_groups.groups():
        listed[consumer_group.group_id] = (CONSUMER, consumer_group.state.value, CONSUMER)
    wanted = {s.lower() for s in request.states_filter or []}
    types = {t.lower() for t in request.types_filter or []}
    # Kafka: DESCRIBE on the cluster lists every group, else those the principal may describe.
    everything = authorized_cluster(node, context, Operation.DESCRIBE)
    groups = [ListGroupsResponse.ListedGroup(group_id=group_id, protocol_type=protocol_type, group_state=state,
                                             group_type=group_type)
              for group_id, (protocol_type, state, group_type) in sorted(listed.items())
              if (not wanted or state.lower() in wanted) and (not types or group_type in types)
              and (everything or authorized_group(node, context, Operation.DESCRIBE, group_id))]
    return ListGroupsResponse(error_code=0, groups=groups)


def error_response(request: ListGroupsRequest, version: int, code: ErrorCode) -> ListGroupsResponse:
    return ListGroupsResponse(error_code=int(code))

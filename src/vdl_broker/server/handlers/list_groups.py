"""ListGroups (key 16): every group the coordinator knows, with members or only committed
offsets (those are Empty); v4 filters by state (KIP-518: an empty filter lists them all)."""

from __future__ import annotations

from typing import Any

from vdl_broker.server.authorizer import (
    Operation,
    authorized_cluster,
    authorized_group,
)
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import ListGroupsRequest, ListGroupsResponse

API_KEY = ListGroupsRequest.DECL.api_key
NAME = "ListGroups"


def handle(broker: Any, context: Any, request: Any) -> Any:
    coordinator = broker.groups.active()
    if coordinator is None:
        return error_response(request, context.api_version, ErrorCode.NOT_COORDINATOR)
    listed: dict[str, tuple[str, str]] = {}
    stored = broker.metadata.state.groups
    for group_id in stored.group_ids():
        kept = stored.groups.get(group_id)
        listed[group_id] = ((kept.protocol_type or "") if kept else "", "Empty")
    for group in coordinator.groups():
        listed[group.group_id] = (group.protocol_type or "", group.state.value)
    wanted = {s.lower() for s in request.states_filter or []}
    # Kafka: DESCRIBE on the cluster lists every group, else those the principal may describe.
    everything = authorized_cluster(broker, context, Operation.DESCRIBE)
    groups = [ListGroupsResponse.ListedGroup(group_id=group_id, protocol_type=protocol_type, group_state=state)
              for group_id, (protocol_type, state) in sorted(listed.items())
              if (not wanted or state.lower() in wanted)
              and (everything or authorized_group(broker, context, Operation.DESCRIBE, group_id))]
    return ListGroupsResponse(error_code=0, groups=groups)


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    return ListGroupsResponse(error_code=int(code))

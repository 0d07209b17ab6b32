"""ConsumerGroupHeartbeat (key 68): a member of a KIP-848 group joins (epoch 0), heartbeats,
acknowledges revocations by reporting what it owns, and leaves (epoch -1, or -2 for a static
member); the coordinator answers with its epoch and, when it changed, the partitions it may
consume (groups/consumer.py). A group id held by a classic group with members is not a consumer
group: GROUP_ID_NOT_FOUND, as Kafka answers without online migration. A cluster below feature
level 2 (upgraded, not yet finalized) answers UNSUPPORTED_VERSION."""

from __future__ import annotations

from vdl_broker.cluster.features import CONSUMER_GROUPS_LEVEL, FEATURE_NAME
from vdl_broker.groups.consumer import HeartbeatRequestData
from vdl_broker.server.authorizer import Operation, authorized_group
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse

API_KEY = ConsumerGroupHeartbeatRequest.DECL.api_key
NAME = "ConsumerGroupHeartbeat"

Assignment = ConsumerGroupHeartbeatResponse.Assignment
TopicPartitions = ConsumerGroupHeartbeatResponse.TopicPartitions


def handle(node: NodeView, context: RequestContext,
           request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
    if not authorized_group(node, context, Operation.READ, request.group_id):
        return error_response(request, context.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if node.groups.active() is None:
        return error_response(request, context.api_version, ErrorCode.NOT_COORDINATOR)
    level = node.metadata.state.features.level
    if level < CONSUMER_GROUPS_LEVEL:
        # Nodes still on the older release could not apply the group's replicated state; the
        # Java client reads UNSUPPORTED_VERSION as "use group.protocol=classic".
        return _error(ErrorCode.UNSUPPORTED_VERSION,
                      f"KIP-848 consumer groups need {FEATURE_NAME} level {CONSUMER_GROUPS_LEVEL} (the cluster "
                      f"is at {level}): finalize it with `vdl cluster upgrade` once every node runs this release.")
    classic = node.groups.coordinator.group(request.group_id)
    if classic is not None and classic.members:
        return _error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {request.group_id} is not a consumer group.")
    state = node.metadata.state
    owned = None
    if request.topic_partitions is not None:
        # Only partition 0 exists; a stream deleted meanwhile is simply no longer owned.
        named = (state.stream_named_by(t.topic_id) for t in request.topic_partitions if 0 in t.partitions)
        owned = frozenset(name for name in named if name is not None)
    data = HeartbeatRequestData(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        instance_id=request.instance_id, rack_id=request.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=None if request.subscribed_topic_names is None else tuple(request.subscribed_topic_names),
        subscribed_topic_regex=request.subscribed_topic_regex if context.api_version >= 1 else None,
        server_assignor=request.server_assignor, owned=owned, client_id=context.client_id or "",
        client_host=context.client_host)
    groups = node.groups
    result = groups.consumer_groups.heartbeat(data, groups.streams(), groups.clock_ms())
    if result.error is not ErrorCode.NONE:
        return _error(result.error, result.message)
    assignment = None
    if result.assignment is not None:
        assignment = Assignment(topic_partitions=[TopicPartitions(topic_id=state.topic_id(name), partitions=[0])
                                                  for name in sorted(result.assignment)])
    return ConsumerGroupHeartbeatResponse(
        error_code=0, member_id=result.member_id, member_epoch=result.member_epoch,
        heartbeat_interval_ms=groups.consumer_groups.config_of(data.group_id).heartbeat_interval_ms, assignment=assignment)


def _error(code: ErrorCode, message: str | None) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(error_code=int(code), error_message=message, member_epoch=-1)


def error_response(request: ConsumerGroupHeartbeatRequest, version: int,
                   code: ErrorCode) -> ConsumerGroupHeartbeatResponse:
    return _error(code, None)

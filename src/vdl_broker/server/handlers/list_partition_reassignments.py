"""ListPartitionReassignments (key 46): the streams being moved, from the metadata as this node
has applied it (committed state: every node answers alike once it caught up)."""

from __future__ import annotations

from vdl_broker.server.authorizer import Operation, authorized_cluster
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse

API_KEY = ListPartitionReassignmentsRequest.DECL.api_key
NAME = "ListPartitionReassignments"

Topic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
Partition = Topic.OngoingPartitionReassignment


def handle(node: NodeView, context: RequestContext,
           request: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    if not authorized_cluster(node, context, Operation.DESCRIBE):  # Kafka: DESCRIBE on the cluster
        return error_response(request, context.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    state = node.metadata.state
    moving = state.membership.reassignments
    if request.topics is None:
        wanted = {name: [0] for name in moving}
    else:
        wanted = {topic.name: list(topic.partition_indexes) for topic in request.topics}
    topics = []
    for name in sorted(wanted):
        move = moving.get(name)
        stream = state.streams.get(name)
        if move is None or stream is None or 0 not in wanted[name]:
            continue  # Kafka lists only partitions being reassigned
        replicas = list(state.membership.hosts(stream))
        # Kafka: adding = target - original, removing = original - target; replicas = both.
        topics.append(Topic(name=name, partitions=[Partition(
            partition_index=0, replicas=list(dict.fromkeys((*move.target, *replicas))),
            adding_replicas=list(move.adding), removing_replicas=list(move.removing))]))
    return ListPartitionReassignmentsResponse(topics=topics)


def error_response(request: ListPartitionReassignmentsRequest, version: int,
                   code: ErrorCode) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(error_code=int(code))

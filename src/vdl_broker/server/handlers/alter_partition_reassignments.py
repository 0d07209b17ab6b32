"""AlterPartitionReassignments (key 45): move a stream's replicas (or cancel a move), as Kafka's
admin clients and `kafka-reassign-partitions` do. Runs on the metadata leader, which records
the target (cluster/membership.py); the stream's leader then changes its Raft group one voter at
a time, learners first (server/reassigner.py). The answer comes once the target is recorded,
as in Kafka: ListPartitionReassignments shows the move until it is done."""

from __future__ import annotations

from vdl_broker.cluster.membership import ACTIVE, reassign_stream_command
from vdl_broker.cluster.metadata import ClusterState, Outcome
from vdl_broker.server.authorizer import Operation, authorized_cluster
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.forwarding import on_metadata_leader
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)

API_KEY = AlterPartitionReassignmentsRequest.DECL.api_key
NAME = "AlterPartitionReassignments"

TopicResult = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
PartitionResult = TopicResult.ReassignablePartitionResponse


def check_target(state: ClusterState, replicas: list[int]) -> str | None:
    """Why `replicas` cannot be a stream's replica set, or None."""
    if not replicas:
        return "the replica list is empty (give null to cancel a reassignment)"
    if len(set(replicas)) != len(replicas):
        return f"replica list {replicas} names a node twice"
    for node in replicas:
        if node not in state.nodes:
            return f"no node {node} in the cluster"
        if state.membership.state_of(node) != ACTIVE:
            return f"node {node} is {state.membership.state_of(node)}: it takes no new replicas"
    return None


async def _reassign(node: NodeView, name: str, partition: int, replicas: list[int] | None,
                    allow_replication_factor_change: bool) -> tuple[ErrorCode, str | None]:
    state = node.metadata.state
    stream = state.streams.get(name)
    if stream is None or partition != 0:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no stream {name} partition {partition}"
    if replicas is not None and not allow_replication_factor_change and len(replicas) != len(stream.replicas):
        # KIP-860: a client may forbid moves that change the number of replicas.
        return ErrorCode.INVALID_REPLICATION_FACTOR, (f"stream {name} has {len(stream.replicas)} replicas, the move "
                                                      f"names {len(replicas)}")
    if replicas is None:
        if name not in state.membership.reassignments:
            return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"stream {name} is not being reassigned"
    else:
        problem = check_target(state, replicas)
        if problem is not None:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem
    result = await node.metadata.submit(reassign_stream_command(name, stream.created_index, replicas))
    if result.outcome is not Outcome.OK:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, result.message
    return ErrorCode.NONE, None


async def _on_leader(node: NodeView,
                     request: AlterPartitionReassignmentsRequest) -> AlterPartitionReassignmentsResponse:
    responses = []
    for topic in request.topics:
        results = []
        for partition in topic.partitions:
            replicas = None if partition.replicas is None else [int(r) for r in partition.replicas]
            code, message = await _reassign(node, topic.name, partition.partition_index, replicas,
                                            request.allow_replication_factor_change)
            results.append(PartitionResult(partition_index=partition.partition_index, error_code=int(code),
                                           error_message=message))
        responses.append(TopicResult(name=topic.name, partitions=results))
    return AlterPartitionReassignmentsResponse(responses=responses)


async def handle(node: NodeView, context: RequestContext,
                 request: AlterPartitionReassignmentsRequest) -> AlterPartitionReassignmentsResponse:
    if not authorized_cluster(node, context, Operation.ALTER):  # Kafka: ALTER on the cluster
        return error_response(request, context.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return await on_metadata_leader(node, context.api_version, request, _on_leader, error_response, context)


def error_response(request: AlterPartitionReassignmentsRequest, version: int,
                   code: ErrorCode) -> AlterPartitionReassignmentsResponse:
    return AlterPartitionReassignmentsResponse(error_code=int(code))

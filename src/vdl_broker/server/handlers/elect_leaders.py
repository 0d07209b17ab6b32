"""ElectLeaders (key 43): preferred-replica elections (election type 0; Kafka's
`kafka-leader-election --election-type PREFERRED`, AdminClient elect_leaders). Each stream's
leader hands leadership to the stream's preferred leader (server/leader_balancer.py); a stream
led elsewhere is forwarded to its leader. Unclean elections (type 1) do not exist in Raft: a
leader is always elected by a majority holding every committed entry. As Kafka's controller
answers an unclean election for a partition whose leader is live (ELECTION_NOT_NEEDED: the tool
says "Valid replica already elected"), a stream with a leader is answered so; one without gets
ELIGIBLE_LEADERS_NOT_AVAILABLE (Kafka's answer when no replica can be elected), never a replica
that could lack acknowledged writes."""

from __future__ import annotations

import asyncio
from collections import defaultdict

from vdl_broker.server import internal
from vdl_broker.server.authorizer import Operation, authorized_cluster
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.leader_balancer import elect_preferred
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import ElectLeadersRequest, ElectLeadersResponse

API_KEY = ElectLeadersRequest.DECL.api_key
NAME = "ElectLeaders"

Result = ElectLeadersResponse.ReplicaElectionResult
PartitionResult = Result.PartitionResult
Outcome = tuple[ErrorCode, str | None]
PREFERRED = 0
LEADER_WAIT_S = 5.0


async def handle(node: NodeView, context: RequestContext,
                 request: ElectLeadersRequest) -> ElectLeadersResponse:
    version = context.api_version
    if not authorized_cluster(node, context, Operation.ALTER):  # Kafka: ALTER on the cluster
        return error_response(request, version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    election_type = request.election_type if version >= 1 else PREFERRED
    streams = node.metadata.state.streams
    if request.topic_partitions is None:
        asked = {name: [0] for name in sorted(streams)}
    else:
        asked = defaultdict(list)
        for topic in request.topic_partitions:
            asked[topic.topic] += list(topic.partitions)
    outcomes: dict[tuple[str, int], Outcome] = {}
    remote: dict[int, list[str]] = defaultdict(list)
    local: list[str] = []
    timeout_s = max(0.5, min(request.timeout_ms, 60_000) / 1000)
    # A stream that just moved or failed over may have no known leader for a moment.
    await asyncio.gather(*(node.replicas.wait_for_leader(name, min(timeout_s, LEADER_WAIT_S))
                           for name in asked if name in streams))
    for name, partitions in asked.items():
        for partition in partitions:
            if name not in streams or partition != 0:
                outcomes[name, partition] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no stream {name} partition {partition}")
            elif election_type != PREFERRED:
                outcomes[name, partition] = _unclean(node.replicas.leader_view(name, streams[name])[0], name)
            else:
                leader = node.replicas.leader_view(name, streams[name])[0]
                local_partition = node.replicas.local(name)
                if local_partition is not None and local_partition.is_leader:
                    local.append(name)
                elif leader > 0 and leader != node.node_id and not context.forwarded:
                    remote[leader].append(name)
                else:
                    outcomes[name, partition] = (ErrorCode.NOT_LEADER_OR_FOLLOWER if leader > 0
                                                 else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                                                 f"no leader of stream {name} known here")
    jobs = [_local(node, name, timeout_s) for name in local]
    jobs += [_forward(node, leader, names, version, request.timeout_ms, context)
             for leader, names in remote.items()]
    for found in await asyncio.gather(*jobs):
        outcomes.update(found)
    by_topic: dict[str, list[ElectLeadersResponse.PartitionResult]] = defaultdict(list)
    for (name, partition), (code, message) in sorted(outcomes.items()):
        by_topic[name].append(PartitionResult(partition_id=partition, error_code=int(code), error_message=message))
    return ElectLeadersResponse(replica_election_results=[Result(topic=name, partition_result=results)
                                                          for name, results in by_topic.items()])


def _unclean(leader: int, name: str) -> Outcome:
    if leader > 0:
        return ErrorCode.ELECTION_NOT_NEEDED, (f"stream {name} has a leader (node {leader}) holding every "
                                               "acknowledged write: Raft needs no unclean election")
    return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, (f"stream {name} has no leader now: Raft elects only a "
                                                      "replica holding every acknowledged write, never an unclean one")


async def _local(node: NodeView, name: str, timeout_s: float) -> dict[tuple[str, int], Outcome]:
    return {(name, 0): await elect_preferred(node, name, timeout_s)}


async def _forward(node: NodeView, leader: int, names: list[str], version: int, timeout_ms: int,
                   context: RequestContext) -> dict[tuple[str, int], Outcome]:
    """The streams' leader runs their elections (for the client's principal, over the
    node-to-node channel: server/internal.py)."""
    request = ElectLeadersRequest(election_type=PREFERRED, timeout_ms=timeout_ms, topic_partitions=[
        ElectLeadersRequest.TopicPartitions(topic=name, partitions=[0]) for name in names])
    try:
        response = await internal.call(node, leader, request, version, max(1.0, timeout_ms / 1000 + 1), context)
    except (OSError, ValueError, TimeoutError) as error:
        return {(name, 0): (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, f"leader {leader} unreachable: {error}")
                for name in names}
    return {(result.topic, p.partition_id): (ErrorCode(p.error_code), p.error_message)
            for result in response.replica_election_results for p in result.partition_result}


def error_response(request: ElectLeadersRequest, version: int, code: ErrorCode) -> ElectLeadersResponse:
    results = [Result(topic=t.topic, partition_result=[PartitionResult(partition_id=p, error_code=int(code))
                                                       for p in t.partitions])
               for t in request.topic_partitions or []]
    return ElectLeadersResponse(error_code=int(code), replica_election_results=results)

"""DescribeQuorum (key 55): the metadata group described as KRaft describes its metadata log,
partition 0 of `__cluster_metadata` (what kafka-metadata-quorum and Admin.describeMetadataQuorum
show). The leader is the metadata group's leader, the leader epoch its Raft term, the high
watermark its commit index (entry i is offset i - 1, so the commit index is the offset after the
last committed entry), each voter's log end offset the index the leader knows it has durably
(its own included), the observers the group's learners, and v2's nodes the voters with their
client listeners. A follower's last fetch time is when the leader last heard from it, its last
caught-up time when it last answered holding the leader's whole log (-1, "unknown" in KIP-836,
when it has not this term); the leader's are now, as Kafka reports its own.

Only the leader knows its followers' progress: another node forwards the request there, as a
Kafka broker forwards it to the active controller (KafkaApis: DESCRIBE_QUORUM is forwarded). A
forwarded request that finds no leader gets NOT_LEADER_OR_FOLLOWER in the partition, as a KRaft
voter that does not lead answers (KafkaRaftClient.handleDescribeQuorumRequest); the admin
client retries both. Needs DESCRIBE on the cluster (ControllerApis.handleDescribeQuorum)."""

from __future__ import annotations

import time
import uuid

from vdl_broker.cluster.metadata import NodeInfo
from vdl_broker.config import split_host_port
from vdl_broker.listeners import PLAINTEXT, parse_listener
from vdl_broker.server.authorizer import Operation, authorized_cluster
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.forwarding import on_metadata_leader
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import DescribeQuorumRequest, DescribeQuorumResponse
from vdl_wire.messages.describe_quorum import (
    CLUSTER_METADATA_PARTITION,
    CLUSTER_METADATA_TOPIC,
    UNKNOWN_TIMESTAMP,
)

API_KEY = DescribeQuorumRequest.DECL.api_key
NAME = "DescribeQuorum"

Topic = DescribeQuorumResponse.TopicData
Partition = DescribeQuorumResponse.PartitionData
Replica = DescribeQuorumResponse.ReplicaState
Node = DescribeQuorumResponse.Node
Listener = DescribeQuorumResponse.Listener

NO_DIRECTORY_ID = uuid.UUID(int=0)  # VDL nodes have no directory ids (KIP-853): Kafka's ZERO_UUID
NO_OFFSET = -1  # a member whose progress the leader does not know


def asks_for_the_metadata_partition(request: DescribeQuorumRequest) -> bool:
    """Exactly one topic, `__cluster_metadata`, with exactly partition 0 (RaftUtil.hasValidTopicPartition)."""
    topics = request.topics
    return (len(topics) == 1 and topics[0].topic_name == CLUSTER_METADATA_TOPIC
            and len(topics[0].partitions) == 1
            and topics[0].partitions[0].partition_index == CLUSTER_METADATA_PARTITION)


def _listeners(info: NodeInfo | None, fallback: str) -> list[DescribeQuorumResponse.Listener]:
    """A node's client listeners (one PLAINTEXT listener on its client address when it names none)."""
    if info is not None and info.listeners:
        parsed = [parse_listener(listener, "listeners") for listener in info.listeners]
        return [Listener(name=lst.protocol, host=lst.host, port=lst.port) for lst in parsed]
    host, port = split_host_port(info.client if info is not None else fallback, "client")
    return [Listener(name=PLAINTEXT, host=host, port=port)]


def describe(node: NodeView, now_ms: int) -> DescribeQuorumResponse:
    """The quorum as this node, the metadata leader, knows it (a node that does not lead
    answers NOT_LEADER_OR_FOLLOWER in the partition)."""
    group = node.metadata.group
    if group is None or not group.is_leader:
        return not_leader(node)
    status = group.peer_status()
    conf = group.conf
    leader = node.node_id

    tick_ms = group.config.tick_interval_s * 1000

    def stamp(ticks_ago: int) -> int:
        return UNKNOWN_TIMESTAMP if ticks_ago < 0 else now_ms - round(ticks_ago * tick_ms)

    def replica(member: int) -> DescribeQuorumResponse.ReplicaState:
        peer = status.get(member)
        if peer is None:
            return Replica(replica_id=member, replica_directory_id=NO_DIRECTORY_ID, log_end_offset=NO_OFFSET,
                           last_fetch_timestamp=UNKNOWN_TIMESTAMP, last_caught_up_timestamp=UNKNOWN_TIMESTAMP)
        return Replica(replica_id=member, replica_directory_id=NO_DIRECTORY_ID, log_end_offset=peer.match,
                       last_fetch_timestamp=stamp(peer.heard_ticks_ago),
                       last_caught_up_timestamp=stamp(peer.caught_up_ticks_ago))

    voters = sorted(conf.voters)
    partition = Partition(partition_index=CLUSTER_METADATA_PARTITION, leader_id=leader, leader_epoch=group.term,
                          high_watermark=group.commit_index, current_voters=[replica(v) for v in voters],
                          observers=[replica(learner) for learner in sorted(conf.learners)])
    known = node.metadata.state.nodes
    own = node.own_address(PLAINTEXT)
    nodes = [Node(node_id=v, listeners=_listeners(known.get(v), own)) for v in voters
             if v in known or v == leader]
    return DescribeQuorumResponse(topics=[Topic(topic_name=CLUSTER_METADATA_TOPIC, partitions=[partition])],
                                  nodes=nodes)


def not_leader(node: NodeView) -> DescribeQuorumResponse:
    """The metadata partition answered NOT_LEADER_OR_FOLLOWER (DescribeQuorumResponse.singletonErrorResponse),
    naming the leader this node knows (-1: none)."""
    leader = node.metadata.leader_id or -1
    partition = Partition(partition_index=CLUSTER_METADATA_PARTITION, error_code=int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                          error_message=f"node {node.node_id} does not lead the metadata group"
                                        + (f" (node {leader} does)" if leader > 0 else " (no leader known)"),
                          leader_id=leader)
    return DescribeQuorumResponse(topics=[Topic(topic_name=CLUSTER_METADATA_TOPIC, partitions=[partition])])


async def _here(node: NodeView, request: DescribeQuorumRequest) -> DescribeQuorumResponse:
    return describe(node, int(time.time() * 1000))


async def handle(node: NodeView, context: RequestContext, request: DescribeQuorumRequest) -> DescribeQuorumResponse:
    if not authorized_cluster(node, context, Operation.DESCRIBE):
        return error_response(request, context.api_version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if not asks_for_the_metadata_partition(request):
        # DescribeQuorumRequest.getPartitionLevelErrorResponse: every partition asked, by name.
        return DescribeQuorumResponse(topics=[
            Topic(topic_name=topic.topic_name,
                  partitions=[Partition(partition_index=p.partition_index,
                                        error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                              for p in topic.partitions])
            for topic in request.topics])
    # No leader to run it on (on_metadata_leader's NOT_CONTROLLER): what a KRaft voter answers.
    return await on_metadata_leader(node, context.api_version, request, _here,
                                    lambda _request, _version, _code: not_leader(node), context)


def error_response(request: DescribeQuorumRequest, version: int, code: ErrorCode) -> DescribeQuorumResponse:
    """The whole request refused (DescribeQuorumRequest.getTopLevelErrorResponse)."""
    return DescribeQuorumResponse(error_code=int(code))

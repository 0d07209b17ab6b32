"""Metadata (key 3): every registered node (with its rack, v1+), and each stream as a topic with one partition (0):
its leader (LEADER_NOT_AVAILABLE while none is known), replicas and ISR. A node cut off from the
cluster names another replica as each stream's leader, and another node as the controller
(server/cut_off.py).

Nodes are given at the addresses of the listener (protocol) the client came in on. Streams the
principal may not DESCRIBE are left out of an "every stream" answer and answered
TOPIC_AUTHORIZATION_FAILED when named, as Kafka does; auto-creation needs CREATE."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass

from vdl_broker.cluster import topic_ids
from vdl_broker.cluster.acls import CLUSTER_NAME
from vdl_broker.cluster.metadata import validate_stream_name
from vdl_broker.config import split_host_port
from vdl_broker.server.authorizer import Operation, ResourceType, authorized, authorized_operations
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.handlers import create_topics, find_coordinator
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import CreateTopicsRequest, MetadataRequest, MetadataResponse

API_KEY = MetadataRequest.DECL.api_key
NAME = "Metadata"

log = logging.getLogger(__name__)

Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition
Broker = MetadataResponse.MetadataResponseBroker


def _by_id_topics(request: MetadataRequest) -> list[uuid.UUID]:
    """The ids a v12+ request asks for. A topic with a non-zero id is asked for by id whatever
    its name: the Java client leaves the name "" (its default), not null, and Kafka then ignores
    the names (KafkaApis.handleTopicMetadataRequest)."""
    return [topic.topic_id for topic in request.topics or [] if topic.topic_id not in (None, topic_ids.ZERO)]


def requested_names(request: MetadataRequest, version: int) -> list[str] | None:
    """None means every stream: a null list (v1+), or an empty one in v0. Topics asked for by
    id (v12+) are answered apart (`_by_id`)."""
    if request.topics is None or (version == 0 and not request.topics):
        return None
    if _by_id_topics(request):
        return []
    return [topic.name for topic in request.topics if topic.name is not None]


@dataclass(frozen=True, slots=True)
class PartitionView:
    """What a client is told of a stream's one partition (Metadata, DescribeTopicPartitions)."""

    leader: int  # -1: none known
    leader_epoch: int  # -1: unknown
    replicas: list[int]
    isr: list[int]


def partition_view(node: NodeView, name: str, cut_off: bool = False, first_hand: bool = False) -> PartitionView:
    info = node.metadata.state.streams[name]
    # During a reassignment: every node holding a replica, the target's first (as Kafka does).
    membership = node.metadata.state.membership
    replicas = list(dict.fromkeys((*membership.target_of(info), *membership.hosts(info))))
    cut_off_epoch = -1
    if cut_off:  # another replica, never "no leader" (server/cut_off.py)
        leader, cut_off_epoch = node.replicas.leader_when_cut_off(name, info)
        isr = [leader] if leader > 0 else []
    else:
        leader, isr = node.replicas.leader_view(name, info, first_hand)
    # A view learned before a node left the cluster (a decommission, a removal) may still name it:
    # a leader missing from the answer's brokers is "no leader" (clients ask again), never a node
    # the client cannot find (kafka-python's sender then fails on every loop, for good).
    known = node.metadata.state.nodes
    if leader > 0 and leader not in known and leader != node.node_id:
        leader = -1
    isr = [replica for replica in isr if replica in known or replica == node.node_id]
    # The leader epoch is the stream's Raft term (KIP-320: clients validate their position with
    # OffsetForLeaderEpoch when it changes, and send it with Fetch and ListOffsets, which fence
    # an older one). A node without a replica answers the term the leader itself last reported
    # (ReplicaManager.learned_leader_epoch), and so does a replica naming a leader it does not
    # follow itself (learned from the others); -1 ("unknown") where it has not heard it. A
    # cut-off node gives the epoch of the leader it guesses (ReplicaManager.leader_when_cut_off).
    epoch = cut_off_epoch if leader > 0 else -1
    if leader > 0 and not cut_off:
        local = node.replicas.local(name)
        epoch = (local.leader_epoch if local is not None and local.leader_id == leader
                 else node.replicas.learned_leader_epoch(name, leader))
    return PartitionView(leader=leader if leader > 0 else -1, leader_epoch=epoch, replicas=replicas, isr=isr)


def current_leader(node: NodeView, name: str) -> tuple[int, int]:
    """(leader id, leader epoch) of stream `name` for an answer refusing a request here with
    NOT_LEADER_OR_FOLLOWER: Produce v10+ and Fetch v12+ carry it (KIP-951, CurrentLeader), so a
    client goes to that leader without asking Metadata first. The leader a Metadata answer here
    names, never this node itself (it just refused), with the leader epoch it gives (a client
    ignores a hint whose epoch is not newer than the one it knows); (-1, -1) when unknown."""
    if name not in node.metadata.state.streams:
        return -1, -1
    view = partition_view(node, name, node.cut_off)
    if view.leader <= 0 or view.leader == node.node_id:
        return -1, -1
    return view.leader, view.leader_epoch


def leader_endpoints(node: NodeView, protocol: str,
                     leaders: set[int]) -> list[MetadataResponse.MetadataResponseBroker]:
    """The addresses of `leaders` on the listener of `protocol`, as Metadata gives them (the
    NodeEndpoints of a KIP-951 answer: the client may not know a leader named in it yet)."""
    return [broker for broker in listener_brokers(node, protocol) if broker.node_id in leaders]


def _topic(node: NodeView, name: str, cut_off: bool = False,
           first_hand: bool = False) -> MetadataResponse.MetadataResponseTopic:
    view = partition_view(node, name, cut_off, first_hand)
    error = ErrorCode.NONE if view.leader > 0 else ErrorCode.LEADER_NOT_AVAILABLE
    partition = Partition(error_code=int(error), partition_index=0, leader_id=view.leader,
                          leader_epoch=view.leader_epoch, replica_nodes=view.replicas, isr_nodes=view.isr,
                          offline_replicas=[])
    return Topic(error_code=0, name=name, topic_id=node.metadata.state.topic_id(name), is_internal=False,
                 partitions=[partition])


def _by_id(node: NodeView, context: RequestContext,
           topic_id: uuid.UUID) -> MetadataResponse.MetadataResponseTopic:
    """A topic asked for by id (Metadata v12, KIP-516): Kafka answers an unknown id
    UNKNOWN_TOPIC_ID with a null name, and an id the principal may not see the same way."""
    name = node.metadata.state.stream_named_by(topic_id)
    if name is None or not authorized(node, context, Operation.DESCRIBE, ResourceType.TOPIC, name):
        return Topic(error_code=int(ErrorCode.UNKNOWN_TOPIC_ID), name=None, topic_id=topic_id)
    return _topic(node, name)


def listener_brokers(node: NodeView, protocol: str) -> list[MetadataResponse.MetadataResponseBroker]:
    """Every node with its address on the listener of `protocol` (DescribeCluster answers the same)."""
    nodes = node.metadata.state.nodes
    brokers = []
    for node_id in sorted(nodes):
        host, port = split_host_port(nodes[node_id].address_for(protocol), "client")
        brokers.append(Broker(node_id=node_id, host=host, port=port, rack=nodes[node_id].rack))
    if node.node_id not in nodes:  # not registered yet: clients still need this node
        host, port = split_host_port(node.own_address(protocol), "client")
        brokers.append(Broker(node_id=node.node_id, host=host, port=port, rack=node.config.rack))
    return brokers


# How long a Metadata answer may wait for other nodes' word on the leaders and ISRs of streams
# this node does not lead (ReplicaManager.refresh_stale_views); loopback and LAN answers take ms.
VIEW_REFRESH_S = 0.5
# How long it may wait for a leader about to be known here: a stream just created electing its
# first, or this node committing its first entry as leader (ReplicaManager.leader_imminent).
IMMINENT_LEADER_WAIT_S = 3.0


async def handle(node: NodeView, context: RequestContext, request: MetadataRequest) -> MetadataResponse:
    version = context.api_version
    names = requested_names(request, version)
    if not node.cut_off and not context.forwarded:
        # Not when another node asks (it wants this node's first-hand word only), nor when cut off.
        listed = sorted(node.metadata.state.streams) if names is None else names
        await node.replicas.wait_for_imminent_leaders(listed, IMMINENT_LEADER_WAIT_S)
        await node.replicas.refresh_stale_views(listed, VIEW_REFRESH_S)
    streams = node.metadata.state.streams

    def describable(name: str) -> bool:
        return authorized(node, context, Operation.DESCRIBE, ResourceType.TOPIC, name)

    # Cut off from the cluster: send clients to the other nodes (server/cut_off.py).
    cut_off = node.cut_off
    # Another node asking (server/internal.py) is told what this node knows first hand only.
    first_hand = context.forwarded
    topics = []
    creating: dict[str, int] = {}  # auto-created here: name -> its index in topics
    if names is None:
        topics = [_topic(node, name, cut_off, first_hand) for name in sorted(streams) if describable(name)]
    else:
        # Metadata v4+ lets the client veto auto-creation; the broker config must allow it too.
        may_create = node.config.auto_create_streams and (version < 4 or request.allow_auto_topic_creation)
        for name in names:
            if not describable(name) and not (name not in streams and may_create
                                              and create_topics.may_create(node, context, name)):
                topics.append(Topic(error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), name=name))
            elif name in streams:
                topics.append(_topic(node, name, cut_off, first_hand))
            elif validate_stream_name(name) is not None:
                topics.append(Topic(error_code=int(ErrorCode.INVALID_TOPIC_EXCEPTION), name=name))
            elif may_create and create_topics.may_create(node, context, name):
                creating[name] = len(topics)
                topics.append(Topic(error_code=int(ErrorCode.LEADER_NOT_AVAILABLE), name=name))
            elif node.replicas.registry.catching_up:
                # A node whose data directory was lost does not know every stream until its
                # metadata replica recovers: "not available yet" makes clients ask again, where
                # UNKNOWN_TOPIC_OR_PARTITION fails a librdkafka producer ("Unknown topic").
                topics.append(Topic(error_code=int(ErrorCode.LEADER_NOT_AVAILABLE), name=name))
            else:
                topics.append(Topic(error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), name=name))
        if creating:
            await _auto_create(node, list(creating))
            for name, index in creating.items():
                if name in node.metadata.state.streams:
                    created = _topic(node, name, cut_off, first_hand)
                    if created.partitions[0].leader_id > 0:
                        topics[index] = created
        topics += [_by_id(node, context, topic_id) for topic_id in _by_id_topics(request)]
    if request.include_topic_authorized_operations:  # v8+ (KIP-430): what the principal may do on each
        for topic in topics:
            if topic.error_code != ErrorCode.TOPIC_AUTHORIZATION_FAILED and topic.name is not None:
                topic.topic_authorized_operations = authorized_operations(node, context, ResourceType.TOPIC,
                                                                          topic.name)
    controller = find_coordinator.metadata_leader(node) or -1  # never this node when cut off
    # Every node, this one too even when cut off (server/cut_off.py: librdkafka drops a broker
    # left out of Metadata, and with it the new leader it has just learned).
    response = MetadataResponse(brokers=listener_brokers(node, context.protocol), cluster_id=node.cluster_id,
                                controller_id=controller, topics=topics)
    if request.include_cluster_authorized_operations:  # v8-10 (KIP-430; later versions: DescribeCluster)
        response.cluster_authorized_operations = authorized_operations(node, context, ResourceType.CLUSTER,
                                                                       CLUSTER_NAME)
    return response


# How long the Metadata request that auto-creates streams waits for their first leaders.
AUTO_CREATE_WAIT_S = 5.0


async def _auto_create(node: NodeView, names: list[str]) -> None:
    """Create the streams, then wait (at most AUTO_CREATE_WAIT_S) until this node knows their
    first leaders, so that the creating request answers with them. Kafka answers it
    LEADER_NOT_AVAILABLE and has the leader in the topic's first record; a VDL stream elects
    its leader after, and a client asking again at once (kafka-go's DialLeader) found the
    stream listed without one and dialled "no broker". The creation runs on as the node's own
    task if the client goes away."""
    topics = [CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=-1) for name in names]
    request = CreateTopicsRequest(topics=topics, timeout_ms=int(AUTO_CREATE_WAIT_S * 1000))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + AUTO_CREATE_WAIT_S
    await asyncio.wait([node.replicas.spawn(_create(node, request))], timeout=AUTO_CREATE_WAIT_S)
    await asyncio.gather(*(node.replicas.wait_for_leader(name, max(0.0, deadline - loop.time())) for name in names))


async def _create(node: NodeView, request: CreateTopicsRequest) -> None:
    try:
        await create_topics.create(node, request, None)
    except Exception:
        log.exception("auto-creating streams %s failed", ", ".join(t.name for t in request.topics))


def error_response(request: MetadataRequest, version: int, code: ErrorCode) -> MetadataResponse:
    topics = [Topic(error_code=int(code), name=t.name) for t in request.topics or []]
    return MetadataResponse(brokers=[], cluster_id=None, controller_id=-1, topics=topics)

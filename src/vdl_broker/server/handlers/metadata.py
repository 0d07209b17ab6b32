"""Metadata (key 3): every registered node (with its rack, v1+), and each stream as a topic with one partition (0):
its leader (LEADER_NOT_AVAILABLE while none is known), replicas and ISR.

Nodes are given at the addresses of the listener (protocol) the client came in on. Streams the
principal may not DESCRIBE are left out of an "every stream" answer and answered
TOPIC_AUTHORIZATION_FAILED when named, as Kafka does; auto-creation needs CREATE."""

from __future__ import annotations

import logging
from typing import Any

from vdl_broker.cluster.metadata import validate_stream_name
from vdl_broker.config import split_host_port
from vdl_broker.server.authorizer import Operation, ResourceType, authorized
from vdl_broker.server.handlers import create_topics
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import CreateTopicsRequest, MetadataRequest, MetadataResponse

API_KEY = MetadataRequest.DECL.api_key
NAME = "Metadata"

log = logging.getLogger(__name__)

Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition
Broker = MetadataResponse.MetadataResponseBroker


def requested_names(request: Any, version: int) -> list[str] | None:
    """None means every stream: a null list (v1+), or an empty one in v0. Topics named by id
    only (v10+) are answered apart (`_by_id`)."""
    if request.topics is None or (version == 0 and not request.topics):
        return None
    return [topic.name for topic in request.topics if topic.name is not None]


def _topic(broker: Any, name: str) -> Any:
    info = broker.metadata.state.streams[name]
    leader, isr = broker.replicas.leader_view(name, info)
    error = ErrorCode.NONE if leader > 0 else ErrorCode.LEADER_NOT_AVAILABLE
    # leader_epoch -1 ("unknown"): clients then skip epoch fencing, which Fetch/ListOffsets here
    # do not implement (no OffsetForLeaderEpoch).
    # During a reassignment: every node holding a replica, the target's first (as Kafka does).
    membership = broker.metadata.state.membership
    replicas = list(dict.fromkeys((*membership.target_of(info), *membership.hosts(info))))
    partition = Partition(error_code=int(error), partition_index=0, leader_id=leader if leader > 0 else -1,
                          leader_epoch=-1, replica_nodes=replicas, isr_nodes=isr, offline_replicas=[])
    return Topic(error_code=0, name=name, topic_id=broker.metadata.state.topic_id(name), is_internal=False,
                 partitions=[partition])


def _by_id(broker: Any, context: Any, topic_id: Any) -> Any:
    """A topic asked for by id (Metadata v12, KIP-516): Kafka answers an unknown id
    UNKNOWN_TOPIC_ID with a null name, and an id the principal may not see the same way."""
    name = broker.metadata.state.stream_named_by(topic_id)
    if name is None or not authorized(broker, context, Operation.DESCRIBE, ResourceType.TOPIC, name):
        return Topic(error_code=int(ErrorCode.UNKNOWN_TOPIC_ID), name=None, topic_id=topic_id)
    return _topic(broker, name)


def _brokers(broker: Any, protocol: str) -> list[Any]:
    nodes = dict(broker.metadata.state.nodes)
    brokers = []
    for node_id in sorted(nodes):
        host, port = split_host_port(nodes[node_id].address_for(protocol), "client")
        brokers.append(Broker(node_id=node_id, host=host, port=port, rack=nodes[node_id].rack))
    if broker.node_id not in nodes:  # not registered yet: clients still need this node
        host, port = split_host_port(broker.own_address(protocol), "client")
        brokers.append(Broker(node_id=broker.node_id, host=host, port=port, rack=broker.config.rack))
    return brokers


def handle(broker: Any, context: Any, request: Any) -> Any:
    version = context.api_version
    names = requested_names(request, version)
    streams = broker.metadata.state.streams

    def describable(name: str) -> bool:
        return authorized(broker, context, Operation.DESCRIBE, ResourceType.TOPIC, name)

    topics = []
    if names is None:
        topics = [_topic(broker, name) for name in sorted(streams) if describable(name)]
    else:
        # Metadata v4+ lets the client veto auto-creation; the broker config must allow it too.
        may_create = broker.config.auto_create_streams and (version < 4 or request.allow_auto_topic_creation)
        for name in names:
            if not describable(name) and not (name not in streams and may_create
                                              and create_topics.may_create(broker, context, name)):
                topics.append(Topic(error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), name=name))
            elif name in streams:
                topics.append(_topic(broker, name))
            elif validate_stream_name(name) is not None:
                topics.append(Topic(error_code=int(ErrorCode.INVALID_TOPIC_EXCEPTION), name=name))
            elif may_create and create_topics.may_create(broker, context, name):
                broker.replicas.spawn(_auto_create(broker, name))
                topics.append(Topic(error_code=int(ErrorCode.LEADER_NOT_AVAILABLE), name=name))
            elif broker.replicas.registry.catching_up:
                # A node whose data directory was lost does not know every stream until its
                # metadata replica recovers: "not available yet" makes clients ask again, where
                # UNKNOWN_TOPIC_OR_PARTITION fails a librdkafka producer ("Unknown topic").
                topics.append(Topic(error_code=int(ErrorCode.LEADER_NOT_AVAILABLE), name=name))
            else:
                topics.append(Topic(error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), name=name))
        topics += [_by_id(broker, context, t.topic_id) for t in request.topics if t.name is None]
    controller = broker.metadata.leader_id or -1
    return MetadataResponse(brokers=_brokers(broker, context.protocol), cluster_id=broker.cluster_id, controller_id=controller,
                            topics=topics)


async def _auto_create(broker: Any, name: str) -> None:
    topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=-1)
    request = CreateTopicsRequest(topics=[topic], timeout_ms=10_000)
    try:
        await create_topics.create(broker, request, None)
    except Exception:
        log.exception("auto-creating stream %s failed", name)


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    topics = [Topic(error_code=int(code), name=t.name) for t in request.topics or []]
    return MetadataResponse(brokers=[], cluster_id=None, controller_id=-1, topics=topics)

"""Metadata (key 3): this node, and each stream as a topic with one partition (0) led here."""

from __future__ import annotations

from typing import Any

from vdl_broker.protocol.errors import ErrorCode
from vdl_broker.protocol.messages import MetadataResponse
from vdl_broker.server.streams import stream_name_problem

API_KEY = 3
NAME = "Metadata"

Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition


def topic_entry(broker: Any, name: str) -> Any:
    node = broker.node_id
    partition = Partition(error_code=0, partition_index=0, leader_id=node, leader_epoch=0,
                          replica_nodes=[node], isr_nodes=[node], offline_replicas=[])
    return Topic(error_code=0, name=name, is_internal=False, partitions=[partition])


def _requested_names(request: Any, version: int) -> list[str] | None:
    """None means every stream: a null list (v1+), or an empty one in v0."""
    if request.topics is None or (version == 0 and not request.topics):
        return None
    return [topic.name for topic in request.topics]


def handle(broker: Any, context: Any, request: Any) -> Any:
    version = context.api_version
    names = _requested_names(request, version)
    topics = []
    if names is None:
        topics = [topic_entry(broker, name) for name in broker.streams.names()]
    else:
        # Metadata v4+ lets the client veto auto-creation; the broker config must allow it too.
        may_create = broker.config.auto_create_streams and (version < 4 or request.allow_auto_topic_creation)
        for name in names:
            if name in broker.streams:
                topics.append(topic_entry(broker, name))
            elif stream_name_problem(name) is not None:
                topics.append(Topic(error_code=int(ErrorCode.INVALID_TOPIC_EXCEPTION), name=name))
            elif may_create:
                broker.streams.create(name)
                topics.append(topic_entry(broker, name))
            else:
                topics.append(Topic(error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), name=name))
    return _response(broker, topics)


def _response(broker: Any, topics: list[Any]) -> Any:
    node = MetadataResponse.MetadataResponseBroker(node_id=broker.node_id, host=broker.advertised_host,
                                                   port=broker.port, rack=None)
    return MetadataResponse(brokers=[node], cluster_id=broker.cluster_id, controller_id=broker.node_id,
                            topics=topics)


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    topics = [Topic(error_code=int(code), name=t.name) for t in request.topics or []]
    return MetadataResponse(brokers=[], cluster_id=None, controller_id=-1, topics=topics)

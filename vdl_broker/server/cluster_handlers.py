"""The handlers that differ in cluster mode (issue 5): Metadata, CreateTopics, DeleteTopics,
FindCoordinator. `install(handlers)` swaps them into a ClusterBroker's handler table; every other
API keeps its single-node handler (they see streams through the same partition seam).

- Metadata: every registered node; per stream its leader (LEADER_NOT_AVAILABLE while none is
  known), replicas and ISR (vdl_broker.server.cluster_node.ClusterStreams.leader_view).
- CreateTopics / DeleteTopics: committed through the metadata group. A node that does not lead it
  forwards the request to the leader's client port (once: a forwarded request is not forwarded
  again; NOT_CONTROLLER then, which clients retry).
- FindCoordinator: the metadata leader coordinates the consumer groups (one well-known node, so
  members bootstrapped from different nodes meet in one group); this node while none is known.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

from vdl_broker.cluster.config import split_host_port
from vdl_broker.cluster.metadata import ALLOWED_REPLICATION_FACTORS, Outcome, validate_stream_name
from vdl_broker.protocol.api import decode_response, encode_request
from vdl_broker.protocol.errors import ErrorCode
from vdl_broker.protocol.messages import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    FindCoordinatorResponse,
    MetadataResponse,
)
from vdl_broker.raft.types import NotLeaderError, RaftError
from vdl_broker.server.handlers import Handler
from vdl_broker.server.handlers import create_topics as single_create_topics
from vdl_broker.server.handlers import delete_topics as single_delete_topics
from vdl_broker.server.handlers import find_coordinator as single_find_coordinator
from vdl_broker.server.handlers import metadata as single_metadata

log = logging.getLogger(__name__)

Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition
CreateResult = CreateTopicsResponse.CreatableTopicResult
DeleteResult = DeleteTopicsResponse.DeletableTopicResult
FORWARD_CLIENT_ID = "vdl-forward"  # requests one node forwards to another are not forwarded again
MAX_CONTROLLER_WAIT_S = 5.0  # how long a create/delete waits for a metadata leader to exist
MAX_LEADER_WAIT_S = 5.0  # how long a create waits for the new stream's first leader

OUTCOME_ERRORS = {
    Outcome.OK: ErrorCode.NONE,
    Outcome.EXISTS: ErrorCode.TOPIC_ALREADY_EXISTS,
    Outcome.UNKNOWN: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    Outcome.INVALID_NAME: ErrorCode.INVALID_TOPIC_EXCEPTION,
    Outcome.INVALID_REPLICATION_FACTOR: ErrorCode.INVALID_REPLICATION_FACTOR,
    Outcome.INVALID_CONFIG: ErrorCode.INVALID_CONFIG,
    Outcome.INVALID_COMMAND: ErrorCode.INVALID_REQUEST,
}


async def kafka_request(address: str, api_key: int, version: int, request: Any, timeout_s: float) -> Any:
    """One request over a fresh connection to another node's client port; its response."""
    host, port = split_host_port(address, "address")
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    try:
        writer.write(b"".join(bytes(part) for part in encode_request(api_key, version, 1, FORWARD_CLIENT_ID, request)))
        await writer.drain()
        size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), timeout_s), "big")
        body = await asyncio.wait_for(reader.readexactly(size), timeout_s)
    except asyncio.IncompleteReadError as error:
        raise ConnectionError(f"{address} closed the connection") from error
    finally:
        writer.close()
    return decode_response(api_key, version, body)[1]


# -- Metadata ---------------------------------------------------------------------------------


def _topic(broker: Any, name: str) -> Any:
    info = broker.metadata.state.streams[name]
    leader, isr = broker.streams.leader_view(name, info)
    error = ErrorCode.NONE if leader > 0 else ErrorCode.LEADER_NOT_AVAILABLE
    # leader_epoch -1 ("unknown"): clients then skip epoch fencing, which Fetch/ListOffsets here
    # do not implement (no OffsetForLeaderEpoch).
    partition = Partition(error_code=int(error), partition_index=0, leader_id=leader if leader > 0 else -1,
                          leader_epoch=-1, replica_nodes=list(info.replicas), isr_nodes=isr, offline_replicas=[])
    return Topic(error_code=0, name=name, is_internal=False, partitions=[partition])


def _brokers(broker: Any) -> list[Any]:
    nodes = dict(broker.metadata.state.nodes)
    brokers = []
    for node_id in sorted(nodes):
        host, port = split_host_port(nodes[node_id].client, "client")
        brokers.append(MetadataResponse.MetadataResponseBroker(node_id=node_id, host=host, port=port, rack=None))
    if broker.node_id not in nodes:  # not registered yet: clients still need this node
        brokers.append(MetadataResponse.MetadataResponseBroker(node_id=broker.node_id, host=broker.advertised_host,
                                                               port=broker.port, rack=None))
    return brokers


def handle_metadata(broker: Any, context: Any, request: Any) -> Any:
    names = single_metadata._requested_names(request, context.api_version)
    streams = broker.metadata.state.streams
    topics = []
    if names is None:
        topics = [_topic(broker, name) for name in sorted(streams)]
    else:
        may_create = broker.config.auto_create_streams and (context.api_version < 4 or request.allow_auto_topic_creation)
        for name in names:
            if name in streams:
                topics.append(_topic(broker, name))
            elif validate_stream_name(name) is not None:
                topics.append(Topic(error_code=int(ErrorCode.INVALID_TOPIC_EXCEPTION), name=name))
            elif may_create:
                broker.streams.spawn(_auto_create(broker, name))
                topics.append(Topic(error_code=int(ErrorCode.LEADER_NOT_AVAILABLE), name=name))
            else:
                topics.append(Topic(error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), name=name))
    controller = broker.metadata.leader_id or -1
    return MetadataResponse(brokers=_brokers(broker), cluster_id=broker.cluster_id, controller_id=controller,
                            topics=topics)


async def _auto_create(broker: Any, name: str) -> None:
    topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=-1)
    request = CreateTopicsRequest(topics=[topic], timeout_ms=10_000)
    try:
        await _controller_call(broker, 19, 1, request, _create_locally, single_create_topics.error_response)
    except Exception:
        log.exception("auto-creating stream %s failed", name)


# -- CreateTopics / DeleteTopics ------------------------------------------------------------------


async def _controller_call(broker: Any, api_key: int, version: int, request: Any, local: Any,
                           error_response: Any, forwarded: bool = False) -> Any:
    """Run `local(broker, request)` on the metadata leader: here when this node leads the
    metadata group, else forwarded to the leader's client address."""
    loop = asyncio.get_running_loop()
    timeout_s = min(MAX_CONTROLLER_WAIT_S, max(0.5, request.timeout_ms / 1000))
    deadline = loop.time() + timeout_s
    metadata = broker.metadata
    while True:
        if metadata.is_leader:
            try:
                return await local(broker, request)
            except NotLeaderError:
                pass  # lost the leadership meanwhile: find the new leader
        leader = metadata.leader_id
        if leader and leader != broker.node_id and not forwarded:
            address = broker.node_client_address(leader)
            if address is not None:
                try:
                    return await kafka_request(address, api_key, version, request, max(0.5, deadline - loop.time()))
                except (OSError, ValueError, TimeoutError) as error:
                    log.info("forwarding API %d to node %d failed: %s", api_key, leader, error)
        if loop.time() >= deadline or (forwarded and leader and leader != broker.node_id):
            return error_response(request, version, ErrorCode.NOT_CONTROLLER)
        await asyncio.sleep(0.05)


def _create_problem(topic: Any) -> tuple[ErrorCode, str] | None:
    if topic.assignments:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "VDL places replicas itself: give a replication factor"
    if topic.num_partitions not in (1, -1):
        return ErrorCode.INVALID_PARTITIONS, single_create_topics.ONE_PARTITION
    if topic.replication_factor != -1 and topic.replication_factor not in ALLOWED_REPLICATION_FACTORS:
        return ErrorCode.INVALID_REPLICATION_FACTOR, \
            f"replication factor must be one of {ALLOWED_REPLICATION_FACTORS} (or -1 for the default)"
    return None


async def _create_locally(broker: Any, request: Any) -> Any:
    counts = Counter(topic.name for topic in request.topics)
    results = []
    created = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            results.append(CreateResult(name=topic.name, error_code=int(ErrorCode.INVALID_REQUEST),
                                        error_message="the stream is named more than once in the request"))
            continue
        problem = _create_problem(topic)
        rf = None if topic.replication_factor == -1 else int(topic.replication_factor)
        if problem is None:
            refused = broker.metadata.state.check_create(topic.name, rf)
            if refused is not None:
                problem = OUTCOME_ERRORS[refused.outcome], refused.message
        if problem is None and not request.validate_only:
            config = {c.name: c.value for c in topic.configs or []}
            try:
                result = await broker.metadata.create_stream(topic.name, rf, config)
            except RaftError as error:
                if isinstance(error, NotLeaderError) and not results:
                    raise  # nothing done yet: the caller retries on the new leader
                problem = ErrorCode.NOT_CONTROLLER, str(error)
            else:
                if not result.ok:
                    problem = OUTCOME_ERRORS[result.outcome], result.message
                else:
                    created.append(topic.name)
        code, message = problem if problem is not None else (ErrorCode.NONE, None)
        results.append(CreateResult(name=topic.name, error_code=int(code), error_message=message))
    # Kafka answers once the controller created the topic; waiting for the first leader too saves
    # every client a round of LEADER_NOT_AVAILABLE retries right after the create.
    wait_s = min(MAX_LEADER_WAIT_S, max(0.0, request.timeout_ms / 1000))
    for name in created:
        await broker.streams.wait_for_leader(name, wait_s)
    return CreateTopicsResponse(topics=results)


async def handle_create_topics(broker: Any, context: Any, request: Any) -> Any:
    return await _controller_call(broker, 19, context.api_version, request, _create_locally,
                                  single_create_topics.error_response,
                                  forwarded=context.client_id == FORWARD_CLIENT_ID)


async def _delete_locally(broker: Any, request: Any) -> Any:
    results = []
    for name in request.topic_names:
        try:
            result = await broker.metadata.delete_stream(name)
        except RaftError as error:
            if isinstance(error, NotLeaderError) and not results:
                raise
            results.append(DeleteResult(name=name, error_code=int(ErrorCode.NOT_CONTROLLER)))
            log.info("deleting stream %s: %s", name, error)
            continue
        results.append(DeleteResult(name=name, error_code=int(OUTCOME_ERRORS[result.outcome])))
    return DeleteTopicsResponse(responses=results)


async def handle_delete_topics(broker: Any, context: Any, request: Any) -> Any:
    return await _controller_call(broker, 20, context.api_version, request, _delete_locally,
                                  single_delete_topics.error_response,
                                  forwarded=context.client_id == FORWARD_CLIENT_ID)


# -- FindCoordinator ------------------------------------------------------------------------------


def handle_find_coordinator(broker: Any, context: Any, request: Any) -> Any:
    leader = broker.metadata.leader_id
    address = broker.node_client_address(leader) if leader else None
    if address is None:
        return single_find_coordinator.handle(broker, context, request)
    host, port = split_host_port(address, "client")
    return FindCoordinatorResponse(error_code=0, node_id=leader, host=host, port=port)


def install(handlers: dict[int, Handler]) -> None:
    """Swap the cluster-mode handlers into a broker's handler table."""
    replacements = (
        (single_metadata, handle_metadata, False),
        (single_create_topics, handle_create_topics, True),
        (single_delete_topics, handle_delete_topics, True),
        (single_find_coordinator, handle_find_coordinator, False),
    )
    for module, handle, is_async in replacements:
        handlers[module.API_KEY] = Handler(module.API_KEY, module.NAME, handle, module.error_response, is_async)

"""CreateTopics (key 19): a stream is a topic with exactly one partition, created by a command
committed through the metadata group (on its leader: forwarded there from any other node)."""

from __future__ import annotations

import asyncio
from collections import Counter

from vdl_broker.cluster.metadata import (
    ALLOWED_REPLICATION_FACTORS,
    Outcome,
    ReplicaLoad,
    StreamInfo,
    choose_replicas,
)
from vdl_broker.cluster.stream_configs import validated
from vdl_broker.cluster.topic_ids import ZERO as ZERO_TOPIC_ID
from vdl_broker.raft.types import NotLeaderError, RaftError
from vdl_broker.server.authorizer import Operation, ResourceType, authorized, authorized_cluster
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.forwarding import on_metadata_leader
from vdl_broker.server.handlers.describe_configs import stream_configs
from vdl_broker.server.node_view import NodeView
from vdl_broker.tables import table_problem
from vdl_wire.api import default_version
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import CreateTopicsRequest, CreateTopicsResponse

API_KEY = CreateTopicsRequest.DECL.api_key
NAME = "CreateTopics"

Result = CreateTopicsResponse.CreatableTopicResult
Config = CreateTopicsResponse.CreatableTopicConfigs
ONE_PARTITION = "a VDL log stream has exactly one partition"
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


def _problem(topic: CreateTopicsRequest.CreatableTopic) -> tuple[ErrorCode, str] | None:
    if topic.assignments:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "VDL places replicas itself: give a replication factor"
    if topic.num_partitions not in (1, -1):
        return ErrorCode.INVALID_PARTITIONS, ONE_PARTITION
    if topic.replication_factor != -1 and topic.replication_factor not in ALLOWED_REPLICATION_FACTORS:
        return ErrorCode.INVALID_REPLICATION_FACTOR, \
            f"replication factor must be one of {ALLOWED_REPLICATION_FACTORS} (or -1 for the default)"
    return None


async def _create_here(node: NodeView, request: CreateTopicsRequest) -> CreateTopicsResponse:
    counts = Counter(topic.name for topic in request.topics)
    problems: dict[int, tuple[ErrorCode, str]] = {}
    creates: dict[int, tuple[str, int | None, dict[str, str]]] = {}
    capacity = _Capacity(node)
    for i, topic in enumerate(request.topics):
        if counts[topic.name] > 1:
            problems[i] = ErrorCode.INVALID_REQUEST, "the stream is named more than once in the request"
            continue
        problem = _problem(topic)
        replication_factor = None if topic.replication_factor == -1 else int(topic.replication_factor)
        config = {c.name: c.value for c in topic.configs or []}
        if problem is None and len(config) < len(topic.configs or []):
            problem = ErrorCode.INVALID_CONFIG, "a config is named more than once"
        if problem is None:
            refused = node.metadata.state.check_create(topic.name, replication_factor, config)
            if refused is not None:
                problem = OUTCOME_ERRORS[refused.outcome], refused.message
            elif (reason := table_problem(config)) is not None:
                problem = ErrorCode.INVALID_CONFIG, reason
            elif (reason := capacity.take(topic.name, replication_factor)) is not None:
                problem = ErrorCode.POLICY_VIOLATION, reason
        if problem is not None:
            problems[i] = problem
        elif not request.validate_only:
            creates[i] = topic.name, replication_factor, validated(
                config, replication_factor or node.metadata.state.default_replication_factor())
    # Every create of the request is proposed at once: they commit together (one metadata
    # round instead of one per stream), and apply in the request's order.
    outcomes = await asyncio.gather(*(node.metadata.create_stream(*args) for args in creates.values()),
                                    return_exceptions=True)
    if outcomes and isinstance(outcomes[0], NotLeaderError) and all(isinstance(o, NotLeaderError) for o in outcomes):
        raise outcomes[0]  # nothing done: the caller retries on the new leader
    created = []
    for i, outcome in zip(creates, outcomes, strict=True):
        if isinstance(outcome, RaftError):
            problems[i] = ErrorCode.NOT_CONTROLLER, str(outcome)
        elif isinstance(outcome, BaseException):
            raise outcome
        elif not outcome.ok:
            problems[i] = OUTCOME_ERRORS[outcome.outcome], outcome.message
        else:
            created.append(outcome.stream.name if outcome.stream is not None else creates[i][0])
    results = []
    state = node.metadata.state
    for i, topic in enumerate(request.topics):
        code, message = problems.get(i, (ErrorCode.NONE, None))
        if code is not ErrorCode.NONE:
            results.append(Result(name=topic.name, error_code=int(code), error_message=message))
            continue
        # v5+ answer what was created (KIP-525): one partition, its replicas and every config.
        info = state.streams.get(topic.name) if not request.validate_only else None
        replication_factor = (len(info.replicas) if info is not None else
                              topic.replication_factor if topic.replication_factor > 0 else
                              state.default_replication_factor())
        answered = info.config if info is not None else validated({c.name: c.value for c in topic.configs or []},
                                                                  replication_factor)
        results.append(Result(
            name=topic.name, topic_id=state.topic_id(topic.name) if info is not None else ZERO_TOPIC_ID,
            error_code=0, num_partitions=1, replication_factor=replication_factor,
            configs=[Config(name=c.name, value=c.value, read_only=c.read_only, config_source=int(c.source),
                            is_sensitive=False) for c in stream_configs(answered, node.config, replication_factor)]))
    # Kafka answers once the controller created the topic; waiting for the first leader too saves
    # every client a round of LEADER_NOT_AVAILABLE retries right after the create.
    wait_s = min(MAX_LEADER_WAIT_S, max(0.0, request.timeout_ms / 1000))
    await asyncio.gather(*(node.replicas.wait_for_leader(name, wait_s) for name in created))
    return CreateTopicsResponse(topics=results)


class _Capacity:
    """The node setting max_streams_per_node, checked against where each create would place its
    replicas (the metadata's deterministic placement, creates of this request included)."""

    def __init__(self, node: NodeView) -> None:
        state = node.metadata.state
        self.state = state
        self.limit = node.config.max_streams_per_node
        self.load = ReplicaLoad()
        self.load.leads.update(state.streams.load.leads)
        self.load.holds.update(state.streams.load.holds)

    def take(self, name: str, replication_factor: int | None) -> str | None:
        """Why the stream cannot be placed (a node at the limit), or None after booking it."""
        state = self.state
        replicas = choose_replicas(state.membership.placeable(state.nodes), self.load,
                                   replication_factor or state.default_replication_factor())
        for node in replicas:
            if self.load.holds[node] >= self.limit:
                return (f"node {node} holds {self.load.holds[node]} streams, the limit (max_streams_per_node) is "
                        f"{self.limit}")
        self.load.add(StreamInfo(name, replicas))
        return None


async def create(node: NodeView, request: CreateTopicsRequest, context: RequestContext | None,
                 version: int | None = None) -> CreateTopicsResponse:
    """Create on the metadata leader; a request of the broker's own (auto-creation, `context`
    None) is forwarded at the highest version this project declares."""
    version = default_version(CreateTopicsRequest) if version is None else version
    return await on_metadata_leader(node, version, request, _create_here, error_response, context)


def may_create(node: NodeView, context: RequestContext, name: str) -> bool:
    """CREATE on the topic, or on the cluster (Kafka accepts either)."""
    return (authorized_cluster(node, context, Operation.CREATE)
            or authorized(node, context, Operation.CREATE, ResourceType.TOPIC, name))


async def handle(node: NodeView, context: RequestContext,
                 request: CreateTopicsRequest) -> CreateTopicsResponse:
    allowed = [t for t in request.topics if may_create(node, context, t.name)]
    denied = [Result(name=t.name, error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
              for t in request.topics if not may_create(node, context, t.name)]
    response = CreateTopicsResponse(topics=[])
    if allowed:
        request.topics = allowed
        response = await create(node, request, context, context.api_version)
    response.topics += denied
    return response


def error_response(request: CreateTopicsRequest, version: int, code: ErrorCode) -> CreateTopicsResponse:
    return CreateTopicsResponse(topics=[Result(name=t.name, error_code=int(code)) for t in request.topics])

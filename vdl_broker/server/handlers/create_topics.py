"""CreateTopics (key 19): a stream is a topic with exactly one partition, created by a command
committed through the metadata group (on its leader: forwarded there from any other node)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from vdl_broker.cluster.metadata import ALLOWED_REPLICATION_FACTORS, Outcome
from vdl_broker.cluster.stream_configs import validated
from vdl_broker.protocol.errors import ErrorCode
from vdl_broker.protocol.messages import CreateTopicsRequest, CreateTopicsResponse
from vdl_broker.raft.types import NotLeaderError, RaftError
from vdl_broker.server.forwarding import FORWARD_CLIENT_ID, on_metadata_leader
from vdl_broker.tables import table_problem
from vdl_client.connection import default_version

API_KEY = CreateTopicsRequest.DECL.api_key
NAME = "CreateTopics"

Result = CreateTopicsResponse.CreatableTopicResult
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


def _problem(topic: Any) -> tuple[ErrorCode, str] | None:
    if topic.assignments:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "VDL places replicas itself: give a replication factor"
    if topic.num_partitions not in (1, -1):
        return ErrorCode.INVALID_PARTITIONS, ONE_PARTITION
    if topic.replication_factor != -1 and topic.replication_factor not in ALLOWED_REPLICATION_FACTORS:
        return ErrorCode.INVALID_REPLICATION_FACTOR, \
            f"replication factor must be one of {ALLOWED_REPLICATION_FACTORS} (or -1 for the default)"
    return None


async def _create_here(broker: Any, request: Any) -> Any:
    counts = Counter(topic.name for topic in request.topics)
    results = []
    created = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            results.append(Result(name=topic.name, error_code=int(ErrorCode.INVALID_REQUEST),
                                  error_message="the stream is named more than once in the request"))
            continue
        problem = _problem(topic)
        replication_factor = None if topic.replication_factor == -1 else int(topic.replication_factor)
        config = {c.name: c.value for c in topic.configs or []}
        if problem is None and len(config) < len(topic.configs or []):
            problem = ErrorCode.INVALID_CONFIG, "a config is named more than once"
        if problem is None:
            refused = broker.metadata.state.check_create(topic.name, replication_factor, config)
            if refused is not None:
                problem = OUTCOME_ERRORS[refused.outcome], refused.message
            elif (reason := table_problem(config)) is not None:
                problem = ErrorCode.INVALID_CONFIG, reason
        if problem is None and not request.validate_only:
            config = validated(config)
            try:
                result = await broker.metadata.create_stream(topic.name, replication_factor, config)
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
        results.append(Result(name=topic.name, error_code=int(code), error_message=message))
    # Kafka answers once the controller created the topic; waiting for the first leader too saves
    # every client a round of LEADER_NOT_AVAILABLE retries right after the create.
    wait_s = min(MAX_LEADER_WAIT_S, max(0.0, request.timeout_ms / 1000))
    for name in created:
        await broker.replicas.wait_for_leader(name, wait_s)
    return CreateTopicsResponse(topics=results)


async def create(broker: Any, request: Any, forwarded: bool, version: int | None = None) -> Any:
    """Create on the metadata leader; a request of the broker's own (auto-creation) is forwarded
    at the highest version this project declares."""
    version = default_version(CreateTopicsRequest) if version is None else version
    return await on_metadata_leader(broker, version, request, _create_here, error_response, forwarded)


async def handle(broker: Any, context: Any, request: Any) -> Any:
    return await create(broker, request, context.client_id == FORWARD_CLIENT_ID, context.api_version)


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    return CreateTopicsResponse(topics=[Result(name=t.name, error_code=int(code)) for t in request.topics])

"""CreateTopics (key 19): a stream is a topic with exactly one partition."""

from __future__ import annotations

from collections import Counter
from typing import Any

from vdl_broker.protocol.errors import ErrorCode
from vdl_broker.protocol.messages import CreateTopicsResponse
from vdl_broker.server.streams import stream_name_problem

API_KEY = 19
NAME = "CreateTopics"

Result = CreateTopicsResponse.CreatableTopicResult
ONE_PARTITION = "a VDL log stream has exactly one partition"


def _problem(broker: Any, topic: Any) -> tuple[ErrorCode, str] | None:
    name_problem = stream_name_problem(topic.name)
    if name_problem:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, name_problem
    if topic.name in broker.streams:
        return ErrorCode.TOPIC_ALREADY_EXISTS, f"stream {topic.name!r} already exists"
    if topic.assignments:
        if [(a.partition_index, list(a.broker_ids)) for a in topic.assignments] != [(0, [broker.node_id])]:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, \
                f"{ONE_PARTITION} (0), replicated on this node ({broker.node_id})"
        return None
    if topic.num_partitions not in (1, -1):
        return ErrorCode.INVALID_PARTITIONS, ONE_PARTITION
    if topic.replication_factor not in (1, -1):
        return ErrorCode.INVALID_REPLICATION_FACTOR, \
            f"replication factor {topic.replication_factor} is larger than the 1 node of this cluster"
    return None


def handle(broker: Any, context: Any, request: Any) -> Any:
    counts = Counter(topic.name for topic in request.topics)
    results = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            results.append(Result(name=topic.name, error_code=int(ErrorCode.INVALID_REQUEST),
                                  error_message="the stream is named more than once in the request"))
            continue
        problem = _problem(broker, topic)
        if problem is not None:
            code, message = problem
            results.append(Result(name=topic.name, error_code=int(code), error_message=message))
            continue
        if not request.validate_only:
            broker.streams.create(topic.name)
        results.append(Result(name=topic.name, error_code=0, error_message=None))
    return CreateTopicsResponse(topics=results)


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    return CreateTopicsResponse(topics=[Result(name=t.name, error_code=int(code)) for t in request.topics])

"""CreatePartitions (key 37): a VDL stream is a topic with exactly one partition (one Raft
group), so partitions are never added. Each topic is answered as Kafka would answer it, with
the reason: TOPIC_AUTHORIZATION_FAILED without ALTER on it, UNKNOWN_TOPIC_OR_PARTITION for an
unknown stream, INVALID_PARTITIONS otherwise (Kafka answers a count equal to the current one
INVALID_PARTITIONS too). Nothing changes, so validate_only gets the same answers."""

from __future__ import annotations

from collections import Counter
from typing import Any

from vdl_broker.server.authorizer import Operation, ResourceType, authorized
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import CreatePartitionsRequest, CreatePartitionsResponse

API_KEY = CreatePartitionsRequest.DECL.api_key
NAME = "CreatePartitions"

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


def refusal(name: str, count: int) -> str:
    """Why a stream gets no more partitions."""
    return (f"VDL streams have exactly one partition (each is one Raft group): stream {name!r} has 1 and "
            f"cannot have {count}")


def _answer(broker: Any, context: Any, topic: Any) -> tuple[ErrorCode, str | None]:
    # Kafka: ALTER on the topic (KIP-195)
    if not authorized(broker, context, Operation.ALTER, ResourceType.TOPIC, topic.name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
    if topic.name not in broker.metadata.state.streams:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown stream {topic.name!r}"
    return ErrorCode.INVALID_PARTITIONS, refusal(topic.name, topic.count)


def handle(broker: Any, context: Any, request: Any) -> Any:
    counts = Counter(topic.name for topic in request.topics)
    results = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            code, message = ErrorCode.INVALID_REQUEST, f"duplicate topic {topic.name!r} in the request"
        else:
            code, message = _answer(broker, context, topic)
        results.append(Result(name=topic.name, error_code=int(code), error_message=message))
    return CreatePartitionsResponse(results=results)


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    return CreatePartitionsResponse(results=[Result(name=t.name, error_code=int(code)) for t in request.topics])

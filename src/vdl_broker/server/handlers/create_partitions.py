"""CreatePartitions (key 37): a VDL stream is a topic with exactly one partition (one Raft
group), so partitions are never added. Each topic is answered as Kafka would answer it, with
the reason: TOPIC_AUTHORIZATION_FAILED without ALTER on it, UNKNOWN_TOPIC_OR_PARTITION for an
unknown stream, INVALID_PARTITIONS otherwise (Kafka answers a count equal to the current one
INVALID_PARTITIONS too). Nothing changes, so validate_only gets the same answers."""

from __future__ import annotations

from collections import Counter

from vdl_broker.server.authorizer import Operation, ResourceType, authorized
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import CreatePartitionsRequest, CreatePartitionsResponse

API_KEY = CreatePartitionsRequest.DECL.api_key
NAME = "CreatePartitions"

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


def refusal(name: str, count: int) -> str:
    """Why a stream gets no more partitions."""
    return (f"VDL streams have exactly one partition (each is one Raft group): stream {name!r} has 1 and "
            f"cannot have {count}")


def _answer(node: NodeView, context: RequestContext,
            topic: CreatePartitionsRequest.CreatePartitionsTopic) -> tuple[ErrorCode, str | None]:
    # Kafka: ALTER on the topic (KIP-195)
    if not authorized(node, context, Operation.ALTER, ResourceType.TOPIC, topic.name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
    if topic.name not in node.metadata.state.streams:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown stream {topic.name!r}"
    return ErrorCode.INVALID_PARTITIONS, refusal(topic.name, topic.count)


def handle(node: NodeView, context: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    counts = Counter(topic.name for topic in request.topics)
    results: list[Result] = []
    message: str | None
    for topic in request.topics:
        if counts[topic.name] > 1:
            code, message = ErrorCode.INVALID_REQUEST, f"duplicate topic {topic.name!r} in the request"
        else:
            code, message = _answer(node, context, topic)
        results.append(Result(name=topic.name, error_code=int(code), error_message=message))
    return CreatePartitionsResponse(results=results)


def error_response(request: CreatePartitionsRequest, version: int, code: ErrorCode) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(results=[Result(name=t.name, error_code=int(code)) for t in request.topics])

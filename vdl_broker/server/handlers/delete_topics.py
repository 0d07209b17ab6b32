"""DeleteTopics (key 20): removes streams and their data."""

from __future__ import annotations

from typing import Any

from vdl_broker.protocol.errors import ErrorCode
from vdl_broker.protocol.messages import DeleteTopicsResponse

API_KEY = 20
NAME = "DeleteTopics"

Result = DeleteTopicsResponse.DeletableTopicResult


def handle(broker: Any, context: Any, request: Any) -> Any:
    results = []
    for name in request.topic_names:
        if name not in broker.streams:
            results.append(Result(name=name, error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
            continue
        broker.streams.delete(name)
        results.append(Result(name=name, error_code=0))
    return DeleteTopicsResponse(responses=results)


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    return DeleteTopicsResponse(responses=[Result(name=name, error_code=int(code)) for name in request.topic_names])

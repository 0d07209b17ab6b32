"""OffsetFetch (key 9): VDL stores no consumer offsets, so every partition asked for has
"no committed offset" (-1, error 0) and clients fall back to auto.offset.reset. Any other answer
breaks a client (librdkafka needs the partitions it asked for to be present)."""

from __future__ import annotations

from typing import Any

from vdl_broker.protocol.errors import ErrorCode
from vdl_broker.protocol.messages import OffsetFetchRequest, OffsetFetchResponse

API_KEY = OffsetFetchRequest.DECL.api_key
NAME = "OffsetFetch"


def handle(broker: Any, context: Any, request: Any) -> Any:
    return _response(request, ErrorCode.NONE)


def _response(request: Any, code: ErrorCode) -> Any:
    topics = []
    for topic in request.topics or []:  # null = "all committed": there are none
        partitions = [OffsetFetchResponse.OffsetFetchResponsePartition(
            partition_index=index, committed_offset=-1, committed_leader_epoch=-1, metadata="",
            error_code=int(code)) for index in topic.partition_indexes]
        topics.append(OffsetFetchResponse.OffsetFetchResponseTopic(name=topic.name, partitions=partitions))
    return OffsetFetchResponse(topics=topics, error_code=0 if code is ErrorCode.NONE else int(code))


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    return _response(request, code)

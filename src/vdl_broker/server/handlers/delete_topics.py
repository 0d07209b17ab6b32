"""DeleteTopics (key 20): removes streams and their data, by a command committed through the
metadata group (on its leader: forwarded there from any other node)."""

from __future__ import annotations

import logging
from typing import Any

from vdl_broker.raft.types import NotLeaderError, RaftError
from vdl_broker.server.authorizer import Operation, ResourceType, authorized
from vdl_broker.server.forwarding import on_metadata_leader
from vdl_broker.server.handlers.create_topics import OUTCOME_ERRORS
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import DeleteTopicsRequest, DeleteTopicsResponse

API_KEY = DeleteTopicsRequest.DECL.api_key
NAME = "DeleteTopics"

log = logging.getLogger(__name__)

Result = DeleteTopicsResponse.DeletableTopicResult


async def _delete_here(broker: Any, request: Any) -> Any:
    results = []
    for name in request.topic_names:
        try:
            result = await broker.metadata.delete_stream(name)
        except RaftError as error:
            if isinstance(error, NotLeaderError) and not results:
                raise
            results.append(Result(name=name, error_code=int(ErrorCode.NOT_CONTROLLER)))
            log.info("deleting stream %s: %s", name, error)
            continue
        results.append(Result(name=name, error_code=int(OUTCOME_ERRORS[result.outcome])))
    return DeleteTopicsResponse(responses=results)


async def handle(broker: Any, context: Any, request: Any) -> Any:
    allowed = [n for n in request.topic_names if authorized(broker, context, Operation.DELETE, ResourceType.TOPIC, n)]
    denied = [Result(name=n, error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
              for n in request.topic_names if n not in allowed]
    response = DeleteTopicsResponse(responses=[])
    if allowed:
        request.topic_names = allowed
        response = await on_metadata_leader(broker, context.api_version, request, _delete_here, error_response,
                                            context)
    response.responses += denied
    return response


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    return DeleteTopicsResponse(responses=[Result(name=name, error_code=int(code)) for name in request.topic_names])

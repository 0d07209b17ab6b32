"""DeleteTopics (key 20): removes streams and their data, by a command committed through the
metadata group (on its leader: forwarded there from any other node)."""

from __future__ import annotations

import logging
from typing import Any

from vdl_broker.protocol.errors import ErrorCode
from vdl_broker.protocol.messages import DeleteTopicsRequest, DeleteTopicsResponse
from vdl_broker.raft.types import NotLeaderError, RaftError
from vdl_broker.server.forwarding import FORWARD_CLIENT_ID, on_metadata_leader
from vdl_broker.server.handlers.create_topics import OUTCOME_ERRORS

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
    return await on_metadata_leader(broker, context.api_version, request, _delete_here, error_response,
                                    context.client_id == FORWARD_CLIENT_ID)


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    return DeleteTopicsResponse(responses=[Result(name=name, error_code=int(code)) for name in request.topic_names])

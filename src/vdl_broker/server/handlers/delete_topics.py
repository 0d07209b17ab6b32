"""DeleteTopics (key 20): removes streams and their data, by a command committed through the
metadata group (on its leader: forwarded there from any other node). v6 names each topic by
name or by id (KIP-516): an unknown id is UNKNOWN_TOPIC_ID."""

from __future__ import annotations

import logging

from vdl_broker.cluster.topic_ids import ZERO as ZERO_TOPIC_ID
from vdl_broker.raft.types import NotLeaderError, RaftError
from vdl_broker.server.authorizer import Operation, ResourceType, authorized
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.forwarding import on_metadata_leader
from vdl_broker.server.handlers.create_topics import OUTCOME_ERRORS
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import DeleteTopicsRequest, DeleteTopicsResponse

API_KEY = DeleteTopicsRequest.DECL.api_key
NAME = "DeleteTopics"

log = logging.getLogger(__name__)

Result = DeleteTopicsResponse.DeletableTopicResult
State = DeleteTopicsRequest.DeleteTopicState
BY_ID_VERSION = 6


def _asked(request: DeleteTopicsRequest, version: int) -> list[DeleteTopicsRequest.DeleteTopicState]:
    """Every topic of the request as a DeleteTopicState (v0-5 name them only)."""
    if version >= BY_ID_VERSION:
        return list(request.topics)
    return [State(name=name) for name in request.topic_names]


def _set_asked(request: DeleteTopicsRequest, version: int,
               topics: list[DeleteTopicsRequest.DeleteTopicState]) -> None:
    if version >= BY_ID_VERSION:
        request.topics = topics
    else:
        request.topic_names = [t.name or "" for t in topics]


async def _delete_here(node: NodeView, request: DeleteTopicsRequest, version: int) -> DeleteTopicsResponse:
    results = []
    for topic in _asked(request, version):
        name = topic.name
        state = node.metadata.state
        if name is None:
            name = state.stream_named_by(topic.topic_id)
            if name is None:
                results.append(Result(name=None, topic_id=topic.topic_id, error_code=int(ErrorCode.UNKNOWN_TOPIC_ID)))
                continue
        topic_id = state.topic_id(name)
        try:
            result = await node.metadata.delete_stream(name)
        except RaftError as error:
            if isinstance(error, NotLeaderError) and not results:
                raise
            results.append(Result(name=name, topic_id=topic_id, error_code=int(ErrorCode.NOT_CONTROLLER)))
            log.info("deleting stream %s: %s", name, error)
            continue
        results.append(Result(name=name, topic_id=topic_id, error_code=int(OUTCOME_ERRORS[result.outcome]),
                              error_message=result.message or None))
    return DeleteTopicsResponse(responses=results)


async def handle(node: NodeView, context: RequestContext,
                 request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    version = context.api_version
    state = node.metadata.state
    allowed, denied = [], []
    for topic in _asked(request, version):
        if topic.name is not None and topic.topic_id != ZERO_TOPIC_ID:
            denied.append(Result(name=topic.name, topic_id=topic.topic_id, error_code=int(ErrorCode.INVALID_REQUEST),
                                 error_message="name a topic by its name or by its id, not both"))
            continue
        name = topic.name if topic.name is not None else state.stream_named_by(topic.topic_id)
        if name is None or authorized(node, context, Operation.DELETE, ResourceType.TOPIC, name):
            allowed.append(topic)  # an unknown id is answered UNKNOWN_TOPIC_ID by the leader
        elif topic.name is None:  # Kafka: an id the principal may not see is unknown to it
            denied.append(Result(name=None, topic_id=topic.topic_id, error_code=int(ErrorCode.UNKNOWN_TOPIC_ID)))
        else:
            denied.append(Result(name=name, error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)))
    response = DeleteTopicsResponse(responses=[])
    if allowed:
        _set_asked(request, version, allowed)
        response = await on_metadata_leader(node, version, request,
                                            lambda b, r: _delete_here(b, r, version), error_response, context)
    response.responses += denied
    return response


def error_response(request: DeleteTopicsRequest, version: int, code: ErrorCode) -> DeleteTopicsResponse:
    return DeleteTopicsResponse(responses=[Result(name=t.name, topic_id=t.topic_id, error_code=int(code))
                                           for t in _asked(request, version)])

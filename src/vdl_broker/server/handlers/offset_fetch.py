"""OffsetFetch (key 9): the offsets a group committed (with their metadata and leader epoch),
from the cluster metadata; -1 for a partition without one (the client then applies its
auto.offset.reset). A null topic list (v2+) asks for every offset the group has. v8+ ask for
several groups at once, each answered with its own error."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vdl_broker.server.authorizer import (
    Operation,
    ResourceType,
    authorized,
    authorized_group,
)
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import OffsetFetchRequest, OffsetFetchResponse

API_KEY = OffsetFetchRequest.DECL.api_key
NAME = "OffsetFetch"

BATCHED_VERSION = 8  # OffsetFetch v8 asks for several groups (KIP-709)


@dataclass(frozen=True, slots=True)
class _Offset:
    partition_index: int
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


def _group(node: NodeView, context: RequestContext, group_id: str,
           topics: list[tuple[str, list[int]]] | None) -> tuple[ErrorCode, list[tuple[str, list[_Offset]]]]:
    """One group's answer: (group error, [(stream, offsets)]); `topics` None = all."""
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID, []
    if not authorized_group(node, context, Operation.DESCRIBE, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    if node.groups.active() is None:
        return ErrorCode.NOT_COORDINATOR, []
    committed = node.groups.committed(group_id)

    def describable(name: str) -> bool:
        return authorized(node, context, Operation.DESCRIBE, ResourceType.TOPIC, name)

    if topics is None:  # every stream with an offset, as far as the principal may see them (Kafka)
        topics = [(name, [0]) for name in sorted(committed) if describable(name)]
    answer = []
    for name, indexes in topics:
        allowed = describable(name)
        offsets = []
        for index in indexes:
            stored = committed.get(name) if index == 0 else None
            if not allowed:
                offsets.append(_Offset(index, error=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            elif stored is None:
                offsets.append(_Offset(index))
            else:
                offsets.append(_Offset(index, stored.offset, stored.leader_epoch,
                                       stored.metadata if stored.metadata is not None else ""))
        answer.append((name, offsets))
    return ErrorCode.NONE, answer


_AskedTopic = OffsetFetchRequest.OffsetFetchRequestTopic | OffsetFetchRequest.OffsetFetchRequestTopics


def _wanted(topics: Sequence[_AskedTopic] | None) -> list[tuple[str, list[int]]] | None:
    return None if topics is None else [(t.name, list(t.partition_indexes)) for t in topics]


def handle(node: NodeView, context: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    if context.api_version >= BATCHED_VERSION:
        groups = []
        for asked in request.groups:
            code, topics = _group(node, context, asked.group_id, _wanted(asked.topics))
            groups.append(_batched_group(asked.group_id, code, topics))
        return OffsetFetchResponse(groups=groups)
    code, topics = _group(node, context, request.group_id, _wanted(request.topics))
    if code is not ErrorCode.NONE:
        return _response(request, code)
    return OffsetFetchResponse(error_code=0, topics=[
        OffsetFetchResponse.OffsetFetchResponseTopic(name=name, partitions=[
            OffsetFetchResponse.OffsetFetchResponsePartition(
                partition_index=o.partition_index, committed_offset=o.committed_offset,
                committed_leader_epoch=o.committed_leader_epoch, metadata=o.metadata, error_code=int(o.error))
            for o in offsets]) for name, offsets in topics])


def _batched_group(group_id: str, code: ErrorCode, topics: list[tuple[str, list[_Offset]]]
                   ) -> OffsetFetchResponse.OffsetFetchResponseGroup:
    return OffsetFetchResponse.OffsetFetchResponseGroup(group_id=group_id, error_code=int(code), topics=[
        OffsetFetchResponse.OffsetFetchResponseTopics(name=name, partitions=[
            OffsetFetchResponse.OffsetFetchResponsePartitions(
                partition_index=o.partition_index, committed_offset=o.committed_offset,
                committed_leader_epoch=o.committed_leader_epoch, metadata=o.metadata, error_code=int(o.error))
            for o in offsets]) for name, offsets in topics])


def _response(request: OffsetFetchRequest, code: ErrorCode) -> OffsetFetchResponse:
    topics = []
    for topic in request.topics or []:
        partitions = [OffsetFetchResponse.OffsetFetchResponsePartition(
            partition_index=index, committed_offset=-1, committed_leader_epoch=-1, metadata="", error_code=int(code))
            for index in topic.partition_indexes]
        topics.append(OffsetFetchResponse.OffsetFetchResponseTopic(name=topic.name, partitions=partitions))
    # v2+ carry a top-level error; v1 clients read it from the partitions.
    return OffsetFetchResponse(topics=topics, error_code=int(code))


def error_response(request: OffsetFetchRequest, version: int, code: ErrorCode) -> OffsetFetchResponse:
    if version >= BATCHED_VERSION:
        return OffsetFetchResponse(groups=[_batched_group(g.group_id, code, []) for g in request.groups])
    return _response(request, code)

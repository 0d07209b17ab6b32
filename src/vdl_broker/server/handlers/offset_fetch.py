"""OffsetFetch (key 9): the offsets a group committed (with their metadata and leader epoch),
from the cluster metadata; -1 for a partition without one (the client then applies its
auto.offset.reset). A null topic list (v2+) asks for every offset the group has."""

from __future__ import annotations

from typing import Any

from vdl_broker.server.authorizer import (
    Operation,
    ResourceType,
    authorized,
    authorized_group,
)
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import OffsetFetchRequest, OffsetFetchResponse

API_KEY = OffsetFetchRequest.DECL.api_key
NAME = "OffsetFetch"

Partition = OffsetFetchResponse.OffsetFetchResponsePartition
Topic = OffsetFetchResponse.OffsetFetchResponseTopic


def handle(broker: Any, context: Any, request: Any) -> Any:
    if not request.group_id:
        return _response(request, ErrorCode.INVALID_GROUP_ID, context.api_version)
    if not authorized_group(broker, context, Operation.DESCRIBE, request.group_id):
        return _response(request, ErrorCode.GROUP_AUTHORIZATION_FAILED, context.api_version)
    if broker.groups.active() is None:
        return _response(request, ErrorCode.NOT_COORDINATOR, context.api_version)
    committed = broker.groups.committed(request.group_id)

    def describable(name: str) -> bool:
        return authorized(broker, context, Operation.DESCRIBE, ResourceType.TOPIC, name)

    wanted = request.topics
    if wanted is None:  # every stream with an offset, as far as the principal may see them (Kafka)
        wanted = [OffsetFetchRequest.OffsetFetchRequestTopic(name=name, partition_indexes=[0])
                  for name in sorted(committed) if describable(name)]
    topics = []
    for topic in wanted:
        partitions = []
        allowed = describable(topic.name)
        for index in topic.partition_indexes:
            stored = committed.get(topic.name) if index == 0 else None
            if not allowed:
                partitions.append(Partition(partition_index=index, committed_offset=-1, committed_leader_epoch=-1,
                                            metadata="", error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)))
            elif stored is None:
                partitions.append(Partition(partition_index=index, committed_offset=-1, committed_leader_epoch=-1,
                                            metadata="", error_code=0))
            else:
                partitions.append(Partition(partition_index=index, committed_offset=stored.offset,
                                            committed_leader_epoch=stored.leader_epoch,
                                            metadata=stored.metadata if stored.metadata is not None else "",
                                            error_code=0))
        topics.append(Topic(name=topic.name, partitions=partitions))
    return OffsetFetchResponse(topics=topics, error_code=0)


def _response(request: Any, code: ErrorCode, version: int) -> Any:
    topics = []
    for topic in request.topics or []:
        partitions = [Partition(partition_index=index, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                                error_code=int(code)) for index in topic.partition_indexes]
        topics.append(Topic(name=topic.name, partitions=partitions))
    # v2+ carry a top-level error; v1 clients read it from the partitions.
    return OffsetFetchResponse(topics=topics, error_code=int(code))


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    return _response(request, code, version)

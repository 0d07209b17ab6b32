"""DeleteRecords (key 21, KIP-107): move a stream's log start offset up, at its leader. The
leader proposes the new start through the stream's Raft group (Partition.delete_records), so
every replica applies it at the same point of its log, and answers once a majority has it:
the low watermark is then the new log start. Offset -1 means the high watermark; an offset
above it is OFFSET_OUT_OF_RANGE; one at or below the log start changes nothing. Retention
deletes the segments wholly below the new start (their records are unreadable at once).

The new start travels as a LOG_START entry, which a release before feature level 2 cannot read:
below that level (a rolling upgrade not finalized yet) DeleteRecords is UNSUPPORTED_VERSION."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from vdl_broker.cluster.features import DELETE_RECORDS_LEVEL
from vdl_broker.raft.types import RaftError
from vdl_broker.server.authorizer import Operation, ResourceType, authorized
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.node_view import NodeView
from vdl_broker.server.partition import Partition, PartitionError
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import DeleteRecordsRequest, DeleteRecordsResponse

API_KEY = DeleteRecordsRequest.DECL.api_key
NAME = "DeleteRecords"

TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = DeleteRecordsResponse.DeleteRecordsPartitionResult


async def _delete(node: NodeView, name: str, index: int, offset: int, timeout_ms: int) -> tuple[ErrorCode, int]:
    partition = node.replicas.get(name)
    if partition is None or index != 0:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
    if not isinstance(partition, Partition):  # no replica here: the client goes to the leader
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
    try:
        low_watermark, proposal = partition.delete_records(offset)
    except PartitionError as error:
        return error.code, -1
    if proposal is not None:
        try:
            async with asyncio.timeout(max(0, timeout_ms) / 1000):
                await asyncio.shield(proposal.committed)
        except TimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT, -1
        except RaftError as error:
            return partition.proposal_error(error).code, -1
    return ErrorCode.NONE, max(low_watermark, partition.log_start_offset)


async def handle(node: NodeView, context: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    if node.metadata.state.features.level < DELETE_RECORDS_LEVEL:
        return error_response(request, context.api_version, ErrorCode.UNSUPPORTED_VERSION)
    jobs: list[Coroutine[Any, Any, tuple[ErrorCode, int]]] = []
    for topic in request.topics:
        # Kafka: DELETE on the topic
        allowed = authorized(node, context, Operation.DELETE, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            jobs.append(_delete(node, topic.name, p.partition_index, p.offset, request.timeout_ms) if allowed
                        else _refused(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    outcomes = iter(await asyncio.gather(*jobs))
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            code, low_watermark = next(outcomes)
            partitions.append(PartitionResult(partition_index=p.partition_index, low_watermark=low_watermark,
                                              error_code=int(code)))
        topics.append(TopicResult(name=topic.name, partitions=partitions))
    return DeleteRecordsResponse(topics=topics)


async def _refused(code: ErrorCode) -> tuple[ErrorCode, int]:
    return code, -1


def error_response(request: DeleteRecordsRequest, version: int, code: ErrorCode) -> DeleteRecordsResponse:
    return DeleteRecordsResponse(topics=[TopicResult(name=t.name, partitions=[
        PartitionResult(partition_index=p.partition_index, low_watermark=-1, error_code=int(code))
        for p in t.partitions]) for t in request.topics])

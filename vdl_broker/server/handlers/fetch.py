"""Fetch (key 1): reads below the high watermark, long-polling as a delayed operation (seed 003).

A fetch that finds fewer than min_bytes waits until the high watermark of one of its streams
advances (an append became durable) or max_wait_ms passes, then reads again. The response
carries the log's stored batch buffers unchanged (zero copy to transport.writelines), except
for Fetch v0-3, whose clients need magic 0/1 message sets.

Fetch sessions (KIP-227) are not offered: session_id 0 in every answer, as a broker without
sessions replies; an incremental fetch naming a session gets FETCH_SESSION_ID_NOT_FOUND.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from vdl_broker.log import OffsetOutOfRange
from vdl_broker.protocol.errors import ErrorCode
from vdl_broker.protocol.messages import FetchRequest, FetchResponse
from vdl_broker.protocol.records.conversion import batches_to_message_set
from vdl_broker.server.delayed import wait_for_any
from vdl_broker.server.partition import await_read_lease

API_KEY = FetchRequest.DECL.api_key
NAME = "Fetch"

TopicResponse = FetchResponse.FetchableTopicResponse
PartitionData = FetchResponse.PartitionData


@dataclass(slots=True)
class _Read:
    partition_index: int
    error: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    buffers: list[Any] | None = None
    size: int = 0


def _read_partition(broker: Any, topic: str, fp: Any, budget: int, has_data: bool) -> _Read:
    partition = broker.replicas.get(topic)
    if partition is None or fp.partition != 0:
        return _Read(fp.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if not partition.serves_reads:  # led elsewhere, or a leader without its read lease: the client asks Metadata again
        return _Read(fp.partition, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    high_watermark = partition.high_watermark
    start = partition.log_start_offset
    offset = fp.fetch_offset
    # Kafka compares against the log end offset: between HW and LEO is "no data yet", not out of range.
    if offset < start or offset > partition.log_end_offset:
        return _Read(fp.partition, ErrorCode.OFFSET_OUT_OF_RANGE, high_watermark, start)
    if offset >= high_watermark or (has_data and budget <= 0):
        return _Read(fp.partition, ErrorCode.NONE, high_watermark, start, None, 0)
    limit = min(fp.partition_max_bytes, budget) if has_data else fp.partition_max_bytes
    try:
        result = partition.log.read(offset, max(1, limit), high_watermark)
    except OffsetOutOfRange:
        return _Read(fp.partition, ErrorCode.OFFSET_OUT_OF_RANGE, high_watermark, partition.log_start_offset)
    size = sum(len(buffer) for buffer in result.buffers)
    return _Read(fp.partition, ErrorCode.NONE, high_watermark, start, result.buffers, size)


def _read_all(broker: Any, request: Any, version: int) -> tuple[list[tuple[str, list[_Read]]], int, bool]:
    # Response max_bytes exists from v3; the first batch is always returned even if larger
    # (KIP-74), later partitions get what is left of the budget.
    budget = request.max_bytes if version >= 3 else 0x7FFFFFFF
    total = 0
    failed = False
    topics = []
    for topic in request.topics:
        reads = []
        for fp in topic.partitions:
            read = _read_partition(broker, topic.topic, fp, budget - total, total > 0)
            failed |= read.error is not ErrorCode.NONE
            total += read.size
            reads.append(read)
        topics.append((topic.topic, reads))
    return topics, total, failed


def _records(read: _Read, version: int) -> Any:
    if not read.buffers:
        return b""
    if version <= 3:
        # Fetch v0-1 speak magic 0, v2-3 magic 1 (Kafka protocol guide: Message sets).
        return batches_to_message_set(read.buffers, 0 if version <= 1 else 1)
    return read.buffers


def _response(broker: Any, topics: list[tuple[str, list[_Read]]], version: int) -> Any:
    metrics = broker.metrics
    responses = []
    for name, reads in topics:
        if metrics is not None:
            size = sum(read.size for read in reads)
            if size:
                metrics.fetched(name, size)
        partitions = [PartitionData(
            partition_index=read.partition_index, error_code=int(read.error),
            high_watermark=read.high_watermark, last_stable_offset=read.high_watermark,
            log_start_offset=read.log_start_offset, aborted_transactions=[],
            preferred_read_replica=-1, records=_records(read, version)) for read in reads]
        responses.append(TopicResponse(topic=name, partitions=partitions))
    return FetchResponse(error_code=0, session_id=0, responses=responses)


async def handle(broker: Any, context: Any, request: Any) -> Any:
    version = context.api_version
    if version >= 7 and request.session_id != 0:
        return FetchResponse(error_code=int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND), session_id=0, responses=[])
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, request.max_wait_ms) / 1000
    min_bytes = max(1, request.min_bytes)
    await await_read_lease([p for p in (broker.replicas.get(t.topic) for t in request.topics) if p is not None])
    while True:
        topics, total, failed = _read_all(broker, request, version)
        if total >= min_bytes or failed or not topics or loop.time() >= deadline:
            return _response(broker, topics, version)
        # Delayed fetch: park until any of the streams' HW advances, or the deadline.
        partitions = [p for p in (broker.replicas.get(name) for name, _ in topics) if p is not None]
        if not partitions:
            return _response(broker, topics, version)
        await wait_for_any(partitions, deadline)
        # An idle stream's group may have gone quiet meanwhile (no read lease): wake it again.
        await await_read_lease(partitions)


def error_response(request: Any, version: int, code: ErrorCode) -> Any:
    return FetchResponse(error_code=0, session_id=0, responses=[
        TopicResponse(topic=t.topic, partitions=[PartitionData(partition_index=p.partition, error_code=int(code),
                                                               high_watermark=-1, records=b"")
                                                 for p in t.partitions]) for t in request.topics])

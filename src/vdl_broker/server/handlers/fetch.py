"""Fetch (key 1): reads below the high watermark, long-polling as a delayed operation (seed 003).

A fetch that finds fewer than min_bytes waits until the high watermark of one of its streams
advances (an append became durable) or max_wait_ms passes, then reads again. The response
carries the log's stored batch buffers unchanged (zero copy to transport.writelines), except
for Fetch v0-3, whose clients need magic 0/1 message sets.

Follower reads (KIP-392): the leader answers a Fetch v11+ naming the consumer's rack with a
preferred_read_replica in that rack (server/read_replicas.py); any replica answers Fetch v11+
below its own high watermark (Partition.serves_follower_reads). Offsets below a follower's log
start or past its log end get OFFSET_OUT_OF_RANGE, as at Kafka's follower, when the client chose
the follower (it sent a rack id); a client without one reads there only because its metadata
named this node the leader (stale, or from a node cut off from the others), and gets
NOT_LEADER_OR_FOLLOWER: clients that reset on OFFSET_OUT_OF_RANGE without checking the leader
epoch (kafka-python) would otherwise jump back to the start of the stream. An offset past its
high watermark but within its log waits like an empty fetch and then gets OFFSET_NOT_AVAILABLE.
Older versions at a follower get NOT_LEADER_OR_FOLLOWER (Kafka's fetchOnlyLeader).

Leader epochs (KIP-320): a Fetch v9+ naming a current_leader_epoch older than the replica's
(the stream's Raft term, as Metadata reports it) gets FENCED_LEADER_EPOCH, a newer one
UNKNOWN_LEADER_EPOCH, at the leader and at a follower alike; -1 is not checked.

Fetch sessions (KIP-227) are not offered: session_id 0 in every answer, as a broker without
sessions replies. A full fetch (session epoch 0, asking for a session, or -1, sessionless or
closing one, whatever session id it names) is answered in full; only an incremental fetch
(epoch above 0) needs a session, and gets FETCH_SESSION_ID_NOT_FOUND (Kafka's
FetchManager.newContext).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from vdl_broker.log import DamagedEntry, OffsetOutOfRange
from vdl_broker.server.authorizer import Operation, ResourceType, authorized
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.delayed import wait_for_any
from vdl_broker.server.handlers.metadata import current_leader
from vdl_broker.server.node_view import NodeView
from vdl_broker.server.partition import Partition, await_read_lease, leader_epoch_error
from vdl_broker.server.read_replicas import NO_PREFERENCE, preferred_read_replica
from vdl_broker.server.replica_manager import ISR_MAX_LAG_ENTRIES
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import FetchRequest, FetchResponse
from vdl_wire.records.conversion import batches_to_message_set

API_KEY = FetchRequest.DECL.api_key
NAME = "Fetch"

FOLLOWER_READ_VERSION = 11  # Fetch v11 added rack_id and preferred_read_replica (KIP-392)
LEADER_HINT_VERSION = 12  # Fetch v12 added CurrentLeader (KIP-951 fills it)
TopicResponse = FetchResponse.FetchableTopicResponse
PartitionData = FetchResponse.PartitionData
AbortedTransaction = FetchResponse.AbortedTransaction


@dataclass(slots=True)
class _Read:
    partition_index: int
    error: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    buffers: list[bytes | bytearray | memoryview] | None = None
    size: int = 0
    preferred_read_replica: int = NO_PREFERENCE
    # A follower asked for an offset past its high watermark (but within its log): the fetch
    # waits like an empty one and, if the watermark is still behind at the answer, gets
    # OFFSET_NOT_AVAILABLE (never a high watermark below the offset the client asks for).
    ahead_of_follower: bool = False
    last_stable_offset: int = -1
    aborted: list[FetchResponse.AbortedTransaction] | None = None  # read_committed: those of the range


READ_COMMITTED = 1  # Fetch v4+ isolation_level (KIP-98)


@dataclass(frozen=True, slots=True)
class _Client:
    version: int
    rack: str  # Fetch v11 rack_id (librdkafka's client.rack); "" = none
    read_committed: bool = False


def _read_partition(node: NodeView, topic: str, fp: FetchRequest.FetchPartition, budget: int, has_data: bool,
                    client: _Client) -> _Read:
    partition = node.replicas.get(topic)
    if partition is None or fp.partition != 0:
        return _Read(fp.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    # A replica here checks the client's leader epoch (Fetch v9+, KIP-320) before anything else,
    # as Kafka's Partition.fetchRecords does: a consumer fetching with the epoch of an older
    # leader learns that leadership moved instead of reading from a log that may have diverged.
    fenced = leader_epoch_error(fp.current_leader_epoch, partition.leader_epoch)
    if fenced is not ErrorCode.NONE:
        return _Read(fp.partition, fenced)
    if isinstance(partition, Partition) and partition.serves_reads:
        preferred = _preferred_replica(node, partition, fp.fetch_offset, client)
        if preferred != NO_PREFERENCE:  # Kafka answers a redirect with no records
            return _Read(fp.partition, ErrorCode.NONE, partition.high_watermark, partition.log_start_offset,
                         preferred_read_replica=preferred)
        return _read_log(partition, fp, budget, has_data, follower=False, committed=client.read_committed)
    # Kafka: only Fetch v11+ from a consumer may read at a follower (FetchParams.fetchOnlyLeader).
    # Not at a node cut off from the cluster: the consumer would sit there seeing nothing new.
    if isinstance(partition, Partition) and client.version >= FOLLOWER_READ_VERSION \
            and partition.serves_follower_reads and not node.cut_off:
        out_of_range = ErrorCode.OFFSET_OUT_OF_RANGE if client.rack else ErrorCode.NOT_LEADER_OR_FOLLOWER
        return _read_log(partition, fp, budget, has_data, follower=True, committed=client.read_committed,
                         out_of_range=out_of_range)
    # Led elsewhere, or a leader without its read lease: the client asks Metadata again.
    return _Read(fp.partition, ErrorCode.NOT_LEADER_OR_FOLLOWER)


def _preferred_replica(node: NodeView, partition: Partition, offset: int, client: _Client) -> int:
    if client.version < FOLLOWER_READ_VERSION or not client.rack:
        return NO_PREFERENCE
    nodes = node.metadata.state.nodes
    racks = {node_id: node.rack for node_id, node in nodes.items()}
    racks[node.node_id] = node.config.rack
    return preferred_read_replica(client.rack, offset, node.node_id, racks,
                                  partition.follower_read_offsets(ISR_MAX_LAG_ENTRIES))


def _read_log(partition: Partition, fp: FetchRequest.FetchPartition, budget: int, has_data: bool,
              follower: bool, committed: bool, out_of_range: ErrorCode = ErrorCode.OFFSET_OUT_OF_RANGE) -> _Read:
    read = _read_range(partition, fp, budget, has_data, follower, committed, out_of_range)
    if read.error is ErrorCode.NONE:
        read.last_stable_offset = partition.last_stable_offset
        if committed and read.buffers:
            # KIP-98: the consumer drops the records of these producers from first_offset up to
            # their abort marker; it learns where the records it got end from the batches.
            read.aborted = [AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                            for a in partition.aborted_between(fp.fetch_offset, read.last_stable_offset)]
    return read


def _read_range(partition: Partition, fp: FetchRequest.FetchPartition, budget: int, has_data: bool,
                follower: bool, committed: bool, out_of_range: ErrorCode) -> _Read:
    high_watermark = partition.high_watermark
    # read_committed reads stop at the last stable offset: no open transaction's records.
    bound = partition.last_stable_offset if committed else high_watermark
    start = partition.log_start_offset
    offset = fp.fetch_offset
    # Kafka compares against the log end offset: between HW and LEO is "no data yet", not out of
    # range. A follower's errors carry no offsets, as Kafka's (LogReadResult of an exception).
    if offset < start or offset > partition.log_end_offset:
        if follower:
            return _Read(fp.partition, out_of_range)
        return _Read(fp.partition, ErrorCode.OFFSET_OUT_OF_RANGE, high_watermark, start)
    if offset >= bound or (has_data and budget <= 0):
        return _Read(fp.partition, ErrorCode.NONE, high_watermark, start, None, 0,
                     ahead_of_follower=follower and offset > high_watermark)
    limit = min(fp.partition_max_bytes, budget) if has_data else fp.partition_max_bytes
    try:
        result = partition.log.read(offset, max(1, limit), bound)
    except DamagedEntry:
        # Kafka's code for a log it cannot read: clients ask for metadata again, which by then
        # names another leader (this replica stopped to have its log checked again).
        return _Read(fp.partition, ErrorCode.KAFKA_STORAGE_ERROR)
    except OffsetOutOfRange:
        if follower:
            return _Read(fp.partition, out_of_range)
        return _Read(fp.partition, ErrorCode.OFFSET_OUT_OF_RANGE, high_watermark, partition.log_start_offset)
    size = sum(len(buffer) for buffer in result.buffers)
    return _Read(fp.partition, ErrorCode.NONE, high_watermark, start, result.buffers, size)


def _read_all(node: NodeView, request: FetchRequest, client: _Client,
              denied: set[str]) -> tuple[list[tuple[str, list[_Read]]], int, bool]:
    # Response max_bytes exists from v3; the first batch is always returned even if larger
    # (KIP-74), later partitions get what is left of the budget.
    budget = request.max_bytes if client.version >= 3 else 0x7FFFFFFF
    total = 0
    failed = False
    topics = []
    for topic in request.topics:
        reads = []
        for fp in topic.partitions:
            read = (_Read(fp.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED) if topic.topic in denied
                    else _read_partition(node, topic.topic, fp, budget - total, total > 0, client))
            # A redirect is answered at once, as an error would be.
            failed |= read.error is not ErrorCode.NONE or read.preferred_read_replica != NO_PREFERENCE
            total += read.size
            reads.append(read)
        topics.append((topic.topic, reads))
    return topics, total, failed


def _records(read: _Read, version: int) -> bytes | bytearray | memoryview | Sequence[bytes | bytearray | memoryview] | None:
    if not read.buffers:
        return b""
    if version <= 3:
        # Fetch v0-1 speak magic 0, v2-3 magic 1 (Kafka protocol guide: Message sets).
        return batches_to_message_set(read.buffers, 0 if version <= 1 else 1)
    return read.buffers


def _partition_data(read: _Read, version: int) -> FetchResponse.PartitionData:
    if read.ahead_of_follower:
        # Kafka's follower would answer no records and its own (lower) high watermark; that
        # would show this client a high watermark below an offset it has reached. Both
        # librdkafka and the Java consumer take OFFSET_NOT_AVAILABLE as "ask the leader again".
        read = _Read(read.partition_index, ErrorCode.OFFSET_NOT_AVAILABLE)
    return PartitionData(partition_index=read.partition_index, error_code=int(read.error),
                         high_watermark=read.high_watermark,
                         last_stable_offset=read.last_stable_offset if read.last_stable_offset >= 0
                         else read.high_watermark,
                         log_start_offset=read.log_start_offset,
                         aborted_transactions=read.aborted if read.aborted is not None else [],
                         preferred_read_replica=read.preferred_read_replica, records=_records(read, version))


def _add_leader_hints(node: NodeView, name: str, partitions: list[FetchResponse.PartitionData]) -> None:
    """Name the current leader in every NOT_LEADER_OR_FOLLOWER partition answer (KIP-951), so
    the consumer fetches there at once. Fetch v16 added the leaders' NodeEndpoints; this broker
    answers up to v12, whose clients find a leader they do not know yet through Metadata."""
    refused = [part for part in partitions if part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER]
    if not refused:
        return
    leader, epoch = current_leader(node, name)
    if leader > 0:
        for part in refused:
            part.current_leader = FetchResponse.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)


def _response(node: NodeView, topics: list[tuple[str, list[_Read]]], version: int) -> FetchResponse:
    metrics = node.metrics
    responses = []
    for name, reads in topics:
        if metrics is not None:
            size = sum(read.size for read in reads)
            if size:
                metrics.fetched(name, size)
        partitions = [_partition_data(read, version) for read in reads]
        if version >= LEADER_HINT_VERSION:
            _add_leader_hints(node, name, partitions)
        responses.append(TopicResponse(topic=name, partitions=partitions))
    return FetchResponse(error_code=0, session_id=0, responses=responses)


# FetchMetadata.INITIAL_EPOCH and FINAL_EPOCH (clients/.../requests/FetchMetadata.java).
FULL_FETCH_EPOCHS = (0, -1)


async def handle(node: NodeView, context: RequestContext, request: FetchRequest) -> FetchResponse:
    version = context.api_version
    if version >= 7 and request.session_epoch not in FULL_FETCH_EPOCHS:
        return FetchResponse(error_code=int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND), session_id=0, responses=[])
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, request.max_wait_ms) / 1000
    min_bytes = max(1, request.min_bytes)
    denied = {t.topic for t in request.topics
              if not authorized(node, context, Operation.READ, ResourceType.TOPIC, t.topic)}
    await await_read_lease([p for p in (node.replicas.get(t.topic) for t in request.topics)
                            if p is not None and p.name not in denied])
    client = _Client(version, (request.rack_id or "") if version >= FOLLOWER_READ_VERSION else "",
                     version >= 4 and request.isolation_level == READ_COMMITTED)
    while True:
        topics, total, failed = _read_all(node, request, client, denied)
        if total >= min_bytes or failed or not topics or loop.time() >= deadline:
            return _response(node, topics, version)
        # Delayed fetch: park until any of the streams' HW advances, or the deadline.
        partitions = [p for p in (node.replicas.get(name) for name, _ in topics) if p is not None]
        if not partitions:
            return _response(node, topics, version)
        await wait_for_any(partitions, deadline)
        # An idle stream's group may have gone quiet meanwhile (no read lease): wake it again.
        await await_read_lease(partitions)


def error_response(request: FetchRequest, version: int, code: ErrorCode) -> FetchResponse:
    return FetchResponse(error_code=0, session_id=0, responses=[
        TopicResponse(topic=t.topic, partitions=[PartitionData(partition_index=p.partition, error_code=int(code),
                                                               high_watermark=-1, records=b"")
                                                 for p in t.partitions]) for t in request.topics])

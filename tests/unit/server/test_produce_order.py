"""A transactional producer's Produce requests reach their appends in the order they were sent
(Kafka processes a connection's requests in order; the producer pipelines its batches), even when
an earlier one waits for this node's metadata to show its transaction (handlers/produce.py) and a
later one arrives as that wait ends: the later batch would otherwise be stored out of sequence and
refused OUT_OF_ORDER_SEQUENCE_NUMBER, fatal to the producer (the Java transactional producer failed
so on a loaded machine, its stream leader not the coordinator)."""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support.waiting import within
from vdl_broker.cluster.transactions import NO_EPOCH, TxnMeta, TxnState
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.handlers import produce
from vdl_broker.server.partition import VERDICT_ERRORS, PartitionError
from vdl_broker.server.producer_state import ProducerStateTable, Verdict, last_sequence
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import ProduceRequest
from vdl_wire.records.batch_header import BatchHeader, parse_batch_header
from vdl_wire.records.compression import Compression
from vdl_wire.records.record_batch import RecordBatchBuilder

pytestmark = pytest.mark.unit

PID = 7
TXN = "t"


def txn_batch(seq: int, n: int = 5) -> bytes:
    builder = RecordBatchBuilder(producer_id=PID, producer_epoch=0, base_sequence=seq, is_transactional=True)
    for i in range(n):
        builder.append(1_000 + i, None, b"v%d" % (seq + i))
    return builder.build()


def request(seq: int) -> ProduceRequest:
    data = ProduceRequest.PartitionProduceData(index=0, records=txn_batch(seq))
    return ProduceRequest(transactional_id=TXN, acks=-1, timeout_ms=1000,
                          topic_data=[ProduceRequest.TopicProduceData(name="s", partition_data=[data])])


@dataclass
class Handle:
    base_offset: int

    async def wait(self, acks: int, timeout_ms: int) -> None:
        return None


@dataclass
class LeaderPartition:
    """The stream leader's append as Partition.append decides it: the producer-state check."""

    name: str = "s"
    is_leader: bool = True
    max_message_bytes: None = None
    timestamp_limits: tuple[int, int] = ((1 << 63) - 1, 3_600_000)  # Kafka's defaults
    recompression: None = None  # compression.type=producer
    log_append_time: bool = False
    produce_queue: None = None
    log_start_offset: int = 0
    table: ProducerStateTable = field(default_factory=lambda: ProducerStateTable(0))
    stored: list[int] = field(default_factory=list)  # base sequences, in log order

    def append(self, batch: bytes, header: BatchHeader | None = None) -> Handle:
        header = header or parse_batch_header(batch)
        last = last_sequence(header.base_sequence, header.last_offset_delta)
        check = self.table.check(header.producer_id, header.producer_epoch, header.base_sequence, last)
        if check.verdict is not Verdict.APPEND:
            raise PartitionError(VERDICT_ERRORS[check.verdict])
        offset = 5 * len(self.stored)
        self.table.record(header.producer_id, header.producer_epoch, header.base_sequence, last, offset)
        self.stored.append(header.base_sequence)
        return Handle(offset)


class MetadataGroup:
    """The metadata group's wait_for as RaftGroup's: re-check after each change notice. A
    follower: its copy of the metadata may lag the leader's."""

    leader_ready = False
    applied_index = commit_index = 0

    def __init__(self) -> None:
        self.waiters: list[asyncio.Future[None]] = []

    async def wait_for(self, predicate: Any, timeout_s: float) -> bool:
        while not predicate(self):
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.waiters.append(future)
            await within(asyncio.shield(future), timeout_s)
        return True

    def changed(self) -> None:
        waiters, self.waiters = self.waiters, []
        for future in waiters:
            future.set_result(None)


def meta(streams: tuple[str, ...]) -> TxnMeta:
    return TxnMeta(TXN, PID, 0, NO_EPOCH, TxnState.ONGOING, streams, 60_000, 1, 1)


def test_a_request_arriving_as_an_earlier_one_stops_waiting_for_its_transaction_appends_after_it() -> None:
    partition = LeaderPartition()
    partition.append(txn_batch(0))  # the producer's previous transaction: it is known here
    group = MetadataGroup()
    txns: dict[str, TxnMeta] = {TXN: meta(())}  # AddPartitionsToTxn not applied here yet
    node: Any = SimpleNamespace(
        metadata=SimpleNamespace(group=group, state=SimpleNamespace(transactions=SimpleNamespace(get=txns.get))),
        replicas={"s": partition}, config=SimpleNamespace(max_batch_bytes=1 << 20), metrics=None, cut_off=False,
        authorizer=SimpleNamespace(allows=lambda *args: True), transactions=SimpleNamespace(produce_chain={}))
    contexts = [RequestContext(SimpleNamespace(request_api_version=9), "127.0.0.1", None)  # type: ignore[arg-type]
                for _ in range(2)]

    async def run() -> list[int]:
        loop = asyncio.get_running_loop()
        first = loop.create_task(produce.handle(node, contexts[0], request(5)))
        while not group.waiters:  # the first request waits for the transaction to show here
            await asyncio.sleep(0)
        txns[TXN] = meta(("s",))
        group.changed()
        # The connection reads the next request, pipelined by the client, in the same pass.
        second = loop.create_task(produce.handle(node, contexts[1], request(10)))
        responses = await asyncio.gather(first, second)
        return [r.responses[0].partition_responses[0].error_code for r in responses if r is not None]

    assert asyncio.run(run()) == [0, 0]
    assert partition.stored == [0, 5, 10]


class NoWaitGroup:
    """A metadata group whose wait must not be needed: the request is answerable at once."""

    async def wait_for(self, predicate: Any, timeout_s: float) -> bool:
        assert predicate(self), "the request waited for a transaction that cannot come"
        return True


@pytest.mark.parametrize("version", [9, 12])
def test_a_batch_of_an_epoch_a_timeout_fenced_is_refused_at_once_as_kafka_answers(version: int) -> None:
    """After the coordinator aborted the producer's transaction on its timeout (epoch 0 -> 1), a
    late batch under epoch 0 gets INVALID_PRODUCER_EPOCH (Kafka: the coordinator's
    PRODUCER_FENCED, as a produce answers it) at once, not after the wait for a transaction to
    show up here (TXN_VISIBLE_WAIT_S)."""
    partition = LeaderPartition()
    aborted = TxnMeta(TXN, PID, 1, 0, TxnState.COMPLETE_ABORT, (), 60_000, -1, 1)
    node: Any = SimpleNamespace(
        metadata=SimpleNamespace(group=NoWaitGroup(), state=SimpleNamespace(
            transactions=SimpleNamespace(get={TXN: aborted}.get), streams={"s": None})),
        replicas={"s": partition}, config=SimpleNamespace(max_batch_bytes=1 << 20), metrics=None, cut_off=False,
        authorizer=SimpleNamespace(allows=lambda *args: True), transactions=SimpleNamespace(produce_chain={}))
    context = RequestContext(SimpleNamespace(request_api_version=version), "127.0.0.1", None)  # type: ignore[arg-type]
    response = asyncio.run(produce.handle(node, context, request(0)))
    assert response is not None
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert partition.stored == []


class CaughtUpLeader(NoWaitGroup):
    """The metadata leader, its own term's entry committed and every committed entry applied."""

    leader_ready = True
    applied_index = commit_index = 42


def test_a_batch_for_a_stream_not_added_is_refused_at_once_by_the_caught_up_metadata_leader() -> None:
    """KIP-890 part 1 on the node leading the metadata: its state holds every AddPartitionsToTxn
    ever answered, so a batch for a stream its transaction lacks gets INVALID_TXN_STATE at once
    (as from Kafka), not after the wait for the stream to show up (TXN_VISIBLE_WAIT_S)."""
    partition = LeaderPartition()
    node: Any = SimpleNamespace(
        metadata=SimpleNamespace(group=CaughtUpLeader(), state=SimpleNamespace(
            transactions=SimpleNamespace(get={TXN: meta(("other",))}.get), streams={"s": None})),
        replicas={"s": partition}, config=SimpleNamespace(max_batch_bytes=1 << 20), metrics=None, cut_off=False,
        authorizer=SimpleNamespace(allows=lambda *args: True), transactions=SimpleNamespace(produce_chain={}))
    context = RequestContext(SimpleNamespace(request_api_version=9), "127.0.0.1", None)  # type: ignore[arg-type]
    response = asyncio.run(produce.handle(node, context, request(0)))
    assert response is not None
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_TXN_STATE
    assert partition.stored == []


class HeldExecutor(Executor):
    """Runs nothing until the test says which job finishes, in the order it likes."""

    def __init__(self) -> None:
        self.jobs: list[tuple[Future[Any], Any, tuple[Any, ...]]] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self.jobs.append((future, fn, args))
        return future

    def finish(self, index: int) -> None:
        future, fn, args = self.jobs[index]
        future.set_result(fn(*args))


@dataclass
class RecompressingPartition(LeaderPartition):
    """A stream with compression.type=gzip; records the codec of each batch it stores."""

    recompression: Any = (Compression.GZIP, None)
    produce_queue: Any = None
    codecs: list[int] = field(default_factory=list)

    def append(self, batch: bytes, header: BatchHeader | None = None) -> Handle:
        header = header or parse_batch_header(batch)
        self.codecs.append(header.compression)
        return super().append(batch, header)


def idempotent_request(seq: int) -> ProduceRequest:
    builder = RecordBatchBuilder(Compression.LZ4, producer_id=PID, producer_epoch=0, base_sequence=seq)
    for i in range(5):
        builder.append(1_000 + i, None, b"v%d" % (seq + i))
    data = ProduceRequest.PartitionProduceData(index=0, records=builder.build())
    return ProduceRequest(acks=-1, timeout_ms=1000,
                          topic_data=[ProduceRequest.TopicProduceData(name="s", partition_data=[data])])


def test_pipelined_batches_recompressed_off_the_loop_append_in_the_order_sent() -> None:
    """An idempotent producer's pipelined batches to a compression.type=gzip stream are
    recompressed on worker threads, which may finish them in any order: each is appended in the
    order its request started, or the later would be stored first and the earlier refused
    OUT_OF_ORDER_SEQUENCE_NUMBER. A produce sent meanwhile that needs no worker waits too."""
    partition = RecompressingPartition()
    executor = HeldExecutor()
    node: Any = SimpleNamespace(
        metadata=SimpleNamespace(group=NoWaitGroup(), state=SimpleNamespace(transactions=SimpleNamespace(get={}.get))),
        replicas={"s": partition}, config=SimpleNamespace(max_batch_bytes=1 << 20), metrics=None, cut_off=False,
        authorizer=SimpleNamespace(allows=lambda *args: True), transactions=SimpleNamespace(produce_chain={}),
        recompress_executor=lambda: executor)
    contexts = [RequestContext(SimpleNamespace(request_api_version=9), "127.0.0.1", None)  # type: ignore[arg-type]
                for _ in range(3)]
    gzip_request = idempotent_request(10)
    gzip_data = gzip_request.topic_data[0].partition_data[0]
    builder = RecordBatchBuilder(Compression.GZIP, producer_id=PID, producer_epoch=0, base_sequence=10)
    for i in range(5):
        builder.append(1_000 + i, None, b"v%d" % (10 + i))
    gzip_data.records = builder.build()  # already the stream's codec: no worker needed

    async def run() -> list[int]:
        loop = asyncio.get_running_loop()
        tasks = [loop.create_task(produce.handle(node, contexts[0], idempotent_request(0))),
                 loop.create_task(produce.handle(node, contexts[1], idempotent_request(5))),
                 loop.create_task(produce.handle(node, contexts[2], gzip_request))]
        while len(executor.jobs) < 2:
            await asyncio.sleep(0)
        executor.finish(1)  # the second batch's recompression finishes first
        # Event-loop turns, not a timed wait (the executor is a stand-in: nothing else runs): the
        # second produce has every chance to append, and must not before the first.
        for _ in range(10):
            await asyncio.sleep(0)
        assert partition.stored == []  # it waits for the first
        executor.finish(0)
        responses = await asyncio.gather(*tasks)
        return [r.responses[0].partition_responses[0].error_code for r in responses if r is not None]

    assert asyncio.run(run()) == [0, 0, 0]
    assert partition.stored == [0, 5, 10]
    assert partition.codecs == [Compression.GZIP] * 3
    assert partition.produce_queue is None

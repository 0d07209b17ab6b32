"""KafkaConnection starts a connection's requests in the order Kafka processes them
(server/connection.py): a request waits while a write sent before it runs; Produce requests
pipeline behind each other; a read (a long-poll Fetch) holds nothing back; answers go out in
request order. The handlers are stand-ins that record when they start and finish when the test
says (the real modules give the error_response they answer with)."""

from __future__ import annotations

import asyncio
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from tests.support.buffered_reads import read_into
from tests.support.kafka import encode, make_batch
from vdl_broker.server.connection import MAX_INFLIGHT_REQUESTS, KafkaConnection, Order, RequestContext
from vdl_broker.server.handlers import Handler, delete_records, fetch, list_offsets, order_of, produce
from vdl_wire import messages as m
from vdl_wire.errors import ErrorCode
from vdl_wire.framing import FrameReader

pytestmark = pytest.mark.unit


class Transport:
    def __init__(self) -> None:
        self.written = bytearray()
        self.reading = True

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else None

    def set_write_buffer_limits(self, high: int) -> None:
        pass

    def writelines(self, buffers: Any) -> None:
        for buffer in buffers:
            self.written += bytes(buffer)

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


class Gated:
    """Handlers that note (correlation id) when they start and answer once released."""

    def __init__(self) -> None:
        self.started: list[int] = []
        self.gates: dict[int, asyncio.Future[None]] = {}

    def handler(self, module: ModuleType) -> Handler:
        async def handle(node: Any, context: RequestContext, request: Any) -> Any:
            correlation_id = context.header.correlation_id
            self.started.append(correlation_id)
            await self.gates.setdefault(correlation_id, asyncio.get_running_loop().create_future())
            return module.error_response(request, context.api_version, ErrorCode.NONE)
        return Handler(module.API_KEY, module.NAME, handle, module.error_response, True, order_of(module))

    def release(self, correlation_id: int) -> None:
        self.gates.setdefault(correlation_id, asyncio.get_running_loop().create_future()).set_result(None)


def requests() -> dict[str, Any]:
    produce_request = m.ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[m.ProduceRequest.TopicProduceData(
        name="s", partition_data=[m.ProduceRequest.PartitionProduceData(index=0, records=make_batch([b"v"]))])])
    fetch_request = m.FetchRequest(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, topics=[
        m.FetchRequest.FetchTopic(topic="s", partitions=[m.FetchRequest.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    delete = m.DeleteRecordsRequest(timeout_ms=1000, topics=[m.DeleteRecordsRequest.DeleteRecordsTopic(
        name="s", partitions=[m.DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=1)])])
    listed = m.ListOffsetsRequest(replica_id=-1, topics=[m.ListOffsetsRequest.ListOffsetsTopic(
        name="s", partitions=[m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-2)])])
    return {"produce": produce_request, "fetch": fetch_request, "delete": delete, "list": listed}


def answered(transport: Transport) -> list[int]:
    """Correlation ids of the answers written, in order."""
    return [int.from_bytes(bytes(frame[:4]), "big") for frame in FrameReader(1 << 20).feed(bytes(transport.written))]


def test_handlers_are_ordered_by_what_they_change() -> None:
    assert (order_of(produce), order_of(delete_records), order_of(list_offsets), order_of(fetch)) == (
        Order.PRODUCE, Order.WRITE, Order.READ, Order.READ)


def gated_owner(gated: Gated) -> SimpleNamespace:
    return SimpleNamespace(config=SimpleNamespace(host="127.0.0.1", port=9092, max_request_bytes=1 << 20,
                                                  max_inflight_bytes=1 << 20),
                           handlers={module.API_KEY: gated.handler(module)
                                     for module in (produce, fetch, delete_records, list_offsets)},
                           connections=set(), metrics=None, sasl_session=None)


async def turns() -> None:
    for _ in range(10):  # event-loop turns, not time: every runnable handler task moves on
        await asyncio.sleep(0)


def test_a_request_waits_for_the_writes_before_it_and_only_for_them() -> None:
    gated = Gated()
    owner = gated_owner(gated)
    sent = requests()
    # correlation id: 1 fetch (a long poll), 2 delete, 3 list, 4 produce, 5 produce, 6 list
    order = ["fetch", "delete", "list", "produce", "produce", "list"]

    async def run() -> list[tuple[str, list[int], list[int]]]:
        transport = Transport()
        connection = KafkaConnection(owner)  # type: ignore[arg-type]
        connection.connection_made(transport)  # type: ignore[arg-type]
        read_into(connection, b"".join(encode(sent[name], correlation_id=i + 1) for i, name in enumerate(order)))
        steps = []

        async def step(label: str, release: int | None) -> None:
            if release is not None:
                gated.release(release)
            await turns()
            steps.append((label, list(gated.started), answered(transport)))

        await step("arrived", None)
        await step("delete done", 2)
        await step("first produce done", 4)
        await step("list done", 3)
        await step("second produce done", 5)
        await step("fetch done", 1)
        await step("last list done", 6)
        return steps

    assert asyncio.run(run()) == [
        # the fetch holds nothing back; the delete holds everything after it
        ("arrived", [1, 2], []),
        # the list and both produces start (Produce pipelines behind Produce, not behind the list)
        ("delete done", [1, 2, 3, 4, 5], []),
        # the last list waits for both produces
        ("first produce done", [1, 2, 3, 4, 5], []),
        ("list done", [1, 2, 3, 4, 5], []),
        ("second produce done", [1, 2, 3, 4, 5, 6], []),
        # answers in request order: nothing goes out before the fetch's
        ("fetch done", [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5]),
        ("last list done", [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6]),
    ]


def test_reading_pauses_while_a_connection_has_its_fill_of_unanswered_requests() -> None:
    """A producer pipelining without bound (librdkafka's linger.ms=0) is held in its own queue,
    where it batches, not in the broker's: however few bytes its requests are."""
    gated = Gated()
    produced = requests()["produce"]
    pipelined = MAX_INFLIGHT_REQUESTS + 4

    async def run() -> None:
        transport = Transport()
        connection = KafkaConnection(gated_owner(gated))  # type: ignore[arg-type]
        connection.connection_made(transport)  # type: ignore[arg-type]
        for correlation_id in range(1, pipelined + 1):  # one read each, as long as reading goes on
            if transport.reading:
                read_into(connection, encode(produced, correlation_id=correlation_id))
        await turns()
        assert gated.started == list(range(1, MAX_INFLIGHT_REQUESTS + 1))
        assert not transport.reading
        gated.release(1)
        await turns()
        assert answered(transport) == [1] and transport.reading
        for correlation_id in range(2, MAX_INFLIGHT_REQUESTS + 1):
            gated.release(correlation_id)
        await turns()
        assert answered(transport) == list(range(1, MAX_INFLIGHT_REQUESTS + 1)) and transport.reading
        connection.connection_lost(None)

    asyncio.run(run())

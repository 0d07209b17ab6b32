"""ProducePipeline: several idempotent Produce requests in flight to a stream's leader, and what a
failed one does to those sent after it (KIP-98: the broker answers one connection's requests in
order; an unknown producer's first batch is taken at any sequence, KIP-360)."""

from __future__ import annotations

import pytest

from tests.unit.client.fake_cluster import FakeCluster, settings
from vdl_client import VdlClient
from vdl_client.settings import VdlClientError
from vdl_wire.errors import ErrorCode
from vdl_wire.records.record_batch import RecordBatchBuilder, iter_batches, read_records

pytestmark = pytest.mark.unit

PRODUCER = (7, 0)
RECORDS_PER_BATCH = 3


def batch(index: int) -> bytes:
    builder = RecordBatchBuilder(producer_id=PRODUCER[0], producer_epoch=PRODUCER[1],
                                 base_sequence=index * RECORDS_PER_BATCH)
    for j in range(RECORDS_PER_BATCH):
        builder.append(1, None, f"{index}-{j}".encode())
    return builder.build()


def stored_values(cluster: FakeCluster, stream: str) -> list[bytes]:
    return [record.value for stored in cluster.stored[stream] for _, data in iter_batches(stored)
            for record in read_records(data)]


def expected(count: int) -> list[bytes]:
    return [f"{i}-{j}".encode() for i in range(count) for j in range(RECORDS_PER_BATCH)]


def produce_all(cluster: FakeCluster, count: int, window: int = 5) -> None:
    client = VdlClient(settings(deadline_ms=5_000), connect=cluster.connect, sleep=cluster.sleep)
    pipeline = client.pipeline("s", 1000, 5_000, window)
    for index in range(count):
        pipeline.submit(batch(index))
    pipeline.finish()


def fresh_cluster() -> FakeCluster:
    cluster = FakeCluster()
    cluster.leaders["s"] = 1
    return cluster


def test_batches_in_flight_are_stored_once_in_order() -> None:
    cluster = fresh_cluster()
    produce_all(cluster, 12)
    assert stored_values(cluster, "s") == expected(12)
    assert cluster.sent.count(("n1:9092", "ProduceRequest")) == 12


def test_first_batch_refused_does_not_let_the_next_one_in_ahead_of_it() -> None:
    """The broker does not know the producer until its first batch is stored, and takes a first
    batch at any sequence: had batch 1 been in flight behind a refused batch 0, it would have been
    stored first, and batch 0's retry answered DUPLICATE_SEQUENCE_NUMBER (acknowledged, lost)."""
    cluster = fresh_cluster()
    cluster.errors[(1, "ProduceRequest")] = [ErrorCode.NOT_LEADER_OR_FOLLOWER]
    produce_all(cluster, 8)
    assert stored_values(cluster, "s") == expected(8)


def test_refused_batch_in_flight_is_retried_before_the_ones_behind_it() -> None:
    """Batch 3 refused (the producer known by then): batches 4.. are answered
    OUT_OF_ORDER_SEQUENCE_NUMBER, not stored, and sent again after batch 3, on the new leader."""
    cluster = fresh_cluster()
    cluster.errors[(1, "ProduceRequest")] = [0, 0, 0, ErrorCode.NOT_LEADER_OR_FOLLOWER]
    original = cluster.answer

    def answer_then_move(node: int, request: object) -> object:
        response = original(node, request)
        if type(request).__name__ == "ProduceRequest" and response.responses[0].partition_responses[0].error_code:
            cluster.leaders["s"] = 2  # the leader moved: the retries go to node 2
        return response

    cluster.answer = answer_then_move  # type: ignore[method-assign]
    produce_all(cluster, 10)
    assert stored_values(cluster, "s") == expected(10)
    produced_on = [address for address, name in cluster.sent if name == "ProduceRequest"]
    assert "n2:9092" in produced_on and produced_on[:4] == ["n1:9092"] * 4


def test_out_of_order_after_acknowledged_batches_fails_the_write() -> None:
    """A gap behind batches all acknowledged means the log lost an acknowledged batch: the
    pipeline says so rather than retry forever or acknowledge what follows."""
    cluster = fresh_cluster()
    client = VdlClient(settings(deadline_ms=5_000), connect=cluster.connect, sleep=cluster.sleep)
    pipeline = client.pipeline("s", 1000, 5_000, 5)
    pipeline.submit(batch(0))
    pipeline.submit(batch(2))  # sequence 6 after 0..2: a gap
    with pytest.raises(VdlClientError, match="OUT_OF_ORDER_SEQUENCE_NUMBER"):
        pipeline.finish()
    assert stored_values(cluster, "s") == expected(1)


@pytest.mark.parametrize("refused", [None, 0, 3])
def test_each_batch_is_handed_back_once_stored_in_order(refused: int | None) -> None:
    """`acknowledged` gets each batch once, in order, only after the broker stored it (its buffer
    is then reused for a later batch): also the batches sent again after a refused one, whether
    the refused one was the first (sent alone) or had batches in flight behind it."""
    cluster = fresh_cluster()
    if refused is not None:
        cluster.errors[(1, "ProduceRequest")] = [0] * refused + [ErrorCode.NOT_LEADER_OR_FOLLOWER]
    handed: list[bytes] = []

    def acknowledged(done: bytes | bytearray | memoryview) -> None:
        index = len(handed)
        assert stored_values(cluster, "s")[:(index + 1) * RECORDS_PER_BATCH] == expected(index + 1)
        handed.append(bytes(done))

    client = VdlClient(settings(deadline_ms=5_000), connect=cluster.connect, sleep=cluster.sleep)
    pipeline = client.pipeline("s", 1000, 5_000, 3, acknowledged=acknowledged)
    for index in range(8):
        pipeline.submit(batch(index))
    pipeline.finish()
    assert handed == [batch(index) for index in range(8)]
    assert stored_values(cluster, "s") == expected(8)

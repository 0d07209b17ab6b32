"""The sink's producer (StreamProducer) against a fake cluster: the batches it cuts depend only on
the sequence of rows, not on the Arrow batches Spark hands them over in (an exactly-once replay
re-sends the very same batches and sequences, so the broker stores them once), and a batch whose
rows span several Arrow batches is encoded from where they are."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from tests.unit.client.fake_cluster import FakeCluster, settings
from vdl_client import VdlClient
from vdl_connector.arrow import RecordColumns, cut_points, encode_headers
from vdl_connector.options import SinkOptions
from vdl_connector.producing import StreamProducer
from vdl_wire.records.batch_header import BATCH_HEADER_SIZE, parse_batch_header
from vdl_wire.records.record_batch import read_records, validate_batch

pytestmark = pytest.mark.unit

BATCH_SIZE = 4096
ROWS = 3_000


def rows(uniform: bool) -> tuple[pa.Array | None, pa.Array, pa.Array | None]:
    if uniform:
        return None, pa.array([b"%020d" % i + b"x" * 80 for i in range(ROWS)], pa.binary()), None
    keys = pa.array([None if i % 4 == 0 else b"k%d" % (i % 97) for i in range(ROWS)], pa.binary())
    values = pa.array([None if i % 13 == 0 else b"v" * (i % 300) for i in range(ROWS)], pa.binary())
    headers = pa.array([encode_headers([("h", b"%d" % i)]) if i % 5 == 0 else None for i in range(ROWS)], pa.binary())
    return keys, values, headers


def chunkings(seed: int) -> list[list[int]]:
    """Ways to hand ROWS rows over: whole, in equal chunks, in random chunks (ends of each chunk)."""
    rng = random.Random(seed)
    uneven = sorted(rng.sample(range(1, ROWS), 40)) + [ROWS]
    return [[ROWS], list(range(1000, ROWS + 1, 1000)), list(range(7, ROWS, 7)) + [ROWS], uneven]


def produce(keys: pa.Array | None, values: pa.Array, headers: pa.Array | None, ends: list[int],
            stream_rows: list[tuple[int, int]] | None = None) -> list[bytes]:
    cluster = FakeCluster()
    cluster.leaders["s"] = 1
    options = SinkOptions(client=settings(deadline_ms=5_000), topic="s", batch_size=BATCH_SIZE)
    with VdlClient(options.client, connect=cluster.connect, sleep=cluster.sleep) as client:
        producer = StreamProducer(client, options, None)
        start = 0
        for end in ends:
            count = end - start
            producer.add("s", None if keys is None else keys.slice(start, count), values.slice(start, count),
                          None if headers is None else headers.slice(start, count))
            start = end
        assert producer.flush() == {"s": ROWS}
    return cluster.stored["s"]


def without_timestamps(batch: bytes) -> tuple[int, int, bytes]:
    """(base sequence, record count, records section): what a replay must send again."""
    header = parse_batch_header(batch)
    return header.base_sequence, header.record_count, batch[BATCH_HEADER_SIZE:]


@pytest.mark.parametrize("uniform", [True, False])
def test_batches_depend_on_the_rows_only_not_on_their_chunks(uniform: bool) -> None:
    keys, values, headers = rows(uniform)
    stored_runs = [produce(keys, values, headers, ends) for ends in chunkings(uniform)]
    runs = [[without_timestamps(b) for b in stored] for stored in stored_runs]
    assert all(run == runs[0] for run in runs[1:])
    # The boundaries are those of the rows cut all at once, each batch within batch_size.
    reference = cut_points(RecordColumns(keys, values, headers).size_bounds(), BATCH_SIZE)
    counts = [count for _, count, _ in runs[0]]
    assert [sum(counts[:i + 1]) for i in range(len(counts) - 1)] == reference
    assert [sequence for sequence, _, _ in runs[0]] == [sum(counts[:i]) for i in range(len(counts))]
    # Every row once, in order, byte-exact.
    stored = stored_runs[3]  # in uneven chunks
    records = [r for batch in stored for r in read_records(batch)]
    assert [r.value for r in records] == values.to_pylist()
    assert [r.key for r in records] == (keys.to_pylist() if keys is not None else [None] * ROWS)
    for batch in stored:
        assert len(batch) <= BATCH_SIZE
        validate_batch(batch)
    if headers is not None:
        assert [r.headers for r in records] == [[("h", b"%d" % i)] if i % 5 == 0 else [] for i in range(ROWS)]



def test_an_abort_names_the_transactional_ids_of_the_tasks_that_sent_no_message() -> None:
    from vdl_connector.sink import VdlCommitMessage, unfinished_transactional_ids

    query = "892f883c-3b9e-4939-be18-c544f26ad752"
    streaming = VdlCommitMessage({"a": 3}, 1, f"vdl-spark/txn/{query}/1", producer_id=7, epoch=2)
    assert unfinished_transactional_ids([None, streaming, None], None) == [
        f"vdl-spark/txn/{query}/0", f"vdl-spark/txn/{query}/2"]
    in_foreach_batch = VdlCommitMessage({}, 0, f"vdl-spark/txn/{query}/0/orders", replayed=True)
    assert unfinished_transactional_ids([in_foreach_batch, None], None) == [f"vdl-spark/txn/{query}/1/orders"]
    # no message from any task: the streaming writer's query id, else nothing to name
    assert unfinished_transactional_ids([None, None], query) == [f"vdl-spark/txn/{query}/0", f"vdl-spark/txn/{query}/1"]
    assert unfinished_transactional_ids([None, None], None) == []


def test_the_query_id_is_read_from_a_local_checkpoint(tmp_path) -> None:  # noqa: ANN001
    from vdl_connector.sink import query_id_in_checkpoint

    (tmp_path / "metadata").write_text('{"id":"892f883c-3b9e-4939-be18-c544f26ad752"}\n')
    assert query_id_in_checkpoint(str(tmp_path)) == "892f883c-3b9e-4939-be18-c544f26ad752"
    assert query_id_in_checkpoint(tmp_path.as_uri()) == "892f883c-3b9e-4939-be18-c544f26ad752"
    assert query_id_in_checkpoint(str(tmp_path / "absent")) is None
    assert query_id_in_checkpoint("s3a://bucket/checkpoint") is None  # not readable from the commit worker
    assert query_id_in_checkpoint(None) is None

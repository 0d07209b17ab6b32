"""read_range and the sink's producer against an in-memory fake broker (no sockets, no Spark)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from vdl_client import FetchResult
from vdl_connector.arrow import arrow_read_schema
from vdl_connector.options import parse_sink_options, parse_source_options
from vdl_connector.planning import OffsetRange
from vdl_connector.producing import StreamProducer, in_flight_window, split_by_stream
from vdl_connector.reading import read_range
from vdl_connector.schema import validate_write_schema
from vdl_connector.sink import VdlWriteError
from vdl_connector.source import VdlDataLossError, data_loss
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import DescribeConfigsRequest, DescribeConfigsResponse
from vdl_wire.records.batch_header import with_base_offset
from vdl_wire.records.compression import Compression
from vdl_wire.records.control import end_txn_marker
from vdl_wire.records.record_batch import RecordBatchBuilder, iter_batches, read_records


class FakeClient:
    """Stores batches per stream; fetch returns whole batches from the one holding `offset`, the
    last one cut short (a partial trailing batch) like a real Fetch hitting max bytes."""

    def __init__(self) -> None:
        self.batches: dict[str, list[bytes]] = {}
        self.log_start: dict[str, int] = {}
        self.fetches = 0
        self.produced: list[tuple[str, bytes]] = []
        self.existing: set[str] = set()
        self.configs: dict[str, dict[str, str]] = {}  # stream -> the configs DescribeConfigs reports
        self.windows: dict[str, int] = {}  # stream -> produce requests in flight its pipeline was opened with
        self.stored: dict[str, int | None] = {}  # stream -> last sequence DescribeProducers reports (None: no READ)

    def add(self, stream: str, records: list[tuple[int, bytes | None, bytes | None, list]],
            compression: int = Compression.NONE) -> None:
        batches = self.batches.setdefault(stream, [])
        base = sum(len(list(iter_batches(b))) and next(iter_batches(b))[0].record_count for b in batches)
        builder = RecordBatchBuilder(compression, base_offset=base)
        for ts, key, value, headers in records:
            builder.append(ts, key, value, headers)
        batches.append(builder.build())

    def fetch(self, stream, offset, partition_max_bytes, max_bytes, max_wait_ms, deadline):  # noqa: ANN001
        self.fetches += 1
        if stream not in self.batches:
            return FetchResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, -1, -1)
        if offset < self.log_start.get(stream, 0):
            return FetchResult(ErrorCode.OFFSET_OUT_OF_RANGE, None, -1, self.log_start[stream])
        out = bytearray()
        for batch in self.batches[stream]:
            header = next(iter_batches(batch))[0]
            if header.next_offset <= offset or header.base_offset < self.log_start.get(stream, 0):
                continue
            out += batch
        # a partial trailing batch: cut the tail off the last one (when there are several)
        if self.fetches % 2 == 0 and len(out) > 100:
            out = out[:-20]
        return FetchResult(ErrorCode.NONE, memoryview(bytes(out)), 0, 0)

    def fetch_start(self, stream, offset, partition_max_bytes, max_bytes, max_wait_ms):  # noqa: ANN001, ANN201
        return (stream, offset, partition_max_bytes, max_bytes, max_wait_ms)

    def fetch_finish(self, pending, deadline):  # noqa: ANN001, ANN201
        return self.fetch(*pending, deadline)

    def list_offsets(self, streams, timestamp, timestamps=None):  # noqa: ANN001
        return {s: self.log_start.get(s, 0) for s in streams}

    # producer side
    def init_producer_id(self):  # noqa: ANN201
        return (7, 0)

    def writer_id(self, writer_key: str):  # noqa: ANN201
        return (7, 0)

    def last_sequence(self, stream: str, producer_id: int) -> int | None:
        return self.stored.get(stream, -1)

    def stream_exists(self, stream: str) -> bool:
        return stream in self.existing

    def create_streams(self, streams) -> None:  # noqa: ANN001
        self.existing.update(streams)

    def call(self, route, request, what, error_of=None):  # noqa: ANN001, ANN201
        assert isinstance(request, DescribeConfigsRequest), request  # the sink's only other request
        R = DescribeConfigsResponse  # noqa: N806
        return R(results=[R.DescribeConfigsResult(resource_name=r.resource_name, configs=[
            R.DescribeConfigsResourceResult(name=k, value=v) for k, v in self.configs.get(r.resource_name, {}).items()
            if k in r.configuration_keys]) for r in request.resources])

    def produce(self, stream, batch, timeout_ms, deadline, transactional_id=None):  # noqa: ANN001
        self.produced.append((stream, batch))
        return 0

    def pipeline(self, stream, timeout_ms, delivery_timeout_ms, window, transactional_id=None,  # noqa: ANN001, ANN201
                 acknowledged=None):  # noqa: ANN001
        client = self
        self.windows[stream] = window

        class Pipeline:
            def submit(self, batch: bytes | bytearray | memoryview) -> None:
                # stored and acknowledged at once: the producer may reuse the buffer from here on
                client.produced.append((stream, bytes(batch)))
                if acknowledged is not None:
                    acknowledged(batch)

            def finish(self) -> None:
                pass

        return Pipeline()


def options(**extra: str):  # noqa: ANN201
    return parse_source_options({"bootstrap.servers": "h:1", "subscribe": "s"} | {k.lower(): v for k, v in extra.items()})


def rows(batches: list[pa.RecordBatch]) -> list[dict]:
    return [row for batch in batches for row in batch.to_pylist()]


def make_stream(client: FakeClient, compression: int = Compression.NONE) -> None:
    for b in range(5):
        client.add("s", [(1000 + b * 10 + i, f"k{b}{i}".encode() if i % 2 else None, f"v{b}-{i}".encode() * (i + 1),
                          [("h", b"x"), ("n", None)] if i == 1 else []) for i in range(4)], compression)


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP, Compression.SNAPPY,
                                         Compression.LZ4, Compression.ZSTD])
def test_read_exact_range_with_headers(compression: int) -> None:
    client = FakeClient()
    make_stream(client, compression)
    out = list(read_range(client, OffsetRange("s", 3, 17), options(includeHeaders="true"), data_loss))
    assert all(b.schema.equals(arrow_read_schema(True)) for b in out)
    got = rows(out)
    assert [r["offset"] for r in got] == list(range(3, 17))
    expected = []
    for batch in client.batches["s"]:
        for record in read_records(batch):
            if 3 <= record.offset < 17:
                expected.append((record.key, record.value, record.timestamp, record.headers or None))
    assert [(r["key"], r["value"], round(r["timestamp"].timestamp() * 1000),
             None if r["headers"] is None else [(h["key"], h["value"]) for h in r["headers"]]) for r in got] == expected
    assert {r["topic"] for r in got} == {"s"} and {r["partition"] for r in got} == {0}
    assert {r["timestampType"] for r in got} == {0}


def test_read_without_headers_schema() -> None:
    client = FakeClient()
    make_stream(client)
    out = list(read_range(client, OffsetRange("s", 0, 20), options(), data_loss))
    assert all(b.schema.equals(arrow_read_schema(False)) for b in out)
    assert len(rows(out)) == 20


def test_arrow_batches_are_cut_after_the_kafka_batch_that_passes_2_mib_or_65536_rows() -> None:
    """Spark's JVM pools the Arrow buffers it reads up to 4 MiB and maps each larger one anew
    (page faults on every byte): a task's rows come in batches kept under that, cut only between
    Kafka batches, every record once and in order."""
    big_client, many_client = FakeClient(), FakeClient()  # each read one whole Fetch response
    for b in range(5):  # 700 KiB each: the third passes 2 MiB
        big_client.add("big", [(b, None, bytes([b]) * 700, []) for _ in range(1024)])
    for b in range(70):  # 1,000 one-byte records each: the 66th passes 65,536 rows
        many_client.add("many", [(b, None, b"x", []) for _ in range(1000)])
    big = list(read_range(big_client, OffsetRange("big", 0, 5 * 1024), options(), data_loss))
    many = list(read_range(many_client, OffsetRange("many", 0, 70_000), options(), data_loss))
    assert [b.num_rows for b in big] == [3 * 1024, 2 * 1024]
    assert [b.num_rows for b in many] == [66_000, 4_000]
    assert [r["offset"] for r in rows(big)] == list(range(5 * 1024))
    assert [r["value"] for r in rows(big)] == [bytes([b]) * 700 for b in range(5) for _ in range(1024)]
    assert [r["offset"] for r in rows(many)] == list(range(70_000))


def test_data_loss_fails_or_skips() -> None:
    client = FakeClient()
    make_stream(client)
    client.log_start["s"] = 8
    with pytest.raises(VdlDataLossError, match="stream 's': offsets \\[2, 8\\)"):
        list(read_range(client, OffsetRange("s", 2, 12), options(), data_loss))
    got = rows(list(read_range(client, OffsetRange("s", 2, 12), options(failOnDataLoss="false"), data_loss)))
    assert [r["offset"] for r in got] == list(range(8, 12))
    # a stream found after the query started reads from its log start without complaint
    got = rows(list(read_range(client, OffsetRange("s", 0, 12, True), options(), data_loss)))
    assert [r["offset"] for r in got] == list(range(8, 12))


def test_deleted_stream_is_data_loss() -> None:
    client = FakeClient()
    with pytest.raises(VdlDataLossError, match="stream 's' no longer exists"):
        list(read_range(client, OffsetRange("s", 0, 5), options(), data_loss))
    assert list(read_range(client, OffsetRange("s", 0, 5), options(failOnDataLoss="false"), data_loss)) == []


class OneFetch:
    """Answers every Fetch with the same records and aborted transactions (READ_COMMITTED)."""

    def __init__(self, records: bytes, aborted: tuple[tuple[int, int], ...]) -> None:
        self.result = FetchResult(ErrorCode.NONE, memoryview(records), 100, 0, aborted)

    def fetch(self, stream, offset, partition_max_bytes, max_bytes, max_wait_ms, deadline):  # noqa: ANN001, ANN201
        return self.result

    def fetch_start(self, *args):  # noqa: ANN002, ANN201
        return args

    def fetch_finish(self, pending, deadline):  # noqa: ANN001, ANN201
        return self.result


def txn_log() -> bytes:
    """Two producers' transactions, interleaved: 10 commits [0,1]; 20 aborts [2,3], then commits
    [7,8]; 30 aborts [11] (its marker at 13); an idempotent batch of 30 (not transactional) at
    12, between that transaction's batch and its abort marker; a plain record at 4."""

    def data(base: int, count: int, producer: int, transactional: bool = True) -> bytes:
        builder = RecordBatchBuilder(base_offset=base, producer_id=producer, producer_epoch=0, base_sequence=base,
                                     is_transactional=transactional)
        for i in range(count):
            builder.append(1000 + base + i, None, f"v{base + i}".encode())
        return builder.build()

    def marker(base: int, producer: int, commit: bool) -> bytes:
        return bytes(with_base_offset(end_txn_marker(producer, 0, commit, 0, 2000), base))

    plain = RecordBatchBuilder(base_offset=4)
    plain.append(1004, None, b"v4")
    return b"".join([data(0, 2, 10), data(2, 2, 20), plain.build(), marker(5, 10, True), marker(6, 20, False),
                     data(7, 2, 20), marker(9, 20, True), data(10, 1, 10), data(11, 1, 30),
                     data(12, 1, 30, transactional=False), marker(13, 30, False), marker(14, 10, True)])


def test_read_committed_skips_aborted_transactions_and_markers() -> None:
    client = OneFetch(txn_log(), aborted=((30, 11), (20, 2)))  # the broker's order is not relied on
    committed = options(**{"kafka.isolation.level": "read_committed"})
    got = rows(list(read_range(client, OffsetRange("s", 0, 15), committed, data_loss)))
    assert [(r["offset"], r["value"]) for r in got] == [
        (0, b"v0"), (1, b"v1"), (4, b"v4"), (7, b"v7"), (8, b"v8"), (10, b"v10"), (12, b"v12")]
    # an aborted transaction is skipped from its first offset on only: a range starting in the
    # middle of one (the broker lists it, it ends in the range) skips its records there too
    got = rows(list(read_range(client, OffsetRange("s", 3, 9), committed, data_loss)))
    assert [r["offset"] for r in got] == [4, 7, 8]


def test_read_uncommitted_keeps_aborted_records_but_never_markers() -> None:
    client = OneFetch(txn_log(), aborted=())
    got = rows(list(read_range(client, OffsetRange("s", 0, 15), options(), data_loss)))
    assert [r["offset"] for r in got] == [0, 1, 2, 3, 4, 7, 8, 10, 11, 12]


def sink_options(**extra: str):  # noqa: ANN201
    return parse_sink_options({"bootstrap.servers": "h:1"} | {k.lower(): v for k, v in extra.items()})


def test_producer_batches_by_size_with_sequences() -> None:
    client = FakeClient()
    client.existing.add("out")
    producer = StreamProducer(client, sink_options(**{"kafka.batch.size": "1000"}), None)
    for _ in range(100):
        producer.append("out", 5, None, b"x" * 50, [])
    assert producer.flush() == {"out": 100}
    headers = [next(iter_batches(b))[0] for _, b in client.produced]
    assert len(headers) > 5
    sequence = 0
    for header in headers:
        assert header.producer_id == 7 and header.producer_epoch == 0 and header.base_sequence == sequence
        assert header.size <= 1000
        sequence += header.record_count
    assert sequence == 100


def test_producer_batches_fit_the_streams_max_message_bytes_and_the_window_the_batch_size() -> None:
    client = FakeClient()
    client.existing.update({"capped", "open", "small"})
    client.configs = {"capped": {"max.message.bytes": "1000"}, "open": {"max.message.bytes": "16777216"},
                      "small": {"max.message.bytes": "1000"}}
    for options, stream in ((sink_options(topic="capped"), "capped"), (sink_options(topic="open"), "open"),
                            (sink_options(topic="small", **{"kafka.batch.size": "600"}), "small")):
        producer = StreamProducer(client, options, None)
        for _ in range(100):
            producer.append(stream, 5, None, b"x" * 50, [])
        assert producer.flush() == {stream: 100}
    sizes = {stream: [next(iter_batches(b))[0].size for s, b in client.produced if s == stream]
             for stream in ("capped", "open", "small")}
    # The default 4 MiB under a stream's 1000-byte limit: batches of at most 1000 bytes; under 16
    # MiB, one batch; an option below the limit wins.
    assert len(sizes["capped"]) > 5 and max(sizes["capped"]) <= 1000 and max(sizes["capped"]) > 600
    assert len(sizes["open"]) == 1
    assert len(sizes["small"]) > len(sizes["capped"]) and max(sizes["small"]) <= 600
    # Requests in flight: 5 of up to 1 MiB, 2 of the default 4 MiB (8 MiB per stream).
    assert client.windows == {"capped": 5, "open": 2, "small": 5}
    assert [in_flight_window(size) for size in (16_384, 1 << 20, 2 << 20, 3 << 20, 4 << 20, 64 << 20)] == [5, 5, 4, 2, 2, 2]


def test_replayed_writer_starts_after_the_records_its_first_attempt_stored() -> None:
    """Record i of a writer key's rows has sequence i however they are batched: a replay skips the
    rows up to the last sequence stored and goes on from there, in batches of its own size."""
    client = FakeClient()
    client.existing.update({"half", "none", "all", "unreadable"})
    client.stored = {"half": 36, "none": -1, "all": 99, "unreadable": None}
    for stream in client.stored:
        producer = StreamProducer(client, sink_options(topic=stream, **{"kafka.batch.size": "1000"}), "w/0/1/0")
        for chunk in range(10):  # Arrow chunks of 10 rows: the skip ends inside one
            values = pa.array([b"%03d" % (chunk * 10 + i) + b"x" * 47 for i in range(10)], pa.binary())
            producer.add(stream, None, values, None)
        assert producer.flush() == {stream: 100}
    for stream, first in (("half", 37), ("none", 0), ("all", 100), ("unreadable", 0)):
        batches = [b for s, b in client.produced if s == stream]
        sequences = [(h.base_sequence, h.record_count) for h, _ in (next(iter_batches(b)) for b in batches)]
        values = [bytes(r.value[:3]) for b in batches for r in read_records(b)]
        assert values == [b"%03d" % i for i in range(first, 100)]
        assert [sum(n for _, n in sequences[:i]) + first for i in range(len(sequences))] == [b for b, _ in sequences]


def test_producer_missing_stream() -> None:
    client = FakeClient()
    producer = StreamProducer(client, sink_options(), None)
    with pytest.raises(VdlWriteError, match="stream 'nope' does not exist.*'createStreams'"):
        producer.append("nope", 0, None, b"v", [])
    producer = StreamProducer(client, sink_options(createStreams="true"), None)
    producer.append("nope", 0, None, b"v", [])
    assert "nope" in client.existing


def test_rows_topic_option_wins_and_partition_check() -> None:
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    schema = StructType([StructField("topic", StringType()), StructField("value", StringType()),
                         StructField("partition", IntegerType())])
    batch = pa.RecordBatch.from_pydict({"topic": ["a", None], "value": ["x", "y"], "partition": [0, None]})
    groups = split_by_stream(batch, validate_write_schema(schema, "opt"), "opt")
    assert [(g[0], g[1], g[2].to_pylist(), g[3]) for g in groups] == [("opt", None, [b"x", b"y"], None)]
    with pytest.raises(VdlWriteError, match="null topic"):
        split_by_stream(batch, validate_write_schema(schema, None), None)
    two = pa.RecordBatch.from_pydict({"topic": ["a", "b", "a"], "value": ["x", "y", "z"], "partition": [0, 0, 0]})
    groups = split_by_stream(two, validate_write_schema(schema, None), None)
    assert sorted((g[0], g[2].to_pylist()) for g in groups) == [("a", [b"x", b"z"]), ("b", [b"y"])]
    bad = pa.RecordBatch.from_pydict({"topic": ["a"], "value": ["x"], "partition": pa.array([1], pa.int32())})
    with pytest.raises(VdlWriteError, match="'partition' must be null or 0"):
        split_by_stream(bad, validate_write_schema(schema, None), None)

"""Broker-side compression.type and message.timestamp.type=LogAppendTime, as Kafka serves them,
on a real broker with real clients: streams created with each compression.type (confluent-kafka's
and kafka-python's admin), produced to by confluent-kafka with another codec, read back by
kafka-python and kcat record for record, and the stored batches' codec seen in a raw Fetch; an
idempotent retry of a recompressed batch deduplicated; an alter applying to later batches; and
LogAppendTime stamped on batches, seen by confluent-kafka and kafka-python consumers and in the
Produce response (a retry's: its original's); a batch its producer marked LogAppendTime checked
and stored as Kafka's LogValidator does."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.support.cluster import BrokerProcess, start_broker
from tests.support.kafka import fetch_raw, produce_request, raw_request, stored_batches
from tests.support.waiting import wait_until
from vdl_wire.errors import ErrorCode
from vdl_wire.records.compression import Compression
from vdl_wire.records.record_batch import RecordBatchBuilder, iter_batches, read_records

pytestmark = pytest.mark.timeout(180)

N = 1000
DEADLINE_S = 60.0
Row = tuple[int, bytes, bytes, list[tuple[str, bytes]]]
CODECS = {"uncompressed": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
          "lz4": Compression.LZ4, "zstd": Compression.ZSTD}
# The codec confluent-kafka produces with to a stream of each compression.type: always another one.
PRODUCED_WITH = {"uncompressed": "zstd", "gzip": "lz4", "snappy": "gzip", "lz4": "none", "zstd": "snappy"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("compression"), auto_create_streams=False)
    yield broker
    broker.kill()


def expected_rows(stream: str) -> list[Row]:
    return [(i, f"key-{i}".encode(), f"{stream}:{i}:".encode() + b"v" * (i % 97),
             [("seq", str(i).encode()), ("src", stream.encode())]) for i in range(N)]


def create_confluent(bootstrap: str, stream: str, config: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.create_topics([NewTopic(stream, 1, 1, config=config)]).values()
    future.result(timeout=30)


def create_kafka_python(bootstrap: str, stream: str, config: dict[str, str]) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(stream, 1, 1, topic_configs=config)])
    finally:
        admin.close()


def produce_confluent(bootstrap: str, stream: str, codec: str, rows: list[Row]) -> list[object]:
    """Every row produced idempotently, in batches of up to 8 KiB with five in flight (so the
    leader recompresses pipelined batches, which must append in their order); the delivered messages."""
    import confluent_kafka

    errors: list[object] = []
    delivered: list[object] = []
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                                         "linger.ms": 20, "batch.size": 8192, "enable.idempotence": True,
                                         "max.in.flight.requests.per.connection": 5})
    for _, key, value, headers in rows:
        producer.produce(stream, key=key, value=value, headers=headers,
                         on_delivery=lambda err, msg: errors.append(err) if err else delivered.append(msg))
    assert producer.flush(DEADLINE_S) == 0
    assert not errors, errors[:3]
    return delivered


def consume_kafka_python(bootstrap: str, stream: str, count: int) -> list[tuple[Row, int, int]]:
    """(row, timestamp type, timestamp) of the first `count` records."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    partition = TopicPartition(stream, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    got: list[tuple[Row, int, int]] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < count and time.monotonic() < deadline:
        for messages in consumer.poll(timeout_ms=200).values():
            got += [((m.offset, m.key, m.value, list(m.headers)), m.timestamp_type, m.timestamp) for m in messages]
    consumer.close()
    return got


def consume_confluent(bootstrap: str, stream: str, count: int) -> list[tuple[Row, int, int]]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"{stream}-reader",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(stream, 0, confluent_kafka.OFFSET_BEGINNING)])
    got: list[tuple[Row, int, int]] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < count and time.monotonic() < deadline:
        for message in consumer.consume(num_messages=1000, timeout=0.2):
            assert message.error() is None, message.error()
            kind, timestamp = message.timestamp()
            got.append(((message.offset(), message.key(), message.value(), list(message.headers() or [])),
                        kind, timestamp))
    consumer.close()
    return got


def consume_kcat(bootstrap: str, stream: str) -> list[Row]:
    # -e: to the partition's end, which kcat learns from an empty fetch: 10 ms for the broker to
    # hold it rather than fetch.wait.max.ms's 500 (each run waited that out).
    process = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", stream, "-p", "0", "-o", "beginning", "-e", "-q",
                              "-X", "fetch.wait.max.ms=10", "-f", "%o\t%k\t%s\t%h\n"],
                             capture_output=True, timeout=DEADLINE_S)
    assert process.returncode == 0, process.stderr
    rows: list[Row] = []
    for line in process.stdout.splitlines():
        offset, key, value, headers = line.split(b"\t")
        pairs = [h.split(b"=", 1) for h in headers.split(b",")] if headers else []
        rows.append((int(offset), key, value, [(k.decode(), v) for k, v in pairs]))
    return rows


def describe(bootstrap: str, stream: str) -> dict[str, tuple[str | None, int]]:
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.describe_configs([ConfigResource("topic", stream)]).values()
    return {name: (entry.value, int(entry.source)) for name, entry in future.result(timeout=30).items()}


@pytest.mark.parametrize("compression", list(CODECS))
def test_a_stream_stores_every_batch_with_its_compression_type(broker: BrokerProcess, compression: str) -> None:
    stream = f"codec-{compression}"
    create = create_kafka_python if compression in ("gzip", "zstd") else create_confluent
    create(broker.bootstrap, stream, {"compression.type": compression})
    assert describe(broker.bootstrap, stream)["compression.type"] == (compression, 1)  # DYNAMIC_TOPIC_CONFIG
    rows = expected_rows(stream)
    produce_confluent(broker.bootstrap, stream, PRODUCED_WITH[compression], rows)

    assert [row for row, _, _ in consume_kafka_python(broker.bootstrap, stream, N)] == rows
    assert consume_kcat(broker.bootstrap, stream) == rows
    assert {codec for _, codec, _, _ in stored_batches(broker.bootstrap, stream)} == {CODECS[compression]}


def test_producer_stream_keeps_the_producers_codec(broker: BrokerProcess) -> None:
    stream = "codec-producer"
    create_confluent(broker.bootstrap, stream, {})
    rows = expected_rows(stream)
    produce_confluent(broker.bootstrap, stream, "snappy", rows)
    assert consume_kcat(broker.bootstrap, stream) == rows
    assert {codec for _, codec, _, _ in stored_batches(broker.bootstrap, stream)} == {Compression.SNAPPY}


def produce_batch(bootstrap: str, stream: str, batch: bytes) -> tuple[int, int, int]:
    """(error code, base offset, log append time) of one Produce of `batch`."""
    response = raw_request(bootstrap, produce_request(stream, batch))
    result = response.responses[0].partition_responses[0]
    return int(result.error_code), int(result.base_offset), int(result.log_append_time_ms)


def idempotent_batch(codec: Compression, sequence: int, values: list[bytes]) -> bytes:
    builder = RecordBatchBuilder(codec, producer_id=777_000, producer_epoch=0, base_sequence=sequence)
    for value in values:
        builder.append(1_700_000_000_000, b"k", value, [("h", value)])
    return builder.build()


def test_a_retried_idempotent_batch_is_deduplicated_after_recompression(broker: BrokerProcess) -> None:
    stream = "codec-retry"
    create_confluent(broker.bootstrap, stream, {"compression.type": "gzip"})
    first = idempotent_batch(Compression.SNAPPY, 0, [b"a", b"b", b"c"])
    assert produce_batch(broker.bootstrap, stream, first) == (0, 0, -1)
    assert produce_batch(broker.bootstrap, stream, first) == (0, 0, -1)  # the retry: its original's offset
    second = idempotent_batch(Compression.SNAPPY, 3, [b"d"])
    assert produce_batch(broker.bootstrap, stream, second) == (0, 3, -1)
    assert produce_batch(broker.bootstrap, stream, first)[0] == 0  # an older duplicate, still answered
    _, high_watermark, records = fetch_raw(broker.bootstrap, stream, 0)
    assert high_watermark == 4
    stored = list(iter_batches(records))
    assert [(h.base_offset, h.compression, h.producer_id, h.producer_epoch, h.base_sequence, h.record_count)
            for h, _ in stored] == [(0, Compression.GZIP, 777_000, 0, 0, 3), (3, Compression.GZIP, 777_000, 0, 3, 1)]
    assert [(r.offset, r.key, r.value, r.headers) for _, b in stored for r in read_records(b)] == [
        (0, b"k", b"a", [("h", b"a")]), (1, b"k", b"b", [("h", b"b")]), (2, b"k", b"c", [("h", b"c")]),
        (3, b"k", b"d", [("h", b"d")])]


def test_an_alter_applies_to_later_batches(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    stream = "codec-altered"
    create_confluent(broker.bootstrap, stream, {})
    rows = expected_rows(stream)
    produce_confluent(broker.bootstrap, stream, "lz4", rows[:200])
    assert {codec for _, codec, _, _ in stored_batches(broker.bootstrap, stream)} == {Compression.LZ4}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entries = [ConfigEntry("compression.type", "zstd", incremental_operation=AlterConfigOpType.SET),
               ConfigEntry("compression.zstd.level", "19", incremental_operation=AlterConfigOpType.SET)]
    [future] = admin.incremental_alter_configs([ConfigResource("topic", stream, incremental_configs=entries)]).values()
    future.result(timeout=30)
    described = describe(broker.bootstrap, stream)
    assert (described["compression.type"], described["compression.zstd.level"]) == (("zstd", 1), ("19", 1))
    tail = [(offset - 200, key, value, headers) for offset, key, value, headers in rows[200:]]
    produce_confluent(broker.bootstrap, stream, "lz4", tail)
    assert consume_kcat(broker.bootstrap, stream) == rows
    batches = stored_batches(broker.bootstrap, stream)
    assert {codec for base, codec, _, _ in batches if base < 200} == {Compression.LZ4}
    assert {codec for base, codec, _, _ in batches if base >= 200} == {Compression.ZSTD}


def test_log_append_time_stamps_each_batch(broker: BrokerProcess) -> None:
    stream = "log-append-time"
    create_confluent(broker.bootstrap, stream, {"message.timestamp.type": "LogAppendTime", "compression.type": "lz4"})
    assert describe(broker.bootstrap, stream)["message.timestamp.type"] == ("LogAppendTime", 1)
    # CreateTimes a day ahead: KIP-937's bound (message.timestamp.after.max.ms, 1 hour) is CreateTime's only.
    ahead = int(time.time() * 1000) + 86_400_000
    builder = RecordBatchBuilder(Compression.GZIP)
    for i in range(3):
        builder.append(ahead + i, b"k%d" % i, b"v%d" % i)
    before = int(time.time() * 1000)
    error, base_offset, append_time = produce_batch(broker.bootstrap, stream, builder.build())
    after = int(time.time() * 1000)
    assert (error, base_offset) == (0, 0)
    assert before <= append_time <= after

    import confluent_kafka

    rows = [(3 + i, b"key-%d" % i, b"value-%d" % i, [("h", b"%d" % i)]) for i in range(5)]
    before_confluent = int(time.time() * 1000)
    delivered = produce_confluent(broker.bootstrap, stream, "snappy", rows)
    after_confluent = int(time.time() * 1000)
    # librdkafka takes the Produce response's log_append_time_ms for its delivery reports.
    stamp_of = {msg.offset(): msg.timestamp() for msg in delivered}  # type: ignore[attr-defined]
    assert sorted(stamp_of) == [3, 4, 5, 6, 7]
    assert {kind for kind, _ in stamp_of.values()} == {confluent_kafka.TIMESTAMP_LOG_APPEND_TIME}
    assert all(before_confluent <= stamp <= after_confluent for _, stamp in stamp_of.values())

    expected = [((i, b"k%d" % i, b"v%d" % i, []), 1, append_time) for i in range(3)]
    expected += [(row, 1, stamp_of[row[0]][1]) for row in rows]
    assert consume_kafka_python(broker.bootstrap, stream, 8) == expected
    assert consume_confluent(broker.bootstrap, stream, 8) == [
        (row, confluent_kafka.TIMESTAMP_LOG_APPEND_TIME, stamp) for row, _, stamp in expected]
    batches = stored_batches(broker.bootstrap, stream)
    assert batches[0] == (0, Compression.LZ4, 1, append_time)
    assert [(codec, kind, stamp) for base, codec, kind, stamp in batches[1:]] == [
        (Compression.LZ4, 1, stamp_of[base][1]) for base, *_ in batches[1:]]


def produce_errors(bootstrap: str, stream: str, batch: bytes) -> tuple[int, str | None, list[tuple[int, str]]]:
    """(error code, message, record errors as (index, message)) of one refused Produce of `batch`."""
    result = raw_request(bootstrap, produce_request(stream, batch)).responses[0].partition_responses[0]
    return (int(result.error_code), result.error_message,
            [(e.batch_index, e.batch_index_error_message) for e in result.record_errors])


def test_a_retried_batch_answers_its_original_append_time(broker: BrokerProcess) -> None:
    """Kafka keeps each batch's max timestamp with the producer's state and answers an idempotent
    retry with it: on a LogAppendTime stream, the time the original was stamped with."""
    stream = "log-append-time-retry"
    create_confluent(broker.bootstrap, stream, {"message.timestamp.type": "LogAppendTime"})
    first = idempotent_batch(Compression.NONE, 0, [b"a", b"b"])
    error, base_offset, stamped = produce_batch(broker.bootstrap, stream, first)
    assert (error, base_offset) == (0, 0) and stamped > 0
    wait_until(lambda: int(time.time() * 1000) > stamped, timeout=5, message="the clock to pass the append time")
    assert produce_batch(broker.bootstrap, stream, first) == (0, 0, stamped)  # the retry: the original's time
    error, base_offset, second_stamp = produce_batch(broker.bootstrap, stream, idempotent_batch(Compression.NONE, 2,
                                                                                                [b"c"]))
    assert (error, base_offset) == (0, 2) and second_stamp > stamped
    assert produce_batch(broker.bootstrap, stream, first) == (0, 0, stamped)  # an older one of the five kept
    assert stored_batches(broker.bootstrap, stream) == [(0, Compression.NONE, 1, stamped),
                                                        (2, Compression.NONE, 1, second_stamp)]


def marked_batch(timestamps: list[int], codec: Compression = Compression.NONE) -> bytes:
    """A batch its producer marked LogAppendTime (the timestamp-type bit), records k<i>/v<i>."""
    builder = RecordBatchBuilder(codec, log_append_time=True)
    for i, timestamp in enumerate(timestamps):
        builder.append(timestamp, b"k%d" % i, b"v%d" % i)
    return builder.build()


def test_a_create_time_stream_stores_a_batch_marked_log_append_time_as_create_time(broker: BrokerProcess) -> None:
    """Kafka's LogValidator: every record of a batch marked LogAppendTime reads its max timestamp;
    on a CreateTime stream that is checked against message.timestamp.*.max.ms and the batch is
    stored as CreateTime with its max timestamp; a max timestamp of -1 is refused."""
    stream = "create-time-marked"
    create_confluent(broker.bootstrap, stream, {})
    now = int(time.time() * 1000)
    assert produce_batch(broker.bootstrap, stream, marked_batch([now - 20, now - 10])) == (0, 0, -1)
    assert stored_batches(broker.bootstrap, stream) == [(0, Compression.NONE, 0, now - 10)]
    assert consume_kafka_python(broker.bootstrap, stream, 2) == [
        ((0, b"k0", b"v0", []), 0, now - 20), ((1, b"k1", b"v1", []), 0, now - 10)]

    ahead = now + 86_400_000  # the max timestamp every record reads is past the 1-hour bound
    refused = produce_errors(broker.bootstrap, stream, marked_batch([now, ahead]))
    assert refused[:2] == (ErrorCode.INVALID_TIMESTAMP,
                           "One or more records have been rejected due to invalid timestamp")
    assert [index for index, _ in refused[2]] == [0, 1]
    assert [message.split(" of message")[0] for _, message in refused[2]] == [f"Timestamp {ahead}"] * 2
    assert [message.split(" is out of range")[0].split("offset ")[1] for _, message in refused[2]] == ["0", "1"]

    assert produce_errors(broker.bootstrap, stream, marked_batch([-1, -1], Compression.GZIP)) == (
        ErrorCode.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp",
        [(i, f"Invalid timestamp type in message PartialDefaultRecord(offset={i}, timestamp=-1, key=2 bytes, "
             "value=2 bytes). Producer should not set timestamp type to LogAppendTime.") for i in range(2)])
    assert stored_batches(broker.bootstrap, stream) == [(0, Compression.NONE, 0, now - 10)]


def test_a_log_append_time_stream_refuses_a_batch_marked_log_append_time(broker: BrokerProcess) -> None:
    """Kafka's LogValidator: on a LogAppendTime stream the producer may not set the type itself."""
    stream = "log-append-time-marked"
    create_confluent(broker.bootstrap, stream, {"message.timestamp.type": "LogAppendTime"})
    now = int(time.time() * 1000)
    assert produce_errors(broker.bootstrap, stream, marked_batch([now, now + 1])) == (
        ErrorCode.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp",
        [(i, f"Invalid timestamp type in message DefaultRecord(offset={i}, timestamp={now + 1}, key=2 bytes, "
             "value=2 bytes). Producer should not set timestamp type to LogAppendTime.") for i in range(2)])
    assert fetch_raw(broker.bootstrap, stream, 0) == (0, 0, b"")


def test_create_time_stays_the_default_and_answers_no_append_time(broker: BrokerProcess) -> None:
    stream = "create-time"
    create_confluent(broker.bootstrap, stream, {})
    assert describe(broker.bootstrap, stream)["message.timestamp.type"] == ("CreateTime", 5)
    builder = RecordBatchBuilder()
    builder.append(1_700_000_000_000, b"k", b"v")
    assert produce_batch(broker.bootstrap, stream, builder.build()) == (0, 0, -1)
    assert stored_batches(broker.bootstrap, stream) == [(0, Compression.NONE, 0, 1_700_000_000_000)]


def test_the_nodes_compression_type_is_the_default_of_streams(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Kafka's broker compression.type: node setting `compression_type` (--compression-type),
    described as STATIC_BROKER_CONFIG; a stream's own value wins."""
    node = start_broker(tmp_path_factory.mktemp("zstd-node"), auto_create_streams=False, compression_type="zstd")
    try:
        create_confluent(node.bootstrap, "node-default", {})
        create_confluent(node.bootstrap, "own-value", {"compression.type": "producer"})
        assert describe(node.bootstrap, "node-default")["compression.type"] == ("zstd", 4)
        assert describe(node.bootstrap, "own-value")["compression.type"] == ("producer", 1)
        from confluent_kafka.admin import AdminClient, ConfigResource

        admin = AdminClient({"bootstrap.servers": node.bootstrap})  # held: a collected client cancels its futures
        [future] = admin.describe_configs([ConfigResource("broker", "1")]).values()
        entry = future.result(timeout=30)["compression.type"]
        assert (entry.value, int(entry.source), entry.is_read_only) == ("zstd", 4, True)
        for stream, stored in (("node-default", Compression.ZSTD), ("own-value", Compression.SNAPPY)):
            rows = expected_rows(stream)[:50]
            produce_confluent(node.bootstrap, stream, "snappy", rows)
            assert consume_kcat(node.bootstrap, stream) == rows
            assert {codec for _, codec, _, _ in stored_batches(node.bootstrap, stream)} == {stored}
    finally:
        node.kill()

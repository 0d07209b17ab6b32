"""Producing and consuming with real Kafka clients, and expected DataFrames in the source schema."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from vdl_client import ClientSettings, VdlClient
from vdl_connector.schema import read_schema

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclass(frozen=True)
class Produced:
    topic: str
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes | None], ...]


def admin(bootstrap: str) -> VdlClient:
    return VdlClient(ClientSettings.from_bootstrap(bootstrap, deadline_ms=20_000))


def create_streams(bootstrap: str, *names: str) -> None:
    with admin(bootstrap) as client:
        client.create_streams(names)


def record(i: int, tag: str, with_headers: bool = True, null_header: bool = True) -> tuple[bytes | None, bytes, int, list]:
    key = None if i % 5 == 0 else f"key-{tag}-{i}".encode()
    value = (f"value-{tag}-{i}-".encode() * (1 + i % 7)) + bytes([i % 256])
    timestamp = 1_700_000_000_000 + i * 17
    # kafka-python refuses null header values; confluent-kafka sends them
    last = ("none", None) if null_header else ("bytes", bytes(range(3)))
    headers = [("h", f"{i}".encode()), ("empty", b""), last] if with_headers and i % 3 == 0 else []
    return key, value, timestamp, headers


def produce_kafka_python(bootstrap: str, topic: str, count: int, codec: str, tag: str,
                         with_headers: bool = True) -> list[Produced]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                             linger_ms=20, batch_size=4096, acks="all")
    futures = []
    for i in range(count):
        key, value, ts, headers = record(i, tag, with_headers, null_header=False)
        future = producer.send(topic, key=key, value=value, timestamp_ms=ts, partition=0,
                               headers=[(k, v) for k, v in headers])
        futures.append((future, key, value, ts, headers))
    producer.flush()
    result = [Produced(topic, f.get(timeout=30).offset, k, v, ts, tuple(h)) for f, k, v, ts, h in futures]
    producer.close()
    return result


def produce_confluent(bootstrap: str, topic: str, count: int, codec: str, tag: str,
                      with_headers: bool = True) -> list[Produced]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "compression.codec": codec, "linger.ms": 20,
                         "enable.idempotence": True, "acks": "all", "batch.num.messages": 50})
    delivered: dict[int, int] = {}

    def on_delivery(error, message, i: int) -> None:  # noqa: ANN001
        assert error is None, error
        delivered[i] = message.offset()

    rows = []
    for i in range(count):
        key, value, ts, headers = record(i, tag, with_headers)
        producer.produce(topic, value=value, key=key, partition=0, timestamp=ts, headers=headers or None,
                         on_delivery=lambda e, m, i=i: on_delivery(e, m, i))
        rows.append((i, key, value, ts, headers))
        producer.poll(0)
    assert producer.flush(30) == 0
    return [Produced(topic, delivered[i], k, v, ts, tuple(h)) for i, k, v, ts, h in rows]


def expected_df(spark, produced: list[Produced], include_headers: bool = True):  # noqa: ANN001, ANN201
    rows = []
    for p in sorted(produced, key=lambda p: (p.topic, p.offset)):
        row = [p.key, p.value, p.topic, 0, p.offset, datetime.fromtimestamp(p.timestamp_ms / 1000, UTC), 0]
        if include_headers:
            row.append([(k, v) for k, v in p.headers] or None)
        rows.append(tuple(row))
    return spark.createDataFrame(rows, read_schema(include_headers))


def consume_all(bootstrap: str, topic: str, expected_count: int, timeout_s: float = 30) -> list:
    """Read a stream back with kafka-python from offset 0 (ConsumerRecords)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             auto_offset_reset="earliest")
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    records = []
    deadline = time.monotonic() + timeout_s
    while len(records) < expected_count and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            records.extend(batch)
    # one more short poll: anything beyond the expected count is a duplicate
    for batch in consumer.poll(timeout_ms=300).values():
        records.extend(batch)
    consumer.close()
    return records


def high_watermark(bootstrap: str, stream: str) -> int:
    """The stream's high watermark, as confluent-kafka reads it."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "tests-hw"})
    try:
        return int(consumer.get_watermark_offsets(confluent_kafka.TopicPartition(stream, 0), timeout=30)[1])
    finally:
        consumer.close()


def query_failure(query) -> str | None:  # noqa: ANN001 - a pyspark StreamingQuery
    """The query's error followed by each of its Java causes, or None if it has not failed: Spark's
    own message names only the outermost error ("Python worker failed to connect back."), and
    what went wrong underneath is only in the causes."""
    error = query.exception()
    if error is None:
        return None
    lines = [str(error).splitlines()[0]]
    cause = getattr(error, "_cause", None)  # pyspark keeps the converted Java cause chain here
    while cause is not None:
        text = str(cause)
        lines.append(f"caused by: {text.splitlines()[0] if text else type(cause).__name__}")
        cause = getattr(cause, "_cause", None)
    return "\n".join(lines)

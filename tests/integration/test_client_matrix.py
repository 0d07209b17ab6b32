"""kafka-python, confluent-kafka and aiokafka each produce N records with keys and headers per
compression codec; each of them and kcat consumes every stream: same bytes, same order, offsets
0..N-1 without gaps."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.support.cluster import BrokerProcess, start_broker

N = int(os.environ.get("VDL_TEST_RECORDS", "10000"))
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PRODUCERS = ("kafkapython", "confluent", "aiokafka")
STREAMS = [f"{producer}-{codec}" for producer in PRODUCERS for codec in CODECS]
DEADLINE_S = 60.0

Row = tuple[int, bytes, bytes, list[tuple[str, bytes]]]


def expected_rows(stream: str) -> list[Row]:
    # Values of varying size (some compress, some do not) with the stream name in them.
    return [(i, f"key-{i}".encode(), f"{stream}:{i}:".encode() + b"v" * (i % 97),
             [("seq", str(i).encode()), ("src", stream.encode())]) for i in range(N)]


def produce_kafka_python(bootstrap: str, stream: str, codec: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                             linger_ms=5, batch_size=64 * 1024, acks="all")
    for _, key, value, headers in expected_rows(stream):
        producer.send(stream, key=key, value=value, headers=headers)
    producer.flush(timeout=DEADLINE_S)
    producer.close()


def produce_confluent(bootstrap: str, stream: str, codec: str) -> None:
    import confluent_kafka

    errors: list[object] = []
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                                         "linger.ms": 5, "enable.idempotence": True})
    for _, key, value, headers in expected_rows(stream):
        while True:
            try:
                producer.produce(stream, key=key, value=value, headers=headers,
                                 on_delivery=lambda err, msg: err and errors.append(err))
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(DEADLINE_S) == 0
    assert not errors, errors[:3]


def produce_aiokafka(bootstrap: str, stream: str, codec: str) -> None:
    import aiokafka

    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all",
                                             compression_type=None if codec == "none" else codec)
        await producer.start()
        try:
            futures = [await producer.send(stream, key=key, value=value, headers=headers)
                       for _, key, value, headers in expected_rows(stream)]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(run())


PRODUCE = {"kafkapython": produce_kafka_python, "confluent": produce_confluent, "aiokafka": produce_aiokafka}


def consume_kafka_python(bootstrap: str) -> dict[str, list[Row]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, max_poll_records=5000,
                             fetch_max_bytes=16 << 20, max_partition_fetch_bytes=4 << 20)
    partitions = [TopicPartition(stream, 0) for stream in STREAMS]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    rows: dict[str, list[Row]] = {stream: [] for stream in STREAMS}
    deadline = time.monotonic() + DEADLINE_S
    while sum(map(len, rows.values())) < N * len(STREAMS) and time.monotonic() < deadline:
        for tp, messages in consumer.poll(timeout_ms=200).items():
            rows[tp.topic] += [(m.offset, m.key, m.value, list(m.headers)) for m in messages]
    consumer.close()
    return rows


def consume_confluent(bootstrap: str) -> dict[str, list[Row]]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "matrix-confluent",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(stream, 0, confluent_kafka.OFFSET_BEGINNING)
                     for stream in STREAMS])
    rows: dict[str, list[Row]] = {stream: [] for stream in STREAMS}
    deadline = time.monotonic() + DEADLINE_S
    while sum(map(len, rows.values())) < N * len(STREAMS) and time.monotonic() < deadline:
        for message in consumer.consume(num_messages=10000, timeout=0.2):
            assert message.error() is None, message.error()
            headers = [(k, v) for k, v in (message.headers() or [])]
            rows[message.topic()].append((message.offset(), message.key(), message.value(), headers))
    consumer.close()
    return rows


def consume_aiokafka(bootstrap: str) -> dict[str, list[Row]]:
    import aiokafka
    from aiokafka import TopicPartition

    async def run() -> dict[str, list[Row]]:
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                             max_partition_fetch_bytes=4 << 20, fetch_max_bytes=16 << 20)
        await consumer.start()
        rows: dict[str, list[Row]] = {stream: [] for stream in STREAMS}
        try:
            partitions = [TopicPartition(stream, 0) for stream in STREAMS]
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            deadline = time.monotonic() + DEADLINE_S
            while sum(map(len, rows.values())) < N * len(STREAMS) and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=200, max_records=20000)
                for tp, messages in batch.items():
                    rows[tp.topic] += [(m.offset, m.key, m.value, list(m.headers)) for m in messages]
        finally:
            await consumer.stop()
        return rows

    return asyncio.run(run())


def consume_kcat(bootstrap: str) -> dict[str, list[Row]]:
    processes = {stream: subprocess.Popen(
        ["kcat", "-C", "-b", bootstrap, "-t", stream, "-p", "0", "-o", "beginning", "-e", "-q",
         "-f", "%o\t%k\t%s\t%h\n"], stdout=subprocess.PIPE, stderr=subprocess.PIPE) for stream in STREAMS}
    rows: dict[str, list[Row]] = {}
    for stream, process in processes.items():
        out, err = process.communicate(timeout=DEADLINE_S)
        assert process.returncode == 0, err
        parsed = []
        for line in out.splitlines():
            offset, key, value, headers = line.split(b"\t")
            pairs = [tuple(h.split(b"=", 1)) for h in headers.split(b",")] if headers else []
            parsed.append((int(offset), key, value, [(k.decode(), v) for k, v in pairs]))
        rows[stream] = parsed
    return rows


CONSUMERS = {"kafka-python": consume_kafka_python, "confluent-kafka": consume_confluent,
             "aiokafka": consume_aiokafka, "kcat": consume_kcat}


@pytest.fixture(scope="module")
def loaded_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("matrix"), auto_create_streams=True)
    try:
        for stream in STREAMS:
            producer, codec = stream.split("-")
            PRODUCE[producer](broker.bootstrap, stream, codec)
        yield broker
    finally:
        broker.kill()


@pytest.mark.parametrize("consumer", list(CONSUMERS))
def test_every_client_reads_what_every_client_wrote(loaded_broker: BrokerProcess, consumer: str) -> None:
    rows = CONSUMERS[consumer](loaded_broker.bootstrap)
    for stream in STREAMS:
        got = rows[stream]
        assert [r[0] for r in got] == list(range(N)), f"{consumer} reading {stream}: offsets not 0..{N - 1}"
        assert got == expected_rows(stream), f"{consumer} reading {stream}: records differ"

"""Transactions with real clients on a 3-node cluster: confluent-kafka's (librdkafka) and
kafka-python's transactional producers; read_committed and read_uncommitted readers see exactly
the records they should."""

from __future__ import annotations

import time
from collections.abc import Callable

from tests.support.cluster import DevCluster
from tests.support.kafka import make_batch
from vdl_client.client import VdlClient
from vdl_client.settings import ClientSettings

DEADLINE_S = 30


def admin(cluster: DevCluster) -> VdlClient:
    return VdlClient(ClientSettings.from_bootstrap(cluster.bootstrap_servers, deadline_ms=30_000))


def read_all(bootstrap: str, stream: str, isolation: str, expected_count: int) -> list[bytes]:
    """Every value of `stream` a confluent-kafka consumer with `isolation` reads, until it holds
    `expected_count` values and has reached the partition's end, or the deadline."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{stream}-{isolation}",
                                         "isolation.level": isolation, "enable.auto.commit": False,
                                         "enable.partition.eof": True})
    consumer.assign([confluent_kafka.TopicPartition(stream, 0, confluent_kafka.OFFSET_BEGINNING)])
    values: list[bytes] = []
    at_end = False
    deadline = time.monotonic() + DEADLINE_S
    try:
        while time.monotonic() < deadline and not (at_end and len(values) >= expected_count):
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                at_end = message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF
                continue
            at_end = False
            values.append(message.value())
    finally:
        consumer.close()
    return values


def confluent_transactions(bootstrap: str, stream: str, txn_id: str) -> None:
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                                         "linger.ms": 5})
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    for value in (b"c1", b"c2", b"c3"):
        producer.produce(stream, value)
    producer.commit_transaction(DEADLINE_S)
    producer.begin_transaction()
    for value in (b"a1", b"a2"):
        producer.produce(stream, value)
    producer.flush(DEADLINE_S)
    producer.abort_transaction(DEADLINE_S)
    producer.begin_transaction()
    producer.produce(stream, b"c4")
    producer.commit_transaction(DEADLINE_S)


def kafka_python_transactions(bootstrap: str, stream: str, txn_id: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for value in (b"c1", b"c2", b"c3"):
            producer.send(stream, value)
        producer.commit_transaction()
        producer.begin_transaction()
        for value in (b"a1", b"a2"):
            producer.send(stream, value)
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(stream, b"c4")
        producer.commit_transaction()
    finally:
        producer.close(timeout=5)


def check_commit_and_abort(cluster: DevCluster, stream: str, write: Callable[[str, str, str], None]) -> None:
    with admin(cluster) as c:
        c.create_stream(stream)
    write(cluster.bootstrap_servers, stream, f"{stream}-txn")
    assert read_all(cluster.bootstrap_servers, stream, "read_committed", 4) == [b"c1", b"c2", b"c3", b"c4"]
    assert read_all(cluster.bootstrap_servers, stream, "read_uncommitted", 6) == \
        [b"c1", b"c2", b"c3", b"a1", b"a2", b"c4"]


def test_confluent_kafka_commit_and_abort(cluster: DevCluster) -> None:
    check_commit_and_abort(cluster, "txn-confluent", confluent_transactions)


def test_kafka_python_commit_and_abort(cluster: DevCluster) -> None:
    check_commit_and_abort(cluster, "txn-kafkapython", kafka_python_transactions)


def test_an_open_transaction_holds_read_committed_back(cluster: DevCluster) -> None:
    import confluent_kafka

    with admin(cluster) as c:
        c.create_stream("txn-open")
        c.produce("txn-open", make_batch([b"before"]), 10_000, time.monotonic() + DEADLINE_S)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                         "transactional.id": "txn-open-1"})
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    producer.produce("txn-open", b"open")
    producer.flush(DEADLINE_S)
    # The open transaction's record is visible to read_uncommitted only.
    assert read_all(cluster.bootstrap_servers, "txn-open", "read_uncommitted", 2) == [b"before", b"open"]
    assert read_all(cluster.bootstrap_servers, "txn-open", "read_committed", 1) == [b"before"]
    producer.commit_transaction(DEADLINE_S)
    assert read_all(cluster.bootstrap_servers, "txn-open", "read_committed", 2) == [b"before", b"open"]

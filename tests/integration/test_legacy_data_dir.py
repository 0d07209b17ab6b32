"""A data directory written by VDL 0.1's single-node broker (tests/fixtures/v0.1-single-node:
streams `orders` and `clicks`, written by kafka-python with an idempotent producer, then a clean
stop) opens in today's broker, a cluster of one, and serves every record as it was stored."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.support.cluster import start_broker
from vdl_broker.cluster.metadata import METADATA_GROUP

pytestmark = pytest.mark.timeout(120)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "v0.1-single-node"
ORDERS = [(i, f"k{i % 3}".encode(), f"order-{i}".encode(), [("h", f"{i}".encode())], 1_700_000_000_000 + i)
          for i in range(30)]
CLICKS = [(i, None, f"click-{i}".encode(), [], 1_700_000_001_000 + i) for i in range(5)]


def read(bootstrap: str, stream: str, expected: int) -> list[tuple]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000)
    partition = TopicPartition(stream, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    records = []
    for message in consumer:
        records.append((message.offset, message.key, message.value, list(message.headers), message.timestamp))
        if len(records) == expected:
            break
    consumer.close()
    return records


@pytest.mark.parametrize("clean", [True, False], ids=["clean-stop", "killed"])
def test_a_single_node_directory_of_version_0_1_serves_its_records(tmp_path: Path, clean: bool) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(FIXTURE, data_dir)
    if not clean:  # as after kill -9: no clean-shutdown marker, the logs are recovered first
        for marker in data_dir.glob("*/.clean-shutdown"):
            marker.unlink()
    broker = start_broker(tmp_path)
    try:
        assert read(broker.bootstrap, "orders", 30) == ORDERS
        assert read(broker.bootstrap, "clicks", 5) == CLICKS
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        assert producer.send("orders", b"after", timestamp_ms=1_700_000_000_000).get(10).offset == 30
        producer.close()
        assert (data_dir / METADATA_GROUP).is_dir() and (data_dir / "orders" / "incarnation").is_file()
        assert broker.terminate() == 0
        broker.start()  # adopted once: the second start opens it as any stream of the cluster
        records = read(broker.bootstrap, "orders", 31)
        assert records[:30] == ORDERS and records[30][:3] == (30, None, b"after")
    finally:
        broker.kill()

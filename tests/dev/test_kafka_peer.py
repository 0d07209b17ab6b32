"""The Apache Kafka peer of the benchmarks (vdl_dev.kafka_peer): one node from the fetched jars
starts on a port of VDL_DEV_PORT_RANGE, serves a real client, runs with the durability it states,
and stops with nothing left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vdl_dev.dev_cluster import port_range
from vdl_dev.kafka_peer import FLUSH_EVERY_MESSAGE, KafkaPeer

pytestmark = pytest.mark.timeout(240)


def test_one_node_starts_serves_and_stops(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    peer = KafkaPeer(1, tmp_path / "kafka", flush_every_message=True)
    try:
        peer.start()
        [node] = peer.nodes.values()
        low, high = port_range()
        assert low <= node.client_port < high and low <= node.controller_port < high
        assert (tmp_path / "kafka" / "node1" / "data" / "meta.properties").is_file()

        admin = AdminClient({"bootstrap.servers": peer.bootstrap_servers})
        admin.create_topics([NewTopic("per-topic-flush", 1, 1, config=FLUSH_EVERY_MESSAGE)])["per-topic-flush"].result(30)
        broker = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1")])
        configs = next(iter(broker.values())).result(30)
        assert configs["log.flush.interval.messages"].value == "1"
        topic = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "per-topic-flush")])
        assert next(iter(topic.values())).result(30)["flush.messages"].value == "1"

        producer = Producer({"bootstrap.servers": peer.bootstrap_servers, "acks": "all"})
        values = [b"record-%d" % i for i in range(100)]
        for value in values:
            producer.produce("per-topic-flush", value, key=value[-2:])
        assert producer.flush(30) == 0

        consumer = Consumer({"bootstrap.servers": peer.bootstrap_servers, "group.id": "peer-test",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition("per-topic-flush", 0, 0)])
        got: list[tuple[int, bytes]] = []
        while len(got) < len(values):
            message = consumer.poll(30)
            assert message is not None, f"only {len(got)} records came back"
            assert message.error() is None, message.error()
            got.append((message.offset(), message.value()))
        consumer.close()
        assert got == list(enumerate(values))
    finally:
        pids = peer.pids()
        peer.stop_all()
    assert pids and not any(_alive(pid) for pid in pids)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True

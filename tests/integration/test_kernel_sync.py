"""Nodes with fsync on (as `vdl dev-cluster` and a deployment run them; the suite's other
clusters turn it off) sync their logs through the kernel's AIO (vdl_broker/log/aio_sync.py):
each says so when it starts, and a 3-node cluster's acknowledged records, written by an
idempotent confluent-kafka producer across a kill -9 of the stream's leader, are all there, once
and in order, after every node has been stopped and started again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support.cluster import start_cluster, wait_until
from vdl_client import ClientSettings, VdlClient

pytestmark = pytest.mark.timeout(120)

KERNEL_SYNC = "fdatasync through the kernel's AIO"
THREAD_SYNC = "fdatasync runs on worker threads"


def test_fsync_on_syncs_through_the_kernel_and_keeps_every_acknowledged_record(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    cluster = start_cluster(tmp_path, 3, settings={"fsync": True, "log_level": "INFO"},
                            register=lambda c: request.addfinalizer(c.kill_all))
    for node in cluster.nodes.values():
        said = [line for line in list(node.output) if KERNEL_SYNC in line or THREAD_SYNC in line]
        if said and THREAD_SYNC in said[0]:
            pytest.skip(f"this machine's kernel cannot sync through AIO: {said[0]}")
        assert said and KERNEL_SYNC in said[0], list(node.output)

    with VdlClient(ClientSettings(tuple(cluster.bootstrap_servers.split(",")))) as client:
        client.create_stream("synced", 3)
        leader = client.leader_of("synced")
    values = [f"synced-{i:04d}".encode() for i in range(300)]
    delivered: list[tuple[bytes, int]] = []
    failed: list[str] = []

    def report(error: object, message: object) -> None:
        if error is not None:
            failed.append(str(error))
        else:
            delivered.append((message.value(), message.offset()))  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 2, "topic.metadata.refresh.interval.ms": 500})
    for i, value in enumerate(values):
        producer.produce("synced", value, partition=0, on_delivery=report)
        if i == 100:
            assert producer.flush(30) == 0
            cluster.kill(leader)  # batches after it go to the next leader
    assert producer.flush(60) == 0
    del producer  # no reconnecting to the nodes while they restart
    assert failed == []
    assert sorted(delivered, key=lambda d: d[1]) == delivered == [(v, i) for i, v in enumerate(values)]

    cluster.stop_all()
    cluster.start()
    cluster.wait_for_brokers(timeout_s=60)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "synced-reader",
                         "enable.auto.commit": False})
    read: list[tuple[bytes, int]] = []
    try:
        consumer.assign([TopicPartition("synced", 0, 0)])

        def read_some() -> bool:
            read.extend((m.value(), m.offset()) for m in consumer.consume(len(values), 0.5) if m.error() is None)
            return len(read) >= len(values)

        wait_until(read_some, 60, "every acknowledged record read back")
    finally:
        consumer.close()
    assert read == delivered

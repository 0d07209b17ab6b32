"""Process tests: real clients across a leader change, and the cluster's Kafka face
(admin through any node, Metadata, NOT_LEADER_OR_FOLLOWER at followers).

One 3-node dev cluster for the module.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from typing import IO

import pytest

from tests.faults.harness import (
    VDL_CLI,
    ProbeLog,
    create_stream,
    create_topic_raw,
    delete_topic_raw,
    fetch_at_leader,
    fetch_raw,
    metadata_raw,
    node_address,
    one_record_batch,
    partition_view,
    probe_write,
    produce_raw,
    stream_directory,
    wait_for_full_isr,
    wait_until,
)
from vdl_dev.dev_cluster import DevCluster
from vdl_wire.errors import ErrorCode

pytestmark = pytest.mark.timeout(120)

PER_CLIENT = 20


class LineReader(threading.Thread):
    """Collects the lines a subprocess prints (kcat's consumer output)."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__(daemon=True)
        self.source = stream
        self.lines: list[bytes] = []
        self.lock = threading.Lock()

    def run(self) -> None:
        for line in self.source:
            with self.lock:
                self.lines.append(line.rstrip(b"\n"))

    def snapshot(self) -> list[bytes]:
        with self.lock:
            return list(self.lines)


def values_only(records: list[bytes | None]) -> list[bytes | None]:
    """Drop the harness's probe writes (the leader probes), keep client records in log order."""
    return [v for v in records if v is None or not v.startswith(b"probe-")]


def test_clients_keep_working_across_leader_change(cluster: DevCluster, probes: ProbeLog) -> None:
    import confluent_kafka
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    stream = "clients"
    create_stream(cluster, stream, via=1, probes=probes)
    wait_for_full_isr(cluster, stream)
    bootstrap = cluster.bootstrap_servers

    kp_producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), metadata_max_age_ms=1000)
    kp_consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=None, enable_auto_commit=False,
                                fetch_max_wait_ms=100, metadata_max_age_ms=1000)
    kp_consumer.assign([TopicPartition(stream, 0)])
    kp_consumer.seek(TopicPartition(stream, 0), 0)
    ck_producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": -1,
                                            "topic.metadata.refresh.interval.ms": 1000})
    ck_consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "fault-clients",
                                            "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                                            "topic.metadata.refresh.interval.ms": 1000})
    ck_consumer.assign([confluent_kafka.TopicPartition(stream, 0, 0)])
    kcat_out = subprocess.Popen(["kcat", "-C", "-b", bootstrap, "-t", stream, "-p", "0", "-o", "beginning",
                                 "-q", "-u", "-f", "%o %s\\n"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    assert kcat_out.stdout is not None
    kcat_lines = LineReader(kcat_out.stdout)
    kcat_lines.start()
    kp_seen: list[tuple[int, bytes | None]] = []
    ck_seen: list[tuple[int, bytes | None]] = []
    expected: list[bytes] = []
    failures: list[str] = []

    def produce_phase(phase: str) -> None:
        kp_values = [f"kp-{phase}-{i}".encode() for i in range(PER_CLIENT)]
        futures = [kp_producer.send(stream, value=value, partition=0) for value in kp_values]
        kp_producer.flush(60)
        for future in futures:
            future.get(0)  # raises the delivery error, if any
        ck_values = [f"ck-{phase}-{i}".encode() for i in range(PER_CLIENT)]
        for value in ck_values:
            ck_producer.produce(stream, value, partition=0,
                                on_delivery=lambda err, msg: err is not None and failures.append(str(err)))
        assert ck_producer.flush(60) == 0
        kc_values = [f"kcat-{phase}-{i}".encode() for i in range(PER_CLIENT)]
        # kcat -P reads its input to the end before it sends: one process per phase (it exits
        # non-zero when a delivery fails); the kcat consumer runs across the leader change.
        result = subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", stream, "-p", "0", "-X", "acks=all"],
                                input=b"".join(v + b"\n" for v in kc_values), capture_output=True, timeout=60)
        assert result.returncode == 0, result.stderr[-500:]
        expected.extend(kp_values + ck_values)
        wait_until(lambda: all(v in set(consumed_values(kcat_lines)) for v in kc_values), 60,
                   f"kcat's {phase} records coming back")
        expected.extend(kc_values)

    def drain(until: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 60
        while not until():
            assert time.monotonic() < deadline, "consumers did not catch up"
            for records in kp_consumer.poll(timeout_ms=50).values():
                kp_seen.extend((r.offset, r.value) for r in records)
            for message in ck_consumer.consume(1000, 0.05):
                if message.error() is None:
                    ck_seen.append((message.offset(), message.value()))

    def caught_up() -> bool:
        want = len(expected)
        return (len(values_only([v for _, v in kp_seen])) >= want and len(values_only([v for _, v in ck_seen])) >= want
                and len(values_only(consumed_values(kcat_lines))) >= want)

    try:
        produce_phase("before")
        drain(caught_up)
        old_leader, _ = probe_write(cluster, stream, probes, timeout=10)
        cluster.kill(old_leader)
        new_leader, _ = probe_write(cluster, stream, probes, timeout=15, tag="failover")
        assert new_leader != old_leader
        produce_phase("after")  # the old leader is still down
        drain(caught_up)
        cluster.restart(old_leader, timeout_s=60)
    finally:
        kp_producer.close(5)
        kp_consumer.close()
        ck_consumer.close()
        kcat_out.terminate()
        kcat_out.wait(10)
    assert failures == []
    for name, seen in (("kafka-python", kp_seen), ("confluent-kafka", ck_seen),
                       ("kcat", [(int(line.split(b" ", 1)[0]), line.split(b" ", 1)[1])
                                 for line in kcat_lines.snapshot()])):
        offsets = [offset for offset, _ in seen]
        assert offsets == list(range(len(offsets))), f"{name} consumer offsets not consecutive from 0"
        assert values_only([v for _, v in seen]) == expected, f"{name} consumer records differ"


def consumed_values(reader: LineReader) -> list[bytes | None]:
    return [line.split(b" ", 1)[1] if b" " in line else b"" for line in reader.snapshot()]


def run_vdl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*VDL_CLI, *args], capture_output=True, text=True, timeout=60)


def test_admin_metadata_and_not_leader_through_any_node(cluster: DevCluster, probes: ProbeLog) -> None:
    nodes = cluster.node_ids()
    # `vdl streams create` through every node (the metadata leader is one of them).
    for node_id in nodes:
        name = f"admin-cli-{node_id}"
        result = run_vdl("streams", "create", name, "--replication-factor", "3",
                         "--bootstrap", node_address(cluster, node_id))
        assert result.returncode == 0, f"vdl streams create via node {node_id}: {result.stderr}"
    # CreateTopics through every node, with our codec.
    for node_id in nodes:
        code, message = create_topic_raw(node_address(cluster, node_id), f"admin-raw-{node_id}", 3)
        assert code == 0, f"CreateTopics via node {node_id}: {ErrorCode(code).name} {message}"
    code, _ = create_topic_raw(node_address(cluster, nodes[1]), "admin-raw-1", 3)
    assert code == ErrorCode.TOPIC_ALREADY_EXISTS
    streams = [f"admin-cli-{i}" for i in nodes] + [f"admin-raw-{i}" for i in nodes]

    # Metadata at every node: every broker, and per stream leader, replicas and isr.
    for node_id in nodes:
        response = metadata_raw(node_address(cluster, node_id), None)
        brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
        assert brokers == {i: node_address(cluster, i) for i in nodes}, f"node {node_id} lists {brokers}"
    for stream in streams:
        view = wait_for_full_isr(cluster, stream)
        assert view.replicas == tuple(nodes)

        def agreed(stream: str = stream) -> bool:
            views = [partition_view(node_address(cluster, i), stream) for i in nodes]
            return all(v is not None and v.error_code == 0 and v.replicas == tuple(nodes) for v in views) and len(
                {v.leader for v in views if v is not None}) == 1
        wait_until(agreed, 15, f"every node naming the same leader and replicas of {stream}")

    # Produce and Fetch at a follower: NOT_LEADER_OR_FOLLOWER; at the leader: served.
    stream = "admin-cli-2"
    leader, _ = probe_write(cluster, stream, probes, timeout=10)
    for follower in (i for i in nodes if i != leader):
        address = node_address(cluster, follower)
        code, _ = produce_raw(address, stream, one_record_batch(b"to-follower"), acks=-1)
        assert code == ErrorCode.NOT_LEADER_OR_FOLLOWER, f"Produce at follower {follower}: {code}"
        code, _ = produce_raw(address, stream, one_record_batch(b"to-follower"), acks=1)
        assert code == ErrorCode.NOT_LEADER_OR_FOLLOWER, f"Produce acks=1 at follower {follower}: {code}"
        code, _, records = fetch_raw(address, stream, 0)
        assert code == ErrorCode.NOT_LEADER_OR_FOLLOWER, f"Fetch at follower {follower}: {code}"
        assert partition_view(address, stream).leader == leader
    code, hw, _ = fetch_at_leader(node_address(cluster, leader), stream, 0)
    assert code == 0 and hw == 1

    # DeleteTopics through a node other than the creating one; gone everywhere.
    for name, via in (("admin-cli-1", nodes[2]), ("admin-raw-2", nodes[0])):
        assert delete_topic_raw(node_address(cluster, via), name) == 0

        def gone(name: str = name) -> bool:
            views = [partition_view(node_address(cluster, i), name) for i in nodes]
            return all(v is not None and v.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for v in views)
        wait_until(gone, 15, f"every node reporting {name} deleted")

        def removed(name: str = name) -> bool:
            for i in nodes:
                try:
                    stream_directory(cluster.nodes[i].config.data_dir, name)
                except FileNotFoundError:
                    continue
                return False
            return True
        wait_until(removed, 15, f"{name}'s log directory removed on every node")
    assert delete_topic_raw(node_address(cluster, nodes[1]), "admin-cli-1") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # The others are untouched and still writable.
    probe_write(cluster, "admin-raw-3", probes, timeout=10)

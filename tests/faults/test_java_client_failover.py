"""Apache Kafka's Java producer (its defaults: idempotent, acks=all) and a Java group consumer,
with the classic protocol and with KIP-848's, carry on across kill -9 of the stream's leader and
of the group's coordinator (the metadata leader): every acknowledged record is in the log once,
at the offset it was acknowledged at, and the consumer read the log exactly once, in order.

One 3-node dev cluster and one JVM for the module; each test uses its own stream and group.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.faults.harness import (
    ProbeLog,
    create_stream,
    high_watermark,
    node_address,
    read_all,
    running_nodes,
    wait_for_full_isr,
    wait_until,
)
from tests.support.java_client import JavaClients
from tests.support.kafka import coordinator_raw
from vdl_dev.dev_cluster import DevCluster

pytestmark = pytest.mark.timeout(300)

PROGRESS = 100  # records acknowledged and consumed between faults
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaClients]:
    with JavaClients(tmp_path_factory.mktemp("java")) as clients:
        yield clients


def _coordinator(cluster: DevCluster, group: str) -> int:
    def ask() -> int | None:
        for node_id in running_nodes(cluster):
            try:
                error, coordinator = coordinator_raw(node_address(cluster, node_id), group)
            except (OSError, ValueError):
                continue
            if error == 0 and coordinator in running_nodes(cluster):
                return coordinator
        return None

    return wait_until(ask, DEADLINE_S, f"a running coordinator for {group}")


class Progress:
    """Counts of the background tasks, to wait for both clients to move on after a fault."""

    def __init__(self, java: JavaClients, producing: str, consuming: str) -> None:
        self.java, self.producing, self.consuming = java, producing, consuming

    def counts(self) -> tuple[int, int]:
        return (self.java.call("task_status", task=self.producing)["count"],
                self.java.call("task_status", task=self.consuming)["count"])

    def wait(self, what: str) -> None:
        produced, consumed = self.counts()
        wait_until(lambda: all(now >= then + PROGRESS for now, then in zip(self.counts(), (produced, consumed),
                                                                          strict=True)),
                   DEADLINE_S, lambda: f"both clients to go on {what} (counts then {produced, consumed}, "
                                       f"now {self.counts()})")


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_java_clients_carry_on_across_leader_and_coordinator_kills(cluster: DevCluster, java: JavaClients,
                                                                   protocol: str) -> None:
    stream = f"java-failover-{protocol}-{uuid.uuid4().hex[:6]}"
    group = f"{stream}-group"
    create_stream(cluster, stream, via=1, probes=ProbeLog())
    wait_for_full_isr(cluster, stream)
    producer, consumer = f"p-{stream}", f"c-{stream}"
    java.producer(producer, cluster.bootstrap_servers, **{"linger.ms": 5})
    consumer_props = {"group.id": group, "group.protocol": protocol, "auto.offset.reset": "earliest",
                      "enable.auto.commit": "false"}
    if protocol == "classic":
        consumer_props |= {"session.timeout.ms": "10000", "heartbeat.interval.ms": "500"}
    java.consumer(consumer, cluster.bootstrap_servers, **consumer_props)
    java.call("subscribe", name=consumer, topics=[stream])
    java.call("produce_in_background", name=producer, task=producer, topic=stream, prefix="j", interval_ms=2)
    java.call("consume_in_background", name=consumer, task=consumer, commit=True)
    progress = Progress(java, producer, consumer)
    try:
        progress.wait("at the start")
        for what in ("stream leader", "group coordinator"):
            victim = cluster.leader_of(stream) if what == "stream leader" else _coordinator(cluster, group)
            assert victim is not None
            cluster.kill(victim)
            progress.wait(f"after the kill -9 of the {what} (node {victim})")
            cluster.restart(victim, timeout_s=60)
            wait_for_full_isr(cluster, stream)
            progress.wait(f"after the {what} (node {victim}) came back")
    finally:
        produced = java.call("task_stop", task=producer)
    assert produced["errors"] == []
    acked = {event["offset"]: event["value"] for event in produced["events"]}
    assert len(acked) == len(produced["events"])  # no two acknowledgements at one offset
    leader, hw = high_watermark(cluster, stream)
    try:
        wait_until(lambda: java.call("task_status", task=consumer)["count"] >= hw, DEADLINE_S,
                   lambda: f"the consumer to reach the high watermark {hw}")
    finally:
        consumed = java.call("task_stop", task=consumer)
        java.call("close", name=consumer)
        java.call("close", name=producer)
    log = {offset: value for offset, (_, value) in read_all(node_address(cluster, leader), stream, 0, hw).items()}
    # Every acknowledged record is in the log at its offset, and the log holds each value once.
    assert {offset: log.get(offset) for offset in acked} == {offset: value.encode() for offset, value in acked.items()}
    written = [value for value in log.values() if value is not None and value.startswith(b"j-")]
    assert len(written) == len(set(written))
    # The consumer read the whole log once, in order (a commit lost to a kill may be retried, not
    # a record read twice).
    assert [(e["offset"], e["value"].encode()) for e in consumed["events"]] == sorted(log.items())

"""Follower reads (KIP-392) through faults: librdkafka sent to a follower by `client.rack` keeps
reading committed records while the leader is paused (SIGSTOP); a follower holding entries that
are not committed (its acknowledgements to the leader are lost, the third node is paused) never
shows them: at its high watermark it answers no records, past it OFFSET_NOT_AVAILABLE, past its
log end OFFSET_OUT_OF_RANGE (to a client that chose it by its rack); once the links heal and the entries commit it serves them."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.faults.chaos.world import start_world
from tests.faults.harness import wait_for_full_isr
from tests.support.cluster import node_address, wait_until
from tests.support.kafka import (
    create_topic_raw,
    fetch_partition,
    fetch_raw,
    numbered_batch,
    produce_raw,
    record_values,
)
from vdl_dev.dev_cluster import DevCluster
from vdl_wire.errors import ErrorCode

pytestmark = pytest.mark.timeout(240)

CLUSTER_RACKS = {1: "rack-1", 2: "rack-2", 3: "rack-3"}


def expected(start: int, end: int) -> list[tuple[int, bytes]]:
    return [(offset, b"v%d" % (offset % 20)) for offset in range(start, end)]


def test_librdkafka_keeps_reading_from_its_rack_follower_while_the_leader_is_paused(cluster: DevCluster) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is a dev dependency")
    stream = "follower-paused-leader"
    assert create_topic_raw(node_address(cluster, 1), stream, 3)[0] == 0
    leader = wait_for_full_isr(cluster, stream, timeout=60).leader
    follower = min(n for n in cluster.node_ids() if n != leader)
    for _ in range(5):
        assert produce_raw(node_address(cluster, leader), stream, numbered_batch(20))[0] == 0
    stats: dict[str, Any] = {}

    def on_stats(text: str) -> None:
        partition = json.loads(text).get("topics", {}).get(stream, {}).get("partitions", {}).get("0")
        if partition is not None:
            stats["broker"] = partition["broker"]

    # A small local queue: librdkafka fetches as the application consumes, not everything at once.
    # It looks again whether the queue has room fetch.queue.backoff.ms after finding it full: 50 ms,
    # not the default 1 s, which it waited after nearly every fetch of ~1 KB (13 s of the test).
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": cluster.bootstrap_servers, "group.id": "follower-paused-leader",
        "client.rack": CLUSTER_RACKS[follower], "enable.auto.commit": False, "statistics.interval.ms": 100,
        "stats_cb": on_stats, "fetch.wait.max.ms": 100, "fetch.queue.backoff.ms": 50,
        "queued.max.messages.kbytes": 1, "queued.min.messages": 1, "max.partition.fetch.bytes": 1024,
        "fetch.max.bytes": 1024, "message.max.bytes": 1024})
    seen: list[tuple[int, bytes]] = []
    after_pause: list[int] = []
    paused_at = [float("inf")]

    def poll() -> int:
        for message in consumer.consume(20, 0.2):
            assert message.error() is None, message.error()
            seen.append((message.offset(), message.value()))
            if time.monotonic() > paused_at[0]:
                after_pause.append(message.offset())
        return len(seen)

    try:
        consumer.assign([confluent_kafka.TopicPartition(stream, 0, confluent_kafka.OFFSET_BEGINNING)])
        wait_until(lambda: poll() >= 100, 60, "librdkafka reading the first 100 records")
        wait_until(lambda: stats.get("broker") == follower, 20, f"librdkafka sent to node {follower}")
        for _ in range(50):  # 1000 more, committed and known to the follower before the pause
            assert produce_raw(node_address(cluster, leader), stream, numbered_batch(20))[0] == 0
        wait_until(lambda: fetch_partition(node_address(cluster, follower), stream, 0).high_watermark == 1100, 20,
                   f"node {follower} learning the high watermark 1100")
        cluster.stop(leader, signal.SIGSTOP)
        paused_at[0] = time.monotonic()
        wait_until(lambda: poll() >= 1100, 90, "librdkafka reading all 1100 records with the leader paused")
    finally:
        consumer.close()
        cluster.stop(leader, signal.SIGCONT)
    assert seen == expected(0, 1100)
    assert len(after_pause) >= 500, f"only {len(after_pause)} records were fetched after the pause"


def test_a_follower_never_shows_entries_it_holds_that_are_not_committed(tmp_path: Path) -> None:
    stream = "uncommitted"
    world = start_world(tmp_path, 3, seed=7, streams=[stream], racks=CLUSTER_RACKS)
    try:
        leader = wait_for_full_isr(world.cluster, stream, timeout=60).leader
        follower, other = sorted(n for n in world.node_ids if n != leader)
        for _ in range(3):
            assert produce_raw(world.address(leader), stream, numbered_batch(20))[0] == 0
        hw = 60
        wait_until(lambda: fetch_partition(world.address(follower), stream, 0).high_watermark == hw, 20,
                   f"node {follower} learning the high watermark {hw}")
        # The follower receives the leader's appends, but its acknowledgements are lost and the
        # third node is paused: nothing more commits.
        world.pause(other)
        world.links.cut(follower, leader, one_way=True)
        assert produce_raw(world.address(leader), stream, numbered_batch(20), acks=1)[0] == 0
        # The entries reached the follower once offset 80 (its log end) stops being out of range.
        wait_until(lambda: fetch_partition(world.address(follower), stream, hw + 20, rack=CLUSTER_RACKS[follower]).error_code
                   != ErrorCode.OFFSET_OUT_OF_RANGE, 20, f"node {follower} holding the uncommitted batch")
        address = world.address(follower)
        at_hw = fetch_partition(address, stream, hw, max_wait_ms=200)
        assert (at_hw.error_code, at_hw.high_watermark, record_values(at_hw.records)) == (0, hw, [])
        for offset in (hw + 1, hw + 10, hw + 20):
            answer = fetch_partition(address, stream, offset, max_wait_ms=100)
            assert (answer.error_code, answer.high_watermark, bytes(answer.records or b"")) == (
                ErrorCode.OFFSET_NOT_AVAILABLE, -1, b""), offset
        beyond = fetch_partition(address, stream, hw + 21, rack=CLUSTER_RACKS[follower])
        assert (beyond.error_code, beyond.high_watermark) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
        below = fetch_partition(address, stream, 0)
        assert (below.error_code, below.high_watermark, record_values(below.records)) == (0, hw, expected(0, hw))
        # Healed, the batch commits (or is replaced by a new leader's log); either way the
        # follower then serves exactly what the leader serves.
        world.resume(other)
        world.links.heal()

        def converged() -> tuple[int, bytes] | None:
            new_leader = world.leader_of(stream)
            if new_leader is None:
                return None
            code, leader_hw, records = fetch_raw(world.address(new_leader), stream, 0)
            answer = fetch_partition(address, stream, 0)
            if code != 0 or answer.error_code != 0 or answer.high_watermark != leader_hw or leader_hw <= hw:
                return None
            return leader_hw, records
        leader_hw, leader_records = wait_until(converged, 60, "the follower serving what the leader serves")
        assert record_values(fetch_partition(address, stream, 0).records) == record_values(leader_records)
        assert record_values(leader_records)[:hw] == expected(0, hw)
    finally:
        world.close()

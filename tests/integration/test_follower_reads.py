"""Follower reads (KIP-392) on a 3-node cluster whose nodes sit in racks rack-1..rack-3: Metadata
names each broker's rack; a follower serves Fetch v11+ below its high watermark (older versions,
ListOffsets and Produce stay with the leader); the leader sends a consumer whose rack_id names a
follower's rack to that follower (preferred_read_replica); librdkafka with client.rack then
reads from the follower. Hostile input: a foreign or unknown rack, offsets outside the
follower's log."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from tests.faults.harness import wait_for_full_isr
from tests.support.cluster import node_address, wait_until
from tests.support.kafka import (
    LEADER_FETCH_VERSION,
    create_topic_raw,
    fetch_partition,
    fetch_raw,
    list_offset_raw,
    metadata_raw,
    numbered_batch,
    produce_raw,
    raw_request,
    record_values,
)
from tests.support.metrics import scrape
from vdl_dev.dev_cluster import DevCluster
from vdl_wire import messages as m
from vdl_wire.errors import ErrorCode

pytestmark = pytest.mark.timeout(180)

CLUSTER_RACKS = {1: "rack-1", 2: "rack-2", 3: "rack-3"}


def replicated_stream(cluster: DevCluster, name: str, batches: int = 5) -> tuple[int, list[int], int]:
    """A 3-replica stream holding `batches` x 20 records (b"v0".."v19" each), every follower
    caught up: (leader, followers, high watermark)."""
    assert create_topic_raw(node_address(cluster, 1), name, 3)[0] == 0
    view = wait_for_full_isr(cluster, name, timeout=60)
    leader = view.leader
    for _ in range(batches):
        assert produce_raw(node_address(cluster, leader), name, numbered_batch(20))[0] == 0
    hw = 20 * batches
    followers = [n for n in cluster.node_ids() if n != leader]
    for follower in followers:
        wait_until(lambda f=follower: fetch_partition(node_address(cluster, f), name, hw).high_watermark == hw, 20,
                   f"follower {follower} learning high watermark {hw}")
    return leader, followers, hw


def test_metadata_names_each_brokers_rack(cluster: DevCluster) -> None:
    for node_id in cluster.node_ids():
        response = metadata_raw(node_address(cluster, node_id), [])
        assert {b.node_id: b.rack for b in response.brokers} == CLUSTER_RACKS
    v0 = raw_request(node_address(cluster, 1), m.MetadataRequest(topics=[]), 0)
    assert all(b.rack is None for b in v0.brokers)  # the field exists from v1


def test_a_follower_serves_committed_records_at_fetch_v11_and_nothing_else(cluster: DevCluster) -> None:
    stream = "follower-serves"
    leader, followers, hw = replicated_stream(cluster, stream)
    expected = [(offset, b"v%d" % (offset % 20)) for offset in range(hw)]
    code, leader_hw, leader_records = fetch_raw(node_address(cluster, leader), stream, 0)
    assert (code, leader_hw, record_values(leader_records)) == (0, hw, expected)
    for follower in followers:
        address = node_address(cluster, follower)
        answer = fetch_partition(address, stream, 0)
        assert (answer.error_code, answer.high_watermark, answer.preferred_read_replica) == (0, hw, -1)
        assert bytes(answer.records) == leader_records  # the same stored batches, byte for byte
        assert record_values(fetch_partition(address, stream, 37).records)[-1] == (hw - 1, b"v19")
        # Kafka: before v11 only the leader serves consumers; ListOffsets and Produce stay there.
        assert fetch_raw(address, stream, 0, version=LEADER_FETCH_VERSION)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert list_offset_raw(address, stream, -1)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert produce_raw(address, stream, numbered_batch(1))[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_the_leader_sends_a_consumer_to_the_replica_in_its_rack(cluster: DevCluster) -> None:
    stream = "follower-rack"
    leader, followers, hw = replicated_stream(cluster, stream, batches=2)
    address = node_address(cluster, leader)
    for follower in followers:
        answer = fetch_partition(address, stream, 0, rack=CLUSTER_RACKS[follower])
        # Kafka's redirect: no records, the leader's offsets, the replica to ask.
        assert (answer.error_code, answer.preferred_read_replica, answer.high_watermark) == (0, follower, hw)
        assert not answer.records
        assert answer.log_start_offset == 0
    for rack in (CLUSTER_RACKS[leader], "", "rack-nowhere"):  # the leader's own rack, none, unknown
        answer = fetch_partition(address, stream, 0, rack=rack)
        assert (answer.error_code, answer.preferred_read_replica) == (0, -1)
        assert len(record_values(answer.records)) == hw
    # A follower never redirects: it serves whatever rack the consumer names.
    answer = fetch_partition(node_address(cluster, followers[0]), stream, 0, rack=CLUSTER_RACKS[followers[1]])
    assert (answer.error_code, answer.preferred_read_replica, len(record_values(answer.records))) == (0, -1, hw)


def test_a_rack_of_a_node_outside_the_replica_set_is_served_by_the_leader(cluster: DevCluster) -> None:
    stream = "follower-foreign-rack"
    assert create_topic_raw(node_address(cluster, 1), stream, 1)[0] == 0
    leader = wait_until(lambda: cluster.leader_of(stream), 30, f"a leader for {stream}")
    assert produce_raw(node_address(cluster, leader), stream, numbered_batch(3))[0] == 0
    for node_id in cluster.node_ids():
        answer = fetch_partition(node_address(cluster, leader), stream, 0, rack=CLUSTER_RACKS[node_id])
        assert (answer.error_code, answer.preferred_read_replica, len(record_values(answer.records))) == (0, -1, 3)
        if node_id != leader:  # holds no replica: a consumer sent there anyway is turned away
            assert fetch_partition(node_address(cluster, node_id), stream, 0).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_offsets_outside_a_followers_log_are_out_of_range_for_a_client_that_chose_it(cluster: DevCluster) -> None:
    stream = "follower-hostile"
    _, followers, hw = replicated_stream(cluster, stream, batches=1)
    address = node_address(cluster, followers[0])
    for offset in (-1, -1000, hw + 1, hw + 10_000, 2**62):
        answer = fetch_partition(address, stream, offset, rack=CLUSTER_RACKS[followers[0]])
        # As Kafka's follower: the error, and no offsets (its LogReadResult of an exception).
        assert (answer.error_code, answer.high_watermark, answer.log_start_offset) == (
            ErrorCode.OFFSET_OUT_OF_RANGE, -1, -1), offset
        assert not answer.records
        # A client without a rack is here only because its metadata named this node the leader
        # (stale, or a cut-off node's answer): sent back to Metadata, never told to reset.
        answer = fetch_partition(address, stream, offset)
        assert (answer.error_code, answer.high_watermark, answer.log_start_offset) == (
            ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1), offset
        assert not answer.records
    caught_up = fetch_partition(address, stream, hw, max_wait_ms=50)  # at the high watermark: waits, then empty
    assert (caught_up.error_code, caught_up.high_watermark, bool(caught_up.records)) == (0, hw, False)


def test_librdkafka_with_client_rack_reads_from_a_follower(cluster: DevCluster) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is a dev dependency")
    stream = "follower-librdkafka"
    leader, followers, hw = replicated_stream(cluster, stream)
    follower = followers[0]
    stats: dict[str, Any] = {}

    def on_stats(text: str) -> None:
        partition = json.loads(text).get("topics", {}).get(stream, {}).get("partitions", {}).get("0")
        if partition is not None:
            stats.update(broker=partition["broker"], leader=partition["leader"])

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": cluster.bootstrap_servers, "group.id": "follower-librdkafka",
        "client.rack": CLUSTER_RACKS[follower], "enable.auto.commit": False, "statistics.interval.ms": 100,
        "stats_cb": on_stats, "fetch.wait.max.ms": 100})
    try:
        consumer.assign([confluent_kafka.TopicPartition(stream, 0, confluent_kafka.OFFSET_BEGINNING)])
        seen: list[tuple[int, bytes]] = []
        wait_until(lambda: _poll_into(consumer, seen) >= hw, 60, f"librdkafka reading {hw} records")
        assert seen == [(offset, b"v%d" % (offset % 20)) for offset in range(hw)]
        wait_until(lambda: stats.get("broker") == follower, 20, f"librdkafka fetching from node {follower}")
        assert stats["leader"] == leader
    finally:
        consumer.close()


def _poll_into(consumer: Any, seen: list[tuple[int, bytes]]) -> int:
    for message in consumer.consume(1000, 0.2):
        assert message.error() is None, message.error()
        seen.append((message.offset(), message.value()))
    return len(seen)


def test_under_load_a_follower_never_reports_or_serves_beyond_the_leaders_high_watermark(cluster: DevCluster) -> None:
    """Sampled as: the follower's answer first, then the leader's: the leader's high watermark
    never moves back, so a follower answer above the leader's later one would be a follower
    showing what was not committed (or not yet applied at the leader)."""
    stream = "follower-under-load"
    leader, followers, hw = replicated_stream(cluster, stream, batches=1)
    stop = threading.Event()
    produced: list[int] = []

    def produce() -> None:
        while not stop.is_set():
            code, base = produce_raw(node_address(cluster, leader), stream, numbered_batch(20), acks=1)
            if code == 0:
                produced.append(base)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    samples = 0
    # Each follower is read below the highest high watermark it reported itself: one follower may
    # lag the other, and an offset past a follower's own high watermark is answered
    # OFFSET_NOT_AVAILABLE (ask the leader), rightly.
    seen_hw = dict.fromkeys(followers, hw)
    try:
        leader_address = node_address(cluster, leader)
        while samples < 300 or len(produced) < 50:
            for follower in followers:
                offset = max(0, seen_hw[follower] - 40)
                answer = fetch_partition(node_address(cluster, follower), stream, offset)
                code, leader_hw, leader_records = fetch_raw(leader_address, stream, offset)
                assert answer.error_code == 0 and code == 0, (answer.error_code, code)
                assert answer.high_watermark <= leader_hw, (follower, answer.high_watermark, leader_hw)
                served = record_values(answer.records)
                assert all(offset < answer.high_watermark for offset, _ in served)
                leader_values = dict(record_values(leader_records))
                assert all(leader_values.get(offset, value) == value for offset, value in served)
                assert answer.high_watermark >= seen_hw[follower], (follower, answer.high_watermark)
                seen_hw[follower] = answer.high_watermark
                hw = max(hw, answer.high_watermark)
                samples += 1
            assert samples < 5000, "the producer made no progress"
    finally:
        stop.set()
        producer.join(10)
    assert hw > 20  # the followers did follow the load


def test_leader_of_a_quiescent_stream_still_sends_a_rack_consumer_to_its_follower(cluster: DevCluster) -> None:
    """Regression: a read waking a quiescent leader found only the followers that had answered
    its first heartbeat round in sync (one, for the lease), so half the time the consumer's rack
    follower was left out and the leader served the read itself. Followers whose node is alive
    and whose log is caught up count as in sync."""
    leader, followers, hw = replicated_stream(cluster, "quiescent-rack")
    for follower in followers:
        for _ in range(3):
            wait_until(lambda: all(scrape(cluster, i).get("vdl_raft_groups_awake") == 1 for i in cluster.node_ids()),
                       30, "every stream group quiescent")
            answer = fetch_partition(node_address(cluster, leader), "quiescent-rack", 0, rack=CLUSTER_RACKS[follower])
            assert (answer.error_code, answer.preferred_read_replica) == (0, follower)

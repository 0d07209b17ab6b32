"""/metrics of a 3-node cluster, scraped over HTTP and parsed with prometheus_client's parser:
counters equal what the test produced and consumed, under-replication and follower lag follow a
killed follower, leader elections follow a killed leader, group lag is the high watermark minus
the committed offset; a single node's fsync histogram; what the endpoint answers besides.

One cluster for the module (tests/conftest.py); each test makes its own streams, and the
replication test counts every stream of the cluster (all have 3 replicas on the 3 nodes).
"""

from __future__ import annotations

import urllib.error
import urllib.request
import uuid

import pytest
from kafka import KafkaConsumer, TopicPartition

from tests.faults.harness import high_watermark, wait_for_full_isr
from tests.support.cluster import BrokerProcess, free_port, node_address, running_nodes, wait_until
from tests.support.kafka import (
    commit_raw,
    coordinator_raw,
    create_topic_raw,
    fetch_raw,
    make_batch,
    metadata_raw,
    produce_raw,
)
from tests.support.metrics import Scrape, scrape, scrape_url, try_scrape
from vdl_broker.log.tail_cache import ENTRY_OVERHEAD
from vdl_dev.dev_cluster import DevCluster
from vdl_wire import messages as m
from vdl_wire.api import default_version

pytestmark = pytest.mark.timeout(240)

PRODUCE_VERSION = str(default_version(m.ProduceRequest))  # what the raw requests speak: the highest declared


def _stream(cluster: DevCluster, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    assert create_topic_raw(node_address(cluster, 1), name, 3)[0] == 0
    wait_for_full_isr(cluster, name)
    return name


def _leader(cluster: DevCluster, stream: str) -> int:
    return wait_until(lambda: (leader := cluster.leader_of(stream)) and leader in running_nodes(cluster) and leader,
                      30, f"a running leader of {stream}")


def _produce(cluster: DevCluster, stream: str, leader: int, batches: list[bytes]) -> None:
    for batch in batches:
        code, _ = produce_raw(node_address(cluster, leader), stream, batch, acks=-1, timeout_ms=5000)
        assert code == 0


def _stream_count(cluster: DevCluster) -> int:
    return len([t for t in metadata_raw(node_address(cluster, running_nodes(cluster)[0]), None).topics
                if not t.is_internal])


def _total(cluster: DevCluster, name: str, **labels: str) -> float | None:
    """Sum of a sample over the running nodes that answer; None when one does not."""
    total = 0.0
    for node_id in running_nodes(cluster):
        scraped = try_scrape(cluster, node_id)
        if scraped is None:
            return None
        total += scraped.get(name, **labels)
    return total


def test_under_replication_and_follower_lag_follow_a_killed_follower(cluster: DevCluster) -> None:
    stream = _stream(cluster, "under")
    leader = _leader(cluster, stream)
    follower = next(i for i in cluster.node_ids() if i != leader)
    assert wait_until(lambda: _total(cluster, "vdl_under_replicated_streams") == 0, 30, "no under-replication")
    cluster.kill(follower)
    # Every stream has a replica on the dead node: each is under-replicated at its leader. With
    # this module's first test that is this one stream.
    streams = _stream_count(cluster)
    wait_until(lambda: _total(cluster, "vdl_under_replicated_streams") == streams, 30,
               f"{streams} under-replicated stream(s) while node {follower} is down")
    leader = _leader(cluster, stream)
    _produce(cluster, stream, leader, [make_batch([b"a", b"b"]) for _ in range(5)])
    lag = scrape(cluster, leader).value("vdl_raft_follower_lag_entries", stream=stream, follower=str(follower))
    assert lag is not None and lag >= 5  # five batches, five entries, none acknowledged by the dead node
    cluster.restart(follower, timeout_s=60)
    wait_until(lambda: _total(cluster, "vdl_under_replicated_streams") == 0, 60,
               f"no under-replicated stream once node {follower} caught up")
    leader = _leader(cluster, stream)
    wait_until(lambda: scrape(cluster, leader).value("vdl_raft_follower_lag_entries", stream=stream,
                                                     follower=str(follower)) == 0, 30, "follower lag back to 0")


def test_counters_equal_what_was_produced_and_consumed(cluster: DevCluster) -> None:
    stream = _stream(cluster, "count")
    leader = _leader(cluster, stream)
    before = scrape(cluster, leader)
    batches = [make_batch([f"r{b}-{i}".encode() * (b + 1) for i in range(b + 1)]) for b in range(8)]
    _produce(cluster, stream, leader, batches)
    # A produce sent to a follower is answered NOT_LEADER_OR_FOLLOWER, and counted so there.
    follower = next(i for i in cluster.node_ids() if i != leader)
    follower_before = scrape(cluster, follower)
    assert produce_raw(node_address(cluster, follower), stream, batches[0])[0] == 6
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, enable_auto_commit=False)
    try:
        partition = TopicPartition(stream, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        seen: list[bytes] = []
        wait_until(lambda: seen.extend(r.value for rs in consumer.poll(200).values() for r in rs) or len(seen) == 36,
                   30, "kafka-python to read the 36 records")
    finally:
        consumer.close()
    after = scrape(cluster, leader)
    stored = sum(len(batch) for batch in batches)
    assert after.value("vdl_records_in_total", stream=stream) == 36
    assert after.value("vdl_bytes_in_total", stream=stream) == stored
    assert after.value("vdl_bytes_out_total", stream=stream) == stored  # each batch fetched once
    produce = {"api": "Produce", "version": PRODUCE_VERSION}
    assert after.get("vdl_requests_total", **produce, error="NONE") - before.get(
        "vdl_requests_total", **produce, error="NONE") == 8
    assert scrape(cluster, follower).get("vdl_requests_total", **produce, error="NOT_LEADER_OR_FOLLOWER") - \
        follower_before.get("vdl_requests_total", **produce, error="NOT_LEADER_OR_FOLLOWER") == 1
    assert after.get("vdl_request_latency_seconds_count", api="Produce") - before.get(
        "vdl_request_latency_seconds_count", api="Produce") == 8
    assert after.value("vdl_stream_high_watermark", stream=stream) == 36
    assert after.value("vdl_stream_log_start_offset", stream=stream) == 0
    assert after.value("vdl_stream_is_leader", stream=stream) == 1
    assert scrape(cluster, follower).value("vdl_stream_is_leader", stream=stream) == 0
    size = after.value("vdl_stream_size_bytes", stream=stream)
    assert size is not None and size > stored  # the batches inside Raft entries
    assert after.get("vdl_raft_commit_latency_seconds_count") - before.get("vdl_raft_commit_latency_seconds_count") >= 8
    assert 0 < after.get("vdl_disk_free_bytes") <= after.get("vdl_disk_total_bytes")


def test_tail_cache_gauge_counts_each_entry_held_on_every_replica(cluster: DevCluster) -> None:
    """vdl_tail_cache_bytes: each node's caches hold every batch its replica appended, payload and
    ENTRY_OVERHEAD (the soak tells a cache filling after a start from a leak by it), within
    vdl_tail_cache_budget_bytes (the node's tail_cache_bytes, 256 MiB by default)."""
    stream = _stream(cluster, "cache")
    leader = _leader(cluster, stream)
    before = {i: scrape(cluster, i) for i in cluster.node_ids()}
    batches = [make_batch([f"c{b}-{i}".encode() * (b + 3) for i in range(b + 2)]) for b in range(5)]
    _produce(cluster, stream, leader, batches)
    for node_id in cluster.node_ids():  # every follower appended them (its high watermark is theirs)
        wait_until(lambda n=node_id: scrape(cluster, n).value("vdl_stream_high_watermark", stream=stream) == 20,
                   30, f"node {node_id} to hold the 20 records")
    held = sum(len(batch) + ENTRY_OVERHEAD for batch in batches)
    for node_id in cluster.node_ids():
        after = scrape(cluster, node_id)
        assert after.get("vdl_tail_cache_bytes") - before[node_id].get("vdl_tail_cache_bytes") == held, node_id
        assert after.value("vdl_tail_cache_budget_bytes") == 256 << 20
        assert 0 < after.get("vdl_tail_cache_bytes") <= after.get("vdl_tail_cache_budget_bytes")


def test_leader_elections_grow_when_the_leader_is_killed(cluster: DevCluster) -> None:
    stream = _stream(cluster, "elect")
    leader = _leader(cluster, stream)
    assert scrape(cluster, leader).get("vdl_raft_leader_changes_total", group=stream) >= 1
    before = {i: scrape(cluster, i).get("vdl_raft_leader_changes_total", group=stream)
              for i in cluster.node_ids() if i != leader}
    cluster.kill(leader)
    successor = _leader(cluster, stream)
    assert successor != leader
    assert scrape(cluster, successor).get("vdl_raft_leader_changes_total", group=stream) >= before[successor] + 1
    assert scrape(cluster, successor).get("vdl_raft_leader_changes_total", group="__metadata") >= 0


def test_group_lag_is_the_high_watermark_minus_the_committed_offset(cluster: DevCluster) -> None:
    stream = _stream(cluster, "lag")
    leader = _leader(cluster, stream)
    _produce(cluster, stream, leader, [make_batch([f"v{i}".encode() for i in range(10)])])
    group = f"lag-group-{uuid.uuid4().hex[:6]}"

    def commit(offset: int) -> bool:
        try:
            for node in running_nodes(cluster):
                error, coordinator = coordinator_raw(node_address(cluster, node), group)
                if error == 0:
                    return commit_raw(node_address(cluster, coordinator), group, {stream: offset}) == {stream: 0}
        except (OSError, KeyError):
            pass
        return False

    wait_until(lambda: commit(4), 30, "a commit of offset 4")
    hw = high_watermark(cluster, stream)[1]
    assert hw == 10

    def lag_is(expected: int) -> Scrape | None:
        scraped = scrape(cluster, _leader(cluster, stream))
        ok = scraped.value("vdl_consumer_group_lag", group=group, stream=stream) == expected
        return scraped if ok and scraped.value("vdl_consumer_group_lag_sum", group=group) == expected else None

    wait_until(lambda: lag_is(10 - 4), 30, "group lag 6")
    _produce(cluster, stream, _leader(cluster, stream), [make_batch([b"x"] * 5)])
    wait_until(lambda: lag_is(15 - 4), 30, "group lag 11 after five more records")
    # Only the stream's leader reports it: a sum over nodes is the group's lag.
    assert wait_until(lambda: _total(cluster, "vdl_consumer_group_lag_sum", group=group) == 11, 30, "sum 11")


def test_fsync_latency_and_the_endpoint(broker_factory) -> None:  # noqa: ANN001
    metrics_port = free_port()
    broker: BrokerProcess = broker_factory(metrics_listen=f"127.0.0.1:{metrics_port}")  # fsync on
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    stream = f"fsync-{uuid.uuid4().hex[:6]}"
    assert create_topic_raw(broker.bootstrap, stream)[0] == 0
    wait_until(lambda: produce_raw(broker.bootstrap, stream, make_batch([b"x"]))[0] == 0, 10, "a stored batch")
    assert fetch_raw(broker.bootstrap, stream, 0)[0] == 0
    scraped = scrape_url(url)
    assert scraped.get("vdl_fsync_latency_seconds_count") >= 1
    assert scraped.content_type.startswith("text/plain; version=0.0.4")
    assert scraped.value("vdl_connections") is not None
    # OpenMetrics when asked for; 404 elsewhere; HEAD answers no body.
    assert scrape_url(url, accept="application/openmetrics-text; version=1.0.0").content_type.startswith(
        "application/openmetrics-text")
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/other", timeout=5)
    assert missing.value.code == 404
    with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=5) as response:
        assert response.status == 200 and response.read() == b""

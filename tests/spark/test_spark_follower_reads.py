"""Follower reads in the Spark source (preferReplicas) on a 3-node cluster in racks rack-1..3: a
read spread over the in-sync replicas, or kept to one rack, returns exactly the rows of a
leader-only read, and the replicas did serve it (each node's vdl_bytes_out grows); a task whose
replica is dead or paused moves on to another one, the leader last."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from chispa import assert_df_equality

from tests.faults.harness import wait_for_full_isr
from tests.spark.kafka_helpers import admin, expected_df, produce_kafka_python
from tests.support.cluster import start_cluster, wait_until
from tests.support.metrics import scrape
from vdl_client import ClientSettings, VdlClient
from vdl_connector.options import parse_source_options
from vdl_connector.planning import OffsetRange
from vdl_connector.reading import read_range
from vdl_connector.source import data_loss
from vdl_dev.dev_cluster import DevCluster

pytestmark = pytest.mark.timeout(300)

RACKS = {1: "rack-1", 2: "rack-2", 3: "rack-3"}
STREAM = "spread"
COUNT = 3000


@pytest.fixture(scope="module")
def racked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DevCluster, list]]:
    cluster = start_cluster(tmp_path_factory.mktemp("racked"), nodes=3, racks=RACKS)
    try:
        with admin(cluster.bootstrap_servers) as client:
            client.create_stream(STREAM, replication_factor=3)
        produced = produce_kafka_python(cluster.bootstrap_servers, STREAM, COUNT, "lz4", "spread")
        wait_for_full_isr(cluster, STREAM, timeout=60)
        yield cluster, produced
    finally:
        cluster.kill_all()


def bytes_out(cluster: DevCluster) -> dict[int, float]:
    """vdl_bytes_out of the stream on every node (what its Fetch answers carried)."""
    return {node_id: scrape(cluster, node_id).get("vdl_bytes_out_total", stream=STREAM) for node_id in RACKS}


def read(spark, cluster: DevCluster, prefer: str):  # noqa: ANN001, ANN201
    return (spark.read.format("vdl").option("bootstrap.servers", cluster.bootstrap_servers)
            .option("subscribe", STREAM).option("includeHeaders", "true").option("minPartitions", "6")
            .option("preferReplicas", prefer).load())


def test_replica_spread_reads_return_the_rows_of_a_leader_only_read(spark, racked) -> None:  # noqa: ANN001
    cluster, produced = racked
    before = bytes_out(cluster)
    leader_only = read(spark, cluster, "leader").orderBy("offset").cache()
    assert leader_only.count() == COUNT
    assert_df_equality(leader_only, expected_df(spark, produced), ignore_nullable=True)
    after_leader = bytes_out(cluster)
    leader = cluster.leader_of(STREAM)
    assert [n for n in RACKS if after_leader[n] > before[n]] == [leader]
    spread = read(spark, cluster, "any").orderBy("offset")
    assert_df_equality(spread, leader_only, ignore_nullable=True)
    after_spread = bytes_out(cluster)
    assert all(after_spread[n] > after_leader[n] for n in RACKS), (after_leader, after_spread)
    follower = min(n for n in RACKS if n != leader)
    in_rack = read(spark, cluster, f"rack:{RACKS[follower]}").orderBy("offset")
    assert_df_equality(in_rack, leader_only, ignore_nullable=True)
    after_rack = bytes_out(cluster)
    assert [n for n in RACKS if after_rack[n] > after_spread[n]] == [follower]
    leader_only.unpersist()


def test_a_replica_spread_read_survives_a_dead_follower(spark, racked) -> None:  # noqa: ANN001
    cluster, produced = racked
    leader = cluster.leader_of(STREAM)
    victim = max(n for n in RACKS if n != leader)
    cluster.kill(victim)
    try:
        result = read(spark, cluster, "any").orderBy("offset")
        assert_df_equality(result, expected_df(spark, produced), ignore_nullable=True)
    finally:
        cluster.restart(victim, timeout_s=60)
        wait_for_full_isr(cluster, STREAM, timeout=60)


@pytest.mark.parametrize("fault", ["kill", "pause"])
def test_a_task_moves_on_from_a_replica_that_is_dead_or_paused(racked, fault: str) -> None:
    cluster, produced = racked
    leader = cluster.leader_of(STREAM)
    victim, other = sorted(n for n in RACKS if n != leader)
    options = parse_source_options({"bootstrap.servers": cluster.bootstrap_servers, "subscribe": STREAM})
    rng = OffsetRange(STREAM, 100, COUNT - 100, replicas=(victim, other))
    if fault == "kill":
        cluster.kill(victim)
    else:
        cluster.stop(victim, signal.SIGSTOP)
    try:
        started = time.monotonic()
        # Bootstrapped through the leader: the time measured is the replica's, not a Metadata
        # request to the paused node waiting out the request timeout.
        with VdlClient(ClientSettings((cluster.nodes[leader].client_address,))) as client:
            batches = list(read_range(client, rng, options, data_loss))
        offsets = [o for batch in batches for o in batch.column("offset").to_pylist()]
        values = [v for batch in batches for v in batch.column("value").to_pylist()]
        assert offsets == list(range(100, COUNT - 100))
        assert values == [p.value for p in produced[100:COUNT - 100]]
        assert time.monotonic() - started < 15  # a paused replica costs one replica timeout (5 s), not more
    finally:
        if fault == "kill":
            cluster.restart(victim, timeout_s=60)
        else:
            cluster.stop(victim, signal.SIGCONT)
        wait_until(lambda: wait_for_full_isr(cluster, STREAM, timeout=60), 70, "the replica back in sync")


def test_rack_option_without_a_replica_there_reads_from_the_leader(spark, racked, tmp_path: Path) -> None:  # noqa: ANN001
    cluster, produced = racked
    result = read(spark, cluster, "rack:rack-nowhere").orderBy("offset")
    assert_df_equality(result, expected_df(spark, produced), ignore_nullable=True)

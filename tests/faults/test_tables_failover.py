"""Exactly-once tiering through leader changes, on 3 real nodes: producers write with acks=all
while the stream's leader appends committed records to the stream's Delta table; the leader is
killed with SIGKILL again and again, or cut off from its followers while it writes (it is
deposed and a new leader tiers the same offsets). Afterwards the table holds every committed
offset exactly once, the same records as the log (compared with chispa)."""

from __future__ import annotations

from pathlib import Path

import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable

from tests.faults.chaos.world import start_world
from tests.faults.harness import (
    ProbeLog,
    high_watermark,
    node_address,
    probe_write,
    read_all,
    wait_for_full_isr,
    wait_until,
)
from tests.faults.workload import Workload
from vdl_client import ClientSettings, VdlClient
from vdl_client.configs import alter_stream_configs
from vdl_dev.dev_cluster import DevCluster

pytestmark = pytest.mark.timeout(300)

KILLS = 3
CUTS = 2


def table_offsets(path: str) -> list[int]:
    try:
        return DeltaTable(path).to_pyarrow_table(columns=["offset"]).column("offset").to_pylist()
    except Exception:  # not created yet
        return []


def tier(bootstrap: str, stream: str, path: str, lag_ms: int) -> None:
    with VdlClient(ClientSettings.from_bootstrap(bootstrap, deadline_ms=60_000)) as client:
        alter_stream_configs(client, stream, {"vdl.table.path": path, "vdl.table.lag.ms": str(lag_ms)})


def assert_table_is_the_log(spark, path: str, log: dict[int, tuple[bytes | None, bytes | None]]) -> None:  # noqa: ANN001
    """Every committed offset once, with the log's key and value (chispa over both)."""
    table = DeltaTable(path).to_pyarrow_table(columns=["offset", "key", "value"])
    offsets = table.column("offset").to_pylist()
    assert len(offsets) == len(set(offsets)), f"{len(offsets) - len(set(offsets))} offsets are in the table twice"
    assert sorted(offsets) == sorted(log), "the table and the log hold different offsets"
    schema = "offset BIGINT, key BINARY, value BINARY"
    table_df = spark.createDataFrame(list(zip(offsets, table.column("key").to_pylist(), table.column("value").to_pylist(),
                                              strict=True)), schema)
    log_df = spark.createDataFrame([(o, k, v) for o, (k, v) in log.items()], schema)
    assert_df_equality(table_df.orderBy("offset"), log_df.orderBy("offset"))


def caught_up(cluster: DevCluster, stream: str, path: str) -> tuple[int, int] | None:
    """(leader, high watermark) once the table holds as many rows as the log has offsets."""
    leader, hw = high_watermark(cluster, stream, timeout=30)
    return (leader, hw) if len(table_offsets(path)) >= hw else None


def test_kill_the_leader_repeatedly_while_tiering(spark, cluster: DevCluster, probes: ProbeLog,  # noqa: ANN001
                                                  tmp_path: Path) -> None:
    stream, path = "tiered-kills", str(tmp_path / "lake" / "tiered-kills")
    with VdlClient(ClientSettings.from_bootstrap(cluster.bootstrap_servers, deadline_ms=60_000)) as client:
        client.create_stream(stream, 3, config={"vdl.table.path": path, "vdl.table.lag.ms": "300"})
    wait_for_full_isr(cluster, stream)
    workload = Workload(cluster.bootstrap_servers, stream, tag="t").start()
    killed = []
    try:
        for _ in range(KILLS):
            workload.wait_progress(40)
            before = len(table_offsets(path))
            wait_until(lambda b=before: len(table_offsets(path)) > b, 30, "the table growing")
            leader, _ = probe_write(cluster, stream, probes, timeout=15)
            cluster.kill(leader)  # mid-tiering: the table is written every ~0.3 s
            killed.append(leader)
            probe_write(cluster, stream, probes, timeout=15, tag="failover")
            workload.wait_progress(40)
            cluster.restart(leader, timeout_s=60)
            wait_for_full_isr(cluster, stream)
    finally:
        workload.stop()
    leader, hw = wait_until(lambda: caught_up(cluster, stream, path), 60, "the table holding every committed offset")
    log = read_all(node_address(cluster, leader), stream, 0, hw)
    assert sorted(log) == list(range(hw))
    assert_table_is_the_log(spark, path, log)
    assert len(set(killed)) >= 2, f"leaders killed: {killed}"


def test_a_deposed_leader_never_tiers_an_offset_twice(spark, tmp_path: Path) -> None:  # noqa: ANN001
    stream, path = "tiered-cut", str(tmp_path / "lake" / "tiered-cut")
    world = start_world(tmp_path / "world", 3, seed=17, streams=[stream], settings={"fsync": False})
    probes = ProbeLog()
    try:
        cluster = world.cluster
        wait_for_full_isr(cluster, stream, timeout=60)
        # A lag of 1.5 s: when the leader is cut off it still holds committed records not yet in
        # the table, which it tries to commit while the new leader starts tiering the same offsets.
        tier(cluster.bootstrap_servers, stream, path, 1500)
        # kafka-python producers: librdkafka's keep waiting on the cut-off node until the cut heals
        # (a limitation of the cluster under partitions, not of tiering).
        workload = Workload(cluster.bootstrap_servers, stream, tag="d", kinds=("kafka-python", "kafka-python")).start()
        try:
            for _ in range(CUTS):
                workload.wait_progress(60)
                wait_until(lambda: len(table_offsets(path)) > 0, 30, "the table being written")
                old, _ = probe_write(cluster, stream, probes, timeout=15)
                world.links.partition([[old], [n for n in world.node_ids if n != old]])
                new, _ = probe_write(cluster, stream, probes, timeout=30, exclude=[old], tag="new")
                workload.wait_progress(60)
                world.links.heal()
                wait_for_full_isr(cluster, stream, timeout=60)
        finally:
            workload.stop()
        leader, hw = wait_until(lambda: caught_up(cluster, stream, path), 60, "the table holding every committed offset")
        log = read_all(node_address(cluster, leader), stream, 0, hw)
        assert_table_is_the_log(spark, path, log)
    finally:
        world.close()

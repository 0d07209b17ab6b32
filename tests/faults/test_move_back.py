"""Process test: a stream moved off a node and back after that node restarted. The node no
longer holds a replica once the move away is done; when the stream comes back it must join the
current group (a learner that catches up) and never bring back an old copy of the log, its old
Raft state or configuration: every acknowledged record is on the new replica, at its offset.
"""

from __future__ import annotations

import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.harness import (
    ProbeLog,
    check_acknowledged,
    create_stream,
    high_watermark,
    node_address,
    read_all,
    wait_logs_converged,
    wait_until,
)
from tests.faults.test_membership import admin, preload, replicas_of, wait_moved
from tests.support.cluster import start_cluster
from vdl_client.cluster_admin import reassign_stream
from vdl_dev.dev_cluster import DevCluster

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    clusters: list[DevCluster] = []
    started = start_cluster(tmp_path_factory.mktemp("move-back"), 3, register=clusters.append,
                            settings={"leader_balance_interval_ms": 0})
    try:
        yield started
    finally:
        for c in clusters:
            c.kill_all()


def move(cluster: DevCluster, stream: str, target: list[int]) -> None:
    with admin(cluster) as client:
        reassign_stream(client, stream, target)
    wait_moved(cluster, [stream], timeout=60)
    # Every node's metadata follows the leader's within a moment.
    wait_until(lambda: replicas_of(cluster, stream) == tuple(sorted(target)), 10, f"{stream} on {target}")


def check_everything(cluster: DevCluster, stream: str, acked: list[tuple[str, int, bytes]],
                     replicas: tuple[int, ...]) -> None:
    leader, hw = high_watermark(cluster, stream, timeout=30)
    assert leader in replicas
    fetched = {o: v for o, (_, v) in read_all(node_address(cluster, leader), stream, 0, hw).items()}
    assert sorted(fetched) == list(range(hw)), "the leader's committed log has holes"
    assert hw >= len(acked)
    assert check_acknowledged(acked, fetched) == []
    for node_id, image in wait_logs_converged(cluster, stream, nodes=replicas).items():
        assert {o: v for o, v in image.records().items() if o < hw} == fetched, f"node {node_id} differs"
    for node_id in cluster.node_ids():
        if node_id not in replicas:
            data = Path(cluster.nodes[node_id].config.data_dir)
            assert not (data / stream).exists(), f"node {node_id} kept a replica of {stream} it no longer holds"


@pytest.mark.parametrize("how", ["kill", "clean", "stale-copy"])
def test_move_away_restart_and_move_back_keeps_every_record(cluster: DevCluster, how: str, tmp_path: Path) -> None:
    """kill / clean: node 1 is restarted (kill -9 or SIGTERM) right after the stream moved off
    it (racing its deletion of the moved replica). stale-copy: node 1 crashed before it deleted
    it -- the replica's directory (and its registry entry) as it was before the move is put
    back while node 1 is down, deterministically."""
    stream = f"back-{how}"
    probes = ProbeLog()
    create_stream(cluster, stream, via=1, probes=probes, replication_factor=1)
    if replicas_of(cluster, stream) != (1,):
        move(cluster, stream, [1])
    acked = [("probe", o, v) for v, o in probes.acked] + preload(cluster, stream, 1.0)
    data = Path(cluster.nodes[1].config.data_dir)
    if how == "stale-copy":
        # Idle (every acknowledged record fsync'd): a copy is what a crash would leave.
        shutil.copytree(data / stream, tmp_path / "copy")
        registry = [p.name for p in (data / "__replicas").glob(f"{stream}#*")]
        assert registry
    move(cluster, stream, [3])
    if how == "clean":
        cluster.stop(1, signal.SIGTERM)
    else:
        cluster.kill(1)
    if how == "stale-copy":
        wait_until(lambda: not (data / stream).exists(), 10, "node 1 deleted its replica")
        shutil.copytree(tmp_path / "copy", data / stream)
        for name in registry:
            (data / "__replicas" / name).touch()
    cluster.restart(1, timeout_s=60)
    acked += [("after", o, v) for _, o, v in preload(cluster, stream, 1.0)]
    move(cluster, stream, [1])
    acked += [("back", o, v) for _, o, v in preload(cluster, stream, 0.2)]
    check_everything(cluster, stream, acked, (1,))

"""Leaders spread evenly after a rolling restart of every node: each graceful stop hands the
node's leaderships to the others, so the node restarted last would lead nothing and the others
too much; the leader balancer (leader_balance_interval_ms) hands the excess back to the
preferred leaders. No node may end leading more than ceil(streams / nodes) + 1 streams."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from tests.faults.harness import wait_for_full_isr, wait_until
from vdl_client.client import VdlClient
from vdl_client.settings import ClientSettings
from vdl_dev.dev_cluster import DevCluster

pytestmark = pytest.mark.timeout(300)

CLUSTER_SETTINGS = {"leader_balance_interval_ms": 1000}
STREAMS = [f"balance-{i}" for i in range(9)]


def leaders(cluster: DevCluster) -> dict[str, int]:
    with VdlClient(ClientSettings.from_bootstrap(cluster.bootstrap_servers, deadline_ms=30_000)) as client:
        return {t.name: int(p.leader_id) for t in client.metadata(STREAMS).topics for p in t.partitions}


def test_rolling_restart_ends_with_leaders_spread_evenly(cluster: DevCluster) -> None:
    with VdlClient(ClientSettings.from_bootstrap(cluster.bootstrap_servers, deadline_ms=30_000)) as client:
        for stream in STREAMS:
            client.create_stream(stream, 3)
    for stream in STREAMS:
        wait_for_full_isr(cluster, stream)
    for node_id in cluster.node_ids():
        cluster.restart(node_id, timeout_s=60)  # SIGTERM: a graceful stop hands leaderships over
        for stream in STREAMS:
            wait_for_full_isr(cluster, stream, timeout=60)
    limit = math.ceil(len(STREAMS) / len(cluster.nodes)) + 1

    def spread() -> Counter[int] | None:
        counts = Counter(leaders(cluster).values())
        return counts if -1 not in counts and max(counts.values()) <= limit and len(counts) == 3 else None

    counts = wait_until(spread, 30, f"no node leading more than {limit} of {len(STREAMS)} streams")
    assert sum(counts.values()) == len(STREAMS)

"""Nodes describe themselves (Kafka's broker registration): each node registers its own rack,
addresses and listeners from its own node.toml at every start, through the metadata leader, so
no `[[peers]]` entry needs to repeat them, and a changed setting shows after the node restarts."""

from __future__ import annotations

import subprocess
import tomllib
from collections.abc import Callable

import pytest

from tests.support.cluster import VDL_CLI, BrokerProcess, node_address, wait_until
from tests.support.kafka import metadata_raw
from vdl_broker.config import dump_node_config
from vdl_dev.dev_cluster import DevCluster

pytestmark = pytest.mark.timeout(180)

CLUSTER_RACKS = {1: "rack-1", 2: "rack-2", 3: "rack-3"}


def racks_in_metadata(cluster: DevCluster, node_id: int) -> dict[int, str | None]:
    return {b.node_id: b.rack for b in metadata_raw(node_address(cluster, node_id), []).brokers}


def racks_listed(cluster: DevCluster) -> dict[int, str]:
    listed = subprocess.run([*VDL_CLI, "nodes", "list", "--bootstrap", cluster.bootstrap_servers],
                            capture_output=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.decode().splitlines()[1:]]
    return {int(row[0]): row[3] for row in rows}


def every_node_says(cluster: DevCluster, racks: dict[int, str]) -> bool:
    return all(racks_in_metadata(cluster, n) == racks for n in cluster.node_ids())


def test_each_node_registers_its_own_rack_and_a_changed_rack_shows_after_its_restart(cluster: DevCluster) -> None:
    for node in cluster.nodes.values():  # the racks are in no peers entry: each node's own setting only
        written = tomllib.loads(node.config_path.read_text())
        assert written["rack"] == CLUSTER_RACKS[node.node_id]
        assert [("rack" in peer) for peer in written["peers"]] == [False, False, False]
    wait_until(lambda: every_node_says(cluster, CLUSTER_RACKS), 30,
               lambda: f"every rack in Metadata: {racks_in_metadata(cluster, 1)}")
    assert racks_listed(cluster) == CLUSTER_RACKS

    node = cluster.nodes[2]
    node.config.rack = "rack-moved"
    node.config_path.write_text(dump_node_config(node.config))
    cluster.restart(2)
    moved = CLUSTER_RACKS | {2: "rack-moved"}
    wait_until(lambda: every_node_says(cluster, moved), 30,
               lambda: f"the new rack in Metadata: {racks_in_metadata(cluster, 1)}")
    assert racks_listed(cluster) == moved

    # Without a rack setting it has none.
    node.config.rack = None
    node.config_path.write_text(dump_node_config(node.config))
    cluster.restart(2)
    unracked = CLUSTER_RACKS | {2: None}
    wait_until(lambda: every_node_says(cluster, unracked), 30,
               lambda: f"no rack for node 2 in Metadata: {racks_in_metadata(cluster, 1)}")
    assert racks_listed(cluster) == CLUSTER_RACKS | {2: "-"}


def test_a_node_of_its_own_without_raft_listen_registers_itself_and_serves_at_once(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    """A cluster of one has no raft address: its registration carries none and is accepted (it
    was refused as a bad raft address, so the node waited out its 10 s metadata wait at every
    start, warned it started without the cluster metadata, and a changed rack never showed)."""
    broker = broker_factory(rack="rack-a", auto_create_streams=False)
    assert "starting without the cluster metadata" not in broker.recent_output(2000)
    assert [(b.node_id, b.rack) for b in metadata_raw(broker.bootstrap, []).brokers] == [(1, "rack-a")]
    broker.config["rack"] = "rack-b"
    broker.restart()
    assert "starting without the cluster metadata" not in broker.recent_output(2000)
    assert [(b.node_id, b.rack) for b in metadata_raw(broker.bootstrap, []).brokers] == [(1, "rack-b")]

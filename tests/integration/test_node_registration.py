"""Nodes describe themselves (Kafka's broker registration): each node registers its own rack,
addresses and listeners from its own node.toml at every start, through the metadata leader, so
no `[[peers]]` entry needs to repeat them, and a changed setting shows after the node restarts."""

from __future__ import annotations

import subprocess
import tomllib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import confluent_kafka
import pytest

from tests.support.cluster import VDL_CLI, BrokerProcess, node_address, start_cluster, wait_until
from tests.support.kafka import create_topic_raw, metadata_raw, read_to_end
from vdl_broker.config import NodeAddress, dump_node_config
from vdl_dev.dev_cluster import DevCluster, free_base_port, ports_needed

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


def produce_all(bootstrap: str, stream: str, values: list[bytes]) -> list[tuple[int, bytes]]:
    """(offset, value) of each record as an idempotent acks=all confluent-kafka producer had it
    acknowledged."""
    acked: list[tuple[int, bytes]] = []

    def on_delivery(error: confluent_kafka.KafkaError | None, message: confluent_kafka.Message) -> None:
        assert error is None, error
        acked.append((message.offset(), message.value()))

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                         "linger.ms": 5})
    for value in values:
        producer.produce(stream, value, partition=0, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    return sorted(acked)


def move_every_node(cluster: DevCluster, host: str) -> None:
    """A new host and new client, raft and metrics ports for every node, in its own settings and
    in every node's `peers` (as an operator moving the whole cluster writes them)."""
    base = free_base_port(ports_needed(len(cluster.nodes), metrics=True), host)
    count = len(cluster.nodes)
    peers = [NodeAddress(i, f"{host}:{base + i - 1}", f"{host}:{base + count + i - 1}") for i in cluster.node_ids()]
    for node_id, node in cluster.nodes.items():
        node.config = replace(node.config, host=host, port=base + node_id - 1, raft_listen=peers[node_id - 1].raft,
                              metrics_listen=f"{host}:{base + 2 * count + node_id - 1}", peers=peers)


def test_a_whole_cluster_moved_to_new_addresses_forms_again_and_keeps_its_records(tmp_path: Path) -> None:
    """Every node's addresses change at once (new `peers` everywhere, new listen addresses), all
    restarted on their data directories: the configured peers reach the quorum and each node
    registers its new addresses (the addresses the metadata held were all stale: the nodes
    dialled each other there and no metadata leader was ever elected)."""
    cluster = start_cluster(tmp_path, nodes=3, register=lambda c: None)
    try:
        assert create_topic_raw(node_address(cluster, 1), "moved", replication_factor=3) == (0, None)
        before = produce_all(cluster.bootstrap_servers, "moved", [f"before-{i}".encode() for i in range(300)])
        assert before == [(i, f"before-{i}".encode()) for i in range(300)]
        cluster.stop_all()

        move_every_node(cluster, "127.0.0.2")  # another loopback address: a new host
        assert "127.0.0.1" not in cluster.bootstrap_servers
        cluster.start(timeout_s=30)
        cluster.wait_for_brokers(timeout_s=30)
        moved = {n: cluster.nodes[n].client_address for n in cluster.node_ids()}
        for node_id in cluster.node_ids():  # each node's new address, in every node's Metadata
            brokers = metadata_raw(node_address(cluster, node_id), []).brokers
            assert {b.node_id: f"{b.host}:{b.port}" for b in brokers} == moved

        assert read_to_end(cluster.bootstrap_servers, "moved", "read_uncommitted", at_least=300) == before
        after = produce_all(cluster.bootstrap_servers, "moved", [f"after-{i}".encode() for i in range(50)])
        assert after == [(300 + i, f"after-{i}".encode()) for i in range(50)]
        assert read_to_end(cluster.bootstrap_servers, "moved", "read_uncommitted", at_least=350) == before + after
    finally:
        cluster.kill_all()

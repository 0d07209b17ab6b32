"""The cluster id is created once, when the cluster forms, and kept in the replicated metadata:
every node answers the same id in Metadata whatever addresses the nodes use for each other
(behind proxies, NAT or DNS names the nodes of one cluster see different addresses), and the id
survives restarts of every node."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.cluster import wait_until
from tests.support.kafka import raw_request
from vdl_dev.dev_cluster import DevCluster, free_base_port
from vdl_wire import messages as m

pytestmark = pytest.mark.timeout(120)


def cluster_ids(cluster: DevCluster) -> set[str | None]:
    return {raw_request(cluster.nodes[i].client_address, m.MetadataRequest(topics=[]), 8).cluster_id
            for i in cluster.node_ids()}


def test_every_node_answers_one_cluster_id_whatever_addresses_it_knows_its_peers_by(tmp_path: Path) -> None:
    cluster = DevCluster(3, tmp_path, free_base_port(6), settings={"fsync": False, "log_level": "WARNING"})
    # Node 1 knows node 2's Raft address by another name than nodes 2 and 3 do.
    config = cluster.nodes[1].config
    config.peers = [replace(peer, raft=peer.raft.replace("127.0.0.1", "localhost")) if peer.id == 2 else peer
                    for peer in config.peers]
    try:
        cluster.start(timeout_s=30)
        cluster.wait_for_brokers(timeout_s=30)
        ids = wait_until(lambda: (found := cluster_ids(cluster)) and None not in found and found, 15,
                         "every node knowing the cluster id")
        assert len(ids) == 1
        [cluster_id] = ids
        assert len(cluster_id) == 22  # Kafka's form: a UUID as URL-safe base64
        cluster.stop_all()
        cluster.start(timeout_s=30)
        cluster.wait_for_brokers(timeout_s=30)
        assert wait_until(lambda: cluster_ids(cluster) == {cluster_id}, 15, "the same id after a restart")
    finally:
        cluster.kill_all()

"""The demo's local cluster: a `DevCluster` (vdl_dev/dev_cluster.py) on free loopback ports.

Every node runs in its own process group, is stopped in `stop()`, and gets SIGTERM from the
kernel if the demo process dies without cleaning up, so nothing outlives the demo.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vdl_dev.dev_cluster import DevCluster, free_base_port, ports_needed

STATE_FILE = "cluster.json"  # node id -> pid and address, for notebook 03 (kill the leader)


@dataclass
class DemoCluster:
    """What the demo and the notebooks need from a running cluster."""

    nodes: int
    cluster: DevCluster
    data_dir: Path

    @property
    def kind(self) -> str:
        return f"{self.nodes}-node dev cluster"

    @property
    def bootstrap_servers(self) -> str:
        return self.cluster.bootstrap_servers

    def node_pids(self) -> dict[int, int]:
        return {i: n.pid for i, n in self.cluster.nodes.items() if n.running and n.pid is not None}

    def write_state(self) -> Path:
        """DATA_DIR/cluster.json: bootstrap servers and node pids (notebook 03 reads it)."""
        path = self.data_dir / STATE_FILE
        addresses = {i: n.client_address for i, n in self.cluster.nodes.items()}
        state = {"kind": self.kind, "bootstrap_servers": self.bootstrap_servers,
                 "nodes": {str(i): {"pid": pid, "address": addresses[i]} for i, pid in self.node_pids().items()}}
        path.write_text(json.dumps(state, indent=2))
        return path

    def stop(self) -> None:
        self.cluster.stop_all()


def start_cluster(nodes: int, data_dir: Path, *, fsync: bool = True,
                  log: Callable[[str], object] = print) -> DemoCluster:
    """Start `nodes` brokers under data_dir/cluster and wait until they serve clients."""
    data_dir.mkdir(parents=True, exist_ok=True)
    cluster = DevCluster(nodes, data_dir / "cluster", free_base_port(ports_needed(nodes, True)),
                         settings=None if fsync else {"fsync": False}, metrics=True)
    started = time.monotonic()
    try:
        cluster.start()
    except BaseException:  # a failed start or Ctrl-C while the nodes start: none may outlive us
        cluster.kill_all()
        raise
    log(f"started a {nodes}-node VDL cluster in {time.monotonic() - started:.1f} s: {cluster.bootstrap_servers}")
    log("metrics (Prometheus): " + " ".join(cluster.metrics_urls().values()))
    return DemoCluster(nodes, cluster, data_dir)


def end_offset(bootstrap: str, stream: str) -> int:
    """The stream's log end offset (its high watermark), asked of the cluster at `bootstrap`."""
    from vdl_client import ClientSettings, VdlClient

    with VdlClient(ClientSettings.from_bootstrap(bootstrap, client_id="vdl-demo")) as client:
        return client.list_offsets([stream], -1)[stream]

"""The cluster a campaign runs on: `vdl-broker` processes whose Raft links go through the proxies
of links.py, each node's data directory on its own size-limited tmpfs when this machine allows
it (for disk-full faults), and what the nemeses need to know about it (who leads, who is down).
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.faults.chaos.links import Links, link_name
from tests.support.cluster import node_address, running_nodes, start_cluster, wait_until
from tests.support.disk import TmpfsUnavailable, mount_tmpfs, unmount
from tests.support.kafka import create_topic_raw, metadata_raw
from vdl_dev.dev_cluster import DevCluster, free_base_port
from vdl_wire.errors import ErrorCode

# Small segments, so even a short campaign's logs have sealed segments and index files to damage,
# and a small tail cache, so reads of all but the newest entries meet the segments (a long-lived
# node's reads do); fsync on (the data directories are tmpfs: cheap), as in production.
CHAOS_SETTINGS: dict[str, Any] = {"fsync": True, "segment_bytes": 256 << 10, "tail_cache_bytes": 256 << 10}
DISK_SIZE = "384m"


@dataclass
class World:
    cluster: DevCluster
    links: Links
    streams: list[str]
    tmpfs: bool  # every node's data directory is its own size-limited tmpfs
    tmpfs_reason: str = ""
    down: set[int] = field(default_factory=set)  # killed by a nemesis, not yet restarted
    paused: set[int] = field(default_factory=set)
    mounts: list[Path] = field(default_factory=list)

    @property
    def node_ids(self) -> list[int]:
        return self.cluster.node_ids()

    def address(self, node_id: int) -> str:
        return node_address(self.cluster, node_id)

    def data_dir(self, node_id: int) -> Path:
        return self.cluster.nodes[node_id].config.data_dir

    def reachable(self) -> list[int]:
        return [i for i in running_nodes(self.cluster) if i not in self.paused]

    def leader_of(self, stream: str) -> int | None:
        return self.cluster.leader_of(stream, timeout_s=1.0)

    def metadata_leader(self) -> int | None:
        for node_id in self.reachable():
            try:
                response = metadata_raw(self.address(node_id), [])
            except (OSError, ValueError):
                continue
            if response.controller_id >= 0:
                return int(response.controller_id)
        return None

    # -------------------------------------------------------------- process faults

    def kill(self, node_id: int) -> None:
        self.paused.discard(node_id)
        self.cluster.kill(node_id)
        self.down.add(node_id)

    def restart(self, node_id: int) -> None:
        self.cluster.restart(node_id, timeout_s=90)
        self.down.discard(node_id)

    def pause(self, node_id: int) -> None:
        self.cluster.stop(node_id, signal.SIGSTOP)
        self.paused.add(node_id)

    def resume(self, node_id: int) -> None:
        self.cluster.stop(node_id, signal.SIGCONT)
        self.paused.discard(node_id)

    def close(self) -> None:
        self.cluster.kill_all()
        self.links.close()
        for mount in self.mounts:
            unmount(mount)


def start_world(directory: Path, nodes: int, seed: int, streams: list[str],
                settings: dict[str, Any] | None = None, racks: dict[int, str] | None = None,
                env: dict[str, str] | None = None) -> World:
    """Start the cluster with proxied Raft links and tmpfs data directories, and create
    `streams` (replicated on every node, up to 5) once every node lists every broker. `env`:
    the nodes' environment variables beyond the test's."""
    made: list[tuple[Links, list[Path]]] = []
    tmpfs_state = {"ok": True, "reason": ""}

    def prepare(cluster: DevCluster) -> None:
        cluster.log_files = True  # DIR/node<i>/output.log: the whole story of every node
        mounts: list[Path] = []
        for node in cluster.nodes.values():
            try:
                mount_tmpfs(node.config.data_dir, DISK_SIZE)
                mounts.append(node.config.data_dir)
            except TmpfsUnavailable as error:
                tmpfs_state.update(ok=False, reason=str(error))
        ids = cluster.node_ids()
        pairs = [link_name(a, b) for a in ids for b in ids if a < b]
        base = free_base_port(len(pairs))
        raft = {i: cluster.nodes[i].config.raft_listen or "" for i in ids}
        links = Links(ids, raft, {name: base + k for k, name in enumerate(pairs)}, seed,
                      log_path=Path(directory) / "links.log")
        made.append((links, mounts))
        for node_id, node in cluster.nodes.items():
            # The lower id dials: its view of each higher peer's Raft address is that link's proxy.
            peers = [dataclasses.replace(p, raft=links.proxy_address(node_id, p.id)) if node_id < p.id else p
                     for p in node.config.peers]
            node.config = dataclasses.replace(node.config, peers=peers)

    Path(directory).mkdir(parents=True, exist_ok=True)
    cluster = start_cluster(directory, nodes, settings=CHAOS_SETTINGS | dict(settings or {}), register=prepare,
                            racks=racks, env=env)
    for links, mounts in made[:-1]:  # attempts that lost a port race
        links.close()
        for mount in mounts:
            unmount(mount)
    links, mounts = made[-1]
    world = World(cluster, links, streams, tmpfs_state["ok"], str(tmpfs_state["reason"]), mounts=mounts)
    try:
        for stream in streams:
            code, message = create_topic_raw(world.address(1), stream, min(nodes, 5))
            if code != ErrorCode.NONE:
                raise RuntimeError(f"CreateTopics {stream}: {ErrorCode(code).name} {message}")
            wait_until(lambda s=stream: world.leader_of(s) is not None, 60, f"a leader for {stream}")
    except BaseException:
        with contextlib.suppress(Exception):
            world.close()
        raise
    return world

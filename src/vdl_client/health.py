"""A cluster's health from the outside, for `vdl cluster status`: one Metadata answer names every
registered node and every stream; then each node is asked itself (Metadata and DescribeLogDirs,
with a short timeout) whether it is up, which streams it leads and how much disk it has left.

A stream's leader is taken from the leader's own word (a node names itself leader of a stream
only while it serves it, with the in-sync set it computed), never from another node's cached
view: a stream no live node claims is unavailable; one whose leader counts fewer in-sync
replicas than replicas is under-replicated.
"""

from __future__ import annotations

from dataclasses import dataclass

from vdl_client.client import VdlClient
from vdl_client.settings import BrokerUnreachableError
from vdl_wire.messages import DescribeLogDirsRequest, MetadataRequest

NODE_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class NodeHealth:
    node_id: int
    address: str
    up: bool
    leads: tuple[str, ...] = ()  # streams it leads and serves, by its own word
    disk_total: int = -1  # bytes of the disk holding its data directory (-1: unknown)
    disk_free: int = -1

    @property
    def disk_free_fraction(self) -> float | None:
        return self.disk_free / self.disk_total if self.up and self.disk_total > 0 and self.disk_free >= 0 else None


@dataclass(frozen=True)
class ClusterHealth:
    cluster_id: str | None
    metadata_leader: int  # -1: none known
    nodes: tuple[NodeHealth, ...]
    streams: tuple[str, ...]
    under_replicated: tuple[str, ...]
    unavailable: tuple[str, ...]

    def problems(self, min_disk_free: float) -> list[str]:
        """What makes the cluster unhealthy (empty: healthy); `min_disk_free` is a fraction."""
        found = [f"node {n.node_id} down" for n in self.nodes if not n.up]
        found += [f"node {n.node_id} disk {fraction:.0%} free" for n in self.nodes
                  if (fraction := n.disk_free_fraction) is not None and fraction < min_disk_free]
        if self.metadata_leader < 0:
            found.append("no metadata leader")
        if self.under_replicated:
            found.append(f"{len(self.under_replicated)} under-replicated stream(s)")
        if self.unavailable:
            found.append(f"{len(self.unavailable)} unavailable stream(s)")
        return found


def cluster_health(client: VdlClient, node_timeout_s: float = NODE_TIMEOUT_S) -> ClusterHealth:
    overview = client.metadata(None)
    streams = tuple(sorted(t.name for t in overview.topics if not t.is_internal))
    replicas = {t.name: len(p.replica_nodes) for t in overview.topics for p in t.partitions if p.partition_index == 0}
    nodes = []
    claimed: dict[str, int] = {}
    under: set[str] = set()
    leaders = {overview.controller_id} if overview.controller_id >= 0 else set()
    for broker in sorted(overview.brokers, key=lambda b: b.node_id):
        address = client.address_of(broker.node_id)
        try:
            own = client.request_node(broker.node_id, MetadataRequest(topics=None), node_timeout_s)
            dirs = client.request_node(broker.node_id, DescribeLogDirsRequest(topics=[]), node_timeout_s)
        except BrokerUnreachableError:
            nodes.append(NodeHealth(broker.node_id, address, up=False))
            continue
        leads = []
        for topic in own.topics:
            for partition in topic.partitions:
                if partition.partition_index == 0 and partition.error_code == 0 and partition.leader_id == broker.node_id:
                    leads.append(topic.name)
                    claimed[topic.name] = broker.node_id
                    if len(partition.isr_nodes) < replicas.get(topic.name, len(partition.replica_nodes)):
                        under.add(topic.name)
        if own.controller_id >= 0:
            leaders.add(own.controller_id)
        result = dirs.results[0] if dirs.error_code == 0 and dirs.results else None
        total, free = (result.total_bytes, result.usable_bytes) if result is not None and result.error_code == 0 \
            else (-1, -1)
        nodes.append(NodeHealth(broker.node_id, address, True, tuple(sorted(leads)), total, free))
    up = {n.node_id for n in nodes if n.up}
    # The nodes that answered agree on one metadata leader that is itself up, or there is none.
    metadata_leader = leaders.pop() if len(leaders) == 1 and leaders <= up else -1
    unavailable = tuple(s for s in streams if s not in claimed)
    return ClusterHealth(overview.cluster_id, metadata_leader, tuple(nodes), streams,
                         tuple(sorted(under & set(streams))), unavailable)

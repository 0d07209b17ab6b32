"""Gauges read from the broker's state when Prometheus scrapes (nothing is kept between scrapes).

What each node reports, so that a sum over nodes counts every stream once:
- per local replica: high watermark, log start, size on disk, whether this node leads it;
- as a stream's leader: each follower's lag in Raft entries, whether the stream is
  under-replicated (a replica out of the in-sync set, as Metadata's ISR), and each consumer
  group's lag on it (high watermark minus the group's committed offset);
- vdl_unavailable_streams: local replicas that know no serving leader (none elected, or this
  node elected but not serving yet). Unavailable streams have no leader to report them, so every
  replica reports its own view: alert on max() over nodes, not sum().
- per Raft group (streams and "__metadata"): elections this node won (from its first win);
- per peer: Raft frames from it this node refused as malformed (from the start);
- the node: size and free bytes of the data directory's disk, open client connections, the
  memory its logs' tail caches hold and their budget (the caches fill after a start, up to what
  their logs hold or the budget: memory that grows for a while after a start and then stays, not
  a leak).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

if TYPE_CHECKING:  # the broker's parts, read here, import this module
    from vdl_broker.cluster.service import MetadataService
    from vdl_broker.config import NodeConfig
    from vdl_broker.log.tail_cache import CacheBudget
    from vdl_broker.raft.host import RaftHost
    from vdl_broker.server.replica_manager import ReplicaManager

_Family = GaugeMetricFamily | CounterMetricFamily


class BrokerView(Protocol):
    """What the collectors read of a broker (vdl_broker.server.broker.Broker)."""

    node_id: int
    config: NodeConfig
    replicas: ReplicaManager
    host: RaftHost
    metadata: MetadataService
    connections: set[Any]  # only counted
    cache_budget: CacheBudget


def _families() -> dict[str, _Family]:
    stream = ["stream"]
    return {
        "hw": GaugeMetricFamily("vdl_stream_high_watermark", "Offset after the last committed record, as "
                                "this replica knows it", labels=stream),
        "start": GaugeMetricFamily("vdl_stream_log_start_offset", "First offset still stored", labels=stream),
        "size": GaugeMetricFamily("vdl_stream_size_bytes", "Bytes of the stream's segments on this node",
                                  labels=stream),
        "leader": GaugeMetricFamily("vdl_stream_is_leader", "1 when this node leads the stream and serves it",
                                    labels=stream),
        "lag": GaugeMetricFamily("vdl_raft_follower_lag_entries", "Raft entries the leader has that a follower "
                                 "has not acknowledged (reported by the leader)", labels=["stream", "follower"]),
        "under": GaugeMetricFamily("vdl_under_replicated_streams", "Streams this node leads with a replica "
                                   "out of the in-sync set"),
        "unavailable": GaugeMetricFamily("vdl_unavailable_streams", "Streams with a replica here that know no "
                                         "serving leader (take max over nodes)"),
        "elections": CounterMetricFamily("vdl_raft_leader_changes", "Times this node became the leader of a "
                                         "Raft group (a stream, or __metadata)", labels=["group"]),
        "group_lag": GaugeMetricFamily("vdl_consumer_group_lag", "High watermark minus the group's committed "
                                       "offset, for streams this node leads", labels=["group", "stream"]),
        "group_lag_sum": GaugeMetricFamily("vdl_consumer_group_lag_sum", "A group's lag summed over the "
                                           "streams this node leads", labels=["group"]),
        "refused": CounterMetricFamily("vdl_raft_frames_refused", "Raft frames from a peer this node refused "
                                       "as malformed, a record batch failing its CRC32C (damaged on the way) "
                                       "among them: each with its connection, and the peer sent again",
                                       labels=["peer"]),
        "groups": GaugeMetricFamily("vdl_raft_groups", "Raft groups on this node (every stream replica and "
                                    "the metadata group)"),
        "awake": GaugeMetricFamily("vdl_raft_groups_awake", "Raft groups on this node that tick (the others are "
                                   "quiescent: idle, no heartbeats of their own)"),
        "disk": GaugeMetricFamily("vdl_disk_free_bytes", "Free bytes on the disk holding the data directory"),
        "disk_total": GaugeMetricFamily("vdl_disk_total_bytes", "Size of the disk holding the data directory"),
        "connections": GaugeMetricFamily("vdl_connections", "Open Kafka client connections"),
        "cache": GaugeMetricFamily("vdl_tail_cache_bytes", "Memory the tail caches of this node's logs hold "
                                   "(each cached entry's payload and per-entry overhead)"),
        "cache_budget": GaugeMetricFamily("vdl_tail_cache_budget_bytes", "The node's tail_cache_bytes: what its "
                                          "tail caches may hold together"),
    }


class BrokerCollector:
    """The scrape-time gauges of one broker (see the module docstring)."""

    def __init__(self, broker: BrokerView, isr_max_lag_entries: int) -> None:
        self.broker = broker
        self.isr_max_lag_entries = isr_max_lag_entries

    def describe(self) -> Iterator[Metric]:
        yield from _families().values()

    def collect(self) -> Iterator[Metric]:
        # A scrape of a node with thousands of streams must stay well under a second: samples
        # are appended directly (one label dict per stream, shared by its samples), not through
        # add_metric's per-call zip and dict.
        broker = self.broker
        node_id = broker.node_id
        f = _families()
        hw_samples, start_samples = f["hw"].samples, f["start"].samples
        size_samples, leader_samples, lag_samples = f["size"].samples, f["leader"].samples, f["lag"].samples
        under = unavailable = 0
        led: dict[str, int] = {}  # stream -> high watermark, for streams this node serves
        for partition in broker.replicas.all():
            group = partition.group
            if group is None or partition.closed:
                continue
            name = partition.name
            labels = {"stream": name}
            leads = partition.is_leader
            hw = partition.high_watermark
            hw_samples.append(Sample("vdl_stream_high_watermark", labels, hw))
            start_samples.append(Sample("vdl_stream_log_start_offset", labels, partition.log_start_offset))
            size_samples.append(Sample("vdl_stream_size_bytes", labels, partition.log.size_bytes))
            leader_samples.append(Sample("vdl_stream_is_leader", labels, 1 if leads else 0))
            if leads:
                led[name] = hw
                if len(group.voters) > 1:
                    last = group.last_index
                    for peer, status in sorted(group.peer_status().items()):
                        if peer != node_id:
                            lag_samples.append(Sample("vdl_raft_follower_lag_entries",
                                                      {"stream": name, "follower": str(peer)},
                                                      max(0, last - status.match)))
                    if len(group.in_sync_replicas(self.isr_max_lag_entries)) < len(group.voters):
                        under += 1
            elif group.stopped or group.leader_id in (0, node_id):
                unavailable += 1
        f["under"].add_metric([], under)
        f["unavailable"].add_metric([], unavailable)
        elections = f["elections"].samples
        for group in list(broker.host.groups.values()):
            if group.elections_won:  # a series appears once this node has led the group
                elections.append(Sample("vdl_raft_leader_changes_total", {"group": group.name.split("#", 1)[0]},
                                        group.elections_won))
        transport = broker.host.transport
        if transport is not None:
            for peer in sorted(transport.peer_ids()):
                f["refused"].samples.append(Sample("vdl_raft_frames_refused_total", {"peer": str(peer)},
                                                   transport.stats(peer).refused))
        f["groups"].add_metric([], len(broker.host.groups))
        f["awake"].add_metric([], broker.host.awake_groups())
        self._group_lag(f, led)
        total, free = _disk(broker.config.data_dir)
        f["disk"].add_metric([], free)
        f["disk_total"].add_metric([], total)
        f["connections"].add_metric([], len(broker.connections))
        f["cache"].add_metric([], broker.cache_budget.bytes)
        f["cache_budget"].add_metric([], broker.cache_budget.limit)
        yield from f.values()

    def _group_lag(self, f: dict[str, _Family], led: dict[str, int]) -> None:
        lag_samples, sum_samples = f["group_lag"].samples, f["group_lag_sum"].samples
        for group_id, offsets in sorted(self.broker.metadata.state.groups.offsets.items()):
            total = 0
            counted = False
            for stream, committed in sorted(offsets.items()):
                hw = led.get(stream)
                if hw is None:
                    continue
                lag = max(0, hw - committed.offset)
                lag_samples.append(Sample("vdl_consumer_group_lag", {"group": group_id, "stream": stream}, lag))
                total += lag
                counted = True
            if counted:
                sum_samples.append(Sample("vdl_consumer_group_lag_sum", {"group": group_id}, total))


def _disk(path: str | os.PathLike[str]) -> tuple[float, float]:
    """(total, free) bytes of the disk holding `path` (NaN when it cannot be read)."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return float("nan"), float("nan")
    return float(usage.total), float(usage.free)

"""Gauges read from the broker's state when Prometheus scrapes (nothing is kept between scrapes).

What each node reports, so that a sum over nodes counts every stream once:
- per local replica: high watermark, log start, size on disk, whether this node leads it;
- as a stream's leader: each follower's lag in Raft entries, whether the stream is
  under-replicated (a replica out of the in-sync set, as Metadata's ISR), and each consumer
  group's lag on it (high watermark minus the group's committed offset);
- vdl_unavailable_streams: local replicas that know no serving leader (none elected, or this
  node elected but not serving yet). Unavailable streams have no leader to report them, so every
  replica reports its own view: alert on max() over nodes, not sum().
- per Raft group (streams and "__metadata"): elections this node won;
- the node: free bytes on the data directory's disk, open client connections.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric


class BrokerView(Protocol):
    """What the collectors read of a broker (vdl_broker.server.broker.Broker)."""

    node_id: int
    config: Any  # NodeConfig: data_dir
    replicas: Any  # ReplicaManager: all() -> local Partitions
    host: Any  # RaftHost: groups by name
    metadata: Any  # MetadataService: state.groups.offsets
    connections: set[Any]


def _families() -> dict[str, Metric]:
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
        "groups": GaugeMetricFamily("vdl_raft_groups", "Raft groups on this node (every stream replica and "
                                    "the metadata group)"),
        "awake": GaugeMetricFamily("vdl_raft_groups_awake", "Raft groups on this node that tick (the others are "
                                   "quiescent: idle, no heartbeats of their own)"),
        "disk": GaugeMetricFamily("vdl_disk_free_bytes", "Free bytes on the disk holding the data directory"),
        "connections": GaugeMetricFamily("vdl_connections", "Open Kafka client connections"),
    }


class BrokerCollector:
    """The scrape-time gauges of one broker (see the module docstring)."""

    def __init__(self, broker: BrokerView, isr_max_lag_entries: int) -> None:
        self.broker = broker
        self.isr_max_lag_entries = isr_max_lag_entries

    def describe(self) -> Iterator[Metric]:
        yield from _families().values()

    def collect(self) -> Iterator[Metric]:
        broker = self.broker
        f = _families()
        under = unavailable = 0
        led: dict[str, int] = {}  # stream -> high watermark, for streams this node serves
        for partition in broker.replicas.all():
            name = partition.name
            group = partition.group
            if group is None or partition.closed:
                continue
            leads = partition.is_leader
            hw = partition.high_watermark
            f["hw"].add_metric([name], hw)
            f["start"].add_metric([name], partition.log_start_offset)
            f["size"].add_metric([name], partition.log.size_bytes)
            f["leader"].add_metric([name], 1 if leads else 0)
            if leads:
                led[name] = hw
                last = group.last_index
                for peer, status in sorted(group.peer_status().items()):
                    if peer != broker.node_id:
                        f["lag"].add_metric([name, str(peer)], max(0, last - status.match))
                if len(group.in_sync_replicas(self.isr_max_lag_entries)) < len(group.voters):
                    under += 1
            elif group.stopped or group.leader_id in (0, broker.node_id):
                unavailable += 1
        f["under"].add_metric([], under)
        f["unavailable"].add_metric([], unavailable)
        for group in list(broker.host.groups.values()):
            f["elections"].add_metric([group.name.split("#", 1)[0]], group.elections_won)
        f["groups"].add_metric([], len(broker.host.groups))
        f["awake"].add_metric([], broker.host.awake_groups())
        self._group_lag(f, led)
        f["disk"].add_metric([], _disk_free(broker.config.data_dir))
        f["connections"].add_metric([], len(broker.connections))
        yield from f.values()

    def _group_lag(self, f: dict[str, Metric], led: dict[str, int]) -> None:
        for group_id, offsets in sorted(self.broker.metadata.state.groups.offsets.items()):
            total = 0
            counted = False
            for stream, committed in sorted(offsets.items()):
                hw = led.get(stream)
                if hw is None:
                    continue
                lag = max(0, hw - committed.offset)
                f["group_lag"].add_metric([group_id, stream], lag)
                total += lag
                counted = True
            if counted:
                f["group_lag_sum"].add_metric([group_id], total)


def _disk_free(path: Any) -> float:
    try:
        return float(shutil.disk_usage(path).free)
    except OSError:
        return float("nan")

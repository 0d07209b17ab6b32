"""Metrics of streams that are Delta tables (vdl_broker/tables), read when Prometheus scrapes.

Lag is reported by the stream's leader only (the node that writes the table), so a sum over
nodes counts every stream once; the counters are this node's commits and dead letters (sum them
over nodes: a stream's leader changes).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

_Family = GaugeMetricFamily | CounterMetricFamily


def _families() -> dict[str, _Family]:
    stream = ["stream"]
    return {
        "records": GaugeMetricFamily("vdl_table_lag_records", "Committed records not yet in the stream's "
                                     "Delta table (reported by the stream's leader)", labels=stream),
        "seconds": GaugeMetricFamily("vdl_table_lag_seconds", "How long the oldest committed record not yet in "
                                     "the table has waited (reported by the stream's leader)", labels=stream),
        "commits": CounterMetricFamily("vdl_table_commits", "Delta commits this node made to the stream's table",
                                       labels=stream),
        "dead": CounterMetricFamily("vdl_table_dead_letters", "Records this node wrote to the stream's "
                                    "dead-letter table", labels=stream),
    }


class TableCollector:
    def __init__(self, tables: Any) -> None:
        self.tables = tables  # vdl_broker.tables.service.TableService

    def describe(self) -> Iterator[Metric]:
        yield from _families().values()

    def collect(self) -> Iterator[Metric]:
        f = _families()
        for name, table in sorted(self.tables.tables().items()):
            if table.leading:
                f["records"].add_metric([name], table.lag_records())
                f["seconds"].add_metric([name], table.lag_seconds())
        for name, counters in sorted(self.tables.counters.items()):
            f["commits"].add_metric([name], counters.commits)
            f["dead"].add_metric([name], counters.dead_letters)
        yield from f.values()

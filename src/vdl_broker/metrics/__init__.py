"""Prometheus metrics of one broker (node setting `metrics_listen`; off by default).

- registry.py: BrokerMetrics, the broker's own CollectorRegistry with the counters and histograms
  updated as it works (per request, per batch);
- collectors.py: gauges read from the broker's state at scrape time (streams, Raft, groups, disk);
- endpoint.py: the HTTP endpoint serving GET /metrics on the broker's event loop.

Another part of the broker adds its metrics with `broker.metrics.register(collector)` (a
collector is an object with collect() and describe() yielding prometheus_client metric families),
or by creating prometheus_client metrics with `registry=broker.metrics.registry`.
`broker.metrics` is None when metrics are off: nothing is counted then.
"""

from vdl_broker.metrics.collectors import BrokerCollector
from vdl_broker.metrics.endpoint import MetricsEndpoint
from vdl_broker.metrics.registry import BrokerMetrics

__all__ = ["BrokerCollector", "BrokerMetrics", "MetricsEndpoint"]

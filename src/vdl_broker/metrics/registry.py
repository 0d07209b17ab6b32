"""The metrics one broker counts as it works, in its own CollectorRegistry (no global state).

Counting happens per request and per batch, never per record: a request adds one to
vdl_requests_total and one observation to vdl_request_latency_seconds when it is answered; a
stored batch adds its size and record count to its stream's counters; a fetch answer adds the
bytes it carries per stream. Gauges that describe state (high watermarks, leaders, lag, disk)
are not kept here: collectors read them from the broker when Prometheus scrapes
(collectors.py). Other parts of the broker add their own with `register(collector)`.

Label children are looked up once and kept (prometheus_client's `labels()` takes a lock and
builds a key on every call), so the hot path is a dict lookup and an increment. Per-stream
counters, thousands of series on a busy node, are plain integers exposed by a collector
(StreamCounters): no lock per increment and no `_created` series doubling what a scrape formats.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from vdl_wire.errors import ErrorCode

# Request latency includes a long-polling fetch's wait (fetch.max.wait.ms, 500 ms by default),
# as Kafka's TotalTimeMs does.
REQUEST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
FSYNC_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        self.requests = Counter("vdl_requests", "Kafka requests answered, by API, version and the error "
                                "the answer carries (NONE, or the first error code of its parts)",
                                ["api", "version", "error"], registry=r)
        self.request_latency = Histogram("vdl_request_latency_seconds", "Time from a request's arrival "
                                         "to its answer (a long-polling fetch's wait included)", ["api"],
                                         buckets=REQUEST_BUCKETS, registry=r)
        self.commit_latency = Histogram("vdl_raft_commit_latency_seconds", "Time from proposing a Raft "
                                        "entry (a batch, a metadata command) to its commit", buckets=COMMIT_BUCKETS,
                                        registry=r)
        self.fsync_latency = Histogram("vdl_fsync_latency_seconds", "Duration of one log sync (fdatasync of "
                                       "the new data, shared by every append before it)", buckets=FSYNC_BUCKETS,
                                       registry=r)
        self._request_children: dict[tuple[str, int, int], tuple[Any, Any]] = {}
        self.streams = StreamCounters()
        r.register(self.streams)

    def register(self, collector: Any) -> None:
        """Add a collector (an object with collect(), and describe() for name clash checks)."""
        self.registry.register(collector)

    # -- counting (per request, per batch) ------------------------------------------------------

    def request_done(self, api: str, version: int, error: int, seconds: float) -> None:
        key = (api, version, error)
        children = self._request_children.get(key)
        if children is None:
            children = (self.requests.labels(api, str(version), error_name(error)),
                        self.request_latency.labels(api))
            self._request_children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def produced(self, stream: str, size: int, records: int) -> None:
        counts = self.streams.counts.get(stream)
        if counts is None:
            counts = self.streams.counts[stream] = [0, 0, 0]
        counts[0] += size
        counts[1] += records

    def fetched(self, stream: str, size: int) -> None:
        counts = self.streams.counts.get(stream)
        if counts is None:
            counts = self.streams.counts[stream] = [0, 0, 0]
        counts[2] += size

    def forget_stream(self, stream: str) -> None:
        """A deleted stream's series go with it (a stream created again starts from zero)."""
        self.streams.counts.pop(stream, None)

    # -- exposition -----------------------------------------------------------------------------

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        """(body, content type): Prometheus text, or OpenMetrics when `accept` asks for it."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type


class StreamCounters:
    """vdl_bytes_in_total, vdl_records_in_total and vdl_bytes_out_total: stream -> [bytes in,
    records in, bytes out]; a stream's series appear once it has counted something."""

    FAMILIES = (("vdl_bytes_in", "Record batch bytes stored by produce requests (this node led the stream)"),
                ("vdl_records_in", "Records stored by produce requests"),
                ("vdl_bytes_out", "Record batch bytes sent in fetch answers"))

    def __init__(self) -> None:
        self.counts: dict[str, list[int]] = {}

    def describe(self) -> Iterator[Metric]:
        for name, documentation in self.FAMILIES:
            yield CounterMetricFamily(name, documentation, labels=["stream"])

    def collect(self) -> Iterator[Metric]:
        families = list(self.describe())
        samples = [family.samples for family in families]
        names = [family.name + "_total" for family in families]
        for stream, counts in sorted(self.counts.items()):
            labels = {"stream": stream}
            for i in range(3):
                if counts[i]:
                    samples[i].append(Sample(names[i], labels, counts[i]))
        yield from families

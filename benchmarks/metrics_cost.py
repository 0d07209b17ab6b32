"""What metrics cost, for `bench_broker --metrics` (one node) and `bench_replication --metrics`
(3 nodes): alternating rounds of the same workload against fresh brokers with metrics off and on
(scraped every few seconds meanwhile, as Prometheus would), medians and the median of the
per-round ratios; and how long a scrape of a node with many streams takes.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks.report import Report, cpu_seconds, percentile

SCRAPE_INTERVAL_S = 5.0
SCRAPE_GOAL_S = 0.2
RATIO_GOAL = 0.95
GROUPS = 1  # a group with committed offsets on every stream of the scrape measurement (a Spark query
# reading all of them with commitOffsetsToGroup)


def scrape_seconds(url: str, timeout_s: float = 30.0) -> float:
    """One scrape, as Prometheus does it: the whole body read."""
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        response.read()
    return time.perf_counter() - started


class Scraper:
    """Scrapes `urls` every `interval_s` in a thread until stopped (a Prometheus stand-in)."""

    def __init__(self, urls: Sequence[str], interval_s: float = SCRAPE_INTERVAL_S) -> None:
        self.urls = list(urls)
        self.interval_s = interval_s
        self.durations: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="scraper")

    def __enter__(self) -> Scraper:
        if self.urls:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            for url in self.urls:
                try:
                    self.durations.append(scrape_seconds(url))
                except OSError:
                    self.failures += 1


Timelines = dict[bool, dict[int, dict[str, list[tuple[float, float]]]]]  # on -> round -> run -> counts


def add_timelines(report: Report, timelines: Timelines, rounds: int, key: str, label: str) -> None:
    """The middle round's acknowledged-records timeline, metrics on against off (the baseline)."""
    middle = rounds // 2
    for on in (True, False):
        counts = timelines[on].get(middle, {}).get(key)
        if counts:
            report.timeline(f"{label}, metrics {'on' if on else 'off'}", counts, baseline=not on)


def alternate(rounds: int, run: Callable[[bool, int], dict[str, float]]) -> dict[bool, list[dict[str, float]]]:
    """`run(metrics_on, round)` for both settings in every round, the first one alternating."""
    runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for round_number in range(rounds):
        for on in ((False, True) if round_number % 2 == 0 else (True, False)):
            runs[on].append(run(on, round_number))
            print(f"round {round_number + 1} metrics {'on' if on else 'off'}: " + ", ".join(
                f"{key} {value:,.0f}" for key, value in runs[on][-1].items()), flush=True)
    return runs


def add_ratio_rows(report: Report, runs: dict[bool, list[dict[str, float]]], labels: dict[str, str]) -> None:
    """Medians off and on, and the median of the per-round ratios on / off, for each of `labels`.
    A run's "efficiency" (records per second of the brokers' CPU time) is compared too: on a
    shared machine other people's work moves throughput by tens of percent from one run to the
    next, but hardly the CPU a broker spends per record."""
    labels = {**labels, "efficiency": "records per broker CPU second"}
    for key, label in labels.items():
        off = [run[key] for run in runs[False]]
        on = [run[key] for run in runs[True]]
        ratios = [a / b for a, b in zip(on, off, strict=True)]
        unit = "records/CPU s" if key == "efficiency" else "records/s"
        report.add(f"{label}, metrics off", statistics.median(off), unit,
                   note="rounds: " + ", ".join(f"{v:,.0f}" for v in off))
        report.add(f"{label}, metrics on", statistics.median(on), unit,
                   note="rounds: " + ", ".join(f"{v:,.0f}" for v in on))
        report.add(f"{label}, on / off", statistics.median(ratios), "x", RATIO_GOAL,
                   note="median of per-round ratios: " + ", ".join(f"{r:.3f}" for r in ratios))


def compare_metrics_one_node(rounds: int, produce_count: int, producers: int, scrape_streams: int) -> int:
    from benchmarks.bench_broker import Broker, throughput

    timelines: Timelines = {True: {}, False: {}}

    def run(on: bool, round_number: int) -> dict[str, float]:
        with tempfile.TemporaryDirectory(prefix="vdl-bench-") as tmp:
            broker = Broker(Path(tmp) / "data", metrics=on)
            try:
                used = cpu_seconds([broker.process.pid])
                with Scraper([broker.metrics_url] if broker.metrics_url else []):
                    result = throughput(broker.bootstrap, round_number, produce_count, producers,
                                        timelines[on].setdefault(round_number, {}))
                # Each round produces the records twice (acks=1, acks=-1) and reads them once.
                result["efficiency"] = 3 * produce_count / (cpu_seconds([broker.process.pid]) - used)
                return result
            finally:
                broker.stop()

    runs = alternate(rounds, run)
    report = Report("bench_broker_metrics")
    add_timelines(report, timelines, rounds, "acks_all", "produce acks=-1")
    add_ratio_rows(report, runs, {"acks1": "produce acks=1", "acks_all": "produce acks=-1",
                                  "consume": f"kcat consume {produce_count:,} records"})
    add_bookkeeping_rows(report)
    add_scrape_rows(report, scrape_streams)
    report.finish()
    return 0


def add_bookkeeping_rows(report: Report, calls: int = 100_000) -> None:
    """What counting costs per request and per batch, in this process: far below the noise of
    whole-broker rounds on a shared machine, and the figure that decides the on/off ratio."""
    import timeit

    from vdl_broker.metrics import BrokerMetrics
    from vdl_wire import messages as m
    from vdl_wire.response_errors import response_error

    metrics = BrokerMetrics()
    answer = m.ProduceResponse(responses=[m.ProduceResponse.TopicProduceResponse(name="s", partition_responses=[
        m.ProduceResponse.PartitionProduceResponse(index=0, error_code=0)])])
    per_request = min(timeit.repeat(lambda: metrics.request_done("Produce", 8, response_error(answer), 0.001),
                                    number=calls, repeat=5)) / calls
    per_batch = min(timeit.repeat(lambda: metrics.produced("s", 1000, 10), number=calls, repeat=5)) / calls
    report.add("metrics bookkeeping per request", per_request * 1e6, "us", higher_is_better=False,
               note="error of the answer, counter, latency histogram (best of 5)")
    report.add("metrics bookkeeping per stored batch", per_batch * 1e6, "us", higher_is_better=False,
               note="bytes and records of the stream (best of 5)")


def add_scrape_rows(report: Report, streams: int, scrapes: int = 30) -> None:
    """One node with `streams` streams, each with a stored batch and GROUPS groups' offsets."""
    import psutil

    from benchmarks.bench_broker import Broker
    from vdl_client import ClientSettings, VdlClient
    from vdl_client.groups import commit_offsets
    from vdl_wire.records.record_batch import RecordBatchBuilder

    names = [f"scrape-{i:04d}" for i in range(streams)]
    with tempfile.TemporaryDirectory(prefix="vdl-bench-") as tmp:
        broker = Broker(Path(tmp) / "data", metrics=True)
        try:
            with VdlClient(ClientSettings.from_bootstrap(broker.bootstrap, deadline_ms=300_000)) as client:
                client.create_streams(names)
                builder = RecordBatchBuilder()
                for _ in range(10):
                    builder.append(int(time.time() * 1000), None, b"v" * 100)
                batch = builder.build()
                for name in names:
                    client.produce(name, batch, 30_000, time.monotonic() + 60)
                for group in range(GROUPS):
                    commit_offsets(client, f"scrape-group-{group}", dict.fromkeys(names, 5))
            assert broker.metrics_url is not None
            with urllib.request.urlopen(broker.metrics_url, timeout=30) as response:
                size = len(response.read())
            process = psutil.Process(broker.process.pid)
            before = process.cpu_times()
            times = [scrape_seconds(broker.metrics_url) for _ in range(scrapes)]
            after = process.cpu_times()
        finally:
            broker.stop()
    report.latency(f"scrape, {streams:,} streams", [t * 1000 for t in times])
    cpu_ms = ((after.user + after.system) - (before.user + before.system)) / scrapes * 1000
    load = os.getloadavg()[0]
    note = (f"{streams:,} streams, {GROUPS} group(s) on each, {size / 1e6:.1f} MB of text; {scrapes} scrapes; "
            f"load average {load:.1f} on {os.cpu_count()} cores")
    report.add(f"scrape of a node with {streams:,} streams (median)", statistics.median(times) * 1000, "ms",
               SCRAPE_GOAL_S * 1000, higher_is_better=False, note=note)
    report.add(f"scrape of a node with {streams:,} streams (p90)", percentile(times, 0.9) * 1000, "ms",
               SCRAPE_GOAL_S * 1000, higher_is_better=False, note=f"max {max(times) * 1000:.0f} ms")
    report.add("broker CPU time per scrape", cpu_ms, "ms", higher_is_better=False,
               note="the node's whole process, its background Raft ticking included")


def compare_metrics_cluster(rounds: int, produce_count: int, producers: int, fsync: bool) -> int:
    """3-node dev clusters, metrics off and on: acks=-1 produce throughput."""
    from benchmarks.bench_broker import produce_run
    from benchmarks.bench_replication import TOPIC_THROUGHPUT, create_streams
    from vdl_dev.dev_cluster import DevCluster, free_base_port, ports_needed

    timelines: Timelines = {True: {}, False: {}}

    def run(on: bool, round_number: int) -> dict[str, float]:
        topic = f"{TOPIC_THROUGHPUT}-{round_number}"
        with tempfile.TemporaryDirectory(prefix="vdl-bench-repl-") as tmp:
            cluster = DevCluster(3, Path(tmp), free_base_port(ports_needed(3, on)),
                                 settings={"log_level": "WARNING", "fsync": fsync}, metrics=on)
            try:
                cluster.start(timeout_s=60)
                cluster.wait_for_brokers(timeout_s=60)
                create_streams(cluster, topic)
                pids = [node.pid for node in cluster.nodes.values() if node.pid is not None]
                used = cpu_seconds(pids)
                with Scraper(list(cluster.metrics_urls().values())):
                    produced = produce_run(cluster.bootstrap_servers, topic, produce_count, -1, producers)
                efficiency = produce_count / (cpu_seconds(pids) - used)
                timelines[on][round_number] = {"acks_all": produced.counts}
                return {"acks_all": produced.rate, "efficiency": efficiency}
            finally:
                cluster.kill_all()

    runs = alternate(rounds, run)
    report = Report("bench_replication_metrics")
    add_timelines(report, timelines, rounds, "acks_all", "produce acks=-1, 3 replicas")
    add_ratio_rows(report, runs, {"acks_all": f"produce acks=-1, 3 replicas ({'fsync on' if fsync else 'fsync off'})"})
    report.finish()
    return 0

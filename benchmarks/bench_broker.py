"""One-node broker benchmark next to Apache Kafka: produce throughput (acks=1, acks=-1, and
acks=-1 from one producer with linger.ms=0, which pipelines requests without bound), kcat
consume throughput, produce-to-consume latency at a steady 20,000 records/s, and the broker CPU
per record of each throughput.

    .venv/bin/python -m benchmarks.bench_broker [--quick] [--rounds 3]
    .venv/bin/python -m benchmarks.bench_broker --baseline DIR [--rounds 3]
    .venv/bin/python -m benchmarks.bench_broker --metrics [--rounds 3] [--scrape-streams 1000]

100-byte records; the clients run on the same machine as the brokers (2 cores shared). Besides
confluent-kafka and kcat, Apache Kafka's own perf tools (the Java clients with their defaults). One VDL
node (fsync on) and one Apache Kafka node (vdl_dev.kafka_peer, KRaft combined mode) run side by
side; each round measures VDL, Kafka with its defaults (acknowledged from the page cache) and
Kafka with topic flush.messages=1 (fsync after every batch, as VDL) in turn, each round starting
with the next one, after one unrecorded warm-up run of each. The same confluent-kafka producers,
kcat and records go to all three. Reported: medians of the rounds, the medians of the per-round
ratios VDL / Kafka (goals: acks=-1 >= 1.0x Kafka with flush.messages=1 and >= 0.8x Kafka's
defaults; p99 latency <= Kafka's under both), and a side-by-side table.

With --baseline, DIR is a checkout of another version of this repository (for example
`git worktree add /tmp/vdl-before HEAD~1`): each round runs the throughput measurements once
against a fresh broker of each version, alternating which goes first, and the table reports
both medians and the median of the per-round ratios (this version / the baseline).

With --metrics, the same alternating rounds compare this version with metrics off and on
(`metrics_listen`, scraped every 5 s meanwhile, as Prometheus would): the goal is on >= 0.95x
of off. Then one node with --scrape-streams streams (each with a stored batch and three groups'
committed offsets) is scraped repeatedly: the goal is an answer within 200 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.peers import (
    Measure,
    Target,
    TargetRound,
    compare_targets,
    kafka_targets,
    per_record_us,
    rotation,
    vdl_target,
)
from benchmarks.report import Report, merged_counts, percentile
from vdl_dev.dev_cluster import free_base_port
from vdl_dev.kafka_peer import KafkaPeer

RECORD_BYTES = 100
# A throughput producer's records queued unacknowledged at most (librdkafka's
# queue.buffering.max.messages): 20 batches of 10,000, ~0.4 s at 500,000 records/s. Enough to keep
# full batches flowing; beyond it a producer only grows (2,000,000 queued took 440 MB per process
# and, in a --memory-limit cgroup, left the page cache no room and woke the OOM killer).
QUEUED_RECORDS = 200_000
# Measured in rounds on a shared machine: each reported value is the median of the rounds.
TOPIC_ACKS1 = "bench-acks1"
TOPIC_ACKSALL = "bench-acksall"
# librdkafka with linger.ms=0 and no idempotence pipelines up to a million requests on a
# connection, of whatever records came since the last: a broker that reads them all queues
# thousands of tiny requests; one that stops reading makes the producer batch.
TOPIC_LINGER0 = "bench-linger0"
TOPIC_LATENCY = "bench-latency"
TOPIC_JAVA = "bench-java"
LATENCY_RATE = 20_000
# Latency is measured in the steady state: the same producer first sends at the same rate to the
# same stream for this long, unrecorded (a new stream's first records wait for the client's first
# metadata and connections and the followers' first fetches of it).
LATENCY_WARM_UP_S = 2.0


def free_port() -> int:
    """A free loopback port of VDL_DEV_PORT_RANGE."""
    return free_base_port(1)


class Broker:
    def __init__(self, data_dir: Path, source: Path | None = None, fsync: bool = True,
                 metrics: bool = False, tail_cache_bytes: int | None = None) -> None:
        """A broker of this checkout, or of the checkout at `source`; with `metrics`, serving
        them at `metrics_url`; `tail_cache_bytes`, if given, in a node.toml beside `data_dir`."""
        self.bootstrap = f"127.0.0.1:{free_port()}"
        source = (source or Path(__file__).resolve().parents[1]).resolve()
        command = [sys.executable, "-m", "vdl_broker.server.main", "--data-dir", str(data_dir),
                   "--listen", self.bootstrap, "--log-level", "WARNING", "--auto-create-streams",
                   *([] if fsync else ["--no-fsync"])]
        if tail_cache_bytes is not None:
            config = data_dir.parent / f"{data_dir.name}.toml"
            config.write_text(f"tail_cache_bytes = {tail_cache_bytes}\n")
            command += ["--config", str(config)]
        self.metrics_url: str | None = None
        if metrics:
            address = f"127.0.0.1:{free_port()}"
            command += ["--metrics-listen", address]
            self.metrics_url = f"http://{address}/metrics"
        env = dict(os.environ, PYTHONPATH=str(source / "src" if (source / "src").is_dir() else source))
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=source, env=env)
        assert self.process.stdout is not None
        deadline = time.monotonic() + 30
        while True:
            line = self.process.stdout.readline()
            if line.startswith("vdl-broker listening on "):
                break
            if not line or time.monotonic() > deadline:
                raise RuntimeError("broker did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def create(bootstrap: str, *topics: str) -> None:
    from vdl_client import ClientSettings, VdlClient

    with VdlClient(ClientSettings.from_bootstrap(bootstrap)) as client:
        client.create_streams(topics)


def _produce_worker(bootstrap: str, topic: str, count: int, acks: int,
                    start_at: float, conf: dict[str, str] | None = None, linger_ms: int = 5
                    ) -> tuple[float, list[tuple[float, float]], float]:
    """One producer process: `count` 100-byte records; returns when all were acknowledged, with
    (wall time, records acknowledged) samples taken along the way and the CPU seconds this process
    spent from the start (its librdkafka threads included). `conf`: more librdkafka properties
    (security)."""
    import confluent_kafka

    producer = confluent_kafka.Producer(dict(conf or {}) | {
        "bootstrap.servers": bootstrap, "linger.ms": linger_ms, "acks": acks, "batch.size": 1_000_000,
        "batch.num.messages": 100_000, "queue.buffering.max.messages": QUEUED_RECORDS,
        # the records' bound binds; the bytes' one only stays out of its way
        "queue.buffering.max.kbytes": 4 * QUEUED_RECORDS * RECORD_BYTES // 1000, "compression.type": "none",
        "enable.idempotence": False,
        # Only failures come back as delivery reports: per-record callbacks would measure Python.
        "delivery.report.only.error": True})
    failures: list[object] = []
    producer.produce(topic, b"warm-up", on_delivery=lambda err, msg: err and failures.append(err))
    producer.flush(30)
    value = b"v" * RECORD_BYTES
    produce = producer.produce
    if time.time() > start_at:
        raise RuntimeError("producer process started too late for the common start time")
    while time.time() < start_at:
        time.sleep(0.001)
    cpu_at_start = time.process_time()
    samples: list[tuple[float, float]] = [(start_at, 0.0)]
    next_sample = start_at + 0.1
    for i in range(count):
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:  # QUEUED_RECORDS unacknowledged: wait for acknowledgements
                producer.poll(0.001)
        if i % 50_000 == 0:
            producer.poll(0)
        if i % 2_000 == 0 and time.time() >= next_sample:  # acknowledged so far, every 0.1 s
            next_sample += 0.1
            samples.append((time.time(), float(i - len(producer))))  # len(): not yet acknowledged
    while len(producer) and time.time() < start_at + 120:
        producer.flush(0.2)
        samples.append((time.time(), float(count - len(producer))))
    remaining = producer.flush(120)
    if remaining or failures:
        raise RuntimeError(f"produce failed: {remaining} undelivered, errors {failures[:3]}")
    finished = time.time()
    samples.append((finished, float(count)))
    return finished, samples, time.process_time() - cpu_at_start


@dataclass
class Throughput:
    """Records/s of one produce run, its (seconds since start, records acknowledged) timeline and
    the producer processes' CPU seconds."""

    rate: float
    counts: list[tuple[float, float]]
    client_cpu_s: float


def produce_run(bootstrap: str, topic: str, count: int, acks: int, processes: int,
                conf: dict[str, str] | None = None, linger_ms: int = 5) -> Throughput:
    """`count` 100-byte records from `processes` confluent-kafka producers, linger 5 ms (or
    `linger_ms`)."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(processes) as pool:
        # Every producer process started, connected and warmed up before the clock starts.
        start_at = time.time() + 3.0
        futures = [pool.submit(_produce_worker, bootstrap, topic, count // processes, acks, start_at, conf,
                               linger_ms) for _ in range(processes)]
        results = [future.result() for future in futures]
    finished = max(end for end, _, _ in results)
    rate = (count // processes) * processes / (finished - start_at)
    return Throughput(rate, merged_counts([samples for _, samples, _ in results], start_at),
                      sum(cpu for _, _, cpu in results))


def produce_throughput(bootstrap: str, topic: str, count: int, acks: int, processes: int) -> float:
    """Records/s for `count` 100-byte records from `processes` confluent-kafka producers, linger 5 ms."""
    return produce_run(bootstrap, topic, count, acks, processes).rate


def kcat_consume(bootstrap: str, topic: str, count: int, conf: dict[str, str] | None = None) -> float:
    """Records/s for kcat reading `count` records from the start to the end of a stream
    (`conf`: more librdkafka properties, e.g. security)."""
    extra = [arg for key, value in (conf or {}).items() for arg in ("-X", f"{key}={value}")]
    started = time.perf_counter()
    # librdkafka client tuning: big fetches, a local queue big enough that a 16 MB fetch does not
    # park the fetcher for its 1 s re-check ("queued.min.messages exceeded"), and a short
    # fetch.wait.max.ms so the end of the stream (-e) is noticed without a 500 ms long poll.
    result = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q", *extra,
                             "-X", "fetch.max.bytes=52428800", "-X", "fetch.message.max.bytes=16777216",
                             "-X", "queued.min.messages=10000000", "-X", "queued.max.messages.kbytes=2097151",
                             "-X", "fetch.wait.max.ms=10", "-f", "\n"], capture_output=True, timeout=600)
    elapsed = time.perf_counter() - started
    got = result.stdout.count(b"\n")
    if got != count:
        raise RuntimeError(f"kcat read {got} records, expected {count}: {result.stderr[-300:]!r}")
    return count / elapsed


def java_produce(bootstrap: str, topic: str, count: int) -> float:
    """Records/s of Kafka's kafka-producer-perf-test sending `count` 100-byte records with acks=all
    and the Java producer's other defaults (idempotent, batch.size 16384, linger.ms 5): what a
    user of the JVM clients measures first."""
    from vdl_dev.jvm import kafka_command

    result = subprocess.run(kafka_command("org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
                                          "--num-records", str(count), "--record-size", str(RECORD_BYTES),
                                          "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}",
                                          "acks=all"), capture_output=True, text=True, timeout=600)
    # The summary line: "N records sent, R records/sec (M MB/sec), ..."
    summary = [line for line in result.stdout.splitlines() if " records sent, " in line]
    if result.returncode != 0 or not summary or not summary[-1].startswith(f"{count} records sent"):
        raise RuntimeError(f"kafka-producer-perf-test failed ({result.returncode}): {result.stderr[-500:]!r}")
    return float(summary[-1].split(", ")[1].split()[0])


def java_consume(bootstrap: str, topic: str, count: int) -> float:
    """Records/s of Kafka's kafka-consumer-perf-test (a group consumer with the Java consumer's
    defaults) reading `count` records from the start, once its group is joined (fetch.nMsg.sec:
    without the group's join, whose delay the broker sets)."""
    from vdl_dev.jvm import kafka_command

    result = subprocess.run(kafka_command("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", bootstrap,
                                          "--topic", topic, "--num-records", str(count), "--timeout", "30000",
                                          "--group", f"bench-java-{topic}"), capture_output=True, text=True, timeout=600)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    header = lines[0].split(", ") if lines else []
    if result.returncode != 0 or len(lines) < 2 or "fetch.nMsg.sec" not in header:
        raise RuntimeError(f"kafka-consumer-perf-test failed ({result.returncode}): {result.stderr[-500:]!r}")
    row = dict(zip(header, lines[-1].split(", "), strict=False))
    if int(row["data.consumed.in.nMsg"]) < count:
        raise RuntimeError(f"kafka-consumer-perf-test read {row['data.consumed.in.nMsg']} records, expected {count}")
    return float(row["fetch.nMsg.sec"])


def latency(bootstrap: str, topic: str, rate: int, seconds: float) -> list[float]:
    """Produce at a steady `rate` with acks=-1; return produce-to-consume latencies in ms (after
    LATENCY_WARM_UP_S at that rate, unrecorded)."""
    import confluent_kafka

    latencies: list[float] = []
    expected = int(rate * seconds)
    done = threading.Event()
    ready = threading.Event()

    def consume() -> None:
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": "bench-latency", "enable.auto.commit": False,
            "fetch.wait.max.ms": 100, "fetch.min.bytes": 1, "fetch.error.backoff.ms": 0})
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        ready.set()
        while len(latencies) < expected and not done.is_set():
            # poll() returns as soon as one record is there (consume() would wait to fill a batch).
            message = consumer.poll(0.1)
            # Probes carry their send time; anything else in the stream (a readiness write) is skipped.
            if message is not None and message.error() is None and message.value()[:19].isdigit():
                latencies.append((time.time_ns() - int(message.value()[:19])) / 1e6)
        consumer.close()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    ready.wait(10)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": -1,
                                         "enable.idempotence": False})
    padding = b"x" * (RECORD_BYTES - 19)
    warm_up = b"w" * RECORD_BYTES  # no send time: the consumer skips it
    at_steady_rate(rate, LATENCY_WARM_UP_S, lambda: producer.produce(topic, warm_up), producer.poll)
    at_steady_rate(rate, seconds, lambda: producer.produce(topic, b"%019d" % time.time_ns() + padding), producer.poll)
    producer.flush(30)
    thread.join(30)
    done.set()
    return latencies


def at_steady_rate(rate: int, seconds: float, send: Callable[[], object], poll: Callable[[float], object]) -> None:
    """send() `rate` times a second for `seconds`, in ticks of a millisecond, each followed by
    poll(0) (a producer's delivery reports). A target too slow for the rate fills the producer's
    queue (BufferError): the send waits for room, and the latencies show it."""
    per_tick = max(1, rate // 1000)
    expected = int(rate * seconds)
    started = time.perf_counter()
    sent = 0
    while sent < expected:
        delay = started + sent / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        for _ in range(per_tick):
            while True:
                try:
                    send()
                    break
                except BufferError:
                    poll(0.01)
        sent += per_tick
        poll(0)


def throughput(bootstrap: str, round_number: int, produce_count: int, producers: int,
               timelines: dict[str, list[tuple[float, float]]] | None = None) -> dict[str, float]:
    """Produce acks=1, acks=-1 and kcat consume on fresh streams: records/s by name (and, into
    `timelines`, each produce run's acknowledged-records timeline)."""
    acks1, acks_all = (f"{name}-{round_number}" for name in (TOPIC_ACKS1, TOPIC_ACKSALL))
    create(bootstrap, acks1, acks_all)
    runs = {"acks1": produce_run(bootstrap, acks1, produce_count, 1, producers),
            "acks_all": produce_run(bootstrap, acks_all, produce_count, -1, producers)}
    if timelines is not None:
        for key, run in runs.items():
            timelines[key] = run.counts
    return {"acks1": runs["acks1"].rate, "acks_all": runs["acks_all"].rate,
            "consume": kcat_consume(bootstrap, acks1, produce_count + producers)}


def measure(target: Target, round_number: int, produce_count: int, producers: int,
            latency_seconds: float) -> TargetRound:
    """One round against one target on fresh topics: produce acks=1 and acks=-1, kcat consume,
    Kafka's producer and consumer perf tests (the Java clients), each with the broker CPU it took,
    and produce-to-consume latency at 20,000 records/s."""
    # The Java producer's 16 KiB batches run at about a fifth of the rate; its JVM's start (~1 s) must
    # not be most of the run.
    java_count = max(500_000, produce_count // 2)
    acks1, acks_all, linger0, lat = (target.topic(f"{name}-{round_number}") for name in (
        TOPIC_ACKS1, TOPIC_ACKSALL, TOPIC_LINGER0, TOPIC_LATENCY))
    target.create(acks1, acks_all, linger0, lat)
    result = TargetRound()
    for key, topic, acks, processes, linger_ms in (("acks1", acks1, 1, producers, 5),
                                                   ("acks_all", acks_all, -1, producers, 5),
                                                   ("acks_all_linger0", linger0, -1, 1, 0)):
        with target.cpu() as used:
            run = produce_run(target.bootstrap, topic, produce_count, acks, processes, linger_ms=linger_ms)
        result.values[key] = run.rate
        result.values[f"{key}_cpu"] = per_record_us(used[0], produce_count)
        result.timelines[key] = run.counts
    with target.cpu() as used:
        result.values["consume"] = kcat_consume(target.bootstrap, acks1, produce_count + producers)
    result.values["consume_cpu"] = per_record_us(used[0], produce_count)
    java = target.topic(f"{TOPIC_JAVA}-{round_number}")
    target.create(java)
    with target.cpu() as used:
        result.values["java_produce"] = java_produce(target.bootstrap, java, java_count)
    result.values["java_produce_cpu"] = per_record_us(used[0], java_count)
    with target.cpu() as used:
        result.values["java_consume"] = java_consume(target.bootstrap, java, java_count)
    result.values["java_consume_cpu"] = per_record_us(used[0], java_count)
    result.latency = latency(target.bootstrap, lat, LATENCY_RATE, latency_seconds)
    result.values["p50"] = percentile(result.latency, 0.5)
    result.values["p99"] = percentile(result.latency, 0.99)
    return result


def warm_up(targets: list[Target], producers: int, count: int) -> None:
    """An unrecorded acks=-1 run per target first: the JVM's JIT and both page caches warm."""
    for target in targets:
        topic = target.topic("bench-warm-up")
        target.create(topic)
        produce_run(target.bootstrap, topic, count, -1, producers)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller counts, one round (a smoke run)")
    parser.add_argument("--producers", type=int, default=2, help="producer processes (default 2)")
    parser.add_argument("--rounds", type=int, help="rounds; each value reported is the median (default 3)")
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="a checkout of another version to compare with, round by round")
    parser.add_argument("--metrics", action="store_true",
                        help="compare metrics off and on, round by round, then time scrapes of a node with many streams")
    parser.add_argument("--scrape-streams", type=int, default=1000, help="streams of the scrape measurement (default 1000)")
    args = parser.parse_args(argv)
    produce_count = 200_000 if args.quick else 2_000_000
    latency_seconds = 2.0 if args.quick else 5.0
    rounds = args.rounds or (1 if args.quick else 3)
    if args.baseline is not None:
        if not any((args.baseline / top / "vdl_broker" / "server" / "main.py").is_file() for top in ("src", ".")):
            parser.error(f"--baseline {args.baseline}: not a checkout of this repository "
                         "(no src/vdl_broker/server/main.py)")
        return compare(args.baseline, rounds, produce_count, args.producers)
    if args.metrics:
        from benchmarks.metrics_cost import compare_metrics_one_node

        return compare_metrics_one_node(rounds, produce_count, args.producers, args.scrape_streams)
    results: dict[str, list[TargetRound]] = {}
    with tempfile.TemporaryDirectory(prefix="vdl-bench-") as tmp:
        broker = Broker(Path(tmp) / "data")
        peer = KafkaPeer(1, Path(tmp) / "kafka")
        try:
            peer.start()
            targets = [vdl_target(broker.bootstrap, lambda: [broker.process.pid]), *kafka_targets(peer)]
            warm_up(targets, args.producers, produce_count // 10)
            for round_number in range(rounds):
                for target in rotation(targets, round_number):
                    results.setdefault(target.key, []).append(
                        measure(target, round_number, produce_count, args.producers, latency_seconds))
                    print(f"round {round_number + 1} {target.label}: " + ", ".join(
                        f"{k} {v:,.1f}" for k, v in results[target.key][-1].values.items()), flush=True)
        finally:
            broker.stop()
            peer.stop_all()
    report = Report("bench_broker")
    add_comparison(report, targets, results, args.producers)
    report.finish()
    return 0


MEASURES = (Measure("acks1", "produce acks=1", "records/s", 1_000_000),
            Measure("acks_all", "produce acks=-1", "records/s", 800_000),
            Measure("acks_all_linger0", "produce acks=-1, one producer, linger.ms=0", "records/s"),
            Measure("consume", "kcat consume, start to end", "records/s", 1_200_000),
            Measure("java_produce", "kafka-producer-perf-test, Java producer defaults, acks=all", "records/s"),
            Measure("java_consume", "kafka-consumer-perf-test, Java group consumer", "records/s"),
            Measure("p50", "produce-to-consume p50, acks=-1, 20k rec/s", "ms"),
            Measure("p99", "produce-to-consume p99, acks=-1, 20k rec/s", "ms", 5.0))


def add_comparison(report: Report, targets: list[Target], results: dict[str, list[TargetRound]],
                   producers: int) -> None:
    """VDL, Kafka (defaults), Kafka (flush.messages=1): rows, ratios with the issue's goals, plots."""
    vdl, kafka_default, kafka_flush = targets
    middle = len(results[vdl.key]) // 2
    for target in targets:
        report.timeline(f"produce acks=-1, {target.label}", results[target.key][middle].timelines["acks_all"],
                        baseline=target is not vdl)
        report.latency(f"produce-to-consume, acks=-1, 20k rec/s, {target.label}",
                       [v for run in results[target.key] for v in run.latency], baseline=target is not vdl)
    compare_targets(report, targets, results, MEASURES,
                    ratio_goals={("acks_all", kafka_flush.key): 1.0, ("acks_all", kafka_default.key): 0.8,
                                 ("p99", kafka_flush.key): 1.0, ("p99", kafka_default.key): 1.0},
                    who=f"{producers} confluent-kafka producer processes, linger 5 ms, 100-byte records")


def compare(baseline: Path, rounds: int, produce_count: int, producers: int) -> int:
    """Alternating rounds of `throughput` against this checkout and `baseline`; medians and ratios."""
    runs: dict[str, list[dict[str, float]]] = {"current": [], "baseline": []}
    timelines: dict[str, dict[str, list[tuple[float, float]]]] = {"current": {}, "baseline": {}}
    for round_number in range(rounds):
        order = ("current", "baseline") if round_number % 2 == 0 else ("baseline", "current")
        for which in order:
            with tempfile.TemporaryDirectory(prefix="vdl-bench-") as tmp:
                broker = Broker(Path(tmp) / "data", baseline if which == "baseline" else None)
                try:
                    runs[which].append(throughput(broker.bootstrap, round_number, produce_count, producers,
                                                  timelines[which]))
                    linger0 = f"{TOPIC_LINGER0}-{round_number}"
                    create(broker.bootstrap, linger0)
                    runs[which][-1]["acks_all_linger0"] = produce_run(broker.bootstrap, linger0, produce_count, -1,
                                                                      1, linger_ms=0).rate
                finally:
                    broker.stop()
            print(f"round {round_number + 1} {which}: " + ", ".join(
                f"{key} {value:,.0f}" for key, value in runs[which][-1].items()), flush=True)
    report = Report("bench_broker_compare")
    for which in ("current", "baseline"):
        for key in ("acks1", "acks_all"):
            report.timeline(f"{key} ({'this version' if which == 'current' else baseline})", timelines[which][key],
                            baseline=which == "baseline")
    labels = {"acks1": "produce acks=1", "acks_all": "produce acks=-1",
              "acks_all_linger0": "produce acks=-1, one producer, linger.ms=0",
              "consume": f"kcat consume {produce_count:,} records"}
    for key, label in labels.items():
        current = [run[key] for run in runs["current"]]
        base = [run[key] for run in runs["baseline"]]
        ratios = [c / b for c, b in zip(current, base, strict=True)]
        report.add(f"{label}, this version", statistics.median(current), "records/s",
                   note="rounds: " + ", ".join(f"{value:,.0f}" for value in current))
        report.add(f"{label}, baseline {baseline}", statistics.median(base), "records/s",
                   note="rounds: " + ", ".join(f"{value:,.0f}" for value in base))
        report.add(f"{label}, ratio", statistics.median(ratios), "x", 0.9,
                   note="median of per-round ratios: " + ", ".join(f"{ratio:.2f}" for ratio in ratios))
    report.finish()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

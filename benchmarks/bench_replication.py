"""Replication benchmark: a 3-node dev cluster on this machine.

    .venv/bin/python -m benchmarks.bench_replication [--quick] [--no-fsync]
    .venv/bin/python -m benchmarks.bench_replication --metrics [--rounds 3] [--no-fsync]

- produce throughput: confluent-kafka producer processes, 100-byte records, acks=-1
  (majority commit), linger 5 ms -- goal >= 300,000 records/s, and >= 0.8x of one node's
  acks=-1 throughput measured in the same run (a single-node broker, rounds alternating);
- produce latency (send to acknowledgement, acks=-1) at a steady 20,000 records/s: p50, p99
  -- goal p99 <= 8 ms (the single node's, measured alongside, for reference);
- failover: kill -9 of the stream's leader to the first acknowledged acks=-1 produce at any
  node, several kills (the killed node restarted and back in sync in between) -- goal median
  <= 2 s.

With --metrics: alternating rounds of fresh clusters with metrics off and on (scraped every 5 s
meanwhile), acks=-1 throughput; the goal is on >= 0.95x of off (benchmarks/metrics_cost.py).

Clients, brokers and Raft traffic share the machine's cores; numbers are for this machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.bench_broker import RECORD_BYTES, Broker, Throughput, create, produce_run
from benchmarks.report import Report, percentile
from vdl_client import ClientSettings, VdlClient, request_once
from vdl_client.requests import produce_request
from vdl_dev.dev_cluster import DevCluster, fetch_metadata, free_base_port
from vdl_wire.records.record_batch import RecordBatchBuilder

TOPIC_THROUGHPUT = "bench-repl-acksall"
TOPIC_LATENCY = "bench-repl-latency"
TOPIC_FAILOVER = "bench-repl-failover"
LATENCY_RATE = 20_000


def create_streams(cluster: DevCluster, *names: str) -> None:
    with VdlClient(ClientSettings.from_bootstrap(cluster.nodes[1].client_address)) as client:
        client.create_streams(names)  # replication factor -1: the default, 3
    for name in names:
        wait_for_in_sync(cluster, name, 60)


def wait_for_in_sync(cluster: DevCluster, stream: str, timeout_s: float) -> int:
    """Wait until the leader reports all replicas in sync and accepts an acks=-1 write; the leader."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for node in cluster.nodes.values():
            if not node.running:
                continue
            try:
                response = fetch_metadata(node.client_address, [stream], 1.0)
            except (OSError, ValueError):
                continue
            for topic in response.topics:
                for p in topic.partitions:
                    if (topic.name == stream and p.leader_id == node.node_id and len(p.replica_nodes) == 3
                            and sorted(p.isr_nodes) == sorted(p.replica_nodes)
                            and write_once(node.client_address, stream)):
                        return node.node_id
        time.sleep(0.05)
    raise TimeoutError(f"{stream}: no in-sync leader within {timeout_s} s")


def write_once(address: str, stream: str, timeout_s: float = 1.0) -> bool:
    """One acks=-1 produce of one record; True when acknowledged."""
    builder = RecordBatchBuilder()
    builder.append(int(time.time() * 1000), None, b"f" * RECORD_BYTES)
    try:
        response = request_once(address, produce_request(stream, builder.build(), 30_000), timeout_s)
    except (OSError, ValueError):
        return False
    return response.responses[0].partition_responses[0].error_code == 0


def failover_seconds(cluster: DevCluster, stream: str) -> float:
    """kill -9 the leader; seconds until some other node acknowledges an acks=-1 produce."""
    leader = wait_for_in_sync(cluster, stream, 60)
    killed_at = time.monotonic()
    cluster.kill(leader)
    while time.monotonic() - killed_at < 30:
        for node in cluster.nodes.values():
            if node.running and write_once(node.client_address, stream):
                elapsed = time.monotonic() - killed_at
                cluster.restart(leader, timeout_s=60)
                return elapsed
        time.sleep(0.01)
    raise TimeoutError("no node accepted an acks=-1 write within 30 s of the kill")


def ack_latencies(bootstrap: str, stream: str, rate: int, seconds: float) -> list[float]:
    """Produce at a steady `rate` with acks=-1; send-to-acknowledgement latencies in ms."""
    import confluent_kafka

    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "acks": -1,
                                         "enable.idempotence": False})

    def report(error: object, _message: object, sent: float) -> None:
        with lock:
            if error is not None:
                errors.append(str(error))
            else:
                latencies.append((time.perf_counter() - sent) * 1000)

    producer.produce(stream, b"warm-up")
    producer.flush(30)
    value = b"v" * RECORD_BYTES
    per_tick = max(1, rate // 1000)
    expected = int(rate * seconds)
    started = time.perf_counter()
    sent = 0
    while sent < expected:
        delay = started + sent / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        for _ in range(per_tick):
            now = time.perf_counter()
            producer.produce(stream, value, on_delivery=lambda e, m, t=now: report(e, m, t))
        sent += per_tick
        producer.poll(0)
    producer.flush(60)
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, e.g. {errors[:3]}")
    return latencies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller counts, fewer kills (a smoke run)")
    parser.add_argument("--producers", type=int, default=2, help="producer processes (default 2)")
    parser.add_argument("--kills", type=int, help="leader kills for the failover time (default 5, quick 3)")
    parser.add_argument("--no-fsync", action="store_true", help="run the nodes with fsync off")
    parser.add_argument("--rounds", type=int,
                        help="throughput and latency rounds; each value reported is the median (default 3, quick 1)")
    parser.add_argument("--metrics", action="store_true", help="compare metrics off and on, round by round")
    args = parser.parse_args(argv)
    count = 200_000 if args.quick else 2_000_000
    latency_seconds = 2.0 if args.quick else 5.0
    kills = args.kills or (3 if args.quick else 5)
    rounds = args.rounds or (1 if args.quick else 3)
    if args.metrics:
        from benchmarks.metrics_cost import compare_metrics_cluster

        return compare_metrics_cluster(rounds, count, args.producers, fsync=not args.no_fsync)
    runs: dict[str, list[Throughput]] = {"cluster": [], "single": []}
    latencies: dict[str, list[list[float]]] = {"cluster": [], "single": []}
    report = Report("bench_replication")
    with tempfile.TemporaryDirectory(prefix="vdl-bench-repl-") as tmp:
        settings = {"log_level": "WARNING", "fsync": not args.no_fsync}
        cluster = DevCluster(3, Path(tmp) / "cluster", free_base_port(6), settings=settings)
        single: Broker | None = None
        try:
            cluster.start(timeout_s=60)
            cluster.wait_for_brokers(timeout_s=60)
            create_streams(cluster, TOPIC_FAILOVER)
            # The baseline: one node, same machine, same run (it idles while the cluster is measured).
            single = Broker(Path(tmp) / "single", fsync=not args.no_fsync)
            for round_number in range(rounds):
                latency_topic, throughput_topic = f"{TOPIC_LATENCY}-{round_number}", f"{TOPIC_THROUGHPUT}-{round_number}"
                create_streams(cluster, latency_topic, throughput_topic)
                create(single.bootstrap, latency_topic, throughput_topic)
                targets = {"cluster": cluster.bootstrap_servers, "single": single.bootstrap}
                order = ("cluster", "single") if round_number % 2 == 0 else ("single", "cluster")
                # Latency first: after a throughput run the third replica may still be catching
                # up (acks=-1 waits for a majority only) and would compete for the 2 cores.
                for which in order:
                    latencies[which].append(ack_latencies(targets[which], latency_topic, LATENCY_RATE,
                                                          latency_seconds))
                for which in order:
                    runs[which].append(produce_run(targets[which], throughput_topic, count, -1, args.producers))
            failovers: list[float] = []
            for _ in range(kills):
                failovers.append(failover_seconds(cluster, TOPIC_FAILOVER))
        finally:
            cluster.kill_all()
            if single is not None:
                single.stop()
    throughputs = [run.rate for run in runs["cluster"]]
    singles = [run.rate for run in runs["single"]]
    ratios = [c / s for c, s in zip(throughputs, singles, strict=True)]
    p50s = [percentile(values, 0.5) for values in latencies["cluster"]]
    p99s = [percentile(values, 0.99) for values in latencies["cluster"]]
    single_p99s = [percentile(values, 0.99) for values in latencies["single"]]
    samples = sum(len(values) for values in latencies["cluster"])
    middle = rounds // 2
    report.timeline("3 nodes, acks=-1", runs["cluster"][middle].counts)
    report.timeline("1 node, acks=-1", runs["single"][middle].counts, baseline=True)
    report.latency("3 nodes, acks=-1, 20k rec/s", [v for values in latencies["cluster"] for v in values])
    report.latency("1 node, acks=-1, 20k rec/s", [v for values in latencies["single"] for v in values], baseline=True)

    def listed(values: list[float], fmt: str) -> str:
        return "rounds: " + ", ".join(format(v, fmt) for v in values)

    throughput = statistics.median(throughputs)
    who = f"3 nodes, {args.producers} confluent-kafka producer processes, linger 5 ms"
    fsync = "fsync off" if args.no_fsync else "fsync on"
    report.add("produce acks=-1, 3 replicas", throughput, "records/s", 300_000,
               note=f"{who}; {fsync}; {listed(throughputs, ',.0f')}")
    report.add("produce acks=-1, 3 replicas", throughput * RECORD_BYTES / 1e6, "MB/s", note="100-byte values")
    report.add("produce acks=-1, 1 node (same run)", statistics.median(singles), "records/s",
               note=f"{fsync}; {listed(singles, ',.0f')}")
    report.add("3 replicas / 1 node, acks=-1", statistics.median(ratios), "x", 0.8,
               note=f"median of per-round ratios: {listed(ratios, '.2f')}")
    note = f"{LATENCY_RATE:,} rec/s steady, {samples:,} samples"
    report.add("produce-to-ack latency p50 (acks=-1)", statistics.median(p50s), "ms", higher_is_better=False,
               note=f"{note}; {listed(p50s, '.1f')}")
    report.add("produce-to-ack latency p99 (acks=-1)", statistics.median(p99s), "ms", 8.0,
               higher_is_better=False, note=f"{note}; {listed(p99s, '.1f')}")
    report.add("produce-to-ack latency p99, 1 node (same run)", statistics.median(single_p99s), "ms",
               higher_is_better=False, note=listed(single_p99s, ".1f"))
    spread = ", ".join(f"{f:.2f}" for f in failovers)
    report.add("failover: kill -9 leader -> first acks=-1 ack (median)", statistics.median(failovers), "s", 2.0,
               higher_is_better=False, note=f"{kills} kills: {spread}")
    report.add("failover (worst)", max(failovers), "s", higher_is_better=False)
    report.finish()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

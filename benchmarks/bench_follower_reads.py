"""Follower reads (KIP-392): read throughput from all replicas against the leader alone.

    .venv/bin/python -m benchmarks.bench_follower_reads [--quick] [--records N] [--rounds R]

A 3-node dev cluster on this machine, nodes in racks rack-1..rack-3, one stream of 4M 100-byte
records (1M with --quick) replicated on all three, every replica caught up:
- three kcat consumers at once, each reading the whole stream: leader-only (no client.rack:
  all three fetch from the leader) vs follower reads (client.rack rack-1, rack-2, rack-3: the
  leader sends each to the replica in its rack) -- records/s summed over the three;
- a Spark batch read with minPartitions=6 into the noop sink: preferReplicas=leader vs any
  (two tasks per replica).
Each pair runs in alternating rounds (leader-only, follower reads, leader-only, ...) after one
warm-up of each; the table gives the medians and their ratio (goal: follower reads >= 2x).

Brokers, kcat and Spark share the machine's cores (nproc is printed with the table): with
fewer cores than replicas, spreading reads over the replicas cannot add cores to the work.
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
from pathlib import Path

from benchmarks.bench_connector import LOAD_BATCH_RECORDS, load
from benchmarks.report import Report, alternating_rounds
from vdl_client import request_once
from vdl_dev.dev_cluster import DevCluster, free_base_port
from vdl_wire import messages as m

STREAM = "bench-followers"
RACKS = {1: "rack-1", 2: "rack-2", 3: "rack-3"}


def kcat_read(bootstrap: str, count: int, rack: str | None) -> float:
    """Seconds for one kcat to read the stream's `count` records from the beginning to the end
    (librdkafka tuned as in bench_broker.kcat_consume; with `rack`, client.rack)."""
    command = ["kcat", "-C", "-b", bootstrap, "-t", STREAM, "-p", "0", "-o", "beginning", "-e", "-q",
               "-X", "fetch.max.bytes=52428800", "-X", "fetch.message.max.bytes=16777216",
               "-X", "queued.min.messages=10000000", "-X", "queued.max.messages.kbytes=2097151",
               "-X", "fetch.wait.max.ms=10", "-f", "\n"]
    if rack is not None:
        command += ["-X", f"client.rack={rack}"]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, timeout=900)
    elapsed = time.perf_counter() - started
    got = result.stdout.count(b"\n")
    if got != count:
        raise RuntimeError(f"kcat ({rack or 'leader'}) read {got} records, expected {count}: {result.stderr[-300:]!r}")
    return elapsed


def three_kcats(bootstrap: str, count: int, racks: list[str | None]) -> float:
    """Records/s of three kcat consumers started together (3 x count over the slowest's time)."""
    times: list[float] = []
    errors: list[BaseException] = []

    def run(rack: str | None) -> None:
        try:
            times.append(kcat_read(bootstrap, count, rack))
        except BaseException as error:  # reported after the join
            errors.append(error)

    threads = [threading.Thread(target=run, args=(rack,)) for rack in racks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return len(racks) * count / max(times)


def wait_until_caught_up(cluster: DevCluster, count: int, timeout_s: float = 120) -> None:
    """Every replica answers Fetch v11 with the high watermark `count`."""
    deadline = time.monotonic() + timeout_s
    partition = m.FetchRequest.FetchPartition(partition=0, fetch_offset=count, partition_max_bytes=1)
    request = m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1,
                             topics=[m.FetchRequest.FetchTopic(topic=STREAM, partitions=[partition])])
    for node in cluster.nodes.values():
        while True:
            try:
                answer = request_once(node.client_address, request, 5.0, 11).responses[0].partitions[0]
                if answer.error_code == 0 and answer.high_watermark == count:
                    break
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"node {node.node_id} did not catch up to {count} within {timeout_s} s")
            time.sleep(0.1)


def spark_read(spark, bootstrap: str, count: int, prefer: str) -> float:  # noqa: ANN001
    """Records/s of a batch read of the stream (minPartitions=6) into the noop sink."""
    started = time.perf_counter()
    (spark.read.format("vdl").option("bootstrap.servers", bootstrap).option("subscribe", STREAM)
     .option("minPartitions", "6").option("preferReplicas", prefer).load()
     .write.format("noop").mode("append").save())
    return count / (time.perf_counter() - started)


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process so far (proc(5): utime, stime are fields 14, 15)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def compare(report: Report, what: str, cluster: DevCluster, measures: dict[str, Callable[[], float]],
            rounds: int) -> None:
    """Alternating rounds of `measures`; each median with the busiest broker's share of the wall
    time (CPU seconds / wall seconds), which says whether the brokers were the bottleneck."""
    busiest: dict[str, list[float]] = {label: [] for label in measures}

    def with_cpu(label: str, measure: Callable[[], float]) -> Callable[[], float]:
        def run() -> float:
            before = {i: cpu_seconds(n.pid) for i, n in cluster.nodes.items()}
            started = time.perf_counter()
            rate = measure()
            wall = time.perf_counter() - started
            busiest[label].append(max(cpu_seconds(n.pid) - before[i] for i, n in cluster.nodes.items()) / wall)
            return rate
        return run

    results = alternating_rounds({label: with_cpu(label, f) for label, f in measures.items()}, rounds)
    medians = {label: statistics.median(values) for label, values in results.items()}
    for label, values in results.items():
        share = statistics.median(busiest[label][-len(values):])
        report.add(f"{what}: {label}", medians[label], "records/s",
                   note=f"median of {len(values)}: " + ", ".join(f"{v:,.0f}" for v in values)
                   + f"; busiest broker {100 * share:.0f}% of a core")
    (base_label, base), (label, other) = medians.items()
    report.add(f"{what}: {label} / {base_label}", other / base, "x", goal=2.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1M records instead of 4M, 2 rounds")
    parser.add_argument("--records", type=int, help="number of records (overrides --quick)")
    parser.add_argument("--rounds", type=int, help="measured rounds per mode (default 3, 2 with --quick)")
    args = parser.parse_args(argv)
    count = args.records or (1_000_000 if args.quick else 4_000_000)
    count -= count % LOAD_BATCH_RECORDS
    rounds = args.rounds or (2 if args.quick else 3)

    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    report = Report("bench_follower_reads")
    with tempfile.TemporaryDirectory(prefix="vdl-bench-followers-") as tmp:
        cluster = DevCluster(3, Path(tmp), free_base_port(6), settings={"log_level": "WARNING"}, racks=RACKS)
        spark = None
        try:
            cluster.start(timeout_s=60)
            cluster.wait_for_brokers(timeout_s=60)
            leader = cluster.nodes[1].client_address
            load_s = load(leader, STREAM, count)  # replication factor 3: the default on 3 nodes
            wait_until_caught_up(cluster, count)
            report.add("load (10k-record batches, acks=all)", count / load_s, "records/s")
            bootstrap = cluster.bootstrap_servers
            compare(report, "3 kcat consumers", cluster, {
                "leader only": lambda: three_kcats(bootstrap, count, [None, None, None]),
                "follower reads (client.rack)": lambda: three_kcats(bootstrap, count, list(RACKS.values())),
            }, rounds)
            spark = (SparkSession.builder.master("local[2]").appName("bench-follower-reads")
                     .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g").getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            compare(report, "Spark read, minPartitions=6", cluster, {
                "preferReplicas=leader": lambda: spark_read(spark, bootstrap, count, "leader"),
                "preferReplicas=any": lambda: spark_read(spark, bootstrap, count, "any"),
            }, rounds)
        finally:
            if spark is not None:
                spark.stop()
            cluster.kill_all()
    report.add("cores", os.cpu_count() or 0, "", note="brokers, clients and Spark share them")
    report.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

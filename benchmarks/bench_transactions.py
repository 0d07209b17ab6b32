"""Transactions benchmark: a 3-node dev cluster on this machine.

    .venv/bin/python -m benchmarks.bench_transactions [--quick] [--rounds N] [--records N]

Alternating rounds (each starting with the other variant) of one confluent-kafka producer
writing 100-byte records with acks=all, linger 5 ms, to a fresh stream per run:
- idempotent (`enable.idempotence`), the baseline;
- transactional (`transactional.id`): 100 records per transaction, begin / produce /
  commit_transaction in a loop.
Measured: throughput of each (median over rounds) and the per-round ratio, goal >= 0.7x; the
brokers' CPU per record of each; commit latency (the commit_transaction call, which returns
once every stream holds its marker) p50/p99 over all rounds, goal p99 <= 20 ms.

Clients, brokers and Raft traffic share the machine's cores; numbers are for this machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bench_replication import create_streams
from benchmarks.peers import per_record_us
from benchmarks.report import Report, cpu_seconds, percentile
from vdl_dev.dev_cluster import DevCluster, free_base_port

RECORD_BYTES = 100
PER_TXN = 100


def produce(bootstrap: str, stream: str, count: int, transactional: str | None,
            commit_ms: list[float]) -> tuple[float, list[tuple[float, float]]]:
    """Records/s of one producer writing `count` records (in transactions of PER_TXN when
    `transactional`, appending each commit's latency to `commit_ms`); (rate, (time, acknowledged) samples)."""
    import confluent_kafka

    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "enable.idempotence": True,
            "compression.type": "none", "queue.buffering.max.messages": 2_000_000,
            "delivery.report.only.error": True}
    if transactional:
        conf["transactional.id"] = transactional
    producer = confluent_kafka.Producer(conf)
    value = b"v" * RECORD_BYTES
    if transactional:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(stream, b"warm-up")
        producer.commit_transaction(30)
    else:
        producer.produce(stream, b"warm-up")
        producer.flush(30)
    started = time.perf_counter()
    samples = [(0.0, 0.0)]
    if transactional:
        for first in range(0, count, PER_TXN):
            producer.begin_transaction()
            for _ in range(min(PER_TXN, count - first)):
                producer.produce(stream, value)
            asked = time.perf_counter()
            producer.commit_transaction(30)
            done = time.perf_counter()
            commit_ms.append((done - asked) * 1000)
            if first % 10_000 == 0:
                samples.append((done - started, float(first + PER_TXN)))
    else:
        for i in range(count):
            try:
                producer.produce(stream, value)
            except BufferError:
                producer.poll(0.001)
                producer.produce(stream, value)
            if i % 10_000 == 0:
                producer.poll(0)
                samples.append((time.perf_counter() - started, float(i - len(producer))))
        if producer.flush(120):
            raise RuntimeError("produce failed: records left undelivered")
    elapsed = time.perf_counter() - started
    samples.append((elapsed, float(count)))
    return count / elapsed, samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_transactions")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--records", type=int, default=None)
    args = parser.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 4)
    count = args.records or (50_000 if args.quick else 200_000)
    rates: dict[str, list[float]] = {"idempotent": [], "transactional": []}
    cpu: dict[str, list[float]] = {"idempotent": [], "transactional": []}
    timelines: dict[str, list[tuple[float, float]]] = {}
    commit_ms: list[float] = []
    with tempfile.TemporaryDirectory(prefix="vdl-bench-txn-") as tmp:
        cluster = DevCluster(3, Path(tmp) / "cluster", free_base_port(6), settings={"log_level": "WARNING"})
        try:
            cluster.start(timeout_s=60)
            cluster.wait_for_brokers(timeout_s=60)
            pids = [p for n in cluster.nodes.values() if (p := n.pid)]
            names = [f"bench-txn-{kind}-{n}" for n in range(rounds + 1) for kind in rates]
            create_streams(cluster, *names)
            # One unrecorded run of each: connections, the coordinator's first transactional id.
            for kind in rates:
                produce(cluster.bootstrap_servers, f"bench-txn-{kind}-{rounds}", count // 10,
                        "bench-warm-up" if kind == "transactional" else None, [])
            for number in range(rounds):
                order = list(rates) if number % 2 == 0 else list(reversed(rates))
                for kind in order:
                    before = cpu_seconds(pids)
                    rate, samples = produce(cluster.bootstrap_servers, f"bench-txn-{kind}-{number}", count,
                                            f"bench-{number}" if kind == "transactional" else None, commit_ms)
                    cpu[kind].append(per_record_us(cpu_seconds(pids) - before, count))
                    rates[kind].append(rate)
                    timelines.setdefault(kind, [(t, v / t if t else 0.0) for t, v in samples[1:]])
                    print(f"round {number + 1} {kind}: {rate:,.0f} records/s, brokers' CPU "
                          f"{cpu[kind][-1]:.1f} us/record", flush=True)
        finally:
            cluster.kill_all()
    report = Report("bench_transactions")
    for kind, points in timelines.items():
        report.throughput(f"{kind}, acks=all, 3 nodes (average since start)", points,
                          baseline=kind == "idempotent")
    report.latency("commit_transaction (100 records), 3 nodes", commit_ms)
    ratios = [t / i for t, i in zip(rates["transactional"], rates["idempotent"], strict=True)]
    who = f"1 confluent-kafka producer, 100-byte records, {count:,} per run, {rounds} alternating rounds"
    report.add("idempotent produce, acks=all (median)", statistics.median(rates["idempotent"]), "records/s",
               note=who)
    report.add("transactional produce, 100 records per transaction (median)",
               statistics.median(rates["transactional"]), "records/s")
    report.add("transactional / idempotent (median of per-round ratios)", statistics.median(ratios), "x", 0.7,
               note=", ".join(f"{r:.2f}" for r in ratios))
    report.add("commit latency p50", percentile(commit_ms, 0.5), "ms", higher_is_better=False)
    report.add("commit latency p99", percentile(commit_ms, 0.99), "ms", 20.0, higher_is_better=False,
               note=f"{len(commit_ms)} commits")
    for kind in rates:
        report.add(f"brokers' CPU per record, {kind} (median)", statistics.median(cpu[kind]), "us",
                   higher_is_better=False)
    report.finish()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

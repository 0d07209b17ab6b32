"""Transactions benchmark: a 3-node dev cluster on this machine.

    .venv/bin/python -m benchmarks.bench_transactions [--quick] [--rounds N] [--records N]
        [--producers N] [--duration-ms N] [--profile | --baseline DIR [--idle-streams N] | --kafka]

Variants, each writing 100-byte records with acks=all, linger 5 ms, to a fresh stream per run,
with confluent-kafka producers (one thread each; the client's own threads do the I/O):
- idempotent x1 (`enable.idempotence`), the baseline of
- transactional x1 (`transactional.id`): 100 records per transaction, begin / produce /
  commit_transaction in a loop -- the issue's goal (>= 0.7x, commit p99 <= 20 ms);
- transactional x1 every D ms (--duration-ms, default 100): the same producer committing a
  transaction every D ms however many records it holds, as Kafka's own ProducerPerformance
  measures transactional throughput (--transaction-duration-ms, 3000 by default there): records
  are sent without waiting and the commit flushes them; a reference next to the goal's number,
  paired with the same idempotent x1 run;
- idempotent xN and transactional xN (N = --producers, default 4): N producers at once, each on
  its own stream, so the coordinator sees N transactions in flight (one producer alone leaves it
  idle between commits, and the commit's latency bounds its rate: 100 records / commit latency).
Fair: same records, same client settings (idempotence on for both), same cluster, each variant of
a pair runs in the same round, the order alternating per round; medians over rounds; the per-round
ratio; the brokers' CPU per record (all three processes, the fair number on a shared machine),
also net of the cluster's idle CPU (measured once over IDLE_S with no client: its ticks and
heartbeats weigh on a slow run -- a transactional one -- per record, not on a fast one).
What a 100-record transaction costs: its time split into the produce() calls and
commit_transaction (medians), and the brokers' net CPU per transaction.
Commit latency is the commit_transaction call: it returns once the decision is durable in the
metadata (Kafka's EndTxn; the markers follow).

--baseline DIR: a before/after instead -- two 3-node clusters side by side, this checkout's and
the one at DIR (e.g. a `git worktree add` of main; its brokers run with DIR/src first on their
path), the same variants on each (idempotent x1, transactional x1, transactional xN), the
clusters' order alternating per round; medians per cluster and the per-round ratio this /
baseline. Both clusters idle while the other runs (their idle CPU is taken off each run's).

Where a transaction's time goes (every transactional variant but the timed one): the brokers'
own latency per request of the transaction's requests (AddPartitionsToTxn -- it waits for the
previous transaction's markers --, Produce, EndTxn; from each node's /metrics, mean per request),
their fsync and Raft commit latencies, the answers other than NONE (CONCURRENT_TRANSACTIONS: a
client retry after its backoff), and the brokers' run-queue wait per transaction (/proc schedstat:
time their threads were ready to run but had no CPU -- on a shared machine the first suspect).

--kafka: Apache Kafka 4.4 beside VDL instead, to know what the goal asks of a system that serves
transactions: a 3-node VDL cluster and a 3-node Kafka cluster (vdl_dev.kafka_peer, KRaft combined
mode, replication factor 3, min.insync.replicas=2) side by side, the same producers and records,
idempotent x1 and transactional x1 (100 records per transaction) on each; the systems' order
rotating and the variants' order alternating per round. Kafka twice, as benchmarks/peers.py
measures it: topics with its defaults (acknowledged from the page cache) and topics with
flush.messages=1 (every batch fsync'd, markers included); its transaction state log
(__transaction_state) is not fsync'd in either -- VDL fsyncs every step of a transaction. Each
system's own ratio transactional / idempotent, its commit latency, its brokers' CPU per
transaction (net of idle).

--profile: after the rounds, one more transactional xN run under py-spy on every broker
(benchmarks/profile.py, samples of the thread holding the GIL only: the brokers' Python CPU, not
their waits): flame graphs and top frames by self time in the report.

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
import urllib.request
from pathlib import Path

from benchmarks.bench_replication import create_streams, wait_for_in_sync
from benchmarks.peers import Target, kafka_targets, per_record_us, rotation, vdl_target
from benchmarks.profile import Profiler
from benchmarks.report import Report, cpu_seconds, idle_cpu, percentile
from vdl_client import ClientSettings, VdlClient
from vdl_dev.dev_cluster import DevCluster, free_base_port
from vdl_dev.kafka_peer import KafkaPeer

RECORD_BYTES = 100
PER_TXN = 100
IDLE_S = 3.0  # the idle cluster's CPU is measured over this long


def produce_waiting(producer, stream: str, value: bytes) -> None:  # noqa: ANN001
    """produce(), waiting a moment for the client's queue to drain once when it is full."""
    try:
        producer.produce(stream, value)
    except BufferError:
        producer.poll(0.001)
        producer.produce(stream, value)


def produce(bootstrap: str, stream: str, count: int, transactional: str | None,
            commit_ms: list[float], ready: threading.Barrier | None = None, duration_ms: float = 0.0,
            loop_ms: list[float] | None = None) -> tuple[float, list[tuple[float, float]]]:
    """Records/s of one producer writing `count` records (in transactions of PER_TXN when
    `transactional`, or of `duration_ms` each when given; appending each commit's latency to
    `commit_ms`, and the time of each transaction's produce() calls to `loop_ms`); (rate, (time,
    acknowledged) samples). `ready`: producers of one run start together once each has warmed up."""
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
    if ready is not None:
        ready.wait(60)
    started = time.perf_counter()
    samples = [(0.0, 0.0)]
    if transactional and duration_ms:
        # Kafka's ProducerPerformance: send without waiting, commit once the transaction is
        # `duration_ms` old (and at the end).
        producer.begin_transaction()
        begun = time.perf_counter()
        for i in range(count):
            produce_waiting(producer, stream, value)
            now = time.perf_counter()
            if (now - begun) * 1000 >= duration_ms or i == count - 1:
                producer.commit_transaction(30)
                done = time.perf_counter()
                commit_ms.append((done - now) * 1000)
                samples.append((done - started, float(i + 1)))
                if i < count - 1:
                    producer.begin_transaction()
                    begun = time.perf_counter()
    elif transactional:
        for first in range(0, count, PER_TXN):
            begun = time.perf_counter()
            producer.begin_transaction()
            for _ in range(min(PER_TXN, count - first)):
                producer.produce(stream, value)
            asked = time.perf_counter()
            producer.commit_transaction(30)
            done = time.perf_counter()
            commit_ms.append((done - asked) * 1000)
            if loop_ms is not None:
                loop_ms.append((asked - begun) * 1000)
            if first % 10_000 == 0:
                samples.append((done - started, float(first + PER_TXN)))
    else:
        for i in range(count):
            produce_waiting(producer, stream, value)
            if i % 10_000 == 0:
                producer.poll(0)
                samples.append((time.perf_counter() - started, float(i - len(producer))))
        if producer.flush(120):
            raise RuntimeError("produce failed: records left undelivered")
    elapsed = time.perf_counter() - started
    samples.append((elapsed, float(count)))
    return count / elapsed, samples


def produce_many(bootstrap: str, streams: list[str], count: int, transactional: str | None,
                 commit_ms: list[float], duration_ms: float = 0.0,
                 loop_ms: list[float] | None = None) -> tuple[float, list[tuple[float, float]]]:
    """`len(streams)` producers at once, `count` records in all (each its share, on its own stream);
    (total records/s, samples of the first)."""
    if len(streams) == 1:
        return produce(bootstrap, streams[0], count, transactional, commit_ms, duration_ms=duration_ms,
                       loop_ms=loop_ms)
    share = count // len(streams)
    ready = threading.Barrier(len(streams))
    results: list[tuple[float, list[tuple[float, float]]] | BaseException] = [ValueError("not run")] * len(streams)
    begun = [0.0]

    def run(index: int) -> None:
        try:
            results[index] = produce(bootstrap, streams[index], share,
                                     f"{transactional}-{index}" if transactional else None, commit_ms, ready)
        except BaseException as error:  # noqa: BLE001 -- reported below, after every thread ended
            results[index] = error

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(streams))]
    for thread in threads:
        thread.start()
    begun[0] = time.perf_counter()
    for thread in threads:
        thread.join()
    failed = [r for r in results if isinstance(r, BaseException)]
    if failed:
        raise RuntimeError(f"a producer failed: {failed[0]!r}")
    # Producers start together at the barrier: the run lasts as long as the slowest one.
    slowest = max(share / rate for rate, _ in results if not isinstance(rate, BaseException))  # type: ignore[misc]
    first = results[0]
    assert not isinstance(first, BaseException)
    return share * len(streams) / slowest, first[1]


TRACED_APIS = ("AddPartitionsToTxn", "Produce", "EndTxn")


def run_queue_wait_s(pids: list[int]) -> float:
    """Seconds the processes' threads have spent ready to run but waiting for a CPU (Linux
    /proc/PID/task/TID/schedstat, second field, ns); 0 where it cannot be read."""
    total = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/schedstat") as stats:
                    total += int(stats.read().split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return total / 1e9


def broker_counters(cluster: DevCluster) -> dict[str, float]:
    """Every node's request, fsync and Raft commit counters summed: "api:NAME" -> (seconds,
    count) as two keys ("...:s", "...:n"), "error:NAME" -> answers with that error (not NONE)."""
    from prometheus_client.parser import text_string_to_metric_families

    totals: dict[str, float] = {}
    for url in cluster.metrics_urls().values():
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                key = None
                if sample.name in ("vdl_request_latency_seconds_sum", "vdl_request_latency_seconds_count"):
                    key = f"api:{sample.labels.get('api')}:{'s' if sample.name.endswith('_sum') else 'n'}"
                elif sample.name in ("vdl_fsync_latency_seconds_sum", "vdl_fsync_latency_seconds_count",
                                     "vdl_raft_commit_latency_seconds_sum", "vdl_raft_commit_latency_seconds_count"):
                    what = "fsync" if "fsync" in sample.name else "raft commit"
                    key = f"api:{what}:{'s' if sample.name.endswith('_sum') else 'n'}"
                elif sample.name == "vdl_requests_total" and sample.labels.get("error") != "NONE":
                    key = f"error:{sample.labels.get('api')} {sample.labels.get('error')}"
                if key is not None:
                    totals[key] = totals.get(key, 0.0) + sample.value
    return totals


def breakdown(before: dict[str, float], after: dict[str, float], transactions: int) -> dict[str, float]:
    """Per run: "NAME ms" -> the brokers' mean latency of one NAME (request, fsync, Raft commit),
    "NAME per txn" -> how many per transaction, "error ..." -> answers per transaction."""
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    out: dict[str, float] = {}
    for name in (*TRACED_APIS, "fsync", "raft commit"):
        count = delta.get(f"api:{name}:n", 0.0)
        if count:
            out[f"{name} ms"] = delta.get(f"api:{name}:s", 0.0) / count * 1000
            out[f"{name} per txn"] = count / transactions
    for key, value in delta.items():
        if key.startswith("error:") and value:
            out[key] = value / transactions
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_transactions")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--producers", type=int, default=4, help="producers of the xN variants (default 4)")
    parser.add_argument("--duration-ms", type=float, default=100.0,
                        help="the time-based variant's transaction length (default 100; ProducerPerformance's "
                             "--transaction-duration-ms)")
    parser.add_argument("--profile", action="store_true", help="one more transactional xN run under py-spy")
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="a checkout to compare with, round by round (e.g. a worktree of main)")
    parser.add_argument("--idle-streams", type=int, default=0, metavar="N",
                        help="with --baseline: N more streams on each cluster, never written (a cluster's "
                             "other streams; default 0)")
    parser.add_argument("--kafka", action="store_true",
                        help="Apache Kafka (3 nodes) beside VDL, idempotent x1 and transactional x1 on each")
    args = parser.parse_args(argv)
    if args.kafka:
        if args.profile or args.baseline is not None:
            parser.error("--kafka goes with neither --profile nor --baseline")
        return against_kafka(args)
    if args.baseline is not None:
        if args.profile:
            parser.error("--profile does not go with --baseline")
        if not (args.baseline / "src" / "vdl_broker").is_dir():
            parser.error(f"--baseline {args.baseline}: no src/vdl_broker there (give a checkout's top directory)")
        return compare(args)
    if args.idle_streams:
        parser.error("--idle-streams goes with --baseline")
    rounds = args.rounds or (2 if args.quick else 4)
    count = args.records or (50_000 if args.quick else 200_000)
    many = args.producers
    timed = f"transactional x1 every {args.duration_ms:g} ms"
    kinds = {"idempotent x1": 1, "transactional x1": 1, timed: 1,
             f"idempotent x{many}": many, f"transactional x{many}": many}
    groups = [("idempotent x1", "transactional x1", timed), (f"idempotent x{many}", f"transactional x{many}")]
    rates: dict[str, list[float]] = {kind: [] for kind in kinds}
    cpu: dict[str, list[float]] = {kind: [] for kind in kinds}
    net_cpu: dict[str, list[float]] = {kind: [] for kind in kinds}
    timelines: dict[str, list[tuple[float, float]]] = {}
    commit_ms: dict[str, list[float]] = {kind: [] for kind in kinds if kind.startswith("transactional")}
    loop_ms: list[float] = []  # transactional x1: each transaction's produce() calls
    # Per traced variant and round: where its transactions' time went (breakdown()), and the
    # brokers' run-queue wait per transaction.
    traced: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds
                                                 if kind.startswith("transactional") and kind != timed}
    profiler = Profiler("bench_transactions", args.profile, gil_only=True)
    with tempfile.TemporaryDirectory(prefix="vdl-bench-txn-") as tmp:
        cluster = DevCluster(3, Path(tmp) / "cluster", free_base_port(9), settings={"log_level": "WARNING"},
                             metrics=True)
        try:
            cluster.start(timeout_s=60)
            cluster.wait_for_brokers(timeout_s=60)
            pids = [p for n in cluster.nodes.values() if (p := n.pid)]

            def streams(kind: str, run: str) -> list[str]:
                slug = kind.replace(" ", "-")
                return [f"bench-txn-{slug}-{run}-{i}" for i in range(kinds[kind])]

            runs = [str(n) for n in range(rounds)] + ["warm"] + (["profile"] if args.profile else [])
            create_streams(cluster, *[s for kind in kinds for run in runs for s in streams(kind, run)])
            # One unrecorded run of each: connections, the coordinator's first transactional ids.
            for kind in kinds:
                produce_many(cluster.bootstrap_servers, streams(kind, "warm"), count // 10,
                             "bench-warm" if kind.startswith("transactional") else None, [],
                             args.duration_ms if kind == timed else 0.0)
            # The cluster with every stream and no client: its ticks and heartbeats.
            idle_rate = idle_cpu(pids, IDLE_S)
            print(f"idle cluster: brokers' CPU {idle_rate * 1000:.0f} ms/s", flush=True)
            for number in range(rounds):
                for group in groups:
                    for kind in (group if number % 2 == 0 else tuple(reversed(group))):
                        counters = broker_counters(cluster) if kind in traced else {}
                        waited = run_queue_wait_s(pids)
                        before, begun = cpu_seconds(pids), time.perf_counter()
                        transactional = (f"bench-{kind.replace(' ', '-')}-{number}" if kind.startswith("transactional")
                                         else None)
                        rate, samples = produce_many(cluster.bootstrap_servers, streams(kind, str(number)), count,
                                                     transactional, commit_ms.get(kind, []),
                                                     args.duration_ms if kind == timed else 0.0,
                                                     loop_ms if kind == "transactional x1" else None)
                        used, elapsed = cpu_seconds(pids) - before, time.perf_counter() - begun
                        if kind in traced:
                            parts = breakdown(counters, broker_counters(cluster), count // PER_TXN)
                            parts["run-queue wait ms per txn"] = (run_queue_wait_s(pids) - waited) / (count / PER_TXN) * 1000
                            parts["run-queue wait s/s"] = (run_queue_wait_s(pids) - waited) / elapsed
                            traced[kind].append(parts)
                        cpu[kind].append(per_record_us(used, count))
                        net_cpu[kind].append(per_record_us(max(0.0, used - idle_rate * elapsed), count))
                        rates[kind].append(rate)
                        timelines.setdefault(kind, [(t, v / t if t else 0.0) for t, v in samples[1:]])
                        print(f"round {number + 1} {kind}: {rate:,.0f} records/s, brokers' CPU "
                              f"{cpu[kind][-1]:.1f} us/record ({net_cpu[kind][-1]:.1f} net of idle)", flush=True)
            if args.profile:
                kind = f"transactional x{many}"
                with profiler.recording("transactional", {f"node{i}": (lambda p=n.pid: [p] if p else [])
                                                          for i, n in cluster.nodes.items()}):
                    produce_many(cluster.bootstrap_servers, streams(kind, "profile"), count, "bench-profile", [])
        finally:
            cluster.kill_all()
    report = Report("bench_transactions")
    for kind, points in timelines.items():
        report.throughput(f"{kind}, acks=all, 3 nodes (average since start)", points,
                          baseline=kind.startswith("idempotent"))
    for kind, commits in commit_ms.items():
        what = f"a transaction of {args.duration_ms:g} ms" if kind == timed else "100 records"
        report.latency(f"commit_transaction ({what}), {kind}, 3 nodes", commits)
    who = f"confluent-kafka producers, 100-byte records, {count:,} per run, {rounds} alternating rounds"
    for base, *others in groups:
        report.add(f"{base} produce, acks=all (median)", statistics.median(rates[base]), "records/s", note=who)
        for txn in others:
            ratios = [t / i for t, i in zip(rates[txn], rates[base], strict=True)]
            per = "100 records per transaction" if txn != timed else f"a commit every {args.duration_ms:g} ms"
            report.add(f"{txn} produce, {per} (median)", statistics.median(rates[txn]), "records/s",
                       note=f"{count / len(commit_ms[txn]) * rounds:,.0f} records per transaction" if txn == timed else "")
            report.add(f"{txn} / {base} (median of per-round ratios)", statistics.median(ratios), "x",
                       0.7 if txn != timed else None, note=", ".join(f"{r:.2f}" for r in ratios)
                       + ("" if txn != timed else " (reference: Kafka's ProducerPerformance way)"))
            report.add(f"commit latency p50, {txn}", percentile(commit_ms[txn], 0.5), "ms", higher_is_better=False)
            report.add(f"commit latency p99, {txn}", percentile(commit_ms[txn], 0.99), "ms",
                       20.0 if txn != timed else None, higher_is_better=False, note=f"{len(commit_ms[txn])} commits")
    # What one 100-record transaction of the goal's producer costs.
    loop, commit = statistics.median(loop_ms), percentile(commit_ms["transactional x1"], 0.5)
    report.add("transactional x1: produce() of 100 records per transaction (median)", loop, "ms",
               higher_is_better=False, note=f"commit_transaction p50 {commit:.2f} ms: the commit is "
               f"{commit / (loop + commit):.0%} of a transaction's time")
    for kind, measured in traced.items():
        def median_of(key: str, measured: list[dict[str, float]] = measured) -> float:
            return statistics.median(r.get(key, 0.0) for r in measured)
        spent = ", ".join(f"{api} {median_of(f'{api} ms'):.1f}" for api in TRACED_APIS)
        report.add(f"{kind}: brokers' latency per request, sum of {'/'.join(TRACED_APIS)} (medians of run means)",
                   sum(median_of(f"{api} ms") for api in TRACED_APIS), "ms", higher_is_better=False,
                   note=f"{spent} ms; fsync {median_of('fsync ms'):.1f} ms ({median_of('fsync per txn'):.1f} per txn "
                   f"on the 3 nodes), Raft commit {median_of('raft commit ms'):.1f} ms "
                   f"({median_of('raft commit per txn'):.1f} per txn)")
        errors = sorted({key for r in measured for key in r if key.startswith("error:")})
        report.add(f"{kind}: answers other than NONE per transaction (median)",
                   sum(median_of(key) for key in errors), "", higher_is_better=False,
                   note=", ".join(f"{key[6:]} {median_of(key):.3f}" for key in errors) or "none")
        report.add(f"{kind}: brokers' run-queue wait per transaction (median)", median_of("run-queue wait ms per txn"),
                   "ms", higher_is_better=False, note=f"{median_of('run-queue wait s/s'):.2f} s per second of the run "
                   "(threads ready to run, no CPU free)")
    report.add("brokers' idle CPU (every stream, no client)", idle_rate * 1000, "ms/s", higher_is_better=False)
    for kind in kinds:
        report.add(f"brokers' CPU per record, {kind} (median)", statistics.median(cpu[kind]), "us",
                   higher_is_better=False, note=f"{statistics.median(net_cpu[kind]):.1f} us net of idle")
    per_txn = statistics.median(net_cpu["transactional x1"]) * PER_TXN / 1000
    report.add("brokers' CPU per 100-record transaction, transactional x1 net of idle (median)", per_txn, "ms",
               higher_is_better=False, note=f"idempotent x1: {statistics.median(net_cpu['idempotent x1']) * PER_TXN / 1000:.2f} ms "
               "per 100 records")
    profiler.add_to(report)
    report.finish()
    return 0


def compare(args: argparse.Namespace) -> int:
    """--baseline: the same variants on this checkout's cluster and the baseline's, alternating."""
    rounds = args.rounds or (2 if args.quick else 4)
    count = args.records or (30_000 if args.quick else 100_000)
    many = args.producers
    kinds = {"idempotent x1": 1, "transactional x1": 1, f"transactional x{many}": many}
    sides = ("this", "baseline")
    rates = {(side, kind): [] for side in sides for kind in kinds}  # type: dict[tuple[str, str], list[float]]
    net_cpu = {(side, kind): [] for side in sides for kind in kinds}  # type: dict[tuple[str, str], list[float]]
    commit_ms = {(side, kind): [] for side in sides for kind in kinds}  # type: dict[tuple[str, str], list[float]]
    with tempfile.TemporaryDirectory(prefix="vdl-bench-txn-") as tmp:
        clusters = {"this": DevCluster(3, Path(tmp) / "this", free_base_port(6), settings={"log_level": "WARNING"})}
        clusters["baseline"] = DevCluster(3, Path(tmp) / "baseline", free_base_port(6),
                                          settings={"log_level": "WARNING"},
                                          env={"PYTHONPATH": str(args.baseline.resolve() / "src")})
        try:
            pids: dict[str, list[int]] = {}
            idle: dict[str, float] = {}
            for side, cluster in clusters.items():
                cluster.start(timeout_s=60)
                cluster.wait_for_brokers(timeout_s=60)
                pids[side] = [p for n in cluster.nodes.values() if (p := n.pid)]
                create_streams(cluster, *[f"bench-txn-{kind.replace(' ', '-')}-{run}-{i}" for kind, n in kinds.items()
                                          for run in [*map(str, range(rounds)), "warm"] for i in range(n)])
                if args.idle_streams:
                    with VdlClient(ClientSettings.from_bootstrap(cluster.nodes[1].client_address,
                                                                 deadline_ms=300_000)) as client:
                        client.create_streams([f"bench-txn-idle-{i}" for i in range(args.idle_streams)])
                for kind, n in kinds.items():
                    produce_many(cluster.bootstrap_servers, [f"bench-txn-{kind.replace(' ', '-')}-warm-{i}"
                                                             for i in range(n)],
                                 count // 10, "bench-warm" if kind.startswith("transactional") else None, [])
            for side in sides:
                idle[side] = idle_cpu(pids[side], IDLE_S)
                print(f"idle cluster, {side}: brokers' CPU {idle[side] * 1000:.0f} ms/s", flush=True)
            for number in range(rounds):
                for kind, n in kinds.items():
                    for side in (sides if number % 2 == 0 else tuple(reversed(sides))):
                        cluster = clusters[side]
                        before, begun = cpu_seconds(pids[side]), time.perf_counter()
                        rate, _ = produce_many(cluster.bootstrap_servers,
                                               [f"bench-txn-{kind.replace(' ', '-')}-{number}-{i}" for i in range(n)],
                                               count, f"bench-{kind.replace(' ', '-')}-{number}"
                                               if kind.startswith("transactional") else None, commit_ms[side, kind])
                        used, elapsed = cpu_seconds(pids[side]) - before, time.perf_counter() - begun
                        rates[side, kind].append(rate)
                        net_cpu[side, kind].append(per_record_us(max(0.0, used - idle[side] * elapsed), count))
                        print(f"round {number + 1} {kind}, {side}: {rate:,.0f} records/s, brokers' CPU "
                              f"{net_cpu[side, kind][-1]:.1f} us/record net of idle", flush=True)
        finally:
            for cluster in clusters.values():
                cluster.kill_all()
    report = Report("bench_transactions_compare")
    who = (f"confluent-kafka, 100-byte records, {count:,} per run, {rounds} rounds, the clusters' order alternating; "
           f"baseline: {args.baseline}" + (f"; {args.idle_streams} idle streams on each" if args.idle_streams else ""))
    for kind in kinds:
        for side in sides:
            report.add(f"{kind} produce, {side} (median)", statistics.median(rates[side, kind]), "records/s",
                       note=who if kind == "idempotent x1" and side == "this" else "")
        ratios = [a / b for a, b in zip(rates["this", kind], rates["baseline", kind], strict=True)]
        report.add(f"{kind}: this / baseline (median of per-round ratios)", statistics.median(ratios), "x",
                   note=", ".join(f"{r:.2f}" for r in ratios))
        for side in sides:
            if kind.startswith("transactional"):
                commits = commit_ms[side, kind]
                report.add(f"commit latency p50 / p99, {kind}, {side}", percentile(commits, 0.5), "ms",
                           higher_is_better=False, note=f"p99 {percentile(commits, 0.99):.1f} ms, "
                           f"{len(commits)} commits")
                report.add(f"commit latency p99, {kind}, {side}", percentile(commits, 0.99), "ms",
                           20.0 if kind == "transactional x1" else None, higher_is_better=False)
            cost = statistics.median(net_cpu[side, kind]) * PER_TXN / 1000
            report.add(f"brokers' CPU per 100 records, {kind}, {side}, net of idle (median)", cost, "ms",
                       higher_is_better=False)
        for side in sides:
            base = [t / i for t, i in zip(rates[side, kind], rates[side, "idempotent x1"], strict=True)]
            if kind == "transactional x1":
                report.add(f"transactional x1 / idempotent x1, {side} (median of per-round ratios)",
                           statistics.median(base), "x", 0.7)
    report.finish()
    return 0


def against_kafka(args: argparse.Namespace) -> int:
    """--kafka: VDL and Kafka, 3 nodes each, the same two variants on each, rounds alternating."""
    rounds = args.rounds or (2 if args.quick else 4)
    count = args.records or (30_000 if args.quick else 100_000)
    kinds = ("idempotent x1", "transactional x1")
    with tempfile.TemporaryDirectory(prefix="vdl-bench-txn-") as tmp:
        cluster = DevCluster(3, Path(tmp) / "vdl", free_base_port(6), settings={"log_level": "WARNING"})
        peer = KafkaPeer(3, Path(tmp) / "kafka")
        try:
            cluster.start(timeout_s=60)
            cluster.wait_for_brokers(timeout_s=60)
            peer.start()
            targets = [vdl_target(cluster.bootstrap_servers, lambda: [p for n in cluster.nodes.values() if (p := n.pid)],
                                  "VDL 3 nodes", "vdl"), *kafka_targets(peer, "Kafka 3 nodes")]
            rates = {(t.key, kind): [] for t in targets for kind in kinds}  # type: dict[tuple[str, str], list[float]]
            net_cpu = {(t.key, kind): [] for t in targets for kind in kinds}  # type: dict[tuple[str, str], list[float]]
            gross_cpu = {(t.key, kind): [] for t in targets for kind in kinds}  # type: dict[tuple[str, str], list[float]]
            commit_ms: dict[str, list[float]] = {t.key: [] for t in targets}

            def topic(target: Target, kind: str, run: str) -> str:
                return target.topic(f"bench-txn-{kind.replace(' ', '-')}-{run}")

            runs = [*map(str, range(rounds)), "warm"]
            for target in targets:
                target.create(*[topic(target, kind, run) for kind in kinds for run in runs])
                if target.key == "vdl":
                    for name in (topic(target, kind, run) for kind in kinds for run in runs):
                        wait_for_in_sync(cluster, name, 60)
                for kind in kinds:  # connections, the coordinators' first transactional ids
                    produce(target.bootstrap, topic(target, kind, "warm"), count // 10,
                            f"bench-warm-{target.key}" if kind.startswith("transactional") else None, [])
            # Once per cluster (Kafka's two targets share one), after every warm-up.
            idle_of = {"vdl": idle_cpu(targets[0].pids(), IDLE_S), "kafka": idle_cpu(targets[1].pids(), IDLE_S)}
            idle = {t.key: idle_of["vdl" if t is targets[0] else "kafka"] for t in targets}
            for name, value in idle_of.items():
                print(f"idle {name}: brokers' CPU {value * 1000:.0f} ms/s", flush=True)
            for number in range(rounds):
                for target in rotation(targets, number):
                    for kind in (kinds if number % 2 == 0 else tuple(reversed(kinds))):
                        transactional = (f"bench-{target.key}-{number}" if kind.startswith("transactional") else None)
                        pids = target.pids()
                        before, begun = cpu_seconds(pids), time.perf_counter()
                        rate, _ = produce(target.bootstrap, topic(target, kind, str(number)), count, transactional,
                                          commit_ms[target.key] if transactional else [])
                        used, elapsed = cpu_seconds(pids) - before, time.perf_counter() - begun
                        rates[target.key, kind].append(rate)
                        gross_cpu[target.key, kind].append(per_record_us(used, count))
                        net_cpu[target.key, kind].append(
                            per_record_us(max(0.0, used - idle[target.key] * elapsed), count))
                        print(f"round {number + 1} {target.label}, {kind}: {rate:,.0f} records/s, brokers' CPU "
                              f"{gross_cpu[target.key, kind][-1]:.1f} us/record ({net_cpu[target.key, kind][-1]:.1f} "
                              f"net of idle), load {os.getloadavg()[0]:.1f}",
                              flush=True)
        finally:
            cluster.kill_all()
            peer.kill_all()
    report = Report("bench_transactions_kafka")
    who = (f"confluent-kafka, 100-byte records, acks=all, linger 5 ms, {count:,} per run, {rounds} rounds, "
           f"the systems' order rotating, the variants' alternating")
    rows = []
    for target in targets:
        idem, txn = rates[target.key, "idempotent x1"], rates[target.key, "transactional x1"]
        ratios = [t / i for t, i in zip(txn, idem, strict=True)]
        commits = commit_ms[target.key]
        per_txn = statistics.median(net_cpu[target.key, "transactional x1"]) * PER_TXN / 1000
        gross_txn = statistics.median(gross_cpu[target.key, "transactional x1"]) * PER_TXN / 1000
        report.add(f"idempotent x1 produce, {target.label} (median)", statistics.median(idem), "records/s",
                   note=f"{target.durability}; {who}" if target is targets[0] else target.durability)
        report.add(f"transactional x1 produce, 100 records per transaction, {target.label} (median)",
                   statistics.median(txn), "records/s")
        report.add(f"transactional x1 / idempotent x1, {target.label} (median of per-round ratios)",
                   statistics.median(ratios), "x", 0.7 if target is targets[0] else None,
                   note=", ".join(f"{r:.3f}" for r in ratios))
        report.add(f"commit latency p50, {target.label}", percentile(commits, 0.5), "ms", higher_is_better=False)
        report.add(f"commit latency p99, {target.label}", percentile(commits, 0.99), "ms",
                   20.0 if target is targets[0] else None, higher_is_better=False, note=f"{len(commits)} commits")
        report.add(f"brokers' CPU per 100-record transaction, {target.label}, net of idle (median)", per_txn, "ms",
                   higher_is_better=False, note=f"{gross_txn:.2f} ms with idle; idempotent: "
                   f"{statistics.median(net_cpu[target.key, 'idempotent x1']) * PER_TXN / 1000:.2f} ms per 100 records")
        rows.append([target.label, f"{statistics.median(idem):,.0f}", f"{statistics.median(txn):,.0f}",
                     f"{statistics.median(ratios):.3f}x", f"{percentile(commits, 0.5):.1f} / {percentile(commits, 0.99):.1f}",
                     f"{per_txn:.2f} ({gross_txn:.2f})"])
    report.side_by_side(f"VDL next to Kafka, 3 nodes each: {who}",
                        ["system", "idempotent x1 rec/s", "transactional x1 rec/s", "ratio", "commit p50 / p99 ms",
                         "brokers' CPU ms per txn net of idle (with)"], rows)
    report.finish()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

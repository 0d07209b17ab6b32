"""Reassignment benchmark: moving a big stream onto a new node while a producer writes to it.

    .venv/bin/python -m benchmarks.bench_reassign [--quick] [--size-mib N] [--rate-mib R[,R...]] [--no-fsync]

A 4-node dev cluster, every node with `recovery_rate_bytes` = R MiB/s. Stream S (3 replicas on
nodes 1-3) is loaded with N MiB (default 1024; --quick 128), then reassigned to
[leader, one follower, node 4]: node 4 catches up as a learner (paced by the throttle), is
promoted, the other follower leaves. Meanwhile one confluent-kafka producer writes 100-byte
records with acks=all as fast as it can to stream P, led by the same node as S (the node
sending the catch-up traffic), the whole time, and its acknowledgements are sampled every
0.1 s; its throughput is compared between the windows before and after the move (the
baseline: same run, same producer, same stream) and the window of the move.

- reassignment time: from AlterPartitionReassignments to the move done (ListPartitionReassignments
  empty) -- goal <= 1.5x the time to copy the stream's bytes at R;
- producer throughput during the move -- goal >= 0.5x its throughput before and after.

Each rate of --rate-mib gets a fresh cluster: 100 MiB/s (the setting's default) and 40 MiB/s by
default. The catch-up a node can do next to a producer of ~250,000 acks=all records/s is bounded
by this machine's two cores; the throttle is meant to bind below that.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.bench_broker import RECORD_BYTES
from benchmarks.bench_replication import free_base_port, wait_for_in_sync
from benchmarks.report import Report, rates
from vdl_client import ClientSettings, VdlClient
from vdl_client.cluster_admin import elect_preferred, list_reassignments, reassign_stream
from vdl_dev.dev_cluster import DevCluster

STREAM = "bench-reassign"
PRODUCED = "bench-reassign-producer"
MIB = 1 << 20
WINDOW_S = 8.0  # the producer's unloaded windows, before and after the move
LOAD_VALUE = 16 << 10  # records loading the stream: 16 KiB each


def load(bootstrap: str, stream: str, size: int) -> None:
    """Write `size` bytes of 16 KiB records (acks=1, big batches): the data to move."""
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 20,
                                         "batch.size": 1_000_000, "compression.type": "none",
                                         "enable.idempotence": False, "queue.buffering.max.kbytes": 1_000_000,
                                         "message.max.bytes": 2_000_000})
    failures: list[object] = []
    value = b"x" * LOAD_VALUE
    for _ in range(size // LOAD_VALUE):
        while True:
            try:
                producer.produce(stream, value, on_delivery=lambda err, msg: err and failures.append(err))
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(300) or failures:
        raise RuntimeError(f"loading {stream} failed: {failures[:3]}")


def producer_process(bootstrap: str, stream: str, stop: multiprocessing.synchronize.Event,
                     samples: multiprocessing.queues.Queue) -> None:
    """acks=all, 100-byte records, as fast as it goes until `stop`; (time, acknowledged) samples."""
    import confluent_kafka

    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "linger.ms": 5, "acks": -1, "batch.size": 1_000_000,
        "batch.num.messages": 100_000, "queue.buffering.max.messages": 200_000, "compression.type": "none",
        "enable.idempotence": False, "delivery.report.only.error": True})
    value = b"v" * RECORD_BYTES
    sent = 0
    next_sample = time.time()
    while not stop.is_set():
        try:
            producer.produce(stream, value)
            sent += 1
        except BufferError:
            producer.poll(0.001)
        if sent % 1000 == 0:
            producer.poll(0)
            if time.time() >= next_sample:
                next_sample += 0.1
                samples.put((time.time(), sent - len(producer)))
    producer.flush(60)
    samples.put((time.time(), sent - len(producer)))
    samples.put(None)


def window_rate(samples: list[tuple[float, float]], start: float, end: float) -> float:
    inside = [(t, n) for t, n in samples if start <= t <= end]
    if len(inside) < 2:
        return 0.0
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def stream_bytes(cluster: DevCluster, node_id: int, stream: str) -> int:
    directory = Path(cluster.nodes[node_id].config.data_dir) / stream
    return sum(p.stat().st_size for p in directory.glob("*.log"))


@dataclass
class Move:
    """One reassignment under load: what it copied, how long it took, the producer's samples."""

    rate: int
    to_copy: int
    start: float
    end: float
    samples: list[tuple[float, float]]


def move_once(size: int, rate: int, fsync: bool, scratch: Path) -> Move:
    """A fresh 4-node cluster with `recovery_rate_bytes` = rate: load, then move under load."""
    cluster = DevCluster(3, scratch, free_base_port(6), settings={
        "recovery_rate_bytes": rate, "fsync": fsync, "leader_balance_interval_ms": 0, "log_level": "WARNING"})
    try:
        cluster.start(timeout_s=60)
        cluster.wait_for_brokers(60)
        new = cluster.add_node(timeout_s=60)
        with VdlClient(ClientSettings.from_bootstrap(cluster.bootstrap_servers, deadline_ms=120_000)) as client:
            client.create_stream(STREAM, 3)
            wait_for_in_sync(cluster, STREAM, 60)
            started = time.monotonic()
            load(cluster.bootstrap_servers, STREAM, size)
            print(f"loaded {size / MIB:.0f} MiB in {time.monotonic() - started:.1f} s", flush=True)
            wait_for_in_sync(cluster, STREAM, 120)
            leader = client.leader_of(STREAM)
            replicas = [leader] + [n for n in (1, 2, 3) if n != leader]
            target = [leader, replicas[1], new]
            to_copy = stream_bytes(cluster, leader, STREAM)
            # The producer's stream, led by the same node: the one the move loads.
            client.create_stream(PRODUCED, 3)
            wait_for_in_sync(cluster, PRODUCED, 60)
            reassign_stream(client, PRODUCED, replicas)  # same nodes, S's leader first (preferred)
            while list_reassignments(client, [PRODUCED]) or client.leader_of(PRODUCED) != leader:
                elect_preferred(client, [PRODUCED])
                client.metadata([PRODUCED])  # forget the old leader
                time.sleep(0.2)
            stop = multiprocessing.Event()
            queue: multiprocessing.Queue = multiprocessing.Queue()
            producer = multiprocessing.Process(target=producer_process,
                                               args=(cluster.bootstrap_servers, PRODUCED, stop, queue))
            producer.start()
            time.sleep(2.0 + WINDOW_S)  # the producer warms up, then the window before
            move_start = time.time()
            reassign_stream(client, STREAM, target)
            while list_reassignments(client, [STREAM]):
                time.sleep(0.1)
            move_end = time.time()
            time.sleep(WINDOW_S)  # the window after
            stop.set()
            samples = []
            while (item := queue.get(timeout=120)) is not None:
                samples.append(item)
            producer.join(60)
    finally:
        cluster.stop_all()
    return Move(rate, to_copy, move_start, move_end, samples)


def add_rows(report: Report, move: Move) -> None:
    before = window_rate(move.samples, move.start - WINDOW_S, move.start)
    after = window_rate(move.samples, move.end, move.end + WINDOW_S)
    during = window_rate(move.samples, move.start, move.end)
    baseline = statistics.mean([before, after])
    took = move.end - move.start
    copy_s = move.to_copy / move.rate
    rate_mib = move.rate / MIB
    report.add(f"reassignment of {move.to_copy / MIB:,.0f} MiB at {rate_mib:g} MiB/s", took, "s",
               goal=1.5 * copy_s, higher_is_better=False, note=f"copy at the throttle rate: {copy_s:.1f} s")
    report.add(f"catch-up rate achieved ({rate_mib:g} MiB/s throttle)", move.to_copy / took / MIB, "MiB/s")
    report.add(f"acks=all producer during the move / unloaded ({rate_mib:g} MiB/s)",
               during / baseline if baseline else 0.0, "x", goal=0.5,
               note=f"{during:,.0f} vs {baseline:,.0f} records/s (before {before:,.0f}, after {after:,.0f})")
    t0 = move.samples[0][0] if move.samples else 0.0
    # Acknowledgements arrive in bursts: plot the rate over half-second steps, not per sample.
    coarse = [sample for i, sample in enumerate(move.samples) if i % 5 == 0 or i == len(move.samples) - 1]
    report.throughput(f"producer, {rate_mib:g} MiB/s move at {move.start - t0:.0f}-{move.end - t0:.0f} s",
                      rates([(t - t0, n) for t, n in coarse]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_reassign", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="128 MiB instead of 1 GiB, one rate")
    parser.add_argument("--size-mib", type=int, help="stream size to move (default 1024, --quick 128)")
    parser.add_argument("--rate-mib", default="100,40",
                        help="recovery_rate_bytes of every node, MiB/s; a comma list runs one move per rate "
                             "(default 100,40: the setting's default, and a rate this 2-core machine sustains "
                             "next to the producer; --quick: 100)")
    parser.add_argument("--no-fsync", action="store_true", help="brokers skip fsync")
    args = parser.parse_args(argv)
    size = (args.size_mib or (128 if args.quick else 1024)) * MIB
    try:
        rates_mib = [float(r) for r in args.rate_mib.split(",") if r.strip()]
    except ValueError:
        parser.error(f"--rate-mib takes MiB/s values like 100,40, got {args.rate_mib!r}")
    if args.quick and args.rate_mib == parser.get_default("rate_mib"):
        rates_mib = rates_mib[:1]
    report = Report("bench_reassign")
    for rate_mib in rates_mib:
        with tempfile.TemporaryDirectory(prefix="vdl-bench-reassign-") as scratch:
            add_rows(report, move_once(size, int(rate_mib * MIB), not args.no_fsync, Path(scratch)))
    report.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

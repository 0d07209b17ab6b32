"""Replication benchmark: a 3-node dev cluster on this machine, next to one VDL node, and Apache
Kafka on 3 nodes and on 1 node.

    .venv/bin/python -m benchmarks.bench_replication [--quick] [--no-fsync] [--vdl-only] [--profile]
    .venv/bin/python -m benchmarks.bench_replication --metrics [--rounds 3] [--no-fsync]

Six targets take turns in every round (each round starting with the next one, after an
unrecorded warm-up run of each): VDL on 3 nodes, VDL on 1 node, and Apache Kafka on 3 nodes
(vdl_dev.kafka_peer: KRaft combined mode, replication factor 3, min.insync.replicas=2) and on 1
node, each with its defaults (acknowledged from the page cache) and with topic
flush.messages=1 (fsync after every batch, as VDL). The same confluent-kafka clients and records
go to all of them:
- produce throughput: confluent-kafka producer processes, 100-byte records, acks=-1
  (majority commit), linger 5 ms, with the brokers' CPU per record -- goal >= 300,000
  records/s; >= 0.85x of one node's; >= 1.0x Kafka with flush.messages=1, >= 0.8x Kafka's defaults;
- produce latency (send to acknowledgement, acks=-1) at a steady 20,000 records/s: p50, p99
  -- goal p99 <= 8 ms;
- produce-to-consume latency at a steady 20,000 records/s -- goal p99 <= Kafka's under both
  settings;
- replication's cost: broker CPU per acknowledged record (us/record = CPU seconds per million
  records) of the whole cluster and of each role apart -- the stream's leader, each follower --
  counted from the start of the run until every broker is idle again (a follower that was
  behind at the last acknowledgement has caught up by then), split into user and system time
  (the kernel's share: socket reads and writes, the page cache, fdatasync's writeback) -- goals:
  a follower <= 0.5x the leader; 3 nodes in all <= 2.2x one node; 3-node throughput >= 0.85x
  one node's. Kafka's 3 nodes against its 1 node by the same measures (its leader found the same
  way): what replication costs the JVM peer on this machine, where every replica's socket and
  page-cache copies share the same cores;
- the cost of a request: one-record produce requests, each acknowledged (acks=-1) before the
  next is sent, and the brokers' CPU per request of the whole cluster (also net of its idle CPU,
  measured just before) and of each role -- the per-batch work (request parsing, Raft rounds,
  syncs, thread hand-offs, wake-ups) that large batches hide, and what a producer sending small
  batches (a low rate, linger.ms 0-5) pays;
- a new stream: CreateTopics to a Metadata answer naming its leader, through confluent-kafka's
  AdminClient (what a client waits before its first produce), median of CREATES_PER_ROUND
  creates per round;
- failover: kill -9 of the stream's leader to the first acknowledged acks=-1 produce at any
  node, several kills (the killed node restarted and back in sync in between) -- goal median
  <= 2 s.

With --vdl-only: VDL on 3 nodes and on 1 node only (throughput, CPU per role and per request,
creates; no Kafka, no latency runs, no failover) -- the quick loop for replication's cost. With
--profile: after the rounds, one more throughput run per VDL target under py-spy
(benchmarks/profile.py): the leader's, a follower's and the single node's flame graphs beside
the JSON (results/bench_replication.<target>.<role>.svg) and their top frames by self time in
the report (samples of the thread holding the GIL: waits in epoll and fdatasync are not work;
nor is the kernel's share of a writev, in the report's system CPU instead).

With --baseline DIR (and --vdl-only): a 3-node cluster and a node of the checkout at DIR (e.g.
`git worktree add /tmp/vdl-before main`) join the rounds, and the CPU per role is compared
round by round (this / baseline): a before/after on the same loaded machine.

With --memory-limit SIZE (root): the run and every process it starts in a memory cgroup of SIZE
(e.g. 1536M), so the nodes write into page-cache pages the kernel reclaims and reuses, as on a
broker that has run for a while, rather than into pages this VM gets back from its host at first
touch (benchmarks/memory_limit.py): the kernel's share of the CPU per record is then measured at
its steady state. Each node's tail caches then get a sixteenth of VDL's room (tail_cache_bytes):
SIZE/16, or 1536M/16 when SIZE is larger (a run with Kafka's nodes, which need 7.5G), so that up
to eight nodes (four with --baseline's) fit with their caches full -- at the default 256 MiB each,
the kernel killed them in a 1536M cgroup once a busy stream's cache could take what idle ones
did not hold -- and VDL is measured with the same caches whether Kafka runs beside it or not.

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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from benchmarks import memory_limit
from benchmarks.bench_broker import (
    LATENCY_WARM_UP_S,
    RECORD_BYTES,
    Broker,
    at_steady_rate,
    latency,
    produce_run,
)
from benchmarks.peers import (
    Measure,
    Target,
    TargetRound,
    compare_targets,
    kafka_needs,
    kafka_targets,
    median_ratio,
    per_record_us,
    rotation,
    vdl_target,
)
from benchmarks.profile import Profiler
from benchmarks.report import Report, cpu_seconds, idle_cpu, percentile
from vdl_client import ClientSettings, VdlClient, request_once
from vdl_client.requests import produce_request
from vdl_dev.dev_cluster import DevCluster, fetch_metadata, free_base_port
from vdl_dev.kafka_peer import KafkaPeer
from vdl_wire.records.record_batch import RecordBatchBuilder

TOPIC_THROUGHPUT = "bench-repl-acksall"
TOPIC_LATENCY = "bench-repl-latency"
TOPIC_CONSUMED = "bench-repl-consumed"
TOPIC_FAILOVER = "bench-repl-failover"
TOPIC_REQUESTS = "bench-repl-requests"
TOPIC_CREATED = "bench-repl-created"
IDLE_S = 2.0  # a target's idle CPU is measured over this long before its request run
LATENCY_RATE = 20_000
# The memory VDL's part of a run is measured in (--memory-limit): its 3-node cluster, its node
# and the producers, or four nodes with --baseline's.
VDL_ROOM = 1536 << 20


def create_streams(cluster: DevCluster, *names: str) -> None:
    with VdlClient(ClientSettings.from_bootstrap(cluster.nodes[1].client_address)) as client:
        client.create_streams(names)  # replication factor -1: the default, 3
    for name in names:
        wait_for_in_sync(cluster, name, 60)


def wait_for_in_sync(cluster: DevCluster, stream: str, timeout_s: float) -> int:
    """Wait until the leader reports all replicas in sync and accepts an acks=-1 write; the leader."""
    return in_sync({i: n.client_address for i, n in cluster.nodes.items() if n.running}, stream, 3, timeout_s)


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
    """Produce at a steady `rate` with acks=-1; send-to-acknowledgement latencies in ms (after
    LATENCY_WARM_UP_S at that rate, unrecorded)."""
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

    value = b"v" * RECORD_BYTES
    at_steady_rate(rate, LATENCY_WARM_UP_S, lambda: producer.produce(stream, value), producer.poll)
    producer.flush(30)

    def send() -> None:
        now = time.perf_counter()
        producer.produce(stream, value, on_delivery=lambda e, m, t=now: report(e, m, t))

    at_steady_rate(rate, seconds, send, producer.poll)
    producer.flush(60)
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, e.g. {errors[:3]}")
    return latencies


def in_sync(addresses: dict[int, str], stream: str, replicas: int, timeout_s: float) -> int:
    """Wait until a node reports itself the leader of `stream` with `replicas` replicas all in
    sync and takes an acks=-1 write; returns its id (any cluster: VDL's or Kafka's)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for node_id, address in addresses.items():
            try:
                response = fetch_metadata(address, [stream], 1.0)
            except (OSError, ValueError):
                continue
            for topic in response.topics:
                for p in topic.partitions:
                    if (topic.name == stream and p.leader_id == node_id and len(p.replica_nodes) == replicas
                            and sorted(p.isr_nodes) == sorted(p.replica_nodes) and write_once(address, stream)):
                        return node_id
        time.sleep(0.05)
    raise TimeoutError(f"{stream}: no in-sync leader within {timeout_s} s")


def create_in_sync(target: Target, addresses: dict[int, str], *names: str) -> None:
    target.create(*names)
    for name in names:
        in_sync(addresses, name, len(addresses), 60)


MEASURES = (Measure("acks_all", "produce acks=-1", "records/s", 300_000),
            Measure("ack_p50", "produce-to-ack p50, acks=-1, 20k rec/s", "ms"),
            Measure("ack_p99", "produce-to-ack p99, acks=-1, 20k rec/s", "ms", 8.0),
            Measure("p50", "produce-to-consume p50, acks=-1, 20k rec/s", "ms"),
            Measure("p99", "produce-to-consume p99, acks=-1, 20k rec/s", "ms"),
            Measure("create", "create a stream until Metadata names its leader", "ms"))
CREATES_PER_ROUND = 3


def create_ms(bootstrap: str, topic: str, timeout_s: float = 30.0) -> float:
    """Milliseconds from CreateTopics (one partition, the cluster's replication factor) until a
    Metadata answer names the new topic's leader; the admin client connected beforehand."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.list_topics(timeout=timeout_s)
    start = time.perf_counter()
    admin.create_topics([NewTopic(topic, 1)])[topic].result(timeout_s)
    while True:
        found = admin.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if found is not None and found.error is None and 0 in found.partitions and found.partitions[0].leader >= 0:
            return (time.perf_counter() - start) * 1000
        if time.perf_counter() - start > timeout_s:
            raise TimeoutError(f"{topic}: no leader named within {timeout_s} s of its creation")
        time.sleep(0.001)  # a Kafka broker learns the topic from its controller a moment after the answer


def measure_latency(target: Target, round_number: int, seconds: float, result: TargetRound) -> None:
    """Produce-to-ack and produce-to-consume latency at a steady 20,000 records/s (fresh topics)."""
    acked, consumed = target.topic(f"{TOPIC_LATENCY}-{round_number}"), target.topic(f"{TOPIC_CONSUMED}-{round_number}")
    values = ack_latencies(target.bootstrap, acked, LATENCY_RATE, seconds)
    result.values["ack_p50"], result.values["ack_p99"] = percentile(values, 0.5), percentile(values, 0.99)
    result.latency = latency(target.bootstrap, consumed, LATENCY_RATE, seconds)
    result.values["p50"], result.values["p99"] = percentile(result.latency, 0.5), percentile(result.latency, 0.99)


# A stream's brokers by role for one topic: {"leader": pid, "follower-1": pid, ...}.
Roles = Callable[[str], dict[str, int]]


def settle(pids: list[int], timeout_s: float = 20.0, window_s: float = 0.25, idle_share: float = 0.05) -> None:
    """Wait until every process uses under `idle_share` of a core over `window_s` (a follower
    still catching up after the last acknowledgement is busy), at most `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    last = {pid: cpu_seconds([pid]) for pid in pids}
    while time.monotonic() < deadline:
        time.sleep(window_s)
        now = {pid: cpu_seconds([pid]) for pid in pids}
        if all(now[pid] - last[pid] < idle_share * window_s for pid in pids):
            return
        last = now


def measure_throughput(target: Target, round_number: int, count: int, producers: int, result: TargetRound,
                       roles: Roles | None = None) -> None:
    """acks=-1 throughput; the broker CPU per record of all and (with `roles`) of each role,
    counted until the brokers are idle again."""
    topic = target.topic(f"{TOPIC_THROUGHPUT}-{round_number}")
    by_role = roles(topic) if roles is not None else {}
    before = {role: cpu_split(pid) for role, pid in by_role.items()}
    with target.cpu() as used:
        run = produce_run(target.bootstrap, topic, count, -1, producers)
        if by_role:
            settle(list(by_role.values()))
    if by_role:
        check_leader_kept(roles, topic, by_role)
    result.values["acks_all"] = run.rate
    result.values["acks_all_cpu"] = per_record_us(used[0], count)
    result.values["client_cpu"] = per_record_us(run.client_cpu_s, count)
    result.timelines["acks_all"] = run.counts
    after = {role: cpu_split(pid) for role, pid in by_role.items()}
    user = {role: per_record_us(after[role][0] - before[role][0], count) for role in by_role}
    system = {role: per_record_us(after[role][1] - before[role][1], count) for role in by_role}
    spent = {role: user[role] + system[role] for role in by_role}
    if spent:
        result.values["leader_cpu"] = spent["leader"]
        result.values["leader_user"], result.values["leader_sys"] = user["leader"], system["leader"]
        followers = [role for role in spent if role != "leader"]
        if followers:
            result.values["follower_cpu"] = statistics.mean(spent[role] for role in followers)
            result.values["follower_max_cpu"] = max(spent[role] for role in followers)
            result.values["follower_user"] = statistics.mean(user[role] for role in followers)
            result.values["follower_sys"] = statistics.mean(system[role] for role in followers)


def tail_cache_bytes(memory_limit: int | None) -> int | None:
    """Each VDL node's tail caches in a run under `memory_limit` (module docstring); None: the
    nodes' default."""
    return None if memory_limit is None else min(memory_limit, VDL_ROOM) // 16


def sequential_produce(bootstrap: str, topic: str, requests: int) -> None:
    """`requests` one-record produce requests (acks=-1), each waited for before the next."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "-1", "linger.ms": 0, "enable.idempotence": True})
    value = b"x" * RECORD_BYTES
    for _ in range(requests):
        producer.produce(topic, value)
        if producer.flush(30) != 0:
            raise RuntimeError(f"{topic}: a record was not acknowledged within 30 s")


def measure_requests(target: Target, round_number: int, requests: int, result: TargetRound,
                     roles: Roles | None = None) -> None:
    """The brokers' CPU per one-record acks=-1 produce request, in all and (with `roles`) by role,
    counted until the brokers are idle again."""
    topic = target.topic(f"{TOPIC_REQUESTS}-{round_number}")
    by_role = roles(topic) if roles is not None else {}
    settle(target.pids())
    idle = idle_cpu(target.pids(), IDLE_S)  # Kafka's JVMs are far from idle with no client
    before = {role: sum(cpu_split(pid)) for role, pid in by_role.items()}
    begun = time.perf_counter()
    with target.cpu() as used:
        sequential_produce(target.bootstrap, topic, requests)
        if by_role:
            settle(list(by_role.values()))
    elapsed = time.perf_counter() - begun
    if by_role:
        check_leader_kept(roles, topic, by_role)
    result.values["request_cpu"] = per_record_us(used[0], requests)
    result.values["request_net_cpu"] = per_record_us(max(0.0, used[0] - idle * elapsed), requests)
    spent = {role: per_record_us(sum(cpu_split(pid)) - before[role], requests) for role, pid in by_role.items()}
    if spent:
        result.values["request_leader_cpu"] = spent["leader"]
        followers = [spent[role] for role in spent if role != "leader"]
        if followers:
            result.values["request_follower_cpu"] = statistics.mean(followers)


def check_leader_kept(roles: Roles, topic: str, by_role: dict[str, int]) -> None:
    """The CPU by role is only what it says if the stream kept its leader through the run (an
    election on a loaded machine would swap a follower's cost for the leader's): refuse the run."""
    leader_now = roles(topic)["leader"]
    if leader_now != by_role["leader"]:
        raise RuntimeError(f"{topic}: the leader changed during the run (pid {by_role['leader']} -> {leader_now}); "
                           "its CPU by role would be mislabelled")


def cpu_split(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds the process has used so far; (0, 0) once it is gone."""
    import psutil

    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.NoSuchProcess:
        return 0.0, 0.0
    return times.user, times.system


class Node(Protocol):
    """A broker process of a cluster: a VDL dev cluster's node or a Kafka peer's."""

    @property
    def client_address(self) -> str: ...

    @property
    def pid(self) -> int | None: ...


def addresses(nodes: Mapping[int, Node]) -> dict[int, str]:
    return {i: n.client_address for i, n in nodes.items()}


def roles_of(nodes: Mapping[int, Node]) -> Roles:
    """A cluster's brokers (node id -> node, VDL's or Kafka's) by role for a topic: its in-sync
    leader, then the others (their pids when asked: a restarted node has a new one)."""

    def roles(topic: str) -> dict[str, int]:
        leader = in_sync(addresses(nodes), topic, len(nodes), 60)
        followers = [i for i in sorted(nodes) if i != leader]
        return {"leader": nodes[leader].pid or 0} | {f"follower-{k + 1}": nodes[i].pid or 0
                                                      for k, i in enumerate(followers)}

    return roles


def report_cost(report: Report, cluster: Target, single: Target, results: dict[str, list[TargetRound]],
                prefix: str = "", goals: bool = True) -> None:
    """Replication's cost of a 3-node `cluster` against a `single` node: CPU per record by role,
    and the ratios the goals are on (medians of per-round ratios, each round's values measured
    side by side). goals=False: a peer's (Kafka's), the same measures without VDL's goals."""
    three, one = results[cluster.key], results[single.key]

    def listed(values: list[float]) -> str:
        return "rounds: " + ", ".join(f"{v:.2f}" for v in values)

    for label, key, runs in (("3 nodes, leader", "leader_cpu", three), ("3 nodes, a follower (mean of 2)",
                              "follower_cpu", three), ("3 nodes, the busier follower", "follower_max_cpu", three),
                             ("1 node", "leader_cpu", one)):
        values = [r.values[key] for r in runs]
        report.add(f"{prefix}broker CPU per record, {label}", statistics.median(values), "us/record",
                   higher_is_better=False, note="= CPU s per million acknowledged records; " + listed(values))
    ratios = [
        ("follower / leader CPU per record, 3 nodes", [r.values["follower_max_cpu"] / r.values["leader_cpu"]
                                                       for r in three], 0.5, False),
        ("3-node total / 1-node CPU per record", [a.values["acks_all_cpu"] / b.values["acks_all_cpu"]
                                                  for a, b in zip(three, one, strict=True)], 2.2, False),
        ("3-node / 1-node acks=-1 throughput", [a.values["acks_all"] / b.values["acks_all"]
                                                for a, b in zip(three, one, strict=True)], 0.85, True),
    ]
    for name, values, goal, higher in ratios:
        report.add(prefix + name, statistics.median(values), "x", goal if goals else None, higher_is_better=higher,
                   note="median of per-round ratios: " + ", ".join(f"{v:.2f}" for v in values))
    # The producers share the cores with the brokers: with every core busy, the throughput ratio
    # is (producers + 1 node) / (producers + 3 nodes) in CPU per record, so the producers' cost
    # says what the 3 nodes may spend for the throughput goal.
    for label, runs in (("3 nodes", three), ("1 node", one)):
        values = [r.values["client_cpu"] for r in runs]
        report.add(f"{prefix}producers' CPU per record, {label}", statistics.median(values), "us/record",
                   higher_is_better=False, note="confluent-kafka processes, librdkafka's threads included; "
                   + listed(values))
    if goals:
        allowed = [(b.values["client_cpu"] + b.values["acks_all_cpu"]) / 0.85 - a.values["client_cpu"]
                   for a, b in zip(three, one, strict=True)]
        report.add(f"{prefix}3-node broker CPU per record that 0.85x throughput allows", statistics.median(allowed),
                   "us/record", note="with every core busy: (producers + 1 node) / 0.85 - producers; " + listed(allowed))
    for label, key, runs in (("3 nodes, in all", "request_cpu", three),
                             ("3 nodes, in all, net of idle", "request_net_cpu", three),
                             ("3 nodes, leader", "request_leader_cpu", three),
                             ("3 nodes, a follower (mean of 2)", "request_follower_cpu", three),
                             ("1 node", "request_cpu", one), ("1 node, net of idle", "request_net_cpu", one)):
        values = [r.values[key] for r in runs]
        report.add(f"{prefix}broker CPU per one-record acks=-1 produce request, {label}", statistics.median(values),
                   "us/request", higher_is_better=False, note=listed(values))
    rows = [[f"round {i + 1}", f"{a.values['acks_all']:,.0f}", f"{b.values['acks_all']:,.0f}",
             f"{a.values['acks_all'] / b.values['acks_all']:.2f}", f"{a.values['leader_cpu']:.2f}",
             f"{a.values['follower_cpu']:.2f}", f"{a.values['acks_all_cpu']:.2f}", f"{b.values['acks_all_cpu']:.2f}",
             f"{a.values['follower_max_cpu'] / a.values['leader_cpu']:.2f}",
             f"{a.values['acks_all_cpu'] / b.values['acks_all_cpu']:.2f}"]
            for i, (a, b) in enumerate(zip(three, one, strict=True))]
    # Where each role's CPU goes: Python and the interpreter (user) or the kernel (system: socket
    # reads and writes, the page cache, fdatasync's writeback) -- what a Python change can cut.
    split_rows = [[label, *(f"{statistics.median(r.values[f'{key}_{kind}'] for r in runs):.3f}"
                           for kind in ("user", "sys"))]
                  for label, key, runs in (("3 nodes, leader", "leader", three), ("3 nodes, a follower (mean of 2)",
                                           "follower", three), ("1 node", "leader", one))]
    report.side_by_side(f"{prefix}CPU per record by role, user and system (us/record, medians of "
                        f"{len(three)} rounds)", ["role", "user", "system"], split_rows)
    report.side_by_side(f"{prefix}replication's cost per round (CPU in us/record; followers: mean of 2; "
                        "load: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()) + " at the end)",
                        ["round", "3 nodes rec/s", "1 node rec/s", "3/1", "leader CPU", "follower CPU",
                         "3 nodes CPU", "1 node CPU", "follower/leader", "3/1 CPU"], rows)


PROFILE_ATTEMPTS = 3


def profile_runs(targets: list[tuple[Target, Roles]], count: int, producers: int, report: Report) -> None:
    """One more throughput run per target under py-spy: flame graphs and top frames by self time.
    A run whose stream changed leaders (an election on a loaded machine) would label the old
    leader's flame graph a follower's: it is run again on a fresh stream, and after
    PROFILE_ATTEMPTS such runs the target's profile is left out with a note, as it is after a run
    that fails -- never the whole report, whose rounds are measured already."""
    profiler = Profiler("bench_replication", True, gil_only=True)
    for target, roles in targets:
        for attempt in range(1, PROFILE_ATTEMPTS + 1):
            topic = target.topic(f"{TOPIC_THROUGHPUT}-profile-{attempt}")
            target.create(topic)
            by_role = roles(topic)
            chosen = {role: (lambda pid=pid: [pid]) for role, pid in by_role.items()
                      if role in ("leader", "follower-1")}
            kept = len(profiler.profiles)
            try:
                with profiler.recording(target.key, chosen):
                    produce_run(target.bootstrap, topic, count, -1, producers)
                    settle(list(by_role.values()))
            except Exception as failed:  # noqa: BLE001 - a lost profile, not a lost report
                del profiler.profiles[kept:]
                note = f"profile of {target.label}, run {attempt}: {type(failed).__name__}: {failed}"
                print(note, flush=True)
                report.side_by_side(f"no profile of {target.label}: its run failed", ["run"], [[note]])
                break
            try:
                check_leader_kept(roles, topic, by_role)
                break
            except RuntimeError as changed:
                del profiler.profiles[kept:]  # mislabelled: not reported
                note = f"profile of {target.label}, run {attempt}: {changed}"
                print(note, flush=True)
                if attempt == PROFILE_ATTEMPTS:
                    report.side_by_side(f"no profile of {target.label}: its leader changed in each of "
                                        f"{PROFILE_ATTEMPTS} runs", ["run"], [[note]])
    profiler.add_to(report)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller counts, fewer kills (a smoke run)")
    parser.add_argument("--producers", type=int, default=2, help="producer processes (default 2)")
    parser.add_argument("--kills", type=int, help="leader kills for the failover time (default 5, quick 3)")
    parser.add_argument("--no-fsync", action="store_true", help="run the nodes with fsync off")
    parser.add_argument("--rounds", type=int,
                        help="throughput and latency rounds; each value reported is the median (default 3, quick 1)")
    parser.add_argument("--metrics", action="store_true", help="compare metrics off and on, round by round")
    parser.add_argument("--vdl-only", action="store_true",
                        help="VDL on 3 nodes and 1 node only: throughput and CPU per role (no Kafka, latency, failover)")
    parser.add_argument("--profile", action="store_true",
                        help="one more run per VDL target under py-spy: flame graphs (SVG) beside the JSON")
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="with --vdl-only: also a 3-node cluster and a node of the checkout at DIR, same rounds")
    memory_limit.add_argument(parser)
    args = parser.parse_args(argv)
    # Kafka's four JVMs need room of their own beside VDL's.
    memory_limit.apply(args, "vdl-bench-replication", () if args.vdl_only or args.metrics else (
        ("VDL's 4 nodes and the producers (a --vdl-only run's limit)", VDL_ROOM), kafka_needs(4)))
    if args.baseline is not None and not args.vdl_only:
        parser.error("--baseline goes with --vdl-only")
    count = 200_000 if args.quick else 2_000_000
    requests = 300 if args.quick else 1_000
    latency_seconds = 2.0 if args.quick else 5.0
    kills = args.kills or (3 if args.quick else 5)
    rounds = args.rounds or (1 if args.quick else 3)
    if args.metrics:
        from benchmarks.metrics_cost import compare_metrics_cluster

        return compare_metrics_cluster(rounds, count, args.producers, fsync=not args.no_fsync)
    results: dict[str, list[TargetRound]] = {}
    with tempfile.TemporaryDirectory(prefix="vdl-bench-repl-") as tmp:
        # No leader balancing: a stream handed to its preferred leader mid-run (every 5 min by
        # default) would swap the leader's and a follower's CPU (check_leader_kept).
        settings: dict[str, object] = {"log_level": "WARNING", "fsync": not args.no_fsync,
                                       "leader_balance_interval_ms": 0}
        cache_bytes = tail_cache_bytes(args.memory_limit)
        if cache_bytes is not None:
            settings["tail_cache_bytes"] = cache_bytes
        cluster = DevCluster(3, Path(tmp) / "cluster", free_base_port(6), settings=settings)
        single: Broker | None = None
        base_single: Broker | None = None
        base_cluster = None if args.baseline is None else DevCluster(
            3, Path(tmp) / "base-cluster", free_base_port(6), settings=settings,
            command=[sys.executable, "-m", "vdl_broker.server.main"],
            env={"PYTHONPATH": str(args.baseline.resolve() / "src")})
        # Kafka on 3 nodes, and on 1: its own replication cost on this machine, by the same measures.
        peers = [] if args.vdl_only else [KafkaPeer(3, Path(tmp) / "kafka"), KafkaPeer(1, Path(tmp) / "kafka1")]
        try:
            cluster.start(timeout_s=60)
            cluster.wait_for_brokers(timeout_s=60)
            if base_cluster is not None:
                base_cluster.start(timeout_s=60)
                base_cluster.wait_for_brokers(timeout_s=60)
            if not args.vdl_only:
                create_streams(cluster, TOPIC_FAILOVER)
            # Baselines, same machine, same run; each idles while another is measured.
            single = Broker(Path(tmp) / "single", fsync=not args.no_fsync, tail_cache_bytes=cache_bytes)
            for peer in peers:
                peer.start()
            vdl = vdl_target(cluster.bootstrap_servers, lambda: [p for n in cluster.nodes.values() if (p := n.pid)],
                             "VDL 3 nodes", "vdl3", fsync=not args.no_fsync)
            vdl1 = vdl_target(single.bootstrap, lambda: [single.process.pid], "VDL 1 node", "vdl1",
                              fsync=not args.no_fsync)
            # Each Kafka cluster's two targets (its defaults, flush.messages=1), on 3 nodes and on 1.
            groups = [kafka_targets(peer, label, key) for peer, label, key in
                      zip(peers, ("Kafka 3 nodes", "Kafka 1 node"), ("kafka", "kafka1"), strict=False)]
            kafka, kafka1 = groups or ([], [])
            targets = [vdl, vdl1, *kafka, *kafka1]
            nodes = {vdl.key: addresses(cluster.nodes), vdl1.key: {1: single.bootstrap}}
            single_pid = single.process.pid
            vdl_roles = roles_of(cluster.nodes)
            roles: dict[str, Roles] = {vdl.key: vdl_roles, vdl1.key: lambda _topic: {"leader": single_pid}}
            for peer, group in zip(peers, groups, strict=True):
                nodes |= {t.key: addresses(peer.nodes) for t in group}
                roles |= {t.key: roles_of(peer.nodes) for t in group}
            base3 = base1 = vdl
            if base_cluster is not None:
                base_single = Broker(Path(tmp) / "base-single", source=args.baseline, fsync=not args.no_fsync,
                                     tail_cache_bytes=cache_bytes)
                base_pid = base_single.process.pid
                base_nodes = base_cluster.nodes
                base3 = vdl_target(base_cluster.bootstrap_servers, lambda: [p for n in base_nodes.values() if (p := n.pid)],
                                   "baseline 3 nodes", "base3",
                                   fsync=not args.no_fsync)
                base1 = vdl_target(base_single.bootstrap, lambda: [base_pid], "baseline 1 node", "base1",
                                   fsync=not args.no_fsync)
                targets += [base3, base1]
                nodes[base3.key] = addresses(base_cluster.nodes)
                nodes[base1.key] = {1: base_single.bootstrap}
                roles[base3.key] = roles_of(base_cluster.nodes)
                roles[base1.key] = lambda _topic: {"leader": base_pid}
            for target in targets:  # one unrecorded run each: JIT, page caches, connections
                create_in_sync(target, nodes[target.key], target.topic("bench-repl-warm-up"))
                produce_run(target.bootstrap, target.topic("bench-repl-warm-up"), count // 10, -1, args.producers)
                if not args.vdl_only:
                    # The latency runs' small requests take other paths than large batches: a
                    # Kafka of 3 JVMs on these 2 cores answered its first ~10 s of them in
                    # hundreds of ms to seconds (JIT), then in a few ms.
                    ack_latencies(target.bootstrap, target.topic("bench-repl-warm-up"), LATENCY_RATE, latency_seconds)
                    latency(target.bootstrap, target.topic("bench-repl-warm-up"), LATENCY_RATE, latency_seconds)
            for round_number in range(rounds):
                order = rotation(targets, round_number)
                for target in order:
                    create_in_sync(target, nodes[target.key], *(target.topic(f"{name}-{round_number}") for name in
                                                              (TOPIC_LATENCY, TOPIC_CONSUMED, TOPIC_THROUGHPUT,
                                                               TOPIC_REQUESTS)))
                    results.setdefault(target.key, []).append(TargetRound())
                # Latency first: after a throughput run the third replica may still be catching
                # up (acks=-1 waits for a majority only) and would compete for the 2 cores.
                for target in order:
                    if not args.vdl_only:
                        measure_latency(target, round_number, latency_seconds, results[target.key][-1])
                for target in order:
                    measure_requests(target, round_number, requests, results[target.key][-1], roles.get(target.key))
                for target in order:
                    results[target.key][-1].values["create"] = statistics.median(
                        create_ms(target.bootstrap, target.topic(f"{TOPIC_CREATED}-{round_number}-{i}"))
                        for i in range(CREATES_PER_ROUND))
                for target in order:
                    measure_throughput(target, round_number, count, args.producers, results[target.key][-1],
                                       roles.get(target.key))
                    print(f"round {round_number + 1} {target.label}: " + ", ".join(
                        f"{k} {v:,.1f}" for k, v in results[target.key][-1].values.items()), flush=True)
            report = Report("bench_replication")
            memory_limit.add_row(report, args)
            if cache_bytes is not None:
                report.add("tail_cache_bytes of every node (the smaller of --memory-limit and 1536M, / 16)", cache_bytes / (1 << 20), "MiB")
            if args.profile:
                profile_runs([(vdl, vdl_roles), (vdl1, roles[vdl1.key])], count, args.producers, report)
            failovers: list[float] = []
            for _ in range(0 if args.vdl_only else kills):
                failovers.append(failover_seconds(cluster, TOPIC_FAILOVER))
        finally:
            cluster.kill_all()
            if base_cluster is not None:
                base_cluster.kill_all()
            if base_single is not None:
                base_single.stop()
            for peer in peers:
                peer.stop_all()
            if single is not None:
                single.stop()
    middle = rounds // 2
    for target in targets:
        report.timeline(f"acks=-1, {target.label}", results[target.key][middle].timelines["acks_all"],
                        baseline=target is not vdl)
        if args.vdl_only:
            continue
        report.latency(f"produce-to-consume, acks=-1, 20k rec/s, {target.label}",
                       [v for run in results[target.key] for v in run.latency], baseline=target is not vdl)
    who = f"{args.producers} confluent-kafka producer processes, linger 5 ms, 100-byte records"
    report_cost(report, vdl, vdl1, results)
    if args.vdl_only:
        if args.baseline is not None:
            report_cost(report, base3, base1, results, "baseline: ")
            for key, label in (("leader_cpu", "leader"), ("follower_cpu", "follower")):
                ratio, ratios = median_ratio([r.values[key] for r in results[vdl.key]],
                                             [r.values[key] for r in results[base3.key]])
                report.add(f"CPU per record, 3 nodes, {label}: this / baseline", ratio, "x", higher_is_better=False,
                           note="median of per-round ratios: " + ", ".join(f"{r:.2f}" for r in ratios))
        compare_targets(report, targets, results, (MEASURES[0], MEASURES[-1]), ratio_goals={("acks_all", vdl1.key): 0.85},
                        who=who)
        report.finish()
        return 0
    kafka_default, kafka_flush = kafka
    for three, one in zip(kafka, kafka1, strict=True):
        report_cost(report, three, one, results, f"{three.label.replace(' 3 nodes', '')}: ", goals=False)
    compare_targets(report, targets, results, MEASURES,
                    ratio_goals={("acks_all", vdl1.key): 0.85, ("acks_all", kafka_flush.key): 1.0,
                                 ("acks_all", kafka_default.key): 0.8, ("p99", kafka_flush.key): 1.0,
                                 ("p99", kafka_default.key): 1.0}, who=who)
    spread = ", ".join(f"{f:.2f}" for f in failovers)
    report.add("failover: kill -9 leader -> first acks=-1 ack (median)", statistics.median(failovers), "s", 2.0,
               higher_is_better=False, note=f"VDL 3 nodes, {kills} kills: {spread}")
    report.add("failover (worst)", max(failovers), "s", higher_is_better=False)
    report.finish()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

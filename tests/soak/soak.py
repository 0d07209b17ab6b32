"""The soak: a 3-node cluster living for a long time under a mixed workload, sampled as it goes,
then checked. See tests/soak/__init__.py for what runs; `run_soak(SoakConfig(...))` returns a
SoakResult whose `problems` are correctness failures (lost or doubled records, unreadable group
offsets) and whose `goals` are the long-life measurements (slopes, restart times)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from tests.faults.harness import (
    check_acknowledged,
    high_watermark,
    node_address,
    partition_view,
    read_all,
    running_nodes,
    start_cluster,
    stream_directory,
    wait_for_full_isr,
    wait_until,
)
from tests.faults.workload import Acks, ProducerThread
from tests.soak.workers import AiokafkaProducerThread, GroupCommitter, GroupLedger
from vdl_client.client import VdlClient
from vdl_client.cluster_admin import list_reassignments, reassign_stream
from vdl_client.groups import committed_offsets
from vdl_client.settings import ClientSettings
from vdl_dev.dev_cluster import DevCluster

MAIN, MOVING, TIERED = "soak-main", "soak-moving", "soak-tiered"
SPARK_GROUP = "soak-spark"
# The moving stream walks these replica sets, one step per reassignment. It has one replica (a
# stream has 1, 3 or 5, and a 3-node cluster has no room to move a 3-replica one): each step
# copies the whole log to a new node and deletes it from the old one.
MOVES = ((2,), (3,), (1,))
HOUR_S = 3600.0
HEALTHY_TIMEOUT_S = 120.0
SETTLE_S = 20.0  # after a process is ready, samples this long are left out of the slopes


@dataclass
class SoakConfig:
    duration_s: float = 3600.0
    results_dir: Path = Path("soak-results")
    groups: int = 200
    committers_per_client: int = 2  # group committer threads of each client (3 clients)
    group_session_s: float = 2.0  # a committer serves one group this long, then the next
    rate_per_s: float = 40.0  # records per second of each producer
    reassign_every_s: float | None = None  # None: scaled, 5 min per hour
    rolling_every_s: float | None = None  # None: scaled, 10 min per hour
    sample_every_s: float | None = None  # None: scaled, 10 s per hour (at least 1 s)
    warmup_fraction: float = 0.15  # samples before this share of the run are left out of slopes
    spark: bool = True
    # Small snapshot thresholds so the metadata group snapshots and truncates many times during
    # the run (200 groups committing every 100 ms write thousands of entries a minute anyway).
    settings: dict[str, Any] = field(default_factory=lambda: {"metadata_snapshot_entries": 5000,
                                                              "leader_balance_interval_ms": 0})

    def scaled(self, per_hour: float) -> float:
        return per_hour * self.duration_s / HOUR_S

    @property
    def reassign_interval(self) -> float:
        return self.reassign_every_s or self.scaled(300.0)

    @property
    def rolling_interval(self) -> float:
        return self.rolling_every_s or self.scaled(600.0)

    @property
    def sample_interval(self) -> float:
        return self.sample_every_s or max(1.0, self.scaled(10.0))


@dataclass
class Sample:
    t: float  # seconds since the workload started
    node: int
    rss_mb: float
    open_files: int
    threads: int
    metadata_mb: float
    streams_mb: dict[str, float]


@dataclass
class Restart:
    round: int
    node: int
    t: float
    stop_s: float  # SIGTERM to exit
    ready_s: float  # process start to its readiness line
    healthy_s: float  # readiness to every stream fully in sync again


@dataclass
class Move:
    t: float
    replicas: tuple[int, ...]
    seconds: float


@dataclass
class SoakResult:
    config: dict[str, Any]
    elapsed_s: float = 0.0
    spark: str = ""
    samples: list[Sample] = field(default_factory=list)
    restarts: list[Restart] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    goals: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def directory_mb(path: Path) -> float:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # a segment deleted by retention while we walk
                total += os.stat(os.path.join(root, name)).st_size
    return total / 1e6


def process_tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


class Sampler(threading.Thread):
    """Every node's RSS, open files, threads (its whole process tree), and the disk use of its
    metadata directory and of each stream's directory, every `interval` seconds."""

    def __init__(self, cluster: DevCluster, streams: list[str], interval: float, started: float) -> None:
        super().__init__(daemon=True, name="soak-sampler")
        self.cluster, self.streams, self.interval, self.started = cluster, streams, interval, started
        self.samples: list[Sample] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        t = time.monotonic() - self.started
        for node_id in running_nodes(self.cluster):
            node = self.cluster.nodes[node_id]
            data = Path(node.config.data_dir)
            try:
                tree = process_tree(node.pid or -1)
                rss = sum(p.memory_info().rss for p in tree)
                fds = sum(p.num_fds() for p in tree)
                threads = sum(p.num_threads() for p in tree)
            except psutil.Error:  # it exited between the check and the read (a restart)
                continue
            streams = {}
            for stream in self.streams:
                with contextlib.suppress(FileNotFoundError):  # a replica it does not hold
                    streams[stream] = round(directory_mb(stream_directory(data, stream)), 3)
            self.samples.append(Sample(round(t, 2), node_id, round(rss / 1e6, 2), fds, threads,
                                       round(directory_mb(data / "__metadata"), 3), streams))


def admin_client(cluster: DevCluster) -> VdlClient:
    return VdlClient(ClientSettings.from_bootstrap(cluster.bootstrap_servers, deadline_ms=60_000))


def wait_healthy(cluster: DevCluster, replicas_of_moving: tuple[int, ...], stale: list[str] | None = None,
                 started: float = 0.0) -> None:
    """Every node lists every broker, the 3-replica streams are fully in sync, and every running
    node tells clients the moving stream is on `replicas_of_moving`, led by it. A node telling
    another replica set meanwhile (a restarted node that has not caught up with the moves, say)
    is noted in `stale`, once per node and view: clients it answers go to the wrong place."""
    cluster.wait_for_brokers(timeout_s=HEALTHY_TIMEOUT_S)
    for stream in (MAIN, TIERED):
        wait_for_full_isr(cluster, stream, timeout=HEALTHY_TIMEOUT_S)
    expected = tuple(sorted(replicas_of_moving))
    views: dict[int, Any] = {}

    def agreed() -> bool:
        views.clear()
        for node_id in running_nodes(cluster):
            view = views[node_id] = partition_view(node_address(cluster, node_id), MOVING)
            if view is not None and view.leader >= 0 and view.replicas != expected and stale is not None:
                note = f"node {node_id} says {MOVING} is on {view.replicas} led by {view.leader}, not on {expected}"
                if not any(line.endswith(note) for line in stale):
                    stale.append(f"t={time.monotonic() - started:.1f} s: {note}")
        return all(v is not None and (v.leader, v.replicas, v.isr) == (expected[0], expected, expected)
                   for v in views.values())

    wait_until(agreed, HEALTHY_TIMEOUT_S, lambda: f"every node telling {MOVING} on {expected}: {views}")


class Operator:
    """The operator's faults, one at a time: a reassignment of the moving stream every
    `reassign_every` seconds and a rolling restart (SIGTERM each node in turn, wait until it is
    ready and every stream is fully in sync) every `rolling_every` seconds, until `end`. It runs
    in the main thread: a node is started with PR_SET_PDEATHSIG, which kills it when the *thread*
    that started it ends, so nodes must be started by a thread that outlives the cluster."""

    def __init__(self, cluster: DevCluster, config: SoakConfig, started: float, end: float) -> None:
        self.cluster, self.config, self.started, self.end = cluster, config, started, end
        self.replicas: tuple[int, ...] = (1,)
        self.restarts: list[Restart] = []
        self.moves: list[Move] = []
        self.stale: list[str] = []  # views of the moving stream's replicas that nodes gave after a change
        self.failure: BaseException | None = None

    def now(self) -> float:
        return time.monotonic() - self.started

    def run(self) -> None:
        # The first reassignment comes half an interval in, so even a short run has one before
        # its first rolling restart.
        due = {"move": self.config.reassign_interval / 2, "rolling": self.config.rolling_interval}
        actions: dict[str, Callable[[], None]] = {"move": self.move, "rolling": self.rolling_restart}
        interval = {"move": self.config.reassign_interval, "rolling": self.config.rolling_interval}
        try:
            while True:
                kind = min(due, key=lambda k: due[k])
                if self.started + due[kind] >= self.end:
                    break
                # The operator's schedule (workload pacing): sleep until the next action is due.
                time.sleep(max(0.0, due[kind] - self.now()))
                actions[kind]()
                due[kind] = max(due[kind] + interval[kind], self.now())
            time.sleep(max(0.0, self.end - time.monotonic()))  # the workload runs to its end
        except Exception as error:
            self.failure = error

    def move(self) -> None:
        target = MOVES[len(self.moves) % len(MOVES)]
        t = self.now()
        with admin_client(self.cluster) as client:
            reassign_stream(client, MOVING, list(target))
            wait_until(lambda: not list_reassignments(client, [MOVING]), HEALTHY_TIMEOUT_S, f"{MOVING} moved to {target}")
        self.replicas = target
        wait_healthy(self.cluster, target, self.stale, self.started)
        self.moves.append(Move(round(t, 2), target, round(self.now() - t, 2)))

    def rolling_restart(self) -> None:
        round_ = 1 + max((r.round for r in self.restarts), default=0)
        for node_id in self.cluster.node_ids():
            t = self.now()
            began = time.monotonic()
            self.cluster.stop(node_id)  # SIGTERM: the node hands its leaderships over first
            stopped = time.monotonic()
            self.cluster.restart(node_id, wait=False)
            self.cluster.wait_ready([node_id], timeout_s=HEALTHY_TIMEOUT_S)
            ready = time.monotonic()
            # Noted before waiting for health, so a round that fails there still cuts the node's
            # samples into process lifetimes where it restarted (healthy_s stays -1 then).
            restart = Restart(round_, node_id, round(t, 2), round(stopped - began, 3), round(ready - stopped, 3), -1.0)
            self.restarts.append(restart)
            wait_healthy(self.cluster, self.replicas, self.stale, self.started)
            restart.healthy_s = round(time.monotonic() - ready, 3)


def start_spark_query(cluster: DevCluster, work: Path) -> tuple[Any, Any]:
    """One local SparkSession; a streaming query reading the main stream and storing its
    progress as the group `soak-spark` (commitOffsetsToGroup)."""
    from vdl_dev.session import create_spark_session

    spark = create_spark_session(work, "vdl-soak")
    frame = (spark.readStream.format("vdl").option("bootstrap.servers", cluster.bootstrap_servers)
             .option("subscribe", MAIN).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "5000").option("commitOffsetsToGroup", SPARK_GROUP).load())
    query = (frame.writeStream.format("noop").option("checkpointLocation", str(work / "spark-checkpoint"))
             .trigger(processingTime="2 seconds").start())
    return spark, query


def linear_slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (t, y)."""
    n = len(points)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    return 0.0 if var == 0 else sum((t - mean_t) * (y - mean_y) for t, y in points) / var


def percent_per_hour(points: list[tuple[float, float]]) -> float:
    mean = sum(y for _, y in points) / len(points) if points else 0.0
    return 0.0 if mean == 0 else linear_slope(points) * HOUR_S / mean * 100


def settled(result: SoakResult, node: int, warm: float) -> list[list[Sample]]:
    """The node's samples after warm-up, one list per process lifetime: a lifetime ends at the
    restart's SIGTERM (the shutdown's samples are left out) and the next begins `SETTLE_S`
    seconds after the new process was ready (it loads its state and fills its caches first)."""
    cuts = sorted((r.t, r.t + r.stop_s + r.ready_s + SETTLE_S) for r in result.restarts if r.node == node)
    lives: list[list[Sample]] = [[]]
    for sample in (s for s in result.samples if s.node == node and s.t >= warm):
        passed = sum(1 for cut, _ in cuts if sample.t >= cut)
        if passed and sample.t < cuts[passed - 1][1]:
            continue  # stopping, starting or settling
        while len(lives) <= passed:
            lives.append([])
        lives[passed].append(sample)
    return [life for life in lives if life]


def evaluate_goals(result: SoakResult, config: SoakConfig) -> dict[str, Any]:
    """Slopes after warm-up, in % of the mean per hour, per node, of RSS, open files, threads and
    metadata disk (goal: within 5 %/h), from the settled samples (see `settled`): `run`, one
    least-squares line over the whole run (what grows from one process to the next: state a new
    process loads, disk), and `life`, the mean of each process lifetime's own slope weighted by
    its length (what grows within a process: a leak between two restarts). The goal takes the
    larger. And the last rolling restart's time to ready against the first's (goal: within 10 %)."""
    warm = config.duration_s * config.warmup_fraction
    goals: dict[str, Any] = {"warmup_s": round(warm, 1), "settle_s": SETTLE_S}
    nodes = sorted({s.node for s in result.samples})
    for metric in ("rss_mb", "open_files", "metadata_mb", "threads"):
        run, life = {}, {}
        for node_id in nodes:
            lives = settled(result, node_id, warm)
            points = [(s.t, float(getattr(s, metric))) for one in lives for s in one]
            run[node_id] = round(percent_per_hour(points), 2)
            mean = sum(y for _, y in points) / len(points) if points else 0.0
            weighted = [(linear_slope([(s.t, float(getattr(s, metric))) for s in one]), one[-1].t - one[0].t)
                        for one in lives if len(one) >= 5]
            span = sum(w for _, w in weighted)
            life[node_id] = round(sum(k * w for k, w in weighted) / span * HOUR_S / mean * 100, 2) if span and mean else 0.0
        worst = max((abs(v) for v in [*run.values(), *life.values()]), default=0.0)
        goals[metric] = {"run_pct_per_hour": run, "life_pct_per_hour": life, "worst": worst,
                         "met": worst <= 5.0 if metric != "threads" else None}
    rounds = sorted({r.round for r in result.restarts})
    if len(rounds) >= 2:
        first = [r.ready_s for r in result.restarts if r.round == rounds[0]]
        last = [r.ready_s for r in result.restarts if r.round == rounds[-1]]
        change = (sum(last) / len(last)) / (sum(first) / len(first)) * 100 - 100
        goals["restart_ready"] = {"first_round_s": round(sum(first) / len(first), 3),
                                  "last_round_s": round(sum(last) / len(last), 3),
                                  "change_pct": round(change, 1), "met": abs(change) <= 10.0}
    else:
        goals["restart_ready"] = {"met": None, "note": f"{len(rounds)} rolling restart(s): nothing to compare"}
    return goals


def load_result(path: Path) -> SoakResult:
    """A soak.json read back (to report it again: `python -m tests.soak --report DIR`)."""
    data = json.loads(Path(path).read_text())
    return SoakResult(config=data["config"], elapsed_s=data["elapsed_s"], spark=data["spark"],
                      samples=[Sample(**s) for s in data["samples"]],
                      restarts=[Restart(**r) for r in data["restarts"]],
                      moves=[Move(m["t"], tuple(m["replicas"]), m["seconds"]) for m in data["moves"]],
                      counts=data["counts"], problems=data["problems"], goals=data["goals"])


def read_log(cluster: DevCluster, stream: str) -> tuple[int, dict[int, bytes | None]]:
    """(high watermark, offset -> value) read from the leader; read again from the start when
    the leadership moves during the read (the last restart's leaderships settling)."""
    def attempt() -> tuple[int, dict[int, bytes | None]] | None:
        leader, hw = high_watermark(cluster, stream, timeout=60)
        try:
            records = read_all(node_address(cluster, leader), stream, 0, hw)
        except AssertionError as error:
            if "NOT_LEADER_OR_FOLLOWER" in str(error):
                return None
            raise
        return hw, {offset: value for offset, (_, value) in records.items()}

    return wait_until(attempt, 120, f"reading {stream} whole from its leader", interval=0.5)


def check_stream(stream: str, hw: int, log: dict[int, bytes | None], acks: Acks,
                 producers: list[ProducerThread]) -> list[str]:
    """Every acknowledged record at its offset; an idempotent producer's records stored once."""
    problems = [f"{stream}: the committed log has holes below {hw}"] if sorted(log) != list(range(hw)) else []
    mine = {p.client for p in producers}
    problems += [f"{stream}: {p}" for p in check_acknowledged([a for a in acks.snapshot() if a[0] in mine], log)[:20]]
    idempotent = tuple(f"{p.client}-".encode() for p in producers if p.idempotent)
    stored = [v for v in log.values() if v is not None and idempotent and v.startswith(idempotent)]
    if len(stored) != len(set(stored)):
        problems.append(f"{stream}: {len(stored) - len(set(stored))} records of idempotent producers stored twice")
    return problems


def check_table(path: Path, hw: int, log: dict[int, bytes | None]) -> list[str]:
    """The Delta table of the tiered stream holds every offset below the high watermark once,
    with the log's value."""
    import deltalake

    def table() -> dict[int, bytes] | None:
        try:
            rows = deltalake.DeltaTable(str(path)).to_pyarrow_table(columns=["offset", "value"]).to_pydict()
        except Exception:  # not created yet: tiering starts after the first commits
            return None
        offsets = rows["offset"]
        return dict(zip(offsets, rows["value"], strict=True)) if len(offsets) >= hw else None

    try:
        rows = wait_until(table, 180, f"the Delta table of {TIERED} reaching offset {hw}", interval=1.0)
    except AssertionError as error:
        return [str(error)]
    deltalake_rows = deltalake.DeltaTable(str(path)).to_pyarrow_table(columns=["offset"]).num_rows
    problems = []
    if deltalake_rows != len(rows):
        problems.append(f"{TIERED}: the table holds {deltalake_rows - len(rows)} offsets twice")
    wrong = [o for o in range(hw) if rows.get(o) != log.get(o)]
    if wrong:
        problems.append(f"{TIERED}: table and log differ at {len(wrong)} offsets, first {wrong[:5]}")
    return problems


@contextlib.contextmanager
def soak_cluster(work: Path, config: SoakConfig) -> Iterator[DevCluster]:
    clusters: list[DevCluster] = []
    try:
        def register(cluster: DevCluster) -> None:
            cluster.log_files = True  # each node's output in node<i>/output.log, kept for a look afterwards
            clusters.append(cluster)

        yield start_cluster(work / "cluster", 3, settings=config.settings, register=register)
    finally:
        for cluster in clusters:
            cluster.kill_all()


def run_soak(config: SoakConfig, say: Callable[[str], None] = print) -> SoakResult:
    results = Path(config.results_dir)
    results.mkdir(parents=True, exist_ok=True)
    work = results / "work"
    result = SoakResult(config={k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()})
    with soak_cluster(work, config) as cluster:
        table_path = (work / "lake" / TIERED).resolve()
        with admin_client(cluster) as client:
            client.create_stream(MAIN, 3)
            client.create_stream(MOVING, 1)
            client.create_stream(TIERED, 3, config={"vdl.table.path": str(table_path), "vdl.table.lag.ms": "2000"})
        with admin_client(cluster) as client:
            reassign_stream(client, MOVING, [1])  # a known start: the moves walk MOVES from here
            wait_until(lambda: not list_reassignments(client, [MOVING]), HEALTHY_TIMEOUT_S, f"{MOVING} on [1]")
        wait_healthy(cluster, (1,))

        acks = Acks()
        bootstrap, rate = cluster.bootstrap_servers, config.rate_per_s
        producers: dict[str, list[ProducerThread]] = {
            MAIN: [ProducerThread("confluent", "mck", bootstrap, MAIN, acks, rate),
                   ProducerThread("confluent-idempotent", "mci", bootstrap, MAIN, acks, rate),
                   ProducerThread("kafka-python", "mkp", bootstrap, MAIN, acks, rate),
                   AiokafkaProducerThread("aiokafka", "mak", bootstrap, MAIN, acks, rate)],
            MOVING: [ProducerThread("kafka-python", "vkp", bootstrap, MOVING, acks, rate),
                     AiokafkaProducerThread("aiokafka", "vak", bootstrap, MOVING, acks, rate)],
            TIERED: [ProducerThread("confluent-idempotent", "tci", bootstrap, TIERED, acks, rate)]}
        ledger = GroupLedger()
        groups = [f"soak-g{i:03d}" for i in range(config.groups)]
        kinds = [kind for _ in range(config.committers_per_client) for kind in ("confluent", "kafka-python", "aiokafka")]
        committers = [GroupCommitter(kind, bootstrap, MAIN, groups[i::len(kinds)], ledger, config.group_session_s)
                      for i, kind in enumerate(kinds) if groups[i::len(kinds)]]

        spark: Any = None
        query: Any = None
        if config.spark:
            say("starting Spark (one local SparkSession)")
            spark, query = start_spark_query(cluster, work)
            result.spark = "streaming query on soak-main with commitOffsetsToGroup=soak-spark"
        else:
            result.spark = "skipped (--no-spark): no Spark streaming query in this run"
            say(f"Spark: {result.spark}")

        started = time.monotonic()
        end = started + config.duration_s
        sampler = Sampler(cluster, [MAIN, MOVING, TIERED], config.sample_interval, started)
        operator = Operator(cluster, config, started, end)
        everything = [p for ps in producers.values() for p in ps]
        finished = threading.Event()

        def progress() -> None:
            while not finished.wait(min(60.0, max(1.0, config.duration_s / 10))):
                say(f"  t={time.monotonic() - started:6.0f} s  acks={acks.count()}  commits={ledger.commits}  "
                    f"moves={len(operator.moves)}  restarts={len(operator.restarts)}")

        reporter = threading.Thread(target=progress, daemon=True, name="soak-progress")
        for thread in [*everything, *committers, sampler, reporter]:
            thread.start()
        say(f"soak running for {config.duration_s:.0f} s: {len(everything)} producers, {len(committers)} group "
            f"committers over {config.groups} groups, a reassignment every {config.reassign_interval:.0f} s, a "
            f"rolling restart every {config.rolling_interval:.0f} s, samples every {config.sample_interval:.1f} s")
        try:
            operator.run()
            finished.set()
            if operator.failure is not None:
                result.problems.append(f"operator failed: {operator.failure!r}")
            try:
                wait_healthy(cluster, operator.replicas, operator.stale, started)
            except AssertionError as error:  # still check what was acknowledged, and keep the samples
                result.problems.append(f"the cluster did not come back healthy at the end: {error}")
        finally:
            finished.set()
            for committer in committers:
                committer.stop_event.set()
            for producer in everything:
                producer.stop_event.set()
            for thread in [*committers, *everything]:
                thread.join(120)
            sampler.stop_event.set()
            sampler.join(30)
        result.elapsed_s = round(time.monotonic() - started, 1)
        result.samples, result.restarts, result.moves = sampler.samples, operator.restarts, operator.moves
        result.counts["stale_replica_views"] = operator.stale

        logs: dict[str, tuple[int, dict[int, bytes | None]]] = {}
        committed_groups = 0
        try:
            for producer in everything:
                if producer.failure is not None:
                    result.problems.append(f"producer {producer.client} failed: {producer.failure!r}")
                if producer.undelivered != 0:
                    result.problems.append(f"producer {producer.client}: {producer.undelivered} records never delivered")
            for stream, mine in producers.items():
                hw, log = read_log(cluster, stream)
                logs[stream] = (hw, log)
                result.problems += check_stream(stream, hw, log, acks, mine)
            result.problems += check_table(table_path, *logs[TIERED])

            with admin_client(cluster) as client:
                unreadable = []
                for group in groups:
                    possible = ledger.possible(group)
                    found = committed_offsets(client, group).get(MAIN)
                    if possible and found not in possible:
                        unreadable.append(f"group {group}: reads {found}, committed {sorted(possible)}")
                result.problems += unreadable[:20] + ledger.resumed_wrong[:20]
                committed_groups = sum(1 for g in groups if ledger.possible(g))
                if query is not None:
                    spark_failure = query.exception()
                    if spark_failure is not None:
                        result.problems.append(f"Spark query failed: {spark_failure}")
                    main_hw = logs[MAIN][0]
                    wait_until(lambda: 0 < committed_offsets(client, SPARK_GROUP).get(MAIN, 0) <= main_hw, 120,
                               f"group {SPARK_GROUP} holding the Spark query's progress")
                    result.counts["spark_group_offset"] = committed_offsets(client, SPARK_GROUP)[MAIN]
                    result.counts["spark_batches"] = len(query.recentProgress)
            for committer in committers:
                if committer.failure is not None:
                    result.problems.append(f"committer {committer.name} failed: {committer.failure!r}")
        except Exception as error:  # the samples are kept and reported whatever failed here
            result.problems.append(f"the checks did not finish: {error!r}")
        finally:
            if spark is not None:
                query.stop()
                spark.stop()

        per_client: dict[str, int] = {}
        for client_name, _, _ in acks.snapshot():
            per_client[client_name] = per_client.get(client_name, 0) + 1
        result.counts |= {"acknowledged": acks.count(), "acknowledged_per_producer": per_client,
                          "delivery_errors": len(acks.errors), "delivery_error_examples": acks.errors[:5],
                          "high_watermarks": {stream: hw for stream, (hw, _) in logs.items()},
                          "group_commits": ledger.commits, "group_commit_failures": ledger.failures,
                          "groups_committed": committed_groups,
                          "group_sessions": sum(c.sessions for c in committers),
                          "group_session_errors": sum(len(c.errors) for c in committers),
                          "consumed": sum(c.consumed for c in committers)}
    result.goals = evaluate_goals(result, config)
    return result


# ------------------------------------------------------------------------------ reporting


def write_outputs(result: SoakResult, results_dir: Path) -> tuple[Path, Path]:
    path = Path(results_dir) / "soak.json"
    path.write_text(json.dumps(result.to_json(), indent=1))
    return path, plot(result, Path(results_dir) / "soak.png")


def plot(result: SoakResult, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("rss_mb", "RSS (MB)"), ("open_files", "open files"), ("threads", "threads"),
              ("metadata_mb", "metadata dir (MB)"), ("streams", "stream dirs (MB)"), ("restarts", "restart (s)")]
    figure, axes = plt.subplots(3, 2, figsize=(13, 10), sharex=True)
    nodes = sorted({s.node for s in result.samples})
    warm = result.goals.get("warmup_s", 0.0)
    for axis, (metric, title) in zip(axes.flat, panels, strict=True):
        axis.set_title(title)
        axis.grid(alpha=0.3)
        if metric == "restarts":
            for node in nodes:
                mine = [r for r in result.restarts if r.node == node]
                axis.plot([r.t for r in mine], [r.ready_s for r in mine], "o-", label=f"node {node} start→ready")
            healthy = [r for r in result.restarts if r.healthy_s >= 0]
            axis.plot([r.t for r in healthy], [r.healthy_s for r in healthy], "x", color="grey", label="ready→in sync")
        elif metric == "streams":
            for node in nodes:
                for stream in (MAIN, MOVING, TIERED):
                    points = [(s.t, s.streams_mb[stream]) for s in result.samples if s.node == node and stream in s.streams_mb]
                    if points:
                        axis.plot(*zip(*points, strict=True), label=f"n{node} {stream.removeprefix('soak-')}", lw=0.8)
        else:
            for node in nodes:
                points = [(s.t, getattr(s, metric)) for s in result.samples if s.node == node]
                if points:
                    axis.plot(*zip(*points, strict=True), label=f"node {node}", lw=0.9)
        for restart in result.restarts:
            axis.axvline(restart.t, color="red", alpha=0.15, lw=0.8)
        for move in result.moves:
            axis.axvline(move.t, color="green", alpha=0.3, lw=0.8, ls="--")
        axis.axvspan(0, warm, color="grey", alpha=0.08)
        axis.legend(fontsize=6, loc="upper left")
    for axis in axes[-1]:
        axis.set_xlabel("seconds since the workload started")
    figure.suptitle(f"VDL soak: {result.elapsed_s:.0f} s, 3 nodes (red: node restarts, green: reassignments, "
                    "grey: warm-up)")
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


def table(result: SoakResult) -> str:
    lines = ["slopes in % per hour after warm-up: run (whole run) / life (within a process)",
             f"{'node':>4}  {'RSS MB first→last':>18}  {'RSS %/h':>13}  {'files':>9}  {'files %/h':>13}  "
             f"{'threads':>9}  {'meta MB':>13}  {'meta %/h':>13}  {'restart s first→last':>20}"]
    goals = result.goals
    for node in sorted({s.node for s in result.samples}):
        mine = [s for s in result.samples if s.node == node]
        ready = [r.ready_s for r in result.restarts if r.node == node]

        def span(values: list[Any], fmt: str = "{:.0f}") -> str:
            return f"{fmt.format(values[0])}→{fmt.format(values[-1])}" if values else "-"

        def slopes(metric: str, node: int = node) -> str:
            return f"{goals[metric]['run_pct_per_hour'].get(node, 0):.1f} / {goals[metric]['life_pct_per_hour'].get(node, 0):.1f}"

        lines.append(f"{node:>4}  {span([s.rss_mb for s in mine]):>18}  {slopes('rss_mb'):>13}  "
                     f"{span([s.open_files for s in mine]):>9}  {slopes('open_files'):>13}  "
                     f"{span([s.threads for s in mine]):>9}  {span([s.metadata_mb for s in mine], '{:.2f}'):>13}  "
                     f"{slopes('metadata_mb'):>13}  {span(ready, '{:.2f}'):>20}")

    def verdict(met: bool | None) -> str:
        return {True: "met", False: "MISSED", None: "n/a"}[met]

    lines.append("")
    for metric, name in (("rss_mb", "RSS"), ("open_files", "open files"), ("metadata_mb", "metadata disk")):
        lines.append(f"goal: {name} flat within 5 %/h after warm-up: worst {goals[metric]['worst']:.1f} %/h "
                     f"-> {verdict(goals[metric]['met'])}")
    restart = goals["restart_ready"]
    if restart.get("met") is None:
        lines.append(f"goal: restart time at the end within 10 % of the start: {restart.get('note')}")
    else:
        lines.append(f"goal: restart time at the end within 10 % of the start: {restart['first_round_s']:.2f} s -> "
                     f"{restart['last_round_s']:.2f} s ({restart['change_pct']:+.1f} %) -> {verdict(restart['met'])}")
    counts = result.counts
    lines.append(f"records acknowledged {counts.get('acknowledged')}, lost or misplaced: "
                 f"{sum(1 for p in result.problems if 'acknowledged' in p)}; delivery errors {counts.get('delivery_errors')}")
    lines.append(f"group commits {counts.get('group_commits')} over {counts.get('groups_committed')} groups "
                 f"({counts.get('group_commit_failures')} failed, outcome checked), {counts.get('group_sessions')} sessions")
    lines.append(f"reassignments {len(result.moves)} ({', '.join(f'{m.seconds:.1f}s' for m in result.moves)}), "
                 f"rolling restarts {len({r.round for r in result.restarts})}")
    stale = counts.get("stale_replica_views", [])
    lines.append(f"stale replica views after a move or restart: {len(stale)}")
    lines += [f"  - {line}" for line in stale[:10]]
    lines.append(f"Spark: {result.spark}" + (f"; group offset {counts['spark_group_offset']}" if "spark_group_offset" in counts else ""))
    lines.append("correctness: " + ("OK" if not result.problems else f"{len(result.problems)} PROBLEMS"))
    lines += [f"  - {p}" for p in result.problems[:30]]
    return "\n".join(lines)


def fmt_duration(seconds: float) -> str:
    return f"{math.floor(seconds / 60)} min {seconds % 60:.0f} s"

"""The soak: a 3-node cluster living for a long time under a mixed workload, sampled as it goes,
then checked. See tests/soak/__init__.py for what runs; `run_soak(SoakConfig(...))` returns a
SoakResult whose `problems` are correctness failures (lost or doubled records, unreadable group
offsets) and whose `goals` are the long-life measurements (slopes, restart times)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from tests.faults.harness import (
    EARLIEST,
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
from tests.support.kafka import list_offset_raw
from tests.support.metrics import Scrape, scrape_url
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
# Every stream has retention, as a real cluster's streams do: their directories (and what a
# restart opens) stop growing once it bites, a few minutes in whatever the duration.
STREAM_RETENTION = {"retention.bytes": str(2 << 20), "segment.bytes": str(512 << 10)}


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
    # A node whose broker also traces its memory, 0 for every node (tests/soak/memwatch.py; lines beside soak.json).
    memwatch_node: int | None = None
    memwatch_every_s: float = 20.0
    # Small snapshot thresholds so the metadata group snapshots and truncates many times during
    # the run (200 groups committing every 100 ms write thousands of entries a minute anyway).
    # Retention runs every 10 s (not every minute) so the streams' directories stay near their
    # retention.bytes.
    settings: dict[str, Any] = field(default_factory=lambda: {"metadata_snapshot_entries": 5000,
                                                              "leader_balance_interval_ms": 0,
                                                              "retention_check_ms": 10_000})

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
    # Added later (defaults: an older soak.json without them still loads): the node's process id
    # and age (seconds since that process started: samples of different lifetimes compared at the
    # same age), its anonymous resident memory (heap: what a leak grows, unlike mapped libraries),
    # whether it has loaded the Delta write path (tens of MB of libraries: at start on a node holding a
    # tiered replica, later on one that gets such a replica; not a leak), and the machine's 1-minute load average (the machine is
    # shared: restart times and rates follow it).
    pid: int = 0
    age_s: float = -1.0
    rss_anon_mb: float = -1.0
    tier_writer: bool = False
    load1: float = -1.0
    # What the node's tail caches hold (vdl_tail_cache_bytes, MB; -1: not scraped): a restarted
    # process fills them up to what its logs hold (each stream's retention here) or its
    # tail_cache_bytes, the process's warm-up that the slope within it is measured after.
    cache_mb: float = -1.0
    # Of open_files, the sockets (-1: not counted): client and peer connections, which come and
    # go with the clients (a committer finding its coordinator moved, a producer reconnecting
    # after a restart), judged apart from the files a node opens itself.
    sockets: int = -1

    @property
    def files(self) -> int:
        """Open descriptors other than sockets: segments, indexes, snapshots, the node's own."""
        return self.open_files - max(self.sockets, 0)


@dataclass
class Restart:
    round: int
    node: int
    t: float
    stop_s: float  # SIGTERM to exit
    ready_s: float  # process start to its readiness line
    healthy_s: float  # readiness to every stream fully in sync again
    cpu_s: float = -1.0  # CPU seconds (user + system) the new process used until ready: load-independent
    load1: float = -1.0  # the machine's 1-minute load average when it became ready


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


def anonymous_rss_mb(pid: int) -> float:
    """RssAnon of /proc/<pid>/status (kB): the process's resident heap, without mapped files."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1e3
    return -1.0


def socket_count(pid: int) -> int:
    """How many of the process's open descriptors are sockets (-1 when they cannot be read)."""
    try:
        fds = os.scandir(f"/proc/{pid}/fd")
    except OSError:
        return -1
    count = 0
    with fds:
        for fd in fds:
            with contextlib.suppress(OSError):  # closed while we walk
                count += os.readlink(fd.path).startswith("socket:")
    return count


def writes_delta_tables(pid: int) -> bool:
    """Whether the process has loaded what a Delta commit loads (pyarrow's pandas bridge among
    it: tens of MB that stay until the process ends). A node holding a replica of a tiered stream
    loads it before it serves (vdl_broker/tables/service.py `prepare`), so this is true from its
    first sample; a process that gets such a replica later (a reassignment) loads it then, a
    step the within-process slope is split at. Seen as pandas's libraries mapped in
    /proc/<pid>/maps."""
    with contextlib.suppress(OSError):
        return "/pandas/" in Path(f"/proc/{pid}/maps").read_text()
    return False


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


class Sampler(threading.Thread):
    """Every node's RSS, open files, threads (its whole process tree), what its tail caches hold
    (its /metrics), and the disk use of its metadata directory and of each stream's directory,
    every `interval` seconds."""

    def __init__(self, cluster: DevCluster, streams: list[str], interval: float, started: float) -> None:
        super().__init__(daemon=True, name="soak-sampler")
        self.cluster, self.streams, self.interval, self.started = cluster, streams, interval, started
        self.samples: list[Sample] = []
        self.stop_event = threading.Event()
        self.cache_budget_mib: float | None = None  # vdl_tail_cache_budget_bytes, once scraped

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            self.sample()

    def scrape(self, node_id: int) -> Scrape | None:
        """The node's /metrics, or None (no metrics listener, down, or an answer cut short)."""
        url = self.cluster.metrics_urls().get(node_id)
        if url is None:
            return None
        try:
            return scrape_url(url, timeout=2.0)
        except (OSError, ValueError):
            return None

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
                age = time.time() - tree[0].create_time()
            except psutil.Error:  # it exited between the check and the read (a restart)
                continue
            anon = sum(max(0.0, anonymous_rss_mb(p.pid)) for p in tree)
            scraped = self.scrape(node_id)
            cache = scraped.value("vdl_tail_cache_bytes") if scraped is not None else None
            if scraped is not None and self.cache_budget_mib is None:
                self.cache_budget_mib = scraped.get("vdl_tail_cache_budget_bytes") / (1 << 20)
            delta = any(writes_delta_tables(p.pid) for p in tree)
            streams = {}
            for stream in self.streams:
                with contextlib.suppress(FileNotFoundError):  # a replica it does not hold
                    streams[stream] = round(directory_mb(stream_directory(data, stream)), 3)
            self.samples.append(Sample(round(t, 2), node_id, round(rss / 1e6, 2), fds, threads,
                                       round(directory_mb(data / "__metadata"), 3), streams,
                                       tree[0].pid, round(age, 2), round(anon, 2), delta, load_average(),
                                       -1.0 if cache is None else round(cache / 1e6, 3),
                                       sum(max(0, socket_count(p.pid)) for p in tree)))


class Recorder(threading.Thread):
    """Reads each stream's committed records as they come (from the leader, every `interval`), so
    the checks at the end also see those retention deletes before the end: a committed record
    never moves, so reading it early is reading it at the end. A range retention deleted before
    it was read is kept in `missed` (its acknowledgements are then not checked, and say so)."""

    def __init__(self, cluster: DevCluster, streams: list[str], interval: float) -> None:
        super().__init__(daemon=True, name="soak-recorder")
        self.cluster, self.streams, self.interval = cluster, streams, interval
        self.logs: dict[str, dict[int, bytes | None]] = {stream: {} for stream in streams}
        self.next: dict[str, int] = dict.fromkeys(streams, 0)
        self.missed: dict[str, list[tuple[int, int]]] = {stream: [] for stream in streams}
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            for stream in self.streams:
                with contextlib.suppress(AssertionError, OSError, ValueError):  # a leader moving: next round
                    self.catch_up(stream)

    def catch_up(self, stream: str) -> None:
        leader, hw = high_watermark(self.cluster, stream, timeout=10)
        address = node_address(self.cluster, leader)
        code, start = list_offset_raw(address, stream, EARLIEST)
        if code != 0:
            return
        if start > self.next[stream]:
            self.missed[stream].append((self.next[stream], start))
            self.next[stream] = start
        records = read_all(address, stream, self.next[stream], hw)
        self.logs[stream].update({offset: value for offset, (_, value) in records.items()})
        self.next[stream] = max(self.next[stream], hw)

    def merged(self, stream: str, hw: int, log: dict[int, bytes | None]) -> dict[int, bytes | None]:
        """What was read along the way, with the final read (`log`, from the log start) over it."""
        return {offset: value for offset, value in self.logs[stream].items() if offset < hw} | log


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
            cpu = -1.0
            with contextlib.suppress(psutil.Error):
                cpu = sum(sum(p.cpu_times()[:2]) for p in process_tree(self.cluster.nodes[node_id].pid or -1))
            # Noted before waiting for health, so a round that fails there still cuts the node's
            # samples into process lifetimes where it restarted (healthy_s stays -1 then).
            restart = Restart(round_, node_id, round(t, 2), round(stopped - began, 3), round(ready - stopped, 3), -1.0,
                              round(cpu, 3), load_average())
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


@dataclass
class Trend:
    """One slope fitted to several series at once, each with its own level (a least-squares line
    per series sharing the slope): in % of the series' mean per hour, with twice its standard
    error (`margin`, math.inf when the points cannot tell: fewer than two per series, or no
    residual degree of freedom left). The samples are autocorrelated, so the margin is a
    lower bound of the true uncertainty."""

    pct_per_hour: float
    margin: float
    points: int
    series: int

    def text(self) -> str:
        margin = "?" if math.isinf(self.margin) else f"{self.margin:.1f}"
        return f"{self.pct_per_hour:+.1f} ± {margin} %/h ({self.points} points, {self.series} series)"


def shared_trend(series: list[list[tuple[float, float]]]) -> Trend:
    groups = [g for g in series if len(g) >= 2 and len({t for t, _ in g}) >= 2]
    points = sum(len(g) for g in groups)
    if not groups:
        return Trend(0.0, math.inf, points, 0)
    sxx = sxy = 0.0
    centred: list[tuple[float, float]] = []
    for group in groups:
        mean_t = sum(t for t, _ in group) / len(group)
        mean_y = sum(y for _, y in group) / len(group)
        centred += [(t - mean_t, y - mean_y) for t, y in group]
    sxx = sum(dt * dt for dt, _ in centred)
    sxy = sum(dt * dy for dt, dy in centred)
    slope = sxy / sxx
    mean = sum(y for g in groups for _, y in g) / points
    if mean == 0:
        return Trend(0.0, math.inf, points, len(groups))
    dof = points - len(groups) - 1
    residual = sum((dy - slope * dt) ** 2 for dt, dy in centred)
    error = math.sqrt(residual / dof / sxx) if dof > 0 else math.inf
    scale = HOUR_S / mean * 100
    return Trend(round(slope * scale, 2), round(2 * error * scale, 2), points, len(groups))


def verdict(estimate: float, margin: float, bound: float) -> str:
    """met when the whole interval is within the bound, missed when it is all beyond it,
    unclear when the run cannot tell (the interval straddles the bound)."""
    if abs(estimate) + margin <= bound:
        return "met"
    if abs(estimate) - margin > bound:
        return "missed"
    return "unclear"


def median(values: list[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    return 0.0 if n == 0 else ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


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


@dataclass
class Life:
    """One process of a node: its settled samples, with each sample's age (seconds since the
    process started; from the sample, or for an older soak.json from the restart times)."""

    node: int
    samples: list[Sample]
    ages: list[float]

    @property
    def oldest(self) -> float:
        return self.ages[-1]


def lives_of(result: SoakResult) -> list[Life]:
    lives = []
    for node in sorted({s.node for s in result.samples}):
        ready = sorted(r.t + r.stop_s + r.ready_s for r in result.restarts if r.node == node)
        for index, samples in enumerate(settled(result, node, 0.0)):
            began = ready[index - 1] if index else 0.0
            ages = [s.age_s if s.age_s >= 0 else s.t - began for s in samples]
            lives.append(Life(node, samples, ages))
    return lives


def reference_age(lives: list[Life]) -> float:
    """The age every full lifetime reached: the youngest oldest-sample among lifetimes at least
    half as long as the median one (a lifetime cut short, the run's end say, is not compared)."""
    oldest = [life.oldest for life in lives]
    typical = median(oldest)
    return min((a for a in oldest if a >= typical / 2), default=0.0)


def metric_value(sample: Sample, metric: str) -> float:
    return float(getattr(sample, metric))


def same_age_trend(lives: list[Life], metric: str, warm: float, age: float) -> tuple[Trend, list[dict[str, Any]]]:
    """Each lifetime's median over the last third of the reference age (ages in [2/3 age, age]),
    compared across the soak between lifetimes of the same node in the same tiering role
    (has loaded the Delta write path or not: tens of MB of libraries): what each new process
    carries more than the one before it (state it loads, files it keeps) shows as a slope. Only
    lifetimes whose window lies after the warm-up count."""
    points: dict[tuple[int, bool], list[tuple[float, float]]] = {}
    rows = []
    for life in lives:
        window = [s for s, a in zip(life.samples, life.ages, strict=True) if age * 2 / 3 <= a <= age]
        if not window:
            continue
        t = median([s.t for s in window])
        delta = sum(s.tier_writer for s in window) * 2 > len(window)
        value = median([metric_value(s, metric) for s in window])
        rows.append({"node": life.node, "t": round(t, 1), "value": round(value, 3), "tier_writer": delta,
                     "counted": t >= warm})
        if t >= warm:
            points.setdefault((life.node, delta), []).append((t, value))
    return shared_trend(list(points.values())), rows


def cache_fill_s(result: SoakResult, warm: float) -> float:
    """How long a process's tail caches take to fill: seconds from the soak's start until the
    directory of every stream held from the first sample to the last on every node (not the
    moving one: its replica starts empty at each move) first reached 90 % of its median size after
    the warm-up (its retention). A log's tail cache holds what the log holds, and a restarted
    process starts it empty and fills it only with what it appends (or a leader sends it), so
    a process's memory grows for that long after each start however long the soak (seen with
    tests/soak/memwatch.py: cached entries and Python's traced memory rise for the first
    minutes of each process, then stay). 0 when the samples cannot tell."""
    nodes = {s.node for s in result.samples}
    fills = []
    for stream in sorted({name for s in result.samples for name in s.streams_mb}):
        for node in nodes:
            mine = [s for s in result.samples if s.node == node]
            if not mine or any(stream not in s.streams_mb for s in mine):
                break
            late = sorted(s.streams_mb[stream] for s in mine if s.t >= warm)
            if not late:
                break
            plateau = late[len(late) // 2]
            fills.append(next((s.t for s in mine if s.streams_mb[stream] >= 0.9 * plateau), 0.0))
    return max(fills, default=0.0)


def cache_full_age(life: Life) -> float | None:
    """The age at which this process's tail caches were full: its first settled sample holding at
    least the median of what they held from then on to the life's end (vdl_tail_cache_bytes). A
    cache holds at most what its log holds (each stream's retention here; the metadata log's
    entries since its last truncation), and the caches together the node's tail_cache_bytes, so
    once full they move around a level rather than up. A cache still filling at the life's end is below that
    median until its last samples: the few left past it then read its fill as growth (missed or
    unclear, never met). None when the samples have no cache size (a soak.json from before it
    was sampled)."""
    held = [(a, s.cache_mb) for s, a in zip(life.samples, life.ages, strict=True) if s.cache_mb >= 0]
    if not held:
        return None
    return next(a for k, (a, v) in enumerate(held) if v >= median([later for _, later in held[k:]]))


def within_life_trend(lives: list[Life], metric: str, warm: float, since_age: list[float]) -> Trend:
    """The slope within each lifetime after its own warm-up (ages past `since_age`, one per
    lifetime), after the soak's warm-up, split where it loads the Delta write path (a process
    that gets a tiered replica after its start): a leak that each restart hides."""
    series = []
    for life, since in zip(lives, since_age, strict=True):
        segment: list[tuple[float, float]] = []
        loaded: bool | None = None
        for sample, a in zip(life.samples, life.ages, strict=True):
            if a < since or sample.t < warm:
                continue
            if loaded is not None and sample.tier_writer != loaded:
                series.append(segment)
                segment = []
            loaded = sample.tier_writer
            segment.append((sample.t, metric_value(sample, metric)))
        series.append(segment)
    return shared_trend(series)


def long_lived(lives: list[Life], metric: str, warm: float, end: float, since_age: list[float]) -> dict[int, float]:
    """Processes that were never restarted after the warm-up (their whole span after it): the
    plain slope of each, by node, past its own warm-up (`since_age`, one per lifetime: its
    caches' fill when measured). Empty when every node restarts during the run."""
    spans = {}
    for life, since in zip(lives, since_age, strict=True):
        points = [(s.t, metric_value(s, metric)) for s, a in zip(life.samples, life.ages, strict=True)
                  if s.t >= warm and a >= since]
        first = min((s.t for s in life.samples if s.t >= warm), default=None)
        if points and first is not None and first - warm <= 0.1 * (end - warm) and points[-1][0] >= end - 0.1 * (end - warm):
            spans[life.node] = round(percent_per_hour(points), 2)
    return spans


def sawtooth_trend(result: SoakResult, warm: float) -> tuple[Trend, dict[str, Any]]:
    """The metadata directory grows until a segment behind a snapshot is deleted, then drops: a
    sawtooth whose mean depends on where a run ends in it. From each node's first drop (a
    truncation: down by more than 5 % and 0.05 MB between two samples) on, the peaks (the sample
    before each later drop) and the troughs (the sample after it) each get a shared slope; the
    goal takes the larger. Fewer than two drops after the first: the plain slope of every sample
    after the first drop (or after the warm-up when none), which an unbounded growth fails."""
    peaks: list[list[tuple[float, float]]] = []
    troughs: list[list[tuple[float, float]]] = []
    plain: list[list[tuple[float, float]]] = []
    detail: dict[str, Any] = {}
    for node in sorted({s.node for s in result.samples}):
        mine = [s for s in result.samples if s.node == node]
        drops = [i for i in range(1, len(mine))
                 if mine[i - 1].metadata_mb - mine[i].metadata_mb > max(0.05, 0.05 * mine[i - 1].metadata_mb)]
        first = mine[drops[0]].t if drops else None
        later = [i for i in drops[1:] if mine[i].t >= warm]
        peaks.append([(mine[i - 1].t, mine[i - 1].metadata_mb) for i in later])
        troughs.append([(mine[i].t, mine[i].metadata_mb) for i in later])
        since = first if first is not None else warm
        plain.append([(s.t, s.metadata_mb) for s in mine if s.t >= max(since, warm)])
        detail[str(node)] = {"first_truncation_t": first, "truncations": len(drops),
                             "peaks_mb": [round(y, 3) for _, y in peaks[-1]],
                             "troughs_mb": [round(y, 3) for _, y in troughs[-1]],
                             "max_mb_after_first": round(max((y for _, y in plain[-1]), default=0.0), 3)}
    if peaks and all(len(p) >= 2 for p in peaks):
        # Both relative to the mean of the whole sawtooth, not of the peaks or troughs alone.
        mean = sum(y for p in plain for _, y in p) / max(1, sum(len(p) for p in plain))
        fitted = []
        for envelope in (peaks, troughs):
            trend = shared_trend(envelope)
            envelope_mean = sum(y for p in envelope for _, y in p) / sum(len(p) for p in envelope)
            factor = envelope_mean / mean if mean else 1.0
            fitted.append(Trend(round(trend.pct_per_hour * factor, 2), round(trend.margin * factor, 2),
                                trend.points, trend.series))
        detail["measure"] = "peaks and troughs after the first truncation"
        return max(fitted, key=lambda tr: abs(tr.pct_per_hour) + (0 if math.isinf(tr.margin) else tr.margin)), detail
    detail["measure"] = "every sample after the first truncation (too few truncations for an envelope)"
    return shared_trend(plain), detail


def restart_drift(restarts: list[Restart], field_name: str) -> dict[str, Any]:
    """Each node's restarts in order; its first k against its last k (k = half its count, at
    least one), the median of all of them on each side (and each node's, shown)."""
    nodes = sorted({r.node for r in restarts})
    first: list[float] = []
    last: list[float] = []
    loads: tuple[list[float], list[float]] = ([], [])
    per_node = {}
    for node in nodes:
        mine = sorted((r for r in restarts if r.node == node), key=lambda r: r.t)
        values = [float(getattr(r, field_name)) for r in mine]
        if len(values) < 2 or min(values) < 0:
            return {"met": None, "verdict": "n/a", "note": f"node {node}: {len(values)} restart(s) with {field_name}"}
        k = max(1, len(values) // 2)
        first += values[:k]
        last += values[-k:]
        loads[0].extend(r.load1 for r in mine[:k])
        loads[1].extend(r.load1 for r in mine[-k:])
        per_node[str(node)] = {"first_s": round(median(values[:k]), 3), "last_s": round(median(values[-k:]), 3)}
    start, end = median(first), median(last)
    change = (end / start * 100 - 100) if start else 0.0
    # The goal is that restarts do not get slower over the cluster's life: one-sided, a restart
    # that got faster meets it.
    state = "met" if end <= start * (1 + RESTART_DRIFT_PCT / 100) else "missed"
    return {"first_s": round(start, 3), "last_s": round(end, 3), "change_pct": round(change, 1),
            "per_node": per_node, "load1_first": round(median(loads[0]), 2), "load1_last": round(median(loads[1]), 2),
            "met": state == "met", "verdict": state}


FLAT_PCT_PER_HOUR = 5.0
RESTART_DRIFT_PCT = 10.0


def evaluate_goals(result: SoakResult, config: SoakConfig) -> dict[str, Any]:
    """The long-life goals from the samples, meaningful although every node restarts every
    rolling round (no process lives the whole run, and a young process's warm-up would read as
    growth):
    - RSS and open files: the same node at the same age after its start, compared across the
      soak (`same_age_trend`), and the slope within each lifetime past its own warm-up
      (`within_life_trend`); processes never restarted after the warm-up, if any, on their own;
    - metadata disk: the envelope of its sawtooth after the first truncation (`sawtooth_trend`);
    - restart time: each node's last restarts against its first, at most 10 % slower (`restart_drift`;
      one-sided: faster is fine), the CPU
      time to ready beside the wall time (the machine is shared; CPU time does not queue);
    - acknowledged records lost and idempotent records stored twice (exact counts).
    Each goal gets met, missed or unclear (the run cannot tell: the slope's interval straddles
    the bound) in `goals["table"]`."""
    warm = config.duration_s * config.warmup_fraction
    end = max((s.t for s in result.samples), default=0.0)
    lives = lives_of(result)
    age = reference_age(lives)
    # A process's own warm-up: half the age every process reached, or longer when its tail caches
    # take longer to fill. Measured per process from the caches' sampled size (cache_full_age):
    # each lifetime's slope starts once its own caches are full, however late (a life whose
    # caches fill at its end keeps few points, and the goal is unclear rather than met or missed).
    # An older soak.json without it: the stream directories' fill time at the soak's start
    # (cache_fill_s), at most 3/4 of the reference age.
    full = [cache_full_age(life) for life in lives]
    measured = [f for f in full if f is not None]
    if measured:
        fill = median(measured)
        since = [max(age / 2, f if f is not None else age / 2) for f in full]
        since_age = median(since)
    else:
        fill = cache_fill_s(result, warm)
        since_age = min(max(age / 2, fill), age * 3 / 4)
        since = [since_age] * len(lives)
    # A never-restarted process is measured past its caches' fill when sampled, else whole.
    never_since = since if measured else [0.0] * len(lives)
    goals: dict[str, Any] = {"warmup_s": round(warm, 1), "settle_s": SETTLE_S, "reference_age_s": round(age, 1),
                             "cache_fill_s": round(fill, 1), "process_warmup_s": round(since_age, 1),
                             "cache_measured": bool(measured)}
    if measured:
        # What the caches held once full (median over the lifetimes' samples past their fill), and
        # their bound: the node's tail_cache_bytes.
        held = [s.cache_mb for life, f in zip(lives, full, strict=True) if f is not None
                for s, a in zip(life.samples, life.ages, strict=True) if a >= f and s.cache_mb >= 0]
        goals["tail_cache"] = {"full_age_s": [None if f is None else round(f, 1) for f in full],
                               "held_mb_when_full": round(median(held), 2),
                               "budget_mib": result.counts.get("tail_cache_budget_mib")}
    table_rows: list[dict[str, str]] = []

    def row(goal: str, measured: str, state: str) -> None:
        table_rows.append({"goal": goal, "measured": measured, "verdict": state})

    has_anon = any(s.rss_anon_mb >= 0 for s in result.samples)
    # Open files are judged without the sockets when those were counted (an older soak.json did
    # not): sockets follow the clients' connections and are judged on their own.
    has_sockets = any(s.sockets >= 0 for s in result.samples)
    files = ["files", "sockets"] if has_sockets else ["open_files"]
    metrics = ["rss_mb", *files, "threads"] + (["rss_anon_mb"] if has_anon else [])
    names = {"rss_mb": "RSS", "open_files": "open files", "files": "open files other than sockets",
             "sockets": "open sockets", "threads": "threads",
             "rss_anon_mb": "anonymous RSS"}
    for metric in metrics:
        across, per_life = same_age_trend(lives, metric, warm, age)
        within = within_life_trend(lives, metric, warm, since)
        states = [verdict(across.pct_per_hour, across.margin, FLAT_PCT_PER_HOUR),
                  verdict(within.pct_per_hour, within.margin, FLAT_PCT_PER_HOUR)]
        state = "missed" if "missed" in states else "unclear" if "unclear" in states else "met"
        goals[metric] = {"same_age": asdict(across), "same_age_lives": per_life, "within_life": asdict(within),
                         "never_restarted_pct_per_hour": long_lived(lives, metric, warm, end, never_since),
                         "verdict": state, "met": {"met": True, "missed": False}.get(state)}
        if metric in ("rss_mb", "open_files", "files", "sockets"):
            row(f"{names[metric]} flat within 5 %/h over the soak (each node at the same age after its start, "
                f"ages {age * 2 / 3:.0f}-{age:.0f} s)", across.text(), states[0])
            if measured:
                cache = goals["tail_cache"]
                budget = f"{cache['budget_mib']:.0f}" if cache["budget_mib"] is not None else "?"
                why = (f"each process past its own tail caches' fill (median {fill:.0f} s; full, they hold "
                       f"{cache['held_mb_when_full']:.1f} MB, bound by the logs' retention and a {budget} MiB budget) "
                       f"and half the reference age {age:.0f} s")
            else:
                why = (f"ages past {since_age:.0f} s: half the reference age {age:.0f} s, or the caches' fill time "
                       f"{fill:.0f} s if longer")
            row(f"{names[metric]} flat within 5 %/h within a process ({why})", within.text(), states[1])
            never = goals[metric]["never_restarted_pct_per_hour"]
            if never:
                worst = max(abs(v) for v in never.values())
                row(f"{names[metric]} flat within 5 %/h in processes never restarted",
                    ", ".join(f"node {n}: {v:+.1f} %/h" for n, v in never.items()),
                    "met" if worst <= FLAT_PCT_PER_HOUR else "missed")
    meta, detail = sawtooth_trend(result, warm)
    meta_state = verdict(meta.pct_per_hour, meta.margin, FLAT_PCT_PER_HOUR)
    cycles = min((len(d["peaks_mb"]) for k, d in detail.items() if k.isdigit()), default=0)
    if meta_state == "missed" and detail["measure"].startswith("peaks") and cycles < 3:
        # Every node holds the same replicated log (its series are not independent), and where a
        # sample falls in a cycle moves a peak by up to a sampling interval's growth: two cycles
        # cannot tell a growth from that.
        meta_state = "unclear"
        detail["measure"] += f" (only {cycles} cycles after the first: a growth and the sampling phase look alike)"
    goals["metadata_mb"] = {"trend": asdict(meta), **detail, "verdict": meta_state,
                            "met": {"met": True, "missed": False}.get(meta_state)}
    row("metadata disk flat within 5 %/h after its first truncation", f"{meta.text()}; {detail['measure']}",
        meta_state)
    for key, field_name, label in (("restart_ready", "ready_s", "restart time (start to ready)"),
                                   ("restart_cpu", "cpu_s", "restart CPU time (start to ready; load-independent)")):
        drift = restart_drift(result.restarts, field_name)
        goals[key] = drift
        if drift["verdict"] == "n/a":
            row(f"{label} at the end at most 10 % above the start", drift["note"], "n/a")
        else:
            row(f"{label} at the end at most 10 % above the start (end <= 1.10 x start; median of each node's "
                "last vs first restarts)",
                f"{drift['first_s']:.2f} s -> {drift['last_s']:.2f} s ({drift['change_pct']:+.1f} %), "
                f"load {drift['load1_first']:.1f} -> {drift['load1_last']:.1f}", drift["verdict"])
    lost = result.counts.get("lost_acknowledged")
    doubled = result.counts.get("idempotent_stored_twice")
    if isinstance(lost, dict) and isinstance(doubled, dict):
        total, twice = sum(lost.values()), sum(doubled.values())
        row("0 acknowledged records lost", f"{total} lost of {result.counts.get('acknowledged')} acknowledged; "
            f"{twice} idempotent records stored twice", "met" if total == 0 and twice == 0 else "missed")
    else:
        row("0 acknowledged records lost", "not counted (the checks did not finish)", "n/a")
    goals["table"] = table_rows
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
        address = node_address(cluster, leader)
        try:
            code, start = list_offset_raw(address, stream, EARLIEST)  # retention moved it
            if code != 0:
                return None
            records = read_all(address, stream, start, hw)
        except AssertionError as error:
            if "NOT_LEADER_OR_FOLLOWER" in str(error):
                return None
            raise
        return hw, {offset: value for offset, (_, value) in records.items()}

    return wait_until(attempt, 120, f"reading {stream} whole from its leader", interval=0.5)


def unread(offset: int, missed: Sequence[tuple[int, int]]) -> bool:
    return any(first <= offset < end for first, end in missed)


def check_stream(stream: str, hw: int, log: dict[int, bytes | None], acks: Acks,
                 producers: list[ProducerThread], missed: Sequence[tuple[int, int]] = ()) -> list[str]:
    """Every acknowledged record at its offset; an idempotent producer's records stored once
    (offsets in `missed`, deleted by retention before they were read, are not checked)."""
    holes = [offset for offset in range(hw) if offset not in log and not unread(offset, missed)]
    problems = [f"{stream}: the committed log has {len(holes)} holes below {hw} (first {holes[0]})"] if holes else []
    mine = {p.client for p in producers}
    problems += [f"{stream}: {p}" for p in check_acknowledged(
        [a for a in acks.snapshot() if a[0] in mine and not unread(a[1], missed)], log)[:20]]
    idempotent = tuple(f"{p.client}-".encode() for p in producers if p.idempotent)
    stored = [v for v in log.values() if v is not None and idempotent and v.startswith(idempotent)]
    if len(stored) != len(set(stored)):
        problems.append(f"{stream}: {len(stored) - len(set(stored))} records of idempotent producers stored twice")
    return problems


def lost_and_doubled(log: dict[int, bytes | None], acks: Acks, producers: list[ProducerThread],
                     missed: Sequence[tuple[int, int]] = ()) -> tuple[int, int]:
    """Exact counts behind check_stream's problems (which list only the first few): acknowledged
    records not at their acknowledged offset, and extra copies of idempotent producers' records."""
    mine = {p.client for p in producers}
    lost = sum(1 for client, offset, value in acks.snapshot()
               if client in mine and log.get(offset) != value and not unread(offset, missed))
    idempotent = tuple(f"{p.client}-".encode() for p in producers if p.idempotent)
    stored = [v for v in log.values() if v is not None and idempotent and v.startswith(idempotent)]
    return lost, len(stored) - len(set(stored))


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
    # Offsets retention deleted before the recorder read them are not in `log`: not compared.
    wrong = [o for o in range(hw) if o in log and rows.get(o) != log[o]]
    if wrong:
        problems.append(f"{TIERED}: table and log differ at {len(wrong)} offsets, first {wrong[:5]}")
    return problems


@contextlib.contextmanager
def soak_cluster(work: Path, config: SoakConfig) -> Iterator[DevCluster]:
    clusters: list[DevCluster] = []
    try:
        def register(cluster: DevCluster) -> None:
            cluster.log_files = True  # each node's output in node<i>/output.log, kept for a look afterwards
            if config.memwatch_node is not None:
                cluster.command = [sys.executable, "-m", "tests.soak.memwatch"]
                cluster.env.update({"SOAK_MEMWATCH_NODE": str(config.memwatch_node),
                                    "SOAK_MEMWATCH_OUT": str(Path(config.results_dir).resolve()),
                                    "SOAK_MEMWATCH_EVERY": str(config.memwatch_every_s)})
            clusters.append(cluster)

        yield start_cluster(work / "cluster", 3, settings=config.settings, register=register)
    finally:
        for cluster in clusters:
            cluster.kill_all()


def run_soak(config: SoakConfig, say: Callable[[str], None] = print) -> SoakResult:
    results = Path(config.results_dir)
    results.mkdir(parents=True, exist_ok=True)
    work = results / "work"
    # A fresh cluster every run: nodes started on an earlier run's data directories would join
    # that run's cluster (its ports and streams), not form a new one.
    shutil.rmtree(work, ignore_errors=True)
    result = SoakResult(config={k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()})
    with soak_cluster(work, config) as cluster:
        table_path = (work / "lake" / TIERED).resolve()
        with admin_client(cluster) as client:
            client.create_stream(MAIN, 3, config=STREAM_RETENTION)
            client.create_stream(MOVING, 1, config=STREAM_RETENTION)
            client.create_stream(TIERED, 3, config={"vdl.table.path": str(table_path), "vdl.table.lag.ms": "2000",
                                                    **STREAM_RETENTION})
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
        recorder = Recorder(cluster, [MAIN, MOVING, TIERED], 5.0)
        operator = Operator(cluster, config, started, end)
        everything = [p for ps in producers.values() for p in ps]
        finished = threading.Event()

        def progress() -> None:
            while not finished.wait(min(60.0, max(1.0, config.duration_s / 10))):
                say(f"  t={time.monotonic() - started:6.0f} s  acks={acks.count()}  commits={ledger.commits}  "
                    f"moves={len(operator.moves)}  restarts={len(operator.restarts)}  load={' '.join(f'{x:.1f}' for x in os.getloadavg())}")

        reporter = threading.Thread(target=progress, daemon=True, name="soak-progress")
        for thread in [*everything, *committers, sampler, recorder, reporter]:
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
            recorder.stop_event.set()
            recorder.join(60)
        result.elapsed_s = round(time.monotonic() - started, 1)
        result.samples, result.restarts, result.moves = sampler.samples, operator.restarts, operator.moves
        if sampler.cache_budget_mib is not None:
            result.counts["tail_cache_budget_mib"] = round(sampler.cache_budget_mib, 1)
        result.counts["stale_replica_views"] = operator.stale

        logs: dict[str, tuple[int, dict[int, bytes | None]]] = {}
        committed_groups = 0
        try:
            for producer in everything:
                if producer.failure is not None:
                    result.problems.append(f"producer {producer.client} failed: {producer.failure!r}")
                if producer.undelivered != 0:
                    result.problems.append(f"producer {producer.client}: {producer.undelivered} records never delivered")
            lost, doubled = {}, {}
            unchecked: dict[str, int] = {}
            for stream, mine in producers.items():
                hw, log = read_log(cluster, stream)
                log = recorder.merged(stream, hw, log)
                logs[stream] = (hw, log)
                missed = recorder.missed[stream]
                result.problems += check_stream(stream, hw, log, acks, mine, missed)
                lost[stream], doubled[stream] = lost_and_doubled(log, acks, mine, missed)
                unchecked[stream] = sum(1 for client, offset, _ in acks.snapshot()
                                        if client in {p.client for p in mine} and unread(offset, missed))
            result.counts |= {"lost_acknowledged": lost, "idempotent_stored_twice": doubled,
                              "unchecked_deleted_before_read": unchecked,
                              "retention_missed_ranges": {s: r for s, r in recorder.missed.items() if r}}
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
                          "group_session_error_examples": [e for c in committers for e in c.errors[:2]][:12],
                          "aiokafka_leaked_cancellations": [e for c in committers for e in c.leaked_cancellations],
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

    panels = [("rss_mb", "RSS (MB; dashed: anonymous; dotted: tail caches; big dots: each process at the reference age)"),
              ("open_files", "open files (dashed: sockets; big dots: the others, each process at the reference age)"),
              ("threads", "threads"),
              ("metadata_mb", "metadata dir (MB)"), ("streams", "stream dirs (MB)"),
              ("restarts", "restart (s): start→ready (CPU s: dotted)"), ("load1", "machine load, 1 min (2 cores)"),
              ("tier_writer", "has loaded the Delta write path")]
    figure, axes = plt.subplots(4, 2, figsize=(13, 13), sharex=True)
    nodes = sorted({s.node for s in result.samples})
    colours = {node: f"C{i}" for i, node in enumerate(nodes)}
    warm = result.goals.get("warmup_s", 0.0)
    for axis, (metric, title) in zip(axes.flat, panels, strict=True):
        axis.set_title(title, fontsize=9)
        axis.grid(alpha=0.3)
        if metric == "restarts":
            for node in nodes:
                mine = sorted((r for r in result.restarts if r.node == node), key=lambda r: r.t)
                axis.plot([r.t for r in mine], [r.ready_s for r in mine], "o-", color=colours[node],
                          label=f"node {node}")
                cpu = [r for r in mine if r.cpu_s >= 0]
                axis.plot([r.t for r in cpu], [r.cpu_s for r in cpu], "o:", color=colours[node], alpha=0.6)
            healthy = [r for r in result.restarts if r.healthy_s >= 0]
            axis.plot([r.t for r in healthy], [r.healthy_s for r in healthy], "x", color="grey", label="ready→in sync")
        elif metric == "streams":
            for node in nodes:
                for stream in (MAIN, MOVING, TIERED):
                    points = [(s.t, s.streams_mb[stream]) for s in result.samples if s.node == node and stream in s.streams_mb]
                    if points:
                        axis.plot(*zip(*points, strict=True), label=f"n{node} {stream.removeprefix('soak-')}", lw=0.8)
        elif metric == "load1":
            points = sorted({(s.t, s.load1) for s in result.samples if s.load1 >= 0})
            if points:
                axis.plot(*zip(*points, strict=True), color="black", lw=0.8, label="load")
        else:
            for node in nodes:
                points = [(s.t, float(getattr(s, metric))) for s in result.samples if s.node == node]
                if metric == "tier_writer":
                    points = [(t, y + 0.04 * (node - 2)) for t, y in points]  # nodes side by side
                if points:
                    axis.plot(*zip(*points, strict=True), color=colours[node], label=f"node {node}", lw=0.9)
                if metric == "rss_mb":
                    anon = [(s.t, s.rss_anon_mb) for s in result.samples if s.node == node and s.rss_anon_mb >= 0]
                    if anon:
                        axis.plot(*zip(*anon, strict=True), color=colours[node], lw=0.7, ls="--")
                    cache = [(s.t, s.cache_mb) for s in result.samples if s.node == node and s.cache_mb >= 0]
                    if cache:
                        axis.plot(*zip(*cache, strict=True), color=colours[node], lw=0.7, ls=":")
                if metric == "open_files":
                    sockets = [(s.t, s.sockets) for s in result.samples if s.node == node and s.sockets >= 0]
                    if sockets:
                        axis.plot(*zip(*sockets, strict=True), color=colours[node], lw=0.7, ls="--")
                if metric in ("rss_mb", "open_files"):
                    judged = "files" if metric == "open_files" and "files" in result.goals else metric
                    lives = [life for life in result.goals.get(judged, {}).get("same_age_lives", [])
                             if life["node"] == node]
                    for counted in (True, False):  # hollow: in the warm-up, not counted
                        chosen = [life for life in lives if life["counted"] is counted]
                        axis.plot([life["t"] for life in chosen], [life["value"] for life in chosen], "o",
                                  color=colours[node], ms=6, mfc=None if counted else "white")
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
    lines = ["per node: first -> last sample (restart: first -> last start-to-ready, CPU s in brackets)",
             f"{'node':>4}  {'RSS MB':>11}  {'anon MB':>11}  {'cache MB':>11}  {'files':>9}  {'threads':>9}  "
             f"{'meta MB':>11}  {'restart s':>24}"]
    goals = result.goals
    for node in sorted({s.node for s in result.samples}):
        mine = [s for s in result.samples if s.node == node]
        restarts = sorted((r for r in result.restarts if r.node == node), key=lambda r: r.t)

        def span(values: list[Any], fmt: str = "{:.0f}") -> str:
            return f"{fmt.format(values[0])}→{fmt.format(values[-1])}" if values else "-"

        ready = span([r.ready_s for r in restarts], "{:.2f}")
        if restarts:
            ready += f" ({restarts[0].cpu_s:.2f}→{restarts[-1].cpu_s:.2f})"
        cache = span([s.cache_mb for s in mine if s.cache_mb >= 0], "{:.1f}")
        lines.append(f"{node:>4}  {span([s.rss_mb for s in mine]):>11}  {span([s.rss_anon_mb for s in mine]):>11}  "
                     f"{cache:>11}  {span([s.open_files for s in mine]):>9}  {span([s.threads for s in mine]):>9}  "
                     f"{span([s.metadata_mb for s in mine], '{:.2f}'):>11}  {ready:>24}")
    warm = goals.get("warmup_s", 0.0)
    lines.append("stream directories (MB): first -> last sample, and the largest after the warm-up")
    for stream in (MAIN, MOVING, TIERED):
        parts = []
        for node in sorted({s.node for s in result.samples}):
            values = [(s.t, s.streams_mb[stream]) for s in result.samples if s.node == node and stream in s.streams_mb]
            if values:
                late = [v for t, v in values if t >= warm]
                parts.append(f"n{node} {values[0][1]:.2f}→{values[-1][1]:.2f} (max {max(late, default=0.0):.2f})")
        lines.append(f"  {stream}: {', '.join(parts) or '-'}")
    loads = [s.load1 for s in result.samples if s.load1 >= 0]
    if loads:
        lines.append(f"machine load (1 min) over the run: min {min(loads):.1f}, median {median(loads):.1f}, "
                     f"max {max(loads):.1f} (2 cores, shared)")
    lines.append("")
    lines.append(f"goals (warm-up {goals.get('warmup_s', 0):.0f} s; ± is twice the standard error, a lower bound "
                 "as samples are autocorrelated; unclear: the run cannot tell)")
    for entry in goals.get("table", []):
        lines.append(f"  [{entry['verdict']:>7}] {entry['goal']}: {entry['measured']}")
    counts = result.counts
    lines.append(f"records acknowledged {counts.get('acknowledged')}, lost or misplaced: "
                 f"{counts.get('lost_acknowledged', '?')}; delivery errors {counts.get('delivery_errors')}")
    lines.append(f"group commits {counts.get('group_commits')} over {counts.get('groups_committed')} groups "
                 f"({counts.get('group_commit_failures')} failed, outcome checked), {counts.get('group_sessions')} sessions")
    leaked = counts.get("aiokafka_leaked_cancellations", [])
    if leaked:
        lines.append(f"aiokafka sessions ended by a CancelledError it let out (aio-libs/aiokafka#647): {len(leaked)}")
        lines += [f"  - {line}" for line in leaked[:5]]
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

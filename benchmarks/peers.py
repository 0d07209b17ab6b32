"""Apache Kafka beside VDL in the benchmarks: the systems a benchmark measures in alternating
rounds, with the same client and records, and the broker CPU each spends.

A `Target` is one system to measure: its bootstrap servers, the broker processes whose CPU
time counts, and the topic configs its runs create topics with. Kafka is measured twice on
one cluster (vdl_dev.kafka_peer, Kafka's defaults): topics with its default durability
(acknowledged from the page cache) and topics with `flush.messages=1` (fsync after every batch,
as VDL acknowledges only fsync'd writes); the rounds alternate between the topics as between
the systems.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from benchmarks.report import Report, cpu_seconds
from vdl_client import ClientSettings, VdlClient
from vdl_client.settings import StreamNotFoundError
from vdl_dev.kafka_peer import FLUSH_EVERY_MESSAGE, KafkaPeer

# The room a Kafka node takes in a --memory-limit cgroup (benchmarks/memory_limit.py): its 1 GiB
# heap (kafka_peer.KAFKA_HEAP) and the JVM's own memory. bench_replication's Kafka nodes peaked at
# 1.2 GiB resident on this project's machine; in a 1536M cgroup with VDL's, one was killed at start.
KAFKA_NODE_MEMORY = 3 << 29


def kafka_needs(nodes: int) -> tuple[str, int]:
    """What `nodes` Kafka nodes need, as a line of memory_limit.apply's `needs`."""
    what = f"Apache Kafka's {nodes} node{'s' if nodes > 1 else ''} (a 1 GiB heap each and the JVM's own memory)"
    return what, nodes * KAFKA_NODE_MEMORY


@dataclass
class Target:
    """One system under measurement. `key` names it in tables and topic names."""

    key: str
    label: str
    bootstrap: str
    pids: Callable[[], list[int]]
    durability: str
    topic_config: dict[str, str] = field(default_factory=dict)

    def topic(self, name: str) -> str:
        """A topic name of this target's own (Kafka's two targets share one cluster)."""
        return f"{name}-{self.key}"

    def create(self, *topics: str, timeout_s: float = 60.0) -> None:
        """Create the topics (one partition, the cluster's replication factor) and wait for
        their leaders. Kafka's brokers learn a new topic from the controller a moment after
        CreateTopics answered: until then Metadata calls it unknown, so the wait retries."""
        deadline = time.monotonic() + timeout_s
        with VdlClient(ClientSettings.from_bootstrap(self.bootstrap, deadline_ms=int(timeout_s * 1000))) as client:
            while True:
                try:
                    client.create_streams(topics, config=self.topic_config or None)
                    return
                except StreamNotFoundError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)

    @contextmanager
    def cpu(self) -> Iterator[list[float]]:
        """`with target.cpu() as used:` -- afterwards used[0] is the broker CPU seconds spent inside."""
        used: list[float] = []
        pids = self.pids()
        before = cpu_seconds(pids)
        yield used
        used.append(cpu_seconds(pids) - before)


def vdl_target(bootstrap: str, pids: Callable[[], list[int]], label: str = "VDL", key: str = "vdl",
               fsync: bool = True) -> Target:
    durability = ("acks=all answered once a majority fsync'd the batch" if fsync
                  else "fsync off (--no-fsync)")
    return Target(key, label, bootstrap, pids, durability)


def kafka_targets(peer: KafkaPeer, label: str = "Kafka", key: str = "kafka") -> list[Target]:
    """Kafka's defaults and flush.messages=1, as two targets on one cluster (keys `key` and
    `key`-flush: a run with two Kafka clusters gives each a key of its own)."""
    nodes = len(peer.nodes)
    isr = peer.settings["min.insync.replicas"]
    return [Target(key, f"{label} (defaults)", peer.bootstrap_servers, peer.pids,
                   f"Kafka 4.4, {nodes} node(s): acknowledged from the page cache, no fsync (defaults); "
                   f"min.insync.replicas={isr}"),
            Target(f"{key}-flush", f"{label} (flush.messages=1)", peer.bootstrap_servers, peer.pids,
                   f"Kafka 4.4, {nodes} node(s): topic flush.messages=1, fsync after every batch; "
                   f"min.insync.replicas={isr}", dict(FLUSH_EVERY_MESSAGE))]


def rotation(targets: Sequence[Target], round_number: int) -> list[Target]:
    """The order of one round: each round starts one target later, so each goes first as often."""
    shift = round_number % len(targets)
    return [*targets[shift:], *targets[:shift]]


def median_ratio(values: Sequence[float], baselines: Sequence[float]) -> tuple[float, list[float]]:
    """The median of per-round ratios (value / baseline of the same round), and the ratios."""
    ratios = [v / b for v, b in zip(values, baselines, strict=True) if b]
    return (statistics.median(ratios) if ratios else float("nan")), ratios


def per_record_us(cpu_s: float, records: int) -> float:
    return cpu_s / records * 1e6 if records else float("nan")


@dataclass
class TargetRound:
    """What one round measured on one target: values by measure key (throughputs with their
    broker CPU per record under "<key>_cpu"), timelines and latency samples for the plot."""

    values: dict[str, float] = field(default_factory=dict)
    timelines: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    latency: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Measure:
    """A measured quantity: a throughput (broker CPU per record beside it) or a latency (ms)."""

    key: str
    label: str
    unit: str
    goal: float | None = None  # the measured system's own goal (the first target)

    @property
    def is_latency(self) -> bool:
        return self.unit == "ms"


def compare_targets(report: Report, targets: Sequence[Target], results: dict[str, list[TargetRound]],
                    measures: Sequence[Measure], ratio_goals: dict[tuple[str, str], float], who: str) -> None:
    """Rows for every target (medians of the rounds, broker CPU per record after each
    throughput), ratios of the first target to each other one (`ratio_goals`: (measure key,
    other target's key) -> goal), and a side-by-side table."""
    measured, *baselines = targets

    def values(target: Target, key: str) -> list[float]:
        return [run.values[key] for run in results[target.key]]

    def median(target: Target, key: str) -> float:
        return statistics.median(values(target, key))

    def listed(target: Target, key: str, fmt: str) -> str:
        return "rounds: " + ", ".join(format(v, fmt) for v in values(target, key))

    for target in targets:
        for m in measures:
            fmt = ".2f" if m.is_latency else ",.0f"
            note = f"{target.durability}; {who}; " if m is measures[0] else ""
            report.add(f"{m.label}, {target.label}", median(target, m.key), m.unit,
                       m.goal if target is measured else None, higher_is_better=not m.is_latency,
                       note=note + listed(target, m.key, fmt))
            if not m.is_latency:
                report.add(f"{m.label}, {target.label}, broker CPU", median(target, f"{m.key}_cpu"), "us/record",
                           higher_is_better=False, note=listed(target, f"{m.key}_cpu", ".2f"))
    for m in measures:
        for base in baselines:
            ratio, ratios = median_ratio(values(measured, m.key), values(base, m.key))
            report.add(f"{m.label}: {measured.label} / {base.label}", ratio, "x", ratio_goals.get((m.key, base.key)),
                       higher_is_better=not m.is_latency,
                       note="median of per-round ratios: " + ", ".join(f"{r:.2f}" for r in ratios))
    rows = []
    for m in measures:
        cells = [f"{median(t, m.key):.2f} ms" if m.is_latency
                 else f"{median(t, m.key):,.0f} ({median(t, f'{m.key}_cpu'):.2f} us CPU/rec)" for t in targets]
        ratios = [f"{median_ratio(values(measured, m.key), values(t, m.key))[0]:.2f}x" for t in baselines]
        rows.append([m.label if m.is_latency else f"{m.label} ({m.unit})", *cells, *ratios])
    rounds = len(results[measured.key])
    report.side_by_side(f"{measured.label} next to {', '.join(t.label for t in baselines)}: same client and "
                        f"records, alternating rounds, medians of {rounds}",
                        ["measurement", *(t.label for t in targets), *(f"/ {t.label}" for t in baselines)], rows)

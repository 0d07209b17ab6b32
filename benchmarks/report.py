"""Shared output for benchmarks: a printed table, a JSON file and a PNG plot per benchmark.

A benchmark adds rows (a measured value next to its goal) and, for the plot, what it observed
along the way: throughput over time (`throughput`, or `timeline` from a `CounterSampler`) and
latency samples (`latency`), each marked as the measured system or the same-run baseline.
`finish()` prints the table and writes benchmarks/results/<name>.json and <name>.png: throughput
over time on the left, latency percentiles on the right, the baseline dashed on the same axes, so
a regression shows at a glance. Without series or latencies a panel shows the rows against
their goals instead.
"""

from __future__ import annotations

import json
import platform
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType

RESULTS_DIR = Path(__file__).resolve().parent / "results"
# (label, fraction) of the latency percentiles a report keeps and plots
PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999), ("max", 1.0))


@dataclass
class Row:
    """One measured quantity next to its goal (goal may be None when there is none)."""

    name: str
    value: float
    unit: str
    goal: float | None = None
    higher_is_better: bool = True
    note: str = ""

    @property
    def met(self) -> bool | None:
        if self.goal is None:
            return None
        return self.value >= self.goal if self.higher_is_better else self.value <= self.goal


@dataclass
class Series:
    """Throughput over time: (seconds since the series started, rate) points -- or, with another
    `x_label` and `title`, any measurement against another quantity (e.g. per stream count)."""

    label: str
    points: list[tuple[float, float]]
    unit: str
    baseline: bool = False
    x_label: str = "seconds since start"
    title: str = "throughput over time"


@dataclass
class Latency:
    """Latency percentiles of one set of samples (PERCENTILES labels -> value)."""

    label: str
    percentiles: dict[str, float]
    unit: str
    samples: int
    baseline: bool = False


@dataclass
class Table:
    """A side-by-side table (e.g. the same measurements of VDL and of Apache Kafka), printed
    after the rows."""

    title: str
    header: list[str]
    rows: list[list[str]]


@dataclass
class Report:
    benchmark: str
    rows: list[Row] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    latencies: list[Latency] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)

    def add(self, name: str, value: float, unit: str, goal: float | None = None,
            higher_is_better: bool = True, note: str = "") -> Row:
        row = Row(name, value, unit, goal, higher_is_better, note)
        self.rows.append(row)
        return row

    def throughput(self, label: str, points: Iterable[tuple[float, float]], unit: str = "records/s",
                   baseline: bool = False) -> Series:
        """Add a throughput-over-time series: (seconds since start, rate) points."""
        series = Series(label, [(float(t), float(v)) for t, v in points], unit, baseline)
        self.series.append(series)
        return series

    def timeline(self, label: str, counts: Sequence[tuple[float, float]], unit: str = "records/s",
                 baseline: bool = False) -> Series:
        """Add a series from (time, cumulative count) samples, e.g. a CounterSampler's."""
        return self.throughput(label, rates(counts), unit, baseline)

    def latency(self, label: str, samples: Sequence[float], unit: str = "ms", baseline: bool = False) -> Latency:
        """Add the percentiles of latency samples (p50 ... max)."""
        values = {name: percentile(samples, fraction) for name, fraction in PERCENTILES}
        latency = Latency(label, values, unit, len(samples), baseline)
        self.latencies.append(latency)
        return latency

    def side_by_side(self, title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> Table:
        """Add a table printed after the rows (cells as given, formatted by the caller)."""
        table = Table(title, [str(h) for h in header], [[str(c) for c in row] for row in rows])
        self.tables.append(table)
        return table

    def table(self) -> str:
        header = ("measurement", "value", "unit", "goal", "met", "note")
        lines = [header]
        for row in self.rows:
            goal = "" if row.goal is None else f"{'>=' if row.higher_is_better else '<='} {row.goal:,.4g}"
            met = {None: "", True: "yes", False: "NO"}[row.met]
            lines.append((row.name, f"{row.value:,.4g}", row.unit, goal, met, row.note))
        return markdown_table(lines[0], lines[1:])

    def finish(self) -> Path:
        """Print the table, write benchmarks/results/<benchmark>.json and .png; returns the JSON path."""
        print(f"\n## {self.benchmark}  ({platform.node()}, {time.strftime('%Y-%m-%d %H:%M:%S')})")
        print(self.table())
        for extra in self.tables:
            print(f"\n### {extra.title}\n{markdown_table(extra.header, extra.rows)}")
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        path = RESULTS_DIR / f"{self.benchmark}.json"
        payload = {"benchmark": self.benchmark, "time": time.time(),
                   "rows": [asdict(r) | {"met": r.met} for r in self.rows],
                   "series": [asdict(s) for s in self.series],
                   "latencies": [asdict(lat) for lat in self.latencies],
                   "tables": [asdict(t) for t in self.tables]}
        path.write_text(json.dumps(payload, indent=2))
        png = path.with_suffix(".png")
        try:
            plot(self, png)
        except ImportError as error:  # matplotlib is in the dev extra; a plain install has no plots
            print(f"no plot ({error}); install the dev extra for {png.name}")
        else:
            print(f"wrote {path} and {png}")
        return path


def plot(report: Report, path: Path) -> None:
    """Throughput over time (left) and latency percentiles (right); baselines dashed, same axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    if report.series:
        _plot_series(left, report.series, colors)
    else:
        _plot_rows(left, report.rows[: len(report.rows) // 2 or 1], "measurements vs goal (1 = goal)")
    if report.latencies:
        _plot_latencies(right, report.latencies, colors)
    else:
        rest = report.rows[len(report.rows) // 2:] if not report.series else report.rows
        _plot_rows(right, rest, "measurements vs goal (1 = goal)")
    figure.suptitle(f"{report.benchmark}  ({platform.node()}, {time.strftime('%Y-%m-%d %H:%M')})")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _style(baseline: bool, index: int, colors: list[str]) -> dict[str, object]:
    return {"color": colors[index % len(colors)], "linestyle": "--" if baseline else "-",
            "linewidth": 1.3 if baseline else 1.8}


def _plot_series(axis, series: list[Series], colors: list[str]) -> None:  # noqa: ANN001
    for index, item in enumerate(series):
        xs = [t for t, _ in item.points]
        ys = [v for _, v in item.points]
        marker = "o" if len(xs) <= 12 else None
        label = f"{item.label} (baseline)" if item.baseline else item.label
        axis.plot(xs, ys, marker=marker, markersize=3, label=label, **_style(item.baseline, index, colors))
    units = sorted({s.unit for s in series})
    axis.set_title(series[0].title)
    axis.set_xlabel(series[0].x_label)
    axis.set_ylabel(", ".join(units))
    axis.set_ylim(bottom=0)
    axis.grid(alpha=0.3)
    axis.legend(fontsize="x-small")


def _plot_latencies(axis, latencies: list[Latency], colors: list[str]) -> None:  # noqa: ANN001
    names = [name for name, _ in PERCENTILES]
    for index, item in enumerate(latencies):
        values = [item.percentiles[name] for name in names]
        label = f"{item.label} (baseline)" if item.baseline else item.label
        axis.plot(names, values, marker="o", markersize=4, label=f"{label}, n={item.samples:,}",
                  **_style(item.baseline, index, colors))
    units = sorted({lat.unit for lat in latencies})
    axis.set_title("latency percentiles")
    axis.set_ylabel(", ".join(units))
    axis.set_yscale("log")
    axis.grid(alpha=0.3, which="both")
    axis.legend(fontsize="x-small")


def _plot_rows(axis, rows: list[Row], title: str) -> None:  # noqa: ANN001
    with_goal = [r for r in rows if r.goal]
    if not with_goal:
        axis.axis("off")
        axis.set_title("(no goals to plot)")
        return
    ratios = [(r.value / r.goal if r.higher_is_better else r.goal / r.value) if r.value else 0.0
              for r in with_goal]
    labels = [r.name[:48] for r in with_goal]
    axis.barh(labels, ratios, color=["tab:green" if r.met else "tab:red" for r in with_goal])
    axis.axvline(1.0, color="black", linewidth=1)
    axis.invert_yaxis()
    axis.tick_params(axis="y", labelsize="x-small")
    axis.set_title(title)


class CounterSampler:
    """Samples a growing counter on a thread every `interval` s: (seconds since start, count).

        with CounterSampler(lambda: acked) as sampler:
            run()
        report.timeline("produce", sampler.samples)
    """

    def __init__(self, counter: Callable[[], float], interval: float = 0.25) -> None:
        self._counter = counter
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="counter-sampler", daemon=True)
        self._started = 0.0
        self.samples: list[tuple[float, float]] = []

    def _sample(self) -> None:
        self.samples.append((time.perf_counter() - self._started, float(self._counter())))

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def __enter__(self) -> CounterSampler:
        self._started = time.perf_counter()
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def idle_cpu(pids: Sequence[int], seconds: float) -> float:
    """The processes' CPU (cores) over `seconds` with no client: their ticks and heartbeats,
    which a run's CPU is counted net of."""
    before, begun = cpu_seconds(pids), time.perf_counter()
    time.sleep(seconds)
    return (cpu_seconds(pids) - before) / (time.perf_counter() - begun)


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU seconds the processes (all their threads) have used so far; a process
    that is gone counts 0."""
    import psutil

    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def rates(counts: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """(time, cumulative count) samples -> (time, rate over the interval ending then)."""
    points = []
    for (t0, c0), (t1, c1) in zip(counts, counts[1:], strict=False):
        if t1 > t0:
            points.append((t1, (c1 - c0) / (t1 - t0)))
    return points


def merged_counts(sources: Sequence[Sequence[tuple[float, float]]], origin: float,
                  step: float = 0.25) -> list[tuple[float, float]]:
    """Counters sampled separately (e.g. by producer processes, as (wall time, count)) summed on
    one grid of `step` seconds from `origin`: (seconds since origin, total count)."""
    sources = [sorted(samples) for samples in sources if samples]
    if not sources:
        return []
    end = max(samples[-1][0] for samples in sources)
    merged = []
    t = origin
    while True:
        total = 0.0
        for samples in sources:
            seen = [count for when, count in samples if when <= t]
            total += seen[-1] if seen else 0.0
        merged.append((t - origin, total))
        if t >= end:
            return merged
        t = min(t + step, end)


def timed_calls(function: Callable[[], object], repeats: int) -> list[tuple[float, float]]:
    """(start time since the first call, seconds) of `repeats` calls: a throughput timeline
    (with `per_call_rates`) and latency samples from the same runs."""
    calls = []
    origin = time.perf_counter()
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        calls.append((start - origin, time.perf_counter() - start))
    return calls


def per_call_rates(calls: Sequence[tuple[float, float]], work: float) -> list[tuple[float, float]]:
    """timed_calls output -> (end time, work per second) points."""
    return [(start + seconds, work / seconds) for start, seconds in calls if seconds > 0]


def markdown_table(header: Sequence[object], rows: Sequence[Sequence[object]]) -> str:
    """Rows under a header, as a Markdown table with padded columns."""
    lines = [tuple(header), *map(tuple, rows)]
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    rendered = ["| " + " | ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)) + " |" for line in lines]
    rendered.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(rendered)


def median_seconds(function: Callable[[], object], repeats: int = 5) -> float:
    """Median wall time of `repeats` calls: machines here are shared and noisy."""
    return statistics.median(seconds for _, seconds in timed_calls(function, repeats))


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[position]


def alternating_rounds(measures: dict[str, Callable[[], float]], rounds: int,
                       warm_up: bool = True) -> dict[str, list[float]]:
    """Run each measure `rounds` times, taking turns (a, b, a, b, ...) so that drift in the
    shared machine's load hits every measure alike; one unrecorded warm-up call of each first.
    Returns every measure's values in the order taken."""
    if warm_up:
        for measure in measures.values():
            measure()
    results: dict[str, list[float]] = {name: [] for name in measures}
    for _ in range(rounds):
        for name, measure in measures.items():
            results[name].append(measure())
    return results


def compare_source_trees(module: str, doc: str | None, measure: Callable[[], dict[str, float]],
                         rounds: int, unit: Callable[[str], str], digits: Callable[[str], int]) -> None:
    """The whole command of an in-process micro-benchmark (`python -m benchmarks.MODULE`): it
    measures this tree's src/ and, with `--baseline-src DIR`, a baseline checkout's, each round in
    a child process per tree (`--child SRC` runs `measure()` with SRC first on the path and prints
    its JSON), the trees' order alternating; medians and per-round ratios, a table, JSON and a plot.
    `unit` and `digits` say how each measure (by name) is reported."""
    import argparse
    import subprocess
    import sys

    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{module}", description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline-src", type=Path, help="a baseline checkout's src directory")
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, str(args.child))
        print(json.dumps(measure()))
        return
    repo = Path(__file__).resolve().parent.parent
    trees = {"this": repo / "src"}
    if args.baseline_src:
        trees["baseline"] = args.baseline_src.resolve()
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for round_number in range(args.rounds):
        for name in list(trees) if round_number % 2 == 0 else list(reversed(trees)):
            output = subprocess.run([sys.executable, "-m", f"benchmarks.{module}", "--child", str(trees[name])],
                                    cwd=repo, check=True, capture_output=True, text=True).stdout
            runs[name].append(json.loads(output))
    report = Report(module)
    rows = []
    for key in runs["this"][0]:
        this = statistics.median(run[key] for run in runs["this"])
        report.add(key, this, unit(key), higher_is_better=False)
        row: list[object] = [key, f"{this:.{digits(key)}f}"]
        if "baseline" in runs:
            base = statistics.median(run[key] for run in runs["baseline"])
            ratios = [t[key] / b[key] for t, b in zip(runs["this"], runs["baseline"], strict=True)]
            row += [f"{base:.{digits(key)}f}", f"{statistics.median(ratios):.3f}"]
        rows.append(row)
    header = ["measure (median of rounds)", "this", "baseline", "ratio (median per round)"]
    report.side_by_side(f"this tree vs baseline, {args.rounds} alternating rounds", header[:len(rows[0])], rows)
    report.finish()

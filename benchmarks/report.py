"""Shared output for benchmarks: a printed table plus a JSON file per benchmark."""

from __future__ import annotations

import json
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"


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
class Report:
    benchmark: str
    rows: list[Row] = field(default_factory=list)

    def add(self, name: str, value: float, unit: str, goal: float | None = None,
            higher_is_better: bool = True, note: str = "") -> Row:
        row = Row(name, value, unit, goal, higher_is_better, note)
        self.rows.append(row)
        return row

    def table(self) -> str:
        header = ("measurement", "value", "unit", "goal", "met", "note")
        lines = [header]
        for row in self.rows:
            goal = "" if row.goal is None else f"{'>=' if row.higher_is_better else '<='} {row.goal:,.4g}"
            met = {None: "", True: "yes", False: "NO"}[row.met]
            lines.append((row.name, f"{row.value:,.4g}", row.unit, goal, met, row.note))
        return markdown_table(lines[0], lines[1:])

    def finish(self) -> Path:
        """Print the table and write benchmarks/results/<benchmark>.json; returns the JSON path."""
        print(f"\n## {self.benchmark}  ({platform.node()}, {time.strftime('%Y-%m-%d %H:%M:%S')})")
        print(self.table())
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        path = RESULTS_DIR / f"{self.benchmark}.json"
        payload = {"benchmark": self.benchmark, "time": time.time(),
                   "rows": [asdict(r) | {"met": r.met} for r in self.rows]}
        path.write_text(json.dumps(payload, indent=2))
        return path


def markdown_table(header: Sequence[object], rows: Sequence[Sequence[object]]) -> str:
    """Rows under a header, as a Markdown table with padded columns."""
    lines = [tuple(header), *map(tuple, rows)]
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    rendered = ["| " + " | ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)) + " |" for line in lines]
    rendered.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(rendered)


def median_seconds(function: Callable[[], object], repeats: int = 5) -> float:
    """Median wall time of `repeats` calls: machines here are shared and noisy."""
    times: list[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


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

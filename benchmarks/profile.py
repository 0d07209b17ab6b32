"""A benchmark's --profile switch: py-spy samples running processes (no code change in them) while
a benchmark runs a measure once more, unrecorded in its rounds, and writes per profiled target
benchmarks/results/<benchmark>.<target>.svg (a flame graph), .txt (py-spy's collapsed stacks)
and the top frames by self time into the report.

Only samples of active threads count (py-spy drops idle ones), so a frame's self share is
roughly its share of the process's CPU. Attaching to another user's process needs root or
ptrace permission (kernel.yama.ptrace_scope); without it py-spy fails and the benchmark says so.
"""

from __future__ import annotations

import html
import shutil
import signal
import subprocess
import sys
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.report import RESULTS_DIR, Report

SAMPLE_RATE = 1000  # per second: a throughput run of a few seconds, whose brokers hold the GIL a fraction of it
TOP = 12  # frames by self time kept in the report
# Frames that tell nothing about the work: Spark's Python workers are forked from the daemon's
# loop, and py-spy puts samples of a forked worker there when it sees no frame below it (up to a
# third of a write's samples). Left out of the top frames, kept in the flame graph.
WAITING_FRAMES = ("manager (daemon.py:",)


def py_spy() -> str:
    """The py-spy next to this interpreter (the dev extra), else one on PATH."""
    local = Path(sys.executable).with_name("py-spy")
    found = str(local) if local.exists() else shutil.which("py-spy")
    if found is None:
        raise SystemExit("--profile needs py-spy: install the dev extra (make install)")
    return found


def spark_python_workers() -> list[int]:
    """Spark's Python worker daemons started for this process's SparkSession (pyspark.daemon forks
    one worker per task from them; py-spy follows the forks with --subprocesses)."""
    import psutil

    pids = []
    for child in psutil.Process().children(recursive=True):
        try:
            if any("pyspark.daemon" in part or "pyspark/daemon" in part for part in child.cmdline()):
                pids.append(child.pid)
        except psutil.NoSuchProcess:
            continue
    return pids


@dataclass
class Profile:
    """Collapsed stacks of one target ("frame;frame;...;leaf" -> samples)."""

    target: str
    stacks: Counter[str] = field(default_factory=Counter)

    @property
    def samples(self) -> int:
        return sum(self.stacks.values())

    def top_self(self, count: int = TOP) -> list[tuple[str, float]]:
        """(frame, share of the samples) of the frames where most samples ended (WAITING_FRAMES aside)."""
        leaves: Counter[str] = Counter()
        for stack, samples in self.stacks.items():
            leaf = stack.rsplit(";", 1)[-1]
            if not leaf.startswith(WAITING_FRAMES):
                leaves[leaf] += samples
        total = sum(leaves.values()) or 1
        return [(frame, samples / total) for frame, samples in leaves.most_common(count)]


def read_collapsed(path: Path, target: str) -> Profile:
    profile = Profile(target)
    if path.exists():
        for line in path.read_text().splitlines():
            stack, _, samples = line.rpartition(" ")
            if stack and samples.isdigit():
                profile.stacks[stack] += int(samples)
    return profile


class Profiler:
    """Records targets (name -> a function giving their pids at start) around a block when enabled."""

    def __init__(self, benchmark: str, enabled: bool, results: Path = RESULTS_DIR, gil_only: bool = False) -> None:
        self.benchmark = benchmark
        self.enabled = enabled
        # Only samples of the thread holding the GIL (py-spy --gil): the Python CPU of a process
        # that mostly waits (an event loop in epoll, threads in fsync), where py-spy's idle
        # detection keeps those waits as Runner.run / _worker / GroupCommit._run "self" time.
        self.gil_only = gil_only
        self.results = results
        self.profiles: list[Profile] = []

    @contextmanager
    def recording(self, what: str, targets: dict[str, Callable[[], Sequence[int]]]) -> Iterator[None]:
        """py-spy on every target's processes (and their children) while the block runs; `what`
        names the run in the file names (<benchmark>.<what>.<target>.svg)."""
        if not self.enabled:
            yield
            return
        self.results.mkdir(parents=True, exist_ok=True)
        recorders: list[tuple[str, Path, subprocess.Popen[bytes]]] = []
        for target, pids in targets.items():
            for index, pid in enumerate(pids()):
                raw = self.results / f"{self.benchmark}.{what}.{target}.{index}.txt"
                command = [py_spy(), "record", "--pid", str(pid), "--subprocesses", "--nonblocking", "--function",
                           "--rate", str(SAMPLE_RATE), "--format", "raw", "--output", str(raw)]
                if self.gil_only:
                    command.append("--gil")
                recorders.append((target, raw, subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                                                stderr=subprocess.PIPE)))
        try:
            yield
        finally:
            merged: dict[str, Profile] = {}
            for target, raw, recorder in recorders:
                recorder.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
                _, errors = recorder.communicate(timeout=60)
                if recorder.returncode not in (0, -signal.SIGINT) and not raw.exists():
                    print(f"py-spy on {target} failed: {errors.decode(errors='replace').strip()[-500:]}")
                profile = merged.setdefault(target, Profile(f"{what}.{target}"))
                profile.stacks.update(read_collapsed(raw, target).stacks)
                raw.unlink(missing_ok=True)
            for profile in merged.values():
                stem = f"{self.benchmark}.{profile.target}"  # not Path.with_suffix: the target has dots
                (self.results / f"{stem}.txt").write_text(
                    "".join(f"{stack} {samples}\n" for stack, samples in profile.stacks.most_common()))
                (self.results / f"{stem}.svg").write_text(flame_graph(profile, f"{self.benchmark}: {profile.target}"))
                print(f"profile of {profile.target}: {self.results / stem}.svg ({profile.samples:,} samples)")
                self.profiles.append(profile)

    def add_to(self, report: Report) -> None:
        """The top frames by self time of every profile, as a table after the rows."""
        for profile in self.profiles:
            report.side_by_side(f"profile {profile.target}: top frames by self time (of {profile.samples:,} samples, "
                                f"{SAMPLE_RATE}/s; flame graph {self.benchmark}.{profile.target}.svg)",
                                ["self", "frame"], [[f"{share:6.1%}", frame] for frame, share in profile.top_self()])


# ============================================================================== flame graph SVG

_WIDTH = 1600
_FRAME_HEIGHT = 16
_MIN_WIDTH = 0.5  # pixels: narrower frames are left out (their samples still count in their parents)


@dataclass
class _Node:
    samples: int = 0
    children: dict[str, _Node] = field(default_factory=dict)


def flame_graph(profile: Profile, title: str) -> str:
    """A self-contained SVG flame graph (root at the bottom, hover a frame for its name and share)."""
    root = _Node()
    for stack, samples in profile.stacks.items():
        root.samples += samples
        node = root
        for frame in stack.split(";"):
            node = node.children.setdefault(frame, _Node())
            node.samples += samples
    total = root.samples or 1

    def depth(node: _Node) -> int:
        return 1 + max((depth(child) for child in node.children.values()), default=0)

    levels = depth(root)
    height = (levels + 2) * _FRAME_HEIGHT + 24
    scale = _WIDTH / total
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" '
             f'font-family="monospace" font-size="11">',
             f'<text x="4" y="14">{html.escape(title)} ({total:,} samples)</text>']

    def draw(name: str, node: _Node, x: float, level: int) -> None:
        width = node.samples * scale
        if width < _MIN_WIDTH:
            return
        y = height - (level + 1) * _FRAME_HEIGHT
        hue = 20 + zlib.crc32(name.split(" (")[0].encode()) % 40
        label = html.escape(name)
        parts.append(f'<g><title>{label} ({node.samples:,} samples, {node.samples / total:.2%})</title>'
                     f'<rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="{_FRAME_HEIGHT - 1}" '
                     f'fill="hsl({hue},90%,60%)"/>')
        characters = int(width / 7)
        if characters >= 3:
            text = name if len(name) <= characters else name[:characters - 2] + ".."
            parts.append(f'<text x="{x + 2:.1f}" y="{y + _FRAME_HEIGHT - 4}">{html.escape(text)}</text>')
        parts.append("</g>")
        offset = x
        for child_name, child in sorted(node.children.items()):
            draw(child_name, child, offset, level + 1)
            offset += child.samples * scale

    draw("all", root, 0.0, 0)
    parts.append("</svg>\n")
    return "\n".join(parts)

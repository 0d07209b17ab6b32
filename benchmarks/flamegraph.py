"""Sampling profiles of running broker processes with py-spy (no code change in the broker):
collapsed stacks, the top frames by self time, and a flame graph (SVG).

    with Sampler({"leader": pid1, "follower": pid2}, RESULTS_DIR / "bench_replication") as sampler:
        run()
    for role, profile in sampler.profiles.items():
        print(role, profile.top(10))

Each process gets its own `py-spy record --format raw` (collapsed stacks, idle frames left out,
so the samples count CPU, not waiting); `<prefix>.<role>.svg` and `.txt` are written beside the
benchmark's JSON. py-spy is in the dev extra; without it (or without ptrace rights) a Sampler
says so and records nothing.
"""

from __future__ import annotations

import html
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

RATE_HZ = 100


@dataclass
class Profile:
    """Collapsed stacks of one process: "frame;frame;...;leaf" -> samples."""

    stacks: Counter[str] = field(default_factory=Counter)

    @classmethod
    def read(cls, path: Path) -> Profile:
        stacks: Counter[str] = Counter()
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if stack and count.isdigit():
                stacks[stack] += int(count)
        return cls(stacks)

    @property
    def samples(self) -> int:
        return sum(self.stacks.values())

    def top(self, count: int = 10) -> list[tuple[str, float]]:
        """The frames with the most self samples (the leaf of a stack): (frame, share of all)."""
        leaves: Counter[str] = Counter()
        for stack, samples in self.stacks.items():
            leaves[stack.rsplit(";", 1)[-1]] += samples
        total = self.samples or 1
        return [(frame, samples / total) for frame, samples in leaves.most_common(count)]

    def write_svg(self, path: Path, title: str) -> None:
        """A flame graph: one box per frame, its width its inclusive samples; the title of each
        box (hover) names the frame with its samples."""
        tree: dict[str, object] = {}
        for stack, samples in self.stacks.items():
            node = tree
            for frame in stack.split(";"):
                child = node.setdefault(frame, {"#": 0})
                assert isinstance(child, dict)
                child["#"] += samples
                node = child
        width, row, total = 1200.0, 16, self.samples or 1
        boxes: list[str] = []
        depth_max = [0]

        def place(node: dict[str, object], x: float, depth: int) -> None:
            depth_max[0] = max(depth_max[0], depth)
            for frame, child in sorted((k, v) for k, v in node.items() if k != "#"):
                assert isinstance(child, dict)
                samples = int(child["#"])  # type: ignore[call-overload]
                w = width * samples / total
                if w >= 0.5:
                    label = html.escape(frame)
                    text = label if w > 60 else ""
                    boxes.append(f'<g><title>{label} ({samples} samples, {100 * samples / total:.1f}%)</title>'
                                 f'<rect x="{x:.1f}" y="{{y{depth}}}" width="{w:.1f}" height="{row - 1}" '
                                 f'fill="hsl({hash(frame) % 50 + 10},80%,60%)"/>'
                                 f'<text x="{x + 2:.1f}" y="{{t{depth}}}" font-size="10" '
                                 f'clip-path="none">{text[:int(w / 6)]}</text></g>')
                    place(child, x, depth + 1)
                x += w

        place(tree, 0.0, 0)
        height = (depth_max[0] + 2) * row + 20
        svg = "\n".join(boxes)
        for depth in range(depth_max[0] + 1):  # flames grow upwards: the root at the bottom
            y = height - (depth + 1) * row
            svg = svg.replace(f"{{y{depth}}}", str(y)).replace(f"{{t{depth}}}", str(y + row - 4))
        path.write_text(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height}" '
                        f'font-family="monospace"><text x="4" y="14" font-size="12">{html.escape(title)} '
                        f'({self.samples} samples at {RATE_HZ} Hz, idle left out)</text>\n{svg}\n</svg>\n')


def py_spy() -> str | None:
    """The py-spy executable: beside this Python's (the venv's), else on PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


class Sampler:
    """py-spy on each process of `pids` (role -> pid) while the block runs; afterwards
    `profiles` (role -> Profile) and the files `<prefix>.<role>.txt/.svg`."""

    def __init__(self, pids: dict[str, int], prefix: Path) -> None:
        self.pids = pids
        self.prefix = prefix
        self.profiles: dict[str, Profile] = {}
        self._running: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}

    def __enter__(self) -> Sampler:
        executable = py_spy()
        if executable is None:
            print("no py-spy (pip install py-spy, or the dev extra): no profiles", file=sys.stderr)
            return self
        self.prefix.parent.mkdir(parents=True, exist_ok=True)
        for role, pid in self.pids.items():
            raw = Path(f"{self.prefix}.{role}.txt")
            # --nonblocking: the broker is never paused to be sampled (its CPU stays its own).
            command = [executable, "record", "--pid", str(pid), "--rate", str(RATE_HZ), "--format", "raw",
                       "--nonblocking", "--output", str(raw)]
            self._running[role] = (subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE), raw)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        import signal

        for process, _ in self._running.values():
            process.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
        for role, (process, raw) in self._running.items():
            try:
                _, stderr = process.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
                continue
            if not raw.exists():
                print(f"py-spy recorded nothing for {role}: {stderr.decode(errors='replace')[-300:]}", file=sys.stderr)
                continue
            profile = Profile.read(raw)
            self.profiles[role] = profile
            profile.write_svg(raw.with_suffix(".svg"), f"{self.prefix.name}: {role}")


def format_top(profiles: dict[str, Profile], count: int = 8) -> str:
    """The top frames by self time of each profile, one block per role."""
    lines = []
    for role, profile in profiles.items():
        lines.append(f"{role} ({profile.samples} samples):")
        lines += [f"  {share * 100:5.1f}%  {frame}" for frame, share in profile.top(count)]
    return "\n".join(lines)

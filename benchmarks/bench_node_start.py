"""A node's start and its memory once serving, with and without streams that are Delta tables.

Two data directories, each one node (made once, then restarted):

- idle: `--streams` plain streams (default 500) and no table: what a node of a cluster without
  tiering costs;
- tiered: one stream with a table holding a few committed records, besides 20 plain streams;
- fresh: an empty data directory each time (a new cluster of one forming).

Each start is measured from the process's spawn to its readiness line (wall seconds), with the
CPU seconds it used until then, its RSS and anonymous RSS then and `--settle` seconds later, and
its threads. The code under test and a baseline (`--baseline REV`: that git revision checked
out into a temporary worktree and run from its src/; default the merge base with main) take
turns on both directories (alternating rounds, medians), so the shared machine's load hits
both alike. `python -m benchmarks.bench_node_start [--quick] [--baseline REV]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from benchmarks.report import Report, alternating_rounds
from tests.support.cluster import BROKER_COMMAND, REPO, BrokerProcess, free_port, start_broker, wait_until
from vdl_client import ClientSettings, VdlClient


def anon_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1e3
    return -1.0


def make_data(directory: Path, streams: int, tiered: bool) -> Path:
    broker = start_broker(directory)
    try:
        with VdlClient(ClientSettings.from_bootstrap(broker.bootstrap, deadline_ms=30_000)) as client:
            for index in range(streams):
                client.create_stream(f"plain-{index}")
            if tiered:
                table = directory / "table"
                client.create_stream("tiered", config={"vdl.table.path": str(table), "vdl.table.lag.ms": "200"})
                from kafka import KafkaProducer

                producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
                for i in range(100):
                    producer.send("tiered", b"record-%d" % i)
                producer.flush()
                producer.close()

                def in_table() -> bool:
                    from deltalake import DeltaTable

                    try:
                        return DeltaTable(str(table)).to_pyarrow_table(columns=["offset"]).num_rows >= 100
                    except Exception:  # not created yet
                        return False

                wait_until(in_table, 60, "the table holding the records")
        broker.terminate()
    finally:
        broker.kill()
    return broker.data_dir


def measure(command: tuple[str, ...], data_dir: Path, settle_s: float) -> dict[str, float]:
    broker = BrokerProcess(data_dir, free_port(), {"log_level": "WARNING"}, command=command)
    began = time.monotonic()
    broker.start()
    ready = time.monotonic() - began
    try:
        assert broker.process is not None
        process = psutil.Process(broker.process.pid)
        times = process.cpu_times()
        at_ready = {"ready_s": ready, "cpu_s": times.user + times.system,
                    "rss_mb": process.memory_info().rss / 1e6, "anon_mb": anon_mb(process.pid)}
        time.sleep(settle_s)  # a benchmark: the node is left alone, then looked at
        return at_ready | {"rss_settled_mb": process.memory_info().rss / 1e6,
                           "anon_settled_mb": anon_mb(process.pid), "threads": process.num_threads()}
    finally:
        broker.terminate()


def compiled(src: Path) -> None:
    """Bytecode for every module under src, written now: with PYTHONDONTWRITEBYTECODE set, a
    checkout without it compiles each module again at every start (~0.3 s of CPU measured)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True, capture_output=True)


def baseline_command(revision: str, into: Path) -> tuple[str, ...]:
    subprocess.run(["git", "worktree", "add", "--detach", str(into), revision], cwd=REPO, check=True,
                   capture_output=True)
    compiled(into / "src")
    return ("env", f"PYTHONPATH={into / 'src'}", *BROKER_COMMAND)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_node_start", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smoke-sized: 2 rounds, 50 streams")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--streams", type=int, default=500, help="plain streams of the idle node")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after ready before the second look")
    parser.add_argument("--baseline", default=None, help="git revision of the baseline (default: merge-base with main)")
    args = parser.parse_args(argv)
    rounds, streams = (2, 50) if args.quick else (args.rounds, args.streams)
    revision = args.baseline or subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=REPO, check=True,
                                               capture_output=True, text=True).stdout.strip()
    report = Report("bench_node_start")
    with tempfile.TemporaryDirectory(prefix="bench-node-start-") as scratch:
        work = Path(scratch)
        compiled(REPO / "src")  # both sides alike
        old = baseline_command(revision, work / "baseline")
        try:
            dirs: dict[str, Path | None] = {"idle": make_data(work / "idle", streams, tiered=False),
                                            "tiered": make_data(work / "tiered", 20, tiered=True), "fresh": None}
            seen: dict[str, list[dict[str, float]]] = {}
            measures: dict[str, Callable[[], float]] = {}
            for data, path in dirs.items():
                for code, command in (("this code", BROKER_COMMAND), (f"baseline {revision[:10]}", old)):
                    key = f"{data}, {code}"
                    seen[key] = []

                    def one(key: str = key, command: tuple[str, ...] = command, path: Path | None = path) -> float:
                        data_dir = path or Path(tempfile.mkdtemp(dir=work)) / "data"
                        seen[key].append(measure(command, data_dir, args.settle))
                        return seen[key][-1]["ready_s"]

                    measures[key] = one
            alternating_rounds(measures, rounds)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(work / "baseline")], cwd=REPO,
                           capture_output=True)
    fields = ("ready_s", "cpu_s", "rss_mb", "anon_mb", "rss_settled_mb", "anon_settled_mb", "threads")
    rows = []
    for key, values in seen.items():
        counted = values[1:]  # the first of each is alternating_rounds' unrecorded warm-up
        medians = {f: statistics.median(v[f] for v in counted) for f in fields}
        rows.append([key, *(f"{medians[f]:.2f}" if f.endswith("_s") else f"{medians[f]:.0f}" for f in fields)])
        for f in ("ready_s", "cpu_s", "rss_settled_mb"):
            report.add(f"{key}: {f}", medians[f], f.split("_")[-1] if f.endswith("_s") else "MB",
                       higher_is_better=False)
    report.side_by_side(f"medians of {rounds} alternating rounds (load {os.getloadavg()[0]:.1f} at the end; "
                        f"idle: {streams} plain streams; tiered: 1 stream with a table + 20 plain; fresh: empty)",
                        ["node, code", "ready s", "CPU s to ready", "RSS MB at ready", "anon MB at ready",
                         f"RSS MB +{args.settle:.0f} s", f"anon MB +{args.settle:.0f} s", "threads"], rows)
    report.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())

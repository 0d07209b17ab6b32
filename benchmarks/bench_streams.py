"""Many streams: what idle streams cost, and how failover and restart scale with their number.

    .venv/bin/python -m benchmarks.bench_streams [--quick] [--counts 100,1000,5000]
                                                 [--baseline REF] [--no-fsync]

A 3-node dev cluster on this machine per stream count (every stream has 3 replicas, so every
node holds every stream):

- creating N streams: CreateTopics (100 per request, to the metadata leader) until every stream has a leader that says
  so -- goal <= 15 s at 1,000;
- idle CPU per node: CPU time of each broker process over a quiet window once everything is
  created and in sync, as % of one core -- goal <= 5 % at 1,000, growing far slower than N;
- RSS per node -- goal <= 1 GiB at 5,000;
- at the failover count (1,000; quick: 100): acks=all throughput of one busy stream next to
  N-1 idle ones vs the same stream alone (a second 3-node cluster holding only it), in
  alternating rounds, medians -- goal >= 0.9x; kill -9 of the node leading most streams, until
  every stream it led accepts an acks=all write again -- goal <= 5 s; restart of that node, until
  it listens and until every stream is back in sync on all three replicas -- goal <= 20 s.

`--baseline REF` measures the broker of git revision REF (its tree exported to a temporary
directory; or REF is a checkout directory) in the same run, before the current tree, and prints
both side by side.
Clients, brokers and Raft traffic share the machine's cores; numbers are for this machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bench_broker import produce_throughput
from benchmarks.report import Report, Series
from vdl_dev import bulk
from vdl_dev.dev_cluster import DevCluster, free_base_port

REPO = Path(__file__).resolve().parents[1]
CLK_TCK = os.sysconf("SC_CLK_TCK")
BUSY = "bench-streams-busy"


# ---------------------------------------------------------------------------------- processes


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (proc(5) fields 14, 15)


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def idle_cpu(cluster: DevCluster, seconds: float) -> dict[int, float]:
    """% of one core each running node used over `seconds` with no client traffic."""
    pids = {i: n.pid for i, n in cluster.nodes.items() if n.running and n.pid is not None}
    before = {i: cpu_seconds(pid) for i, pid in pids.items()}
    started = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - started
    return {i: 100 * (cpu_seconds(pid) - before[i]) / elapsed for i, pid in pids.items()}


def broker_command(tree: Path | None) -> list[str] | None:
    """The broker of another source tree (its own modules first on sys.path), or None: this one."""
    if tree is None:
        return None
    source = tree / "src" if (tree / "src").is_dir() else tree  # a checkout from before the src layout
    code = (f"import sys; sys.path.insert(0, {str(source)!r}); "
            "from vdl_broker.server.main import main; sys.exit(main())")
    return [sys.executable, "-c", code]


def export_tree(ref: str, into: Path) -> Path:
    """`git archive` of REF into a directory (no change to the repository's worktrees)."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


# ---------------------------------------------------------------------------------- one run


class Run:
    """Measurements of one broker build at every stream count."""

    def __init__(self, label: str, tree: Path | None, settings: dict[str, object], tmp: Path) -> None:
        self.label = label
        self.command = broker_command(tree)
        self.settings = settings
        self.tmp = tmp
        self.values: dict[str, float] = {}
        self.notes: dict[str, str] = {}

    def cluster(self, name: str) -> DevCluster:
        cluster = DevCluster(3, self.tmp / f"{self.label}-{name}", free_base_port(6), command=self.command,
                             settings=self.settings)
        cluster.start(timeout_s=120)
        cluster.wait_for_brokers(timeout_s=120)
        return cluster

    def measure(self, count: int, idle_s: float, create_limit_s: float, failover: bool, rounds: int,
                records: int) -> None:
        cluster = self.cluster(f"n{count}")
        try:
            addresses = {i: n.client_address for i, n in cluster.nodes.items()}
            names = bulk.names_for("s", count)
            started = time.monotonic()
            errors = bulk.create_streams(addresses, names, timeout_s=create_limit_s)
            refused = {name: code for name, code in errors.items() if code not in (0, 36)}
            if refused:
                raise RuntimeError(f"{len(refused)} creates refused, e.g. {list(refused.items())[:3]}")
            remaining = create_limit_s - (time.monotonic() - started)
            try:
                bulk.wait_for_views(addresses, names, max(1.0, remaining), poll_s=0.5)
            except TimeoutError as error:
                self.notes[f"create {count}"] = str(error)
                self.values[f"create {count}"] = float("inf")
                return
            self.values[f"create {count}"] = time.monotonic() - started
            try:
                bulk.wait_for_views(addresses, names, 180, in_sync=True, poll_s=2.0)
            except TimeoutError as error:
                self.notes[f"idle cpu max {count}"] = f"measured anyway: {error}; "
            time.sleep(min(5.0, idle_s))  # let the last elections and catch-ups settle
            cpu = idle_cpu(cluster, idle_s)
            self.values[f"idle cpu max {count}"] = max(cpu.values())
            self.notes[f"idle cpu max {count}"] = (self.notes.get(f"idle cpu max {count}", "")
                                                   + ", ".join(f"node {i}: {v:.1f}" for i, v in sorted(cpu.items())))
            rss = {i: rss_bytes(n.pid) for i, n in cluster.nodes.items() if n.pid is not None}
            self.values[f"rss max {count}"] = max(rss.values()) / 2**20
            self.notes[f"rss max {count}"] = ", ".join(f"node {i}: {v / 2**20:.0f}" for i, v in sorted(rss.items()))
            if failover:
                self.throughput_ratio(cluster, rounds, records)
                self.failover_and_restart(cluster, names, count)
        finally:
            cluster.kill_all()

    def throughput_ratio(self, busy: DevCluster, rounds: int, records: int) -> None:
        """One stream next to the idle ones vs the same stream alone, alternating rounds."""
        alone = self.cluster("alone")
        try:
            clusters = {"crowded": busy, "alone": alone}
            for cluster in clusters.values():
                addresses = {i: n.client_address for i, n in cluster.nodes.items()}
                bulk.create_streams(addresses, [BUSY])
                bulk.wait_for_views(addresses, [BUSY], 60, in_sync=True)
            results: dict[str, list[float]] = {"crowded": [], "alone": []}
            for _ in range(rounds):
                for name, cluster in clusters.items():
                    results[name].append(produce_throughput(cluster.bootstrap_servers, BUSY, records, -1, 2))
        finally:
            alone.kill_all()
        crowded, single = statistics.median(results["crowded"]), statistics.median(results["alone"])
        self.values["throughput crowded"] = crowded
        self.values["throughput alone"] = single
        self.values["throughput ratio"] = crowded / single
        self.notes["throughput ratio"] = (f"{crowded:,.0f} vs {single:,.0f} records/s; rounds crowded "
                                          + ", ".join(f"{v:,.0f}" for v in results["crowded"]) + "; alone "
                                          + ", ".join(f"{v:,.0f}" for v in results["alone"]))

    def failover_and_restart(self, cluster: DevCluster, names: list[str], count: int) -> None:
        addresses = {i: n.client_address for i, n in cluster.nodes.items()}
        views = bulk.wait_for_views(addresses, names, 120, in_sync=True)
        led: dict[int, list[str]] = {}
        for name, view in views.items():
            led.setdefault(view.leader, []).append(name)
        victim = max(led, key=lambda i: len(led[i]))
        pending = set(led[victim])
        self.notes["failover"] = (f"{count} streams; killed node {victim} leading {len(pending)} "
                                  f"(leaders before: {', '.join(f'{i}: {len(v)}' for i, v in sorted(led.items()))})")
        survivors = {i: a for i, a in addresses.items() if i != victim}
        killed_at = time.monotonic()
        cluster.kill(victim)
        new_leaders: dict[str, int] = {}
        deadline = killed_at + 120
        while pending and time.monotonic() < deadline:
            known = {n: v.leader for n, v in bulk.stream_views(survivors, sorted(pending), 2.0).items()}
            if known:
                batches = {n: bulk.one_record_batch(b"failover") for n in known}
                acked = bulk.acknowledged(bulk.produce_each(survivors, batches, known, timeout_ms=2000))
                for name in acked:
                    new_leaders[name] = known[name]
                pending -= acked
            if pending:
                time.sleep(0.05)
        elapsed = time.monotonic() - killed_at
        self.values["failover"] = elapsed if not pending else float("inf")
        spread = {}
        for leader in new_leaders.values():
            spread[leader] = spread.get(leader, 0) + 1
        self.notes["failover"] += (f"; new leaders {', '.join(f'{i}: {v}' for i, v in sorted(spread.items()))}"
                                   + (f"; {len(pending)} never accepted a write" if pending else ""))
        restarted_at = time.monotonic()
        cluster.restart(victim, timeout_s=300)
        self.values["restart ready"] = time.monotonic() - restarted_at
        try:
            bulk.wait_for_views(addresses, names, 300, in_sync=True, poll_s=0.25)
            self.values["restart in sync"] = time.monotonic() - restarted_at
        except TimeoutError as error:
            self.values["restart in sync"] = float("inf")
            self.notes["restart in sync"] = str(error)


# ---------------------------------------------------------------------------------- table


def rows_for(counts: list[int], failover_at: int) -> list[tuple[str, str, str, float | None, bool]]:
    rows = []
    for count in counts:
        rows.append((f"create {count}", f"create {count:,} streams", "s", 15.0 if count == 1000 else None, False))
    for count in counts:
        rows.append((f"idle cpu max {count}", f"idle CPU per node, {count:,} streams (max)", "% core",
                     5.0 if count == 1000 else None, False))
    for count in counts:
        rows.append((f"rss max {count}", f"RSS per node, {count:,} streams (max)", "MiB",
                     1024.0 if count == 5000 else None, False))
    rows += [
        ("throughput ratio", f"acks=all throughput, 1 busy + {failover_at - 1:,} idle vs alone", "x", 0.9, True),
        ("throughput crowded", "  busy stream next to idle ones", "records/s", None, True),
        ("throughput alone", "  same stream alone", "records/s", None, True),
        ("failover", f"kill -9: every stream the node led accepts acks=all ({failover_at:,})", "s", 5.0, False),
        ("restart ready", f"restart of that node: listening ({failover_at:,})", "s", None, False),
        ("restart in sync", f"restart: every stream in sync on 3 replicas ({failover_at:,})", "s", 20.0, False),
    ]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="100 and 300 streams, short windows (a smoke run)")
    parser.add_argument("--counts", help="stream counts, comma-separated (default 100,1000,5000)")
    parser.add_argument("--failover-at", type=int, help="the count for throughput/failover/restart (default 1000)")
    parser.add_argument("--baseline", metavar="REF",
                        help="also measure the broker of git revision (or checkout directory) REF, first")
    parser.add_argument("--no-fsync", action="store_true", help="run the nodes with fsync off")
    parser.add_argument("--create-limit", type=float, default=600.0,
                        help="give up creating a count's streams after this many seconds (default 600)")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.counts.split(",")] if args.counts else ([100, 300] if args.quick else
                                                                          [100, 1000, 5000])
    failover_at = args.failover_at or (counts[-1] if args.quick else 1000)
    idle_s = 5.0 if args.quick else 15.0
    rounds = 1 if args.quick else 3
    records = 100_000 if args.quick else 300_000
    settings: dict[str, object] = {"log_level": "WARNING", "fsync": not args.no_fsync}
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="vdl-bench-streams-") as tmp_name:
        tmp = Path(tmp_name)
        builds: list[tuple[str, Path | None]] = []
        if args.baseline:
            given = Path(args.baseline)
            tree = given.resolve() if given.is_dir() else export_tree(args.baseline, tmp / "baseline-tree")
            builds.append((f"before ({args.baseline})", tree))
        builds.append(("after" if args.baseline else "this tree", None))
        for label, tree in builds:
            run = Run(label.split()[0], tree, settings, tmp)
            run.label = label
            runs.append(run)
            for count in counts:
                print(f"[{label}] {count} streams ...", flush=True)
                run.measure(count, idle_s, args.create_limit, count == failover_at, rounds, records)
    report = Report("bench_streams")
    fsync = "fsync off" if args.no_fsync else "fsync on"
    for key, title, unit, goal, higher in rows_for(counts, failover_at):
        last = runs[-1]
        if key not in last.values:
            continue
        note_parts = [f"{r.label}: {_fmt(r.values.get(key))}" for r in runs[:-1]]
        note_parts += [n for n in (last.notes.get(key),) if n]
        report.add(title, last.values[key], unit, goal, higher, note="; ".join(note_parts))
    report.rows[0].note = (report.rows[0].note + f"; 3 nodes, replication factor 3, {fsync}").lstrip("; ")
    for run in runs:  # the plot: idle CPU against the number of streams, the baseline dashed
        points = [(count, run.values[f"idle cpu max {count}"]) for count in counts
                  if f"idle cpu max {count}" in run.values]
        report.series.append(Series(f"idle CPU per node (max), {run.label}", points, "% of a core",
                                    baseline=run is not runs[-1], x_label="streams",
                                    title="idle CPU per node vs streams"))
    path = report.finish()
    _attach(path, runs, counts)
    return 0


def _fmt(value: float | None) -> str:
    return "-" if value is None else ("not reached" if value == float("inf") else f"{value:,.3g}")


def _attach(path: Path, runs: list[Run], counts: list[int]) -> None:
    """Every run's raw values next to the report's rows (the JSON keeps what the table folds)."""
    import json

    payload = json.loads(path.read_text())
    payload["counts"] = counts
    payload["runs"] = [{"label": r.label, "values": {k: (None if v == float("inf") else v)
                                                     for k, v in r.values.items()}, "notes": r.notes}
                       for r in runs]
    path.write_text(json.dumps(payload, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

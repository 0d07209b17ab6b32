"""`vdl demo --records 100000` end to end: exit code 0 within 5 minutes, its Delta table equals the
aggregates computed independently from the produced events (chispa), and no process survives it;
Ctrl-C while Spark runs stops everything too.

This is the one test that runs the whole stack (cluster + Spark) in a subprocess: it is slow
(~1 minute) and shares nothing with other tests on purpose.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.dev.delta_frames import delta_frame, oracle_frame
from tests.support.cluster import VDL_CLI, wait_until
from vdl_dev.delta_sink import history
from vdl_dev.workload import WorkloadConfig, events

REPO = Path(__file__).resolve().parents[2]
RECORDS = 100_000
SEED = 11


def demo_command() -> list[str]:
    """`vdl demo`, through the CLI's dispatch to vdl_dev."""
    return [*VDL_CLI, "demo"]


def _descendants(pid: int) -> set[int]:
    try:
        return {p.pid for p in psutil.Process(pid).children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()


def _spark_jvm_running(pid: int) -> bool:
    """Spark's JVM is among the demo's descendants (Spark is starting)."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return False
    for child in children:
        try:
            if child.name() == "java":
                return True
        except psutil.NoSuchProcess:
            continue
    return False


def _alive(pids: set[int]) -> set[int]:
    return {p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE}


@dataclass
class _Run:
    code: int
    output: str
    seen: set[int]  # every descendant pid seen while it ran
    exit_after_interrupt_s: float | None = None


def _run(args: list[str], timeout_s: float, interrupt_when: str | None = None) -> _Run:
    """Run the demo (with `interrupt_when`: SIGINT once that line was printed and Spark runs)."""
    process = subprocess.Popen([*demo_command(), *args, "--no-progress"], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert process.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    seen: set[int] = set()
    deadline, interrupted_at = time.monotonic() + timeout_s, None
    try:
        while process.poll() is None:
            seen |= _descendants(process.pid)
            if interrupt_when and interrupted_at is None and any(interrupt_when in line for line in lines):
                # Interrupt once Spark's JVM runs: the hardest moment to stop it.
                wait_until(lambda: _spark_jvm_running(process.pid) or process.poll() is not None, 60,
                           "Spark's JVM to start under the demo")
                seen |= _descendants(process.pid)
                process.send_signal(signal.SIGINT)
                interrupted_at = time.monotonic()
            assert time.monotonic() < deadline, f"the demo ran longer than {timeout_s} s:\n{''.join(lines)}"
            try:  # wake up on exit at once, else look at the descendants again shortly
                process.wait(0.2)
            except subprocess.TimeoutExpired:
                pass
    finally:
        if process.poll() is None:
            process.kill()
        reader.join(10)
    exited_at = time.monotonic()
    return _Run(process.returncode, "".join(lines), seen,
                None if interrupted_at is None else exited_at - interrupted_at)


@pytest.mark.timeout(330)
def test_demo_delta_table_equals_independent_aggregates(tmp_path: Path, spark: Any) -> None:
    from chispa import assert_df_equality

    started = time.monotonic()
    run = _run(["--records", str(RECORDS), "--seed", str(SEED), "--data-dir", str(tmp_path)], timeout_s=300)
    code, output, seen = run.code, run.output, run.seen
    assert code == 0, output
    assert time.monotonic() - started < 300
    assert "started a 3-node VDL cluster" in output, output
    assert re.search(r"^metrics \(Prometheus\): (http://127\.0\.0\.1:\d+/metrics ?){3}$", output, re.MULTILINE), output
    assert f"OK: {RECORDS:,} produced, {RECORDS:,} counted in Delta, {RECORDS:,} enriched, {RECORDS:,} in the raw " \
           "table" in output, output
    assert not _alive(seen), f"left behind: {_alive(seen)}\n{output}"
    state = json.loads((tmp_path / "cluster.json").read_text())
    assert not _alive({n["pid"] for n in state["nodes"].values()})

    delta = delta_frame(spark, tmp_path / "delta" / "orders_per_minute")
    # The history it printed: each commit with the rows it wrote (None where an engine's metric
    # names were not read), MERGEs with the rows they updated and inserted.
    changes = history(spark, tmp_path / "delta" / "orders_per_minute").collect()
    assert [r.operation for r in changes][-1] == "WRITE" and "MERGE" in [r.operation for r in changes], changes
    assert all(r.written is not None and (r.operation != "MERGE" or None not in (r.updated, r.inserted))
               for r in changes), changes
    for r in changes:
        assert re.search(rf"^\s*{r.version} .* {r.operation}\s+{r.updated}\s+{r.inserted}\s+{r.written} ", output,
                         re.MULTILINE), (r, output)
    oracle = oracle_frame(spark, (v for _, v in events(WorkloadConfig(records=RECORDS, seed=SEED))))
    assert_df_equality(delta, oracle, ignore_nullable=True)
    # The top windows it printed: the table's ten largest revenues, largest first.
    windows = oracle.collect()
    header = (f"top 10 of {len(windows)} rows of {tmp_path / 'delta' / 'orders_per_minute'} "
              f"(Delta version {max(r.version for r in changes)}), by revenue:")
    lines = output.splitlines()
    assert header in lines, output
    shown = lines[lines.index(header) + 2:lines.index(header) + 12]
    assert [Decimal(line.split()[-2]) for line in shown] == sorted((r.revenue for r in windows), reverse=True)[:10], \
        output
    raw = spark.read.format("delta").load(str(tmp_path / "delta" / "orders_raw")).select("offset", "value")
    rows = raw.collect()
    assert sorted(r.offset for r in rows) == list(range(RECORDS))
    assert sorted(bytes(r.value) for r in rows) == sorted(v for _, v in events(WorkloadConfig(records=RECORDS,
                                                                                             seed=SEED)))


@pytest.mark.timeout(200)
def test_ctrl_c_while_spark_runs_leaves_no_process(tmp_path: Path) -> None:
    run = _run(["--records", "20000", "--data-dir", str(tmp_path)], timeout_s=180, interrupt_when="starting Spark")
    code, output, seen = run.code, run.output, run.seen
    assert code == 130, output
    # Everything stops promptly: nothing (a send retrying against stopped brokers, say) holds the exit.
    assert run.exit_after_interrupt_s is not None and run.exit_after_interrupt_s < 60, \
        f"took {run.exit_after_interrupt_s} s after SIGINT\n{output}"
    assert "interrupted" in output
    assert len(seen) >= 2, output  # at least the broker and Spark's JVM were running
    try:
        wait_until(lambda: not _alive(seen), 10, "every process of the demo to exit")
    except AssertionError:
        raise AssertionError(f"left behind: {_alive(seen)}\n{output}") from None

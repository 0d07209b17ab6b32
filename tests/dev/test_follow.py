"""`vdl demo --follow`'s loop (vdl_dev/follow.py) for a few seconds on a real 3-node cluster and the
shared SparkSession: events arrive at a steady rate, every micro-batch reports its freshness from
its Delta commit, and after the drain the table equals the aggregates of exactly the events
produced, with every event enriched once. The CLI's argument checks run without a cluster."""

from __future__ import annotations

import re
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.dev.delta_frames import delta_frame, oracle_frame
from vdl_client import ClientSettings, VdlClient
from vdl_dev.delta_sink import newest_produced_ms
from vdl_dev.dev_cluster import DevCluster
from vdl_dev.follow import follow, summary_line
from vdl_dev.run import main
from vdl_dev.workload import WorkloadConfig, events

RATE = 2_000
FOLLOW_S = 4.0  # a micro-batch a second: a few batches with events, then the drain


@pytest.mark.timeout(300)
def test_follow_reports_freshness_per_batch_and_accounts_for_every_event(
        spark: Any, cluster: DevCluster, tmp_path: Path) -> None:
    from chispa import assert_df_equality

    with VdlClient(ClientSettings.from_bootstrap(cluster.bootstrap_servers)) as client:
        client.create_streams(["follow-orders", "follow-enriched"])
    config = WorkloadConfig(records=10**9, seed=5, start_ms=int(time.time() * 1000), events_per_second=RATE)
    lines: list[str] = []
    started = time.monotonic()
    report = follow(spark, cluster.bootstrap_servers, tmp_path, source="follow-orders", enriched="follow-enriched",
                    rate=RATE, trigger_s=1.0, duration_s=FOLLOW_S, stop=threading.Event(), say=lines.append,
                    config=config)
    assert time.monotonic() - started < 240

    # Produced at the steady rate for the whole run (at least the duration's worth), all counted once.
    assert report.produced >= RATE * FOLLOW_S * 0.5, report.produced
    assert report.ok, (report.produced, report.delta_orders, report.enriched_out)
    assert sum(b.events for b in report.batches) == report.produced

    # One line per batch, each with the batch's freshness: commit time minus its newest event's produce time.
    batch_lines = [line for line in lines if line.startswith("batch ")]
    assert len(batch_lines) == len(report.batches) >= 1, lines
    for times, line in zip(report.batches, batch_lines, strict=True):
        assert times.newest_produced_ms is not None and times.freshness_s is not None
        assert times.freshness_s == (times.committed_at_ms - times.newest_produced_ms) / 1000 > 0
        assert re.fullmatch(rf"batch {times.batch_id}: {times.events:,} events in {times.work_s:.2f} s \(enriched "
                            rf"write {times.enrich_s:.2f} s, window aggregates {times.aggregate_s:.2f} s, Delta MERGE "
                            rf"{times.delta_s:.2f} s\), {times.windows} windows merged; freshness "
                            rf"{times.freshness_s:.2f} s \(age of the newest event visible in Delta\)",
                            line), line
    # The run's summary: freshness percentiles and the median micro-batch's work (against the trigger).
    fresh = sorted(report.freshness)
    work = statistics.median(b.work_s for b in report.batches)
    assert summary_line(report, 12.0) == (
        f"follow: {report.produced:,} events in 12.0 s, {len(report.batches)} micro-batches; freshness p50 "
        f"{statistics.median(fresh):.2f} s, p99 {fresh[round(0.99 * (len(fresh) - 1))]:.2f} s, max {fresh[-1]:.2f} s; "
        f"a micro-batch's work p50 {work:.2f} s")
    table = tmp_path / "delta" / "orders_per_minute"
    assert newest_produced_ms(spark, table) == report.batches[-1].newest_produced_ms
    # The job's table is checkpointed every 100 commits, not Delta's 10 (vdl_dev/pipeline.py).
    assert spark.sql(f"DESCRIBE DETAIL delta.`{table}`").first().properties == {"delta.checkpointInterval": "100"}

    produced = WorkloadConfig(records=report.produced, seed=5, start_ms=config.start_ms, events_per_second=RATE)
    assert_df_equality(delta_frame(spark, table),
                       oracle_frame(spark, (v for _, v in events(produced))), ignore_nullable=True)


@pytest.mark.parametrize("argv", [["--follow", "--rate", "0"], ["--follow", "--trigger", "0"],
                                  ["--follow", "--duration", "-1"]])
def test_follow_arguments_are_checked(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "--rate, --trigger and --duration must be > 0" in capsys.readouterr().err

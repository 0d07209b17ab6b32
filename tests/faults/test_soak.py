"""The soak's short form (`make soak` runs the hour): about 30 s of the mixed workload on a
3-node cluster — producers of three clients, group committers over 20 groups, a Delta-tiered
stream, a reassignment and a rolling restart — then its checks. Asserted: nothing acknowledged is
lost, misplaced or (idempotent) doubled, group offsets read back as committed, the table matches
the log, and the samples stay within sane bounds. The long-life goals (slopes, restart-time
drift) are measured and reported by `make soak`, not asserted here. Spark is left out: a
SparkSession's start does not fit this test's budget (tests/spark covers commitOffsetsToGroup)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.soak.soak import SoakConfig, run_soak, table, write_outputs

pytestmark = pytest.mark.timeout(600)


def test_short_soak_loses_nothing(tmp_path: Path) -> None:
    # The reassignment comes at 10 s and the rolling restart at 15 s; the run ends once that is
    # done (it lasts past the 30 s). Each committer serves its share of the 20 groups 2 s each (a
    # round in 14 s), so every group has committed by then and most resumed once from their commit.
    config = SoakConfig(duration_s=30, results_dir=tmp_path / "soak", groups=20, committers_per_client=1,
                        group_session_s=2.0, rate_per_s=20.0, reassign_every_s=20, rolling_every_s=15,
                        sample_every_s=2.0, spark=False,
                        # Snapshots of the metadata group every 300 entries: the run's offset
                        # commits reach at least one (checked below). Its log is not truncated in
                        # so short a run: that deletes whole 4 MiB segments (`make soak` shows it).
                        settings={"metadata_snapshot_entries": 300, "leader_balance_interval_ms": 0})
    result = run_soak(config)
    json_path, png_path = write_outputs(result, config.results_dir)
    print(table(result))
    assert result.problems == []
    assert json_path.stat().st_size > 0 and png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(result.moves) >= 1
    assert {r.node for r in result.restarts if r.round == 1} == {1, 2, 3}
    counts = result.counts
    assert counts["acknowledged"] > 1000
    assert set(counts["acknowledged_per_producer"]) == {"mck", "mci", "mkp", "mak", "vkp", "vak", "tci"}
    assert counts["groups_committed"] == 20 and counts["group_commits"] > 100
    # Sane bounds, far from the goals: a node that leaks or hangs blows through these.
    assert all(s.rss_mb < 1500 and s.open_files < 1000 and s.threads < 500 for s in result.samples)
    assert all(r.ready_s < 60 and r.stop_s < 30 for r in result.restarts)
    assert {s.node for s in result.samples} == {1, 2, 3}
    attempt = max((config.results_dir / "work" / "cluster").glob("attempt*"), key=lambda p: int(p.name[7:]))
    snapshotted = {d.parent.parent.name for d in attempt.glob("node*/data/__metadata") if any(d.glob("snapshot-*.snap"))}
    assert snapshotted == {"node1", "node2", "node3"}

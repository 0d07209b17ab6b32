"""The soak's goal arithmetic (tests/soak/soak.py) on made-up samples: process lifetimes cut at
restarts and settled, slopes over the run and within a lifetime, the restart-time drift."""

from __future__ import annotations

import pytest

from tests.soak.soak import Restart, Sample, SoakConfig, SoakResult, evaluate_goals, settled

pytestmark = pytest.mark.unit


def leaking_node() -> SoakResult:
    """Node 1 sampled every 10 s for 20 minutes, its process started again at 600 s and 1100 s
    (t + stop_s + ready_s); its RSS grows 100 MB per hour within each process, from 100 MB, and
    its metadata stays at 1 MB."""
    restarts = [Restart(1, 1, 597.0, 1.0, 2.0, 0.5), Restart(2, 1, 1096.9, 1.0, 2.1, 0.5)]
    samples = []
    for t in range(0, 1200, 10):
        start = 0 if t < 600 else 600 if t < 1100 else 1100
        samples.append(Sample(float(t), 1, 100 + (t - start) / 36, 40, 20, 1.0, {}))
    return SoakResult(config={}, samples=samples, restarts=restarts)


def test_lifetimes_cut_at_restarts_leave_out_warm_up_and_settling() -> None:
    lives = settled(leaking_node(), 1, warm=0.0)
    # The first process started before the workload: the warm-up covers its settling.
    assert [[s.t for s in life] for life in lives] == [
        [float(t) for t in range(0, 600, 10)], [float(t) for t in range(620, 1100, 10)],
        [float(t) for t in range(1120, 1200, 10)]]
    assert [s.t for s in settled(leaking_node(), 1, warm=700.0)[0]][:2] == [700.0, 710.0]


def test_a_leak_within_each_process_misses_the_goal_even_when_restarts_hide_it() -> None:
    goals = evaluate_goals(leaking_node(), SoakConfig(duration_s=1200, warmup_fraction=0.0))
    assert goals["metadata_mb"] == {"run_pct_per_hour": {1: 0.0}, "life_pct_per_hour": {1: 0.0}, "worst": 0.0,
                                    "met": True}
    rss = goals["rss_mb"]
    # 100 MB/h against the settled samples' mean, 100 + (60*295 + 48*255 + 8*55) / 116 / 36 MB.
    assert rss["life_pct_per_hour"] == {1: 93.22}
    assert abs(rss["run_pct_per_hour"][1]) < rss["life_pct_per_hour"][1]
    assert rss["met"] is False
    assert goals["restart_ready"] == {"first_round_s": 2.0, "last_round_s": 2.1, "change_pct": 5.0, "met": True}

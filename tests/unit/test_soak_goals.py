"""The soak's goal arithmetic (tests/soak/soak.py) on made-up samples: process lifetimes cut at
restarts and settled; RSS and open files compared at the same age across lifetimes and within a
lifetime past its warm-up; the metadata sawtooth's envelope; each node's last restarts against
its first; the goal table."""

from __future__ import annotations

import math
from collections.abc import Callable
from types import SimpleNamespace

import pytest

from tests.faults.workload import Acks
from tests.soak.soak import (
    Restart,
    Sample,
    SoakConfig,
    SoakResult,
    Trend,
    check_stream,
    evaluate_goals,
    lost_and_doubled,
    restart_drift,
    settled,
    shared_trend,
    verdict,
)

pytestmark = pytest.mark.unit

HOUR = 3600


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


def test_shared_trend_fits_one_slope_to_series_at_different_levels() -> None:
    # Two series at 100 and 300, both rising exactly 1 per hour: 1 / 180.5 of their mean.
    a = [(0.0, 100.0), (HOUR / 2, 100.5), (HOUR, 101.0)]
    b = [(0.0, 300.0), (HOUR, 301.0)]
    trend = shared_trend([a, b])
    assert (trend.points, trend.series, trend.margin) == (5, 2, 0.0)
    assert trend.pct_per_hour == round(1 / (902.5 / 5) * 100, 2)
    # A single series of two points leaves no degree of freedom: the margin is unknown.
    assert math.isinf(shared_trend([b]).margin)
    assert shared_trend([[(0.0, 1.0)]]) == Trend(0.0, math.inf, 0, 0)


def test_verdict_is_unclear_when_the_interval_straddles_the_bound() -> None:
    assert [verdict(3.0, 1.5, 5.0), verdict(-3.0, 2.5, 5.0), verdict(8.0, 2.0, 5.0), verdict(-8.0, 2.0, 5.0),
            verdict(0.0, math.inf, 5.0)] == ["met", "unclear", "missed", "missed", "unclear"]


def soak(value: Callable[[int, int, float], float], files: Callable[[int, int, float], int] = lambda n, i, a: 50,
         delta: Callable[[int, int, float], bool] = lambda n, i, a: False,
         metadata: Callable[[float], float] = lambda t: 1.0, ready: Callable[[int, int], float] = lambda n, i: 2.0,
         streams: Callable[[float], dict[str, float]] = lambda t: {},
         cache: Callable[[int, int, float], float] = lambda n, i, a: -1.0,
         sockets: Callable[[int, int, float], int] = lambda n, i, a: -1) -> SoakResult:
    """An hour on 3 nodes sampled every 10 s; a rolling restart every 600 s (node n restarted
    20*(n-1) s into the round, 1 s to stop, `ready(node, round)` s to ready); the first processes
    started 60 s before the workload. `value(node, life, age)` is the RSS of the node's `life`-th
    process at `age` seconds after it started; `cache(node, life, age)` what its tail caches hold
    (MB; -1: not sampled); `sockets(node, life, age)` how many of its `files` are sockets (-1: not
    counted)."""
    restarts = [Restart(r, n, 600.0 * r + 20 * (n - 1), 1.0, ready(n, r), 0.5, 1.5 * ready(n, r), 1.0)
                for r in range(1, 6) for n in (1, 2, 3)]
    samples = []
    for n in (1, 2, 3):
        starts = [-60.0] + [r.t + r.stop_s for r in restarts if r.node == n]
        for t in range(0, HOUR, 10):
            life = max(i for i, s in enumerate(starts) if s <= t)
            age = t - starts[life]
            samples.append(Sample(float(t), n, value(n, life, age), files(n, life, age), 30, metadata(float(t)),
                                  streams(float(t)),
                                  pid=100 * n + life, age_s=age, rss_anon_mb=value(n, life, age) / 2,
                                  tier_writer=delta(n, life, age), load1=2.0, cache_mb=cache(n, life, age),
                                  sockets=sockets(n, life, age)))
    return SoakResult(config={}, samples=samples, restarts=restarts,
                      counts={"acknowledged": 1000, "lost_acknowledged": {"a": 0, "b": 0},
                              "idempotent_stored_twice": {"a": 0}})


def goals_of(result: SoakResult) -> dict[str, str]:
    goals = evaluate_goals(result, SoakConfig(duration_s=HOUR))
    return {row["goal"].split(" (")[0]: row["verdict"] for row in goals["table"]}


def warming(node: int, life: int, age: float) -> float:
    """Every process rises from 150 to 250 MB over its first 200 s, then stays (with a 1 MB
    wobble): what a young process does, not a leak."""
    return 150 + 100 * min(age, 200.0) / 200 + (age // 10 % 2)


def test_a_warm_up_after_each_restart_is_not_growth() -> None:
    goals = evaluate_goals(soak(warming), SoakConfig(duration_s=HOUR))
    assert goals["reference_age_s"] == 549.0  # node 3's last process: restarted 41 s into the last round
    table = {row["goal"].split(" (")[0]: row["verdict"] for row in goals["table"]}
    assert table == {"RSS flat within 5 %/h over the soak": "met", "RSS flat within 5 %/h within a process": "met",
                     "open files flat within 5 %/h over the soak": "met",
                     "open files flat within 5 %/h within a process": "met",
                     "metadata disk flat within 5 %/h after its first truncation": "met",
                     "restart time": "met", "restart CPU time": "met", "0 acknowledged records lost": "met"}
    # Lifetimes after the warm-up (540 s), each compared at ages 366-549 s: 5 per node.
    assert goals["rss_mb"]["same_age"]["points"] == 15
    assert {life["value"] for life in goals["rss_mb"]["same_age_lives"]} == {250.0, 250.5}  # the wobble


def test_a_leak_within_each_process_misses_even_when_restarts_hide_it_across_the_soak() -> None:
    table = goals_of(soak(lambda n, i, a: warming(n, i, a) + a / 36))  # +100 MB an hour of a process's life
    assert table["RSS flat within 5 %/h within a process"] == "missed"
    assert table["RSS flat within 5 %/h over the soak"] == "met"


def test_growth_carried_from_one_process_to_the_next_misses_across_the_soak() -> None:
    # Each new process holds 15 MB more than the one before (state it loads at start): 1.5 MB/min.
    table = goals_of(soak(lambda n, i, a: warming(n, i, a) + 15 * i, files=lambda n, i, a: 50 + 5 * i))
    assert table["RSS flat within 5 %/h over the soak"] == "missed"
    assert table["RSS flat within 5 %/h within a process"] == "met"
    assert table["open files flat within 5 %/h over the soak"] == "missed"


def test_open_files_are_judged_without_the_sockets_which_are_judged_apart() -> None:
    # 30 files held all along; clients' connections rising by 20 over each process's life (what
    # committers reconnecting after a restart do) read as growth of the open descriptors.
    def connections(n: int, i: int, a: float) -> int:
        return 10 + int(20 * a / 600)

    table = goals_of(soak(warming, files=lambda n, i, a: 30 + connections(n, i, a), sockets=connections))
    assert table["open files other than sockets flat within 5 %/h within a process"] == "met"
    assert table["open files other than sockets flat within 5 %/h over the soak"] == "met"
    assert table["open sockets flat within 5 %/h within a process"] == "missed"
    # Not counted (an older soak.json): all the descriptors, sockets included, are judged together.
    table = goals_of(soak(warming, files=lambda n, i, a: 30 + connections(n, i, a)))
    assert table["open files flat within 5 %/h within a process"] == "missed"
    assert "open sockets flat within 5 %/h within a process" not in table


def test_the_tiering_libraries_following_a_leadership_are_not_growth() -> None:
    # The later lifetimes of node 1 lead the tiered stream from age 300 s: 80 MB more.
    def tiering(n: int, i: int, a: float) -> bool:
        return n == 1 and i >= 3 and a >= 300

    table = goals_of(soak(lambda n, i, a: warming(n, i, a) + 80 * tiering(n, i, a), delta=tiering))
    assert table["RSS flat within 5 %/h over the soak"] == "met"
    assert table["RSS flat within 5 %/h within a process"] == "met"


def filling(seconds: float) -> Callable[[float], dict[str, float]]:
    """Two streams whose directories grow to their 2 MB retention in `seconds` (90 % of it at
    0.9 x `seconds`: the fill time counted), then stay."""
    return lambda t: {"main": 2.0 * min(t, seconds / 2) / (seconds / 2), "tiered": 2.0 * min(t, seconds) / seconds}


def caching(fill: float) -> Callable[[int, int, float], float]:
    """Every process's caches fill for `fill` seconds after its start (100 MB), then stay."""
    return lambda n, i, a: 150 + 100 * min(a, fill) / fill + (a // 10 % 2)


def test_caches_filling_longer_than_half_a_life_are_warm_up_measured_from_the_stream_directories() -> None:
    # The caches fill for 360 s after each start, longer than half the reference age (274 s):
    # that long, as the streams' directories took to reach their retention at the start.
    goals = evaluate_goals(soak(caching(360), streams=filling(400)), SoakConfig(duration_s=HOUR))
    assert (goals["cache_fill_s"], goals["process_warmup_s"]) == (360.0, 360.0)
    table = {row["goal"].split(" (")[0]: row["verdict"] for row in goals["table"]}
    assert table["RSS flat within 5 %/h within a process"] == "met"
    # Without the directories' fill time, the same processes read as growing within a process.
    assert goals_of(soak(caching(360)))["RSS flat within 5 %/h within a process"] == "missed"
    # A leak past the fill still misses.
    leak = goals_of(soak(lambda n, i, a: caching(360)(n, i, a) + a / 36, streams=filling(400)))
    assert leak["RSS flat within 5 %/h within a process"] == "missed"
    # A fill longer than 3/4 of a life leaves the last quarter counted, not nothing.
    goals = evaluate_goals(soak(caching(360), streams=filling(3000)), SoakConfig(duration_s=HOUR))
    assert goals["process_warmup_s"] == round(goals["reference_age_s"] * 3 / 4, 1)


def cache_filling(fill: float) -> Callable[[int, int, float], float]:
    """Tail caches (vdl_tail_cache_bytes) growing to 12 MB over `fill` s after each start (what the
    logs hold), then at 12 MB give or take a retention step."""
    return lambda n, i, a: 12.0 * min(a, fill) / fill - 0.5 * (a // 10 % 2)


def test_each_process_is_measured_past_its_own_tail_caches_fill() -> None:
    # Each process warms up for 200 s (warming), and its tail caches fill for 500 s, past 3/4 of
    # the reference age (412 s): each lifetime's slope starts at its own caches' fill (its first
    # sample holding at least the median of what they hold from then on), not at half the
    # reference age nor a cap.
    def rss(fill: float, leak: float = 0.0) -> Callable[[int, int, float], float]:
        return lambda n, i, a: warming(n, i, a) + cache_filling(fill)(n, i, a) + leak * a

    goals = evaluate_goals(soak(rss(500), cache=cache_filling(500)), SoakConfig(duration_s=HOUR))
    assert goals["cache_measured"] is True
    # Each life's first sample holding the median of what it holds from then on: from age 500 s
    # (every other sample 0.5 MB lower, the retention step; ages offset by the restart times),
    # 489 s in the median life (12 MB there, 11.5 the sample after: the median of the rest).
    assert goals["cache_fill_s"] == 489.0
    assert goals["tail_cache"]["held_mb_when_full"] == 11.74
    table = {row["goal"].split(" (")[0]: row["verdict"] for row in goals["table"]}
    assert table["RSS flat within 5 %/h within a process"] == "met"
    # Unsampled caches (an older soak.json): from half the reference age, the fill reads as growth.
    assert goals_of(soak(rss(500)))["RSS flat within 5 %/h within a process"] == "missed"
    # A leak past the fill still misses (+36 MB an hour of a process's life).
    leak = goals_of(soak(rss(500, leak=0.01), cache=cache_filling(500)))
    assert leak["RSS flat within 5 %/h within a process"] == "missed"
    # Caches still filling at each life's end: never met.
    late = goals_of(soak(rss(700), cache=cache_filling(700)))
    assert late["RSS flat within 5 %/h within a process"] != "met"


def sawtooth(growth_mb_per_cycle: float, period: float = 600) -> Callable[[float], float]:
    """Grows 0.4 MB a minute from 1 MB, truncated back every `period` s (the first at 900 s)."""
    def size(t: float) -> float:
        cycle = 0 if t < 900 else 1 + int((t - 900) // period)
        since = t if t < 900 else (t - 900) % period
        return 1.0 + growth_mb_per_cycle * cycle + since / 150
    return size


def test_the_metadata_sawtooth_is_judged_by_its_envelope_after_the_first_truncation() -> None:
    flat = evaluate_goals(soak(warming, metadata=sawtooth(0.0)), SoakConfig(duration_s=HOUR))["metadata_mb"]
    assert flat["measure"] == "peaks and troughs after the first truncation"
    assert flat["1"]["first_truncation_t"] == 900.0 and flat["1"]["truncations"] == 5
    assert flat["1"]["peaks_mb"] == [4.933] * 4 and flat["1"]["troughs_mb"] == [1.0] * 4
    assert flat["verdict"] == "met" and flat["trend"]["pct_per_hour"] == 0.0
    # Each cycle 0.3 MB higher (a state that is never truncated): the peaks' slope gives it away.
    growing = evaluate_goals(soak(warming, metadata=sawtooth(0.3)), SoakConfig(duration_s=HOUR))["metadata_mb"]
    assert growing["verdict"] == "missed" and growing["trend"]["pct_per_hour"] > 20
    # Only two cycles after the first truncation: a growth cannot be told from the sampling phase.
    two = evaluate_goals(soak(warming, metadata=sawtooth(0.3, 1100)), SoakConfig(duration_s=HOUR))["metadata_mb"]
    assert two["1"]["peaks_mb"] == [8.567, 8.867] and two["verdict"] == "unclear"
    # Never truncated: every sample after the warm-up, a straight growth.
    never = evaluate_goals(soak(warming, metadata=lambda t: 1 + t / 150), SoakConfig(duration_s=HOUR))["metadata_mb"]
    assert never["1"]["first_truncation_t"] is None and never["verdict"] == "missed"


def test_restart_time_compares_each_nodes_last_restarts_with_its_first_by_median() -> None:
    # Five rounds: node n takes 2, 2, 9 (one slow outlier), 2.1, 2.1 s; the medians of the first
    # two and the last two of every node: 2.0 -> 2.1 s.
    times = {1: 2.0, 2: 2.0, 3: 9.0, 4: 2.1, 5: 2.1}
    result = soak(warming, ready=lambda n, r: times[r])
    drift = restart_drift(result.restarts, "ready_s")
    assert (drift["first_s"], drift["last_s"], drift["change_pct"], drift["verdict"]) == (2.0, 2.1, 5.0, "met")
    assert drift["per_node"]["3"] == {"first_s": 2.0, "last_s": 2.1}
    assert restart_drift(soak(warming, ready=lambda n, r: 2.0 + 0.2 * r).restarts, "cpu_s")["verdict"] == "missed"
    assert restart_drift(result.restarts[:2], "ready_s")["verdict"] == "n/a"  # one restart per node


def test_restart_time_goal_is_one_sided_faster_meets_it_and_more_than_10_percent_slower_misses() -> None:
    def drift(last: float) -> dict:
        times = {1: 2.0, 2: 2.0, 3: 2.0, 4: last, 5: last}
        return restart_drift(soak(warming, ready=lambda n, r: times[r]).restarts, "ready_s")

    faster = drift(1.0)
    assert (faster["change_pct"], faster["verdict"], faster["met"]) == (-50.0, "met", True)
    assert drift(2.2)["verdict"] == "met"  # exactly 1.10 x the start
    assert (drift(2.3)["change_pct"], drift(2.3)["verdict"]) == (15.0, "missed")
    goals = evaluate_goals(soak(warming, ready=lambda n, r: 3.0 - 0.2 * r), SoakConfig(duration_s=HOUR))
    rows = [row for row in goals["table"] if row["goal"].startswith("restart time")]
    assert [(row["goal"], row["verdict"]) for row in rows] == \
        [("restart time (start to ready) at the end at most 10 % above the start (end <= 1.10 x start; median of "
          "each node's last vs first restarts)", "met")]
    assert rows[0]["measured"].startswith("2.70 s -> 2.10 s (-22.2 %)")


def test_a_lost_record_misses_the_goal() -> None:
    result = soak(warming)
    result.counts["lost_acknowledged"] = {"a": 0, "b": 1}
    assert goals_of(result)["0 acknowledged records lost"] == "missed"
    del result.counts["lost_acknowledged"]
    assert goals_of(result)["0 acknowledged records lost"] == "n/a"


def test_records_retention_deleted_before_they_were_read_are_unchecked_and_the_rest_checked() -> None:
    acks = Acks()
    for offset in range(10):
        acks.add("p", offset, b"p-%d" % offset)
    producers = [SimpleNamespace(client="p", idempotent=True)]
    log: dict[int, bytes | None] = {o: b"p-%d" % o for o in range(10) if not 3 <= o < 6}  # 3..5 deleted unread
    log[8] = b"other"
    missed = [(3, 6)]
    lost, doubled = lost_and_doubled(log, acks, producers, missed)  # type: ignore[arg-type]
    assert (lost, doubled) == (1, 0)  # offset 8 only
    problems = check_stream("s", 10, log, acks, producers, missed)  # type: ignore[arg-type]
    assert not any("holes" in p for p in problems) and any("8" in p for p in problems)
    del log[7]  # a hole outside the deleted range is one
    assert any("1 holes below 10 (first 7)" in p for p in check_stream("s", 10, log, acks, producers, missed))  # type: ignore[arg-type]
    assert lost_and_doubled(log, acks, producers)[0] == 5  # type: ignore[arg-type]  # without the range: 3, 4, 5, 7, 8

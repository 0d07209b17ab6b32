"""Clock drift and the read lease (RaftConfig.max_clock_drift, vdl_broker.raft.clock).

In the many-groups simulator every node's clock runs at its own rate. Within the bound (10%:
rates drawn in [1, 1.1]) no leader ever holds its read lease -- by its own clock, as the driver
measures it -- while another leader exists: no stale read. Far beyond it (followers' clocks six
times as fast as the leader's) the simulator finds a leader still serving under its lease after another was elected, and
the leaders' drift monitors flag those followers; with the margin raised to cover that drift the
same run is safe again.

More seeds: VDL_DRIFT_SEEDS=N (default 60).
"""

from __future__ import annotations

import os

import pytest
from multi_sim import MultiCluster
from raft_sim import InvariantError
from test_quiescence import TICK, E, run_seed

from vdl_broker.raft import MessageType, RaftConfig, Role
from vdl_broker.raft.clock import Drift, DriftMonitor


def _seeds() -> list[int]:
    return list(range(int(os.environ.get("VDL_DRIFT_SEEDS", 60))))


@pytest.mark.parametrize("chunk", range(3))
def test_no_stale_read_lease_with_clocks_within_the_bound(chunk: int) -> None:
    for seed in _seeds()[chunk::3]:
        run_seed(seed, 1200, drift=0.1)


def _cut_off_slow_leader(margin: float, follower_rate: float) -> tuple[MultiCluster, list[Drift]]:
    """Node 1 leads with the slowest clock; 2 and 3 tick `follower_rate` times as fast. After a
    while of heartbeats (the leaders' drift monitors watching), 1 is cut off while its lease is
    fresh: 2 and 3 elect a leader as soon as their own clocks let them."""
    c = MultiCluster(3, 1, seed=3, config=lambda i: RaftConfig(election_ticks=E, quiesce_after_heartbeats=0,
                                                               max_clock_drift=margin))
    c.set_tick_rates({1: 1.0, 2: follower_rate, 3: follower_rate})
    group = c.groups[0]
    # Times in tick intervals of the leader's clock.
    monitors = {i: DriftMonitor(1.0, margin, window_s=100.0, sample_every_s=1.0) for i in c.ids}
    flagged: list[Drift] = []
    deliver = group.deliver

    def watch(m):  # the leader's driver: the follower's tick count against the leader's clock
        node = group.nodes[m.to].node
        if m.type == MessageType.HEARTBEAT_RESPONSE and m.index >= 0 and node is not None and node.role == Role.LEADER:
            found = monitors[m.to].observe(m.sender, m.commit, group.clock(m.to) / TICK)
            if found is not None:
                flagged.append(found)
        deliver(m)

    group.deliver = watch  # type: ignore[method-assign]
    group.node(1).campaign()
    group.process(1)
    assert c.run_until(lambda: c.leader(0) == 1, 20 * TICK)
    c.run(40 * E * TICK)  # heartbeats long enough for the monitors' window
    # Cut 1 off right after a heartbeat round answered by everyone: its lease is as fresh as it gets.
    assert c.run_until(lambda: group.node(1).read_lease_tick() == group.node(1).ticks, 5 * TICK)
    c.partition({1}, {2, 3})
    c.run(4 * E * TICK)
    return c, flagged


def test_clocks_beyond_the_bound_break_the_lease() -> None:
    with pytest.raises(InvariantError, match="still holds its read lease"):
        _cut_off_slow_leader(margin=0.1, follower_rate=6.0)


def test_the_drift_monitor_flags_clocks_beyond_the_bound_in_the_simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MultiCluster, "_check_leases", lambda self: None)  # watch the monitors only
    _, flagged = _cut_off_slow_leader(margin=0.1, follower_rate=6.0)
    assert {d.peer for d in flagged} == {2, 3} and all(d.rate > 5 for d in flagged)
    _, within = _cut_off_slow_leader(margin=0.1, follower_rate=1.08)
    assert within == []


def test_a_margin_covering_the_drift_keeps_the_lease_safe() -> None:
    c, flagged = _cut_off_slow_leader(margin=0.9, follower_rate=1.8)
    assert flagged == [] and c.leader(0) in (2, 3)  # a new leader, and no overlap with 1's lease


def test_the_drift_monitor() -> None:
    monitor = DriftMonitor(interval_s=0.1, max_drift=0.1, window_s=30.0)
    # A peer ticking 5% fast: fine. Sampled once a second for two minutes.
    assert all(monitor.observe(2, int(t * 10.5), float(t)) is None for t in range(120))
    # 20% fast: flagged once, with its rate.
    found = [d for t in range(120) if (d := monitor.observe(3, int(t * 12), float(t))) is not None]
    assert len(found) == 1 and found[0].peer == 3 and 1.15 < found[0].rate < 1.21
    # Late ticks (a loaded node ticks less often, never more): not drift.
    assert all(monitor.observe(4, int(t * 6), float(t)) is None for t in range(120))
    # A restart (its count starts over) forgets what was measured.
    assert monitor.observe(3, 0, 200.0) is None and monitor.observe(3, 10, 201.0) is None

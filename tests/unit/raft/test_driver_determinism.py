"""The harness replays a seeded scenario exactly: the same messages at the same virtual times on
every run (tests/support/raft_groups.py), so a failure found on a seed is found again on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.raft_groups import Cluster, Delivery, produce, run

pytestmark = pytest.mark.unit


async def scenario(c: Cluster) -> None:
    """An election, writes, the leader cut off and a new one elected, lossy links, a heal."""
    leader = await c.leader()
    await produce(c, leader, [f"a{i}".encode() for i in range(20)])
    old = leader.node_id
    c.network.isolate(old)
    new = await c.leader(exclude=old)
    c.network.heal()
    c.network.drop_rate = 0.2
    await produce(c, new, [f"b{i}".encode() for i in range(20)])
    c.network.drop_rate = 0.0
    await c.all_committed(new.last_index)


def trace(tmp_path: Path, seed: int) -> list[Delivery]:
    return run(tmp_path, scenario, seed=seed).network.trace


def test_a_seeded_scenario_delivers_the_same_messages_at_the_same_virtual_times(tmp_path: Path) -> None:
    first = trace(tmp_path / "first", seed=7)
    second = trace(tmp_path / "second", seed=7)
    assert second == first
    # The scenario exercised what it says: elections in two terms, replication, lost appends.
    kinds = {d.type for d in first}
    assert {"PRE_VOTE", "VOTE", "APPEND", "APPEND_RESPONSE", "HEARTBEAT", "HEARTBEAT_RESPONSE"} <= kinds
    assert len({d.term for d in first if d.type == "VOTE"}) == 2
    # Another seed draws other election timeouts and losses: another run.
    assert trace(tmp_path / "other", seed=8) != first

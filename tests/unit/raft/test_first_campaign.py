"""A new group's chosen first leader (raft/group.py campaign_first) is elected without waiting
an election timeout, also when the other replicas open their group only later.

Real RaftHosts and RaftGroups on a virtual clock (tests/support/raft_groups.py), with election
timeouts of 2-4 s so that an election before 2 s can only be the first campaign's.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support import virtual_time
from tests.support.raft_groups import TICK, Cluster
from vdl_broker.raft.config import RaftConfig
from vdl_broker.raft.group import FIRST_CAMPAIGN_DELAY_S, campaign_first

SLOW_ELECTIONS = RaftConfig(election_ticks=100, tick_interval_s=TICK)  # 2-4 s of virtual time


def elected(tmp_path: Path, late: float) -> tuple[int, float]:
    """(leader id, virtual seconds from node 1's start) when nodes 2 and 3 start `late` s after it."""
    cluster = Cluster(tmp_path, 3, raft_config=SLOW_ELECTIONS)
    outcome: list[tuple[int, float]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        await cluster.start_node(1)
        campaign_first(cluster.group(1))
        await asyncio.sleep(late)
        await cluster.start_node(2)
        await cluster.start_node(3)
        try:
            leader = await cluster.leader(timeout=10.0)
            outcome.append((leader.node_id, loop.time() - start))
        finally:
            await cluster.close()
    virtual_time.run(main())
    return outcome[0]


def test_the_chosen_replica_leads_before_any_election_timeout(tmp_path: Path) -> None:
    leader, seconds = elected(tmp_path, late=0.0)
    assert leader == 1
    assert FIRST_CAMPAIGN_DELAY_S <= seconds < 3 * FIRST_CAMPAIGN_DELAY_S  # the first campaign's: the next asks at 3x


def test_it_asks_again_while_the_others_are_not_there_yet(tmp_path: Path) -> None:
    # The first pre-votes find nobody; a later one wins, still well before an election timeout.
    leader, seconds = elected(tmp_path, late=2.5 * FIRST_CAMPAIGN_DELAY_S)
    assert leader == 1
    assert seconds < 2.0


def test_it_keeps_asking_for_others_that_open_their_replicas_late(tmp_path: Path) -> None:
    # Half a second late (a node busy opening many replicas): the doubling waits still ask in time.
    leader, seconds = elected(tmp_path, late=0.5)
    assert leader == 1
    assert 0.5 <= seconds < 2.0

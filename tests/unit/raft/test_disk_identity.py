"""A node that lost its whole data directory, in the deterministic simulator: nothing on its disk
says it held the group, so at start it asks its peers what they hold (vdl_broker.cluster.identity,
rule 1) and starts recovering when anyone holds something. The issue's scenario: acknowledged
writes on the leader and one follower, the third replica lagging; the follower's disk lost while
the leader (the only intact copy) is down.

Each scenario also runs without the peers' answer (the node starts as a brand-new one, which is
what it looked like before): it must break an invariant, showing the defect.
"""

from __future__ import annotations

import pytest
from raft_sim import Cluster, InvariantError, NetConfig
from test_raft_corruption import ELECTION, _intact_copy_back, elect

from vdl_broker.cluster.identity import Formation, formation, may_have_been_lost


def _disk_lost_while_intact_copy_down(ask_peers: bool) -> Cluster:
    """1 leads; 3 is cut off (behind); entries commit on {1, 2}; 1 goes down; 2 loses its disk
    and restarts next to 3."""
    c = Cluster(3, 7)
    elect(c, 1)
    c.propose(1, b"before")
    c.drain()
    c.partition({1, 2}, {3})
    for k in range(5):
        c.propose(1, b"acked-%d" % k)
    c.drain()
    committed = c.node(1).commit_index
    assert c.node(2).last_index == committed > c.node(3).last_index
    c.crash(1)
    c.lose_disk(2)
    c.heal()
    if not ask_peers:
        c.nodes[2].lost_disk = False  # what a lost data directory looked like: a brand-new node
    c.restart(2)
    c.run(3 * ELECTION)  # 2 and 3 alone: no leader may be elected without 1's entries
    assert c.leader() is None
    return c


def test_a_node_that_lost_its_disk_votes_for_no_one_until_given_the_log_back() -> None:
    c = _disk_lost_while_intact_copy_down(ask_peers=True)
    assert c.node(2).recovering  # 3 holds a log: the cluster exists, 2's empty log may be a lost one
    c = _intact_copy_back(c)
    assert c.run_until(lambda: not c.node(2).recovering, ELECTION)  # at the next commit it learns
    assert c.nodes[2].damage is None
    assert c.committed_log(2) == c.committed_log(1) == c.committed_log(3)


def test_without_asking_the_peers_the_scenario_loses_committed_entries() -> None:
    with pytest.raises(InvariantError, match="lacks committed entry|lost or changed|applied"):
        _disk_lost_while_intact_copy_down(ask_peers=False)


def test_a_node_waits_while_no_peer_holding_a_log_has_answered() -> None:
    """Both peers down: nobody tells 2 whether the cluster exists, so it does not start."""
    c = Cluster(3, 8)
    elect(c, 1)
    c.propose(1, b"x")
    c.drain()
    c.crash(1)
    c.crash(3)
    c.lose_disk(2)
    c.restart(2)
    c.run(ELECTION)
    assert c.probing() == [2] and c.nodes[2].node is None
    c.restart(3)  # 3 holds the log: 2 starts, recovering
    c.run(10)
    assert c.probing() == [] and c.node(2).recovering


@pytest.mark.parametrize("seed", range(10))
def test_a_new_cluster_forms_once_every_node_has_answered(seed: int) -> None:
    """Every node starts empty and asks the others: all empty, so all start as usual, elect a
    leader and commit, under loss, duplication and delays."""
    c = Cluster(3, seed, net=NetConfig(loss=0.1, duplicate=0.1, max_delay=8), probe_at_start=True)
    assert c.run_until(lambda: c.leader() is not None, 10 * ELECTION)
    assert not any(c.node(i).recovering for i in c.ids)
    leader = c.leader()
    assert leader is not None
    index = c.propose(leader, b"first")
    assert c.run_until(lambda: all(c.nodes[i].applied >= index for i in c.ids), 10 * ELECTION)


def test_a_cluster_does_not_form_without_every_node() -> None:
    """Node 3 never starts: 1 and 2 cannot tell a new cluster from one whose log only 3 holds."""
    c = Cluster(3, 4, probe_at_start=True)
    c.crash(3)
    c.run(5 * ELECTION)
    assert c.leader() is None and c.probing() == [1, 2]
    c.restart(3)
    assert c.run_until(lambda: c.leader() is not None, 5 * ELECTION)


def test_formation_verdicts() -> None:
    assert formation([2, 3], {2: 0, 3: 0}) is Formation.FORMING
    assert formation([2, 3], {2: 0}) is Formation.WAITING
    assert formation([2, 3], {3: 12}) is Formation.EXISTING  # one holding a log is enough
    assert formation([], {}) is Formation.FORMING  # a cluster of one


def test_replicas_of_streams_older_than_the_directory_may_have_been_lost() -> None:
    assert may_have_been_lost(created_index=10, complete_from=None)  # still catching up
    assert may_have_been_lost(created_index=10, complete_from=11)
    assert not may_have_been_lost(created_index=12, complete_from=11)

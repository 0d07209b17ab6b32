"""raft/reconfigure.py: the steps from a configuration to a target, and that following them in
the simulator always reaches it with every step one the core accepts."""

from __future__ import annotations

import random

import pytest
from raft_sim import Cluster

from vdl_broker.raft import ConfState, PeerStatus, ProgressState, Role
from vdl_broker.raft.reconfigure import next_step


def status(match: dict[int, int], dead: tuple[int, ...] = ()) -> dict[int, PeerStatus]:
    return {n: PeerStatus(m, m + 1, ProgressState.REPLICATE, n not in dead, False, n not in dead)
            for n, m in match.items()}


def test_replace_one_node_learner_first_then_promote_then_remove() -> None:
    conf = ConfState((1, 2, 3))
    step = next_step(conf, [1, 2, 4], 1, status({1: 10, 2: 10, 3: 10}), 10)
    assert step.kind == "change" and step.conf == ConfState((1, 2, 3), (4,))
    conf = step.conf
    lagging = status({1: 10, 2: 10, 3: 10, 4: 2})
    assert next_step(conf, [1, 2, 4], 1, lagging, 1000).kind == "wait"  # far behind: not yet
    # Within the lag but short of the configuration entry that added it (index 9): its log may
    # still end in an earlier placement's configuration, which a restart would make its own.
    assert next_step(conf, [1, 2, 4], 1, status({1: 10, 2: 10, 3: 10, 4: 8}), 10, conf_index=9).kind == "wait"
    step = next_step(conf, [1, 2, 4], 1, status({1: 10, 2: 10, 3: 10, 4: 10}), 10, conf_index=9)
    assert step.conf == ConfState((1, 2, 3, 4))
    step = next_step(step.conf, [1, 2, 4], 1, status({1: 10, 2: 10, 3: 10, 4: 10}), 10)
    assert step.conf == ConfState((1, 2, 4))
    assert next_step(step.conf, [1, 2, 4], 1, status({1: 10, 2: 10, 4: 10}), 10).kind == "done"


def test_the_leader_leaving_hands_over_first_and_dead_voters_go_early() -> None:
    conf = ConfState((1, 2, 3, 4))
    step = next_step(conf, [2, 3, 4], 1, status({1: 10, 2: 10, 3: 10, 4: 10}), 10)
    assert step.kind == "transfer" and step.target == 2
    # A target voter gone quiet is no transfer target.
    step = next_step(conf, [2, 3, 4], 1, status({1: 10, 2: 10, 3: 10, 4: 10}, dead=(2,)), 10)
    assert step.kind == "transfer" and step.target == 3
    # A voter outside the target that does not answer goes before the learners are promoted.
    step = next_step(ConfState((1, 2, 3), (4,)), [1, 2, 4], 1, status({1: 10, 2: 10, 3: 0, 4: 1}, dead=(3,)), 10)
    assert step.conf == ConfState((1, 2), (4,))
    # Learners outside the target are dropped first (a cancelled move).
    step = next_step(ConfState((1, 2, 3), (4, 5)), [1, 2, 3], 1, status({1: 1, 2: 1, 3: 1}), 1)
    assert step.conf == ConfState((1, 2, 3))


@pytest.mark.parametrize("seed", range(12))
def test_following_the_steps_reaches_any_target_in_the_simulator(seed: int) -> None:
    rng = random.Random(seed)
    c = Cluster(3, seed)
    assert c.run_until(lambda: c.leader() is not None, 3000)
    for _ in range(4):
        c.add_node()
    for _round in range(3):
        target = rng.sample(list(c.ids), rng.choice([1, 3, 5]))
        for _ in range(400):
            leader = c.leader()
            if leader is None:
                c.run(20)
                continue
            node = c.node(leader)
            step = next_step(node.conf, target, leader, node.peer_status(), node.last_index, catchup_lag=5,
                             conf_index=node.membership.last_index)
            if step.kind == "done":
                break
            if step.kind == "change":
                assert step.conf is not None
                # Refused only while the previous change or the leader's first commit is pending.
                refused = c.change_conf(leader, step.conf) is None
                assert not refused or node.conf_pending or not node.current_term_committed, step
            elif step.kind == "transfer":
                node.transfer_leadership(step.target)
                c.process(leader)
            c.run(15)
        else:
            pytest.fail(f"never reached {target} (seed {seed}): at {c.node(c.leader()).conf if c.leader() else None}")
        leader = c.leader()
        assert leader is not None and c.node(leader).role == Role.LEADER
        assert set(c.node(leader).conf.voters) == set(target) and not c.node(leader).conf.learners
        index = c.propose(leader, b"after")
        assert c.run_until(lambda index=index, t=target: all(c.nodes[i].applied >= index for i in t), 3000)

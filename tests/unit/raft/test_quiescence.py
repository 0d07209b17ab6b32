"""Quiescent Raft groups in the deterministic simulator (multi_sim): idle groups stop talking,
wake on a proposal, a message or the loss of their leader's node, and stay safe under crashes,
partitions and message loss; every group with a live majority gets a leader back within a
bound once one is needed.

Reproduce one fuzz seed: VDL_QUIESCE_SEED=12 .venv/bin/python -m pytest tests/unit/raft/test_quiescence.py -q
More seeds: VDL_QUIESCE_SEEDS=5000 (default 300); steps per seed: VDL_QUIESCE_STEPS (default 1500).
"""

from __future__ import annotations

import os
import random

import pytest
from multi_sim import CAMPAIGN_DELAY_TICKS, MultiCluster
from raft_sim import NetConfig

from vdl_broker.raft import ConfState, Message, MessageType, NotLeaderError, RaftConfig, Role
from vdl_broker.raft.liveness import LivenessChange, NodeLiveness, successor

SLOW = True  # a minute or more: left out of make test-unit, run by make test

TICK = 10  # simulated steps per tick
E = 10  # election ticks
# Leader lost -> new leader: liveness timeout + successor delay + a pre-vote and a vote round
# (a few steps each); a failed first attempt costs one randomized election timeout (< 2E).
FAILOVER_BOUND_STEPS = (E + CAMPAIGN_DELAY_TICKS + 2 * E + 5) * TICK


def settle(c: MultiCluster) -> None:
    """Elect every group's leader and let everything quiesce."""
    assert c.run_until(c.all_have_leaders, 100 * TICK)
    assert c.run_until(c.quiescent_everywhere, 50 * TICK), "idle groups did not quiesce"
    c.run(TICK)  # the last acknowledgements of the quiesce heartbeats arrive


def group_messages(c: MultiCluster) -> int:
    return sum(group.delivered for group in c.groups)


def test_idle_groups_go_quiet_and_stay_quiet() -> None:
    c = MultiCluster(3, 6, seed=1)
    settle(c)
    before = group_messages(c)
    c.run(200 * TICK)
    assert group_messages(c) == before, "a quiescent group sent messages"
    assert c.quiescent_everywhere()
    for g in range(6):
        leader = c.leader(g)
        assert leader is not None and c.core(g, leader).read_lease_tick() == -1


def test_proposal_wakes_the_group_commits_everywhere_and_it_quiesces_again() -> None:
    c = MultiCluster(3, 3, seed=2)
    settle(c)
    leader = c.leader(1)
    assert leader is not None
    index = c.groups[1].propose(leader, b"hello")
    assert c.run_until(lambda: all(c.groups[1].nodes[i].applied >= index for i in c.ids), 20 * TICK)
    assert all(c.core(0, i).quiescent for i in c.ids), "another group woke up"
    assert c.run_until(c.quiescent_everywhere, 20 * TICK)


def test_a_read_wakes_a_quiescent_leader_and_its_lease_comes_back() -> None:
    c = MultiCluster(3, 2, seed=3)
    settle(c)
    leader = c.leader(0)
    assert leader is not None
    node = c.core(0, leader)
    assert node.read_lease_tick() == -1
    node.wake()
    c.groups[0].process(leader)
    assert c.run_until(lambda: node.read_lease_tick() >= 0, 2 * TICK), "no lease one tick after waking"


def test_a_follower_woken_by_someone_else_wakes_its_leader() -> None:
    c = MultiCluster(3, 1, seed=4)
    settle(c)
    leader = c.leader(0)
    assert leader is not None
    follower = next(i for i in c.ids if i != leader)
    c.core(0, follower).wake()  # e.g. the driver, or a stray message
    c.groups[0].process(follower)
    assert c.run_until(lambda: not c.core(0, leader).quiescent, 2 * TICK), "the leader stayed asleep"


def test_leader_node_crash_every_group_gets_a_new_leader_spread_over_the_survivors() -> None:
    groups = 12
    c = MultiCluster(3, groups, seed=5)
    assert c.run_until(c.all_have_leaders, 100 * TICK)
    for g in range(groups):  # node 1 leads every group
        leader = c.leader(g)
        if leader != 1:
            c.core(g, leader).transfer_leadership(1)
            c.groups[g].process(leader)
    assert c.run_until(lambda: all(c.leader(g) == 1 for g in range(groups)), 100 * TICK)
    assert c.run_until(c.quiescent_everywhere, 50 * TICK)
    crashed_at = c.now
    c.crash(1)
    assert c.run_until(c.all_have_leaders, FAILOVER_BOUND_STEPS), \
        f"groups without a leader {FAILOVER_BOUND_STEPS} steps after their leader's node died"
    leaders = [c.leader(g) for g in range(groups)]
    assert sorted(set(leaders)) == [2, 3], f"new leaders all on one node: {leaders}"
    assert c.now - crashed_at <= FAILOVER_BOUND_STEPS
    # ... and the survivors quiesce again, with node 1 presumed down.
    assert c.run_until(c.quiescent_everywhere, 60 * TICK)
    # Node 1 comes back: the leaders wake, catch it up, and everything quiesces again.
    index = {g: c.groups[g].propose(c.leader(g), b"while 1 was down") for g in range(groups)}
    assert c.run_until(c.quiescent_everywhere, 60 * TICK)
    c.restart(1)
    assert c.run_until(lambda: all(c.groups[g].nodes[1].applied >= index[g] for g in range(groups)), 40 * TICK)
    assert c.run_until(c.quiescent_everywhere, 60 * TICK)


def test_cut_off_quiescent_leader_is_replaced_and_deposed() -> None:
    """A quiescent leader cut off from both followers: the majority elects another leader (their
    node liveness forgets the old one), and the old one, woken by its own node liveness (its
    peers went silent, no majority left), steps down by CheckQuorum; it served no read meanwhile."""
    c = MultiCluster(3, 1, seed=6)
    settle(c)
    old = c.leader(0)
    assert old is not None
    others = [i for i in c.ids if i != old]
    c.partition({old}, set(others))
    node = c.core(0, old)
    assert c.run_until(lambda: any(c.core(0, i).role == Role.LEADER for i in others), FAILOVER_BOUND_STEPS)
    assert c.run_until(lambda: node.role != Role.LEADER, 3 * E * TICK), "the cut-off leader stayed leader"
    with pytest.raises(NotLeaderError):
        c.groups[0].propose(old, b"x")


@pytest.mark.parametrize("seed", range(1, 9))
def test_a_successor_asks_again_a_survivor_that_noticed_the_leader_gone_later(seed: int) -> None:
    """Regression: the designated successor's pre-vote reached the other survivor before it had
    noticed the leader's node gone; still in the leader's lease, that survivor ignored it, and
    the successor waited out a randomized election timeout (1-2 s in a real cluster). It asks
    again every CAMPAIGN_DELAY_TICKS while it knows no leader: here the other survivor notices
    7 ticks after it (it still heard the leader for 7 ticks), and a leader follows at once."""
    c = MultiCluster(3, 1, seed=seed)
    settle(c)
    old = c.leader(0)
    assert old is not None
    first = successor("g0", c.core(0, old).voters, old, [i for i in c.ids if i != old])
    [late] = [i for i in c.ids if i not in (old, first)]
    c.partition({old, late}, {first, late})  # the successor stops hearing the leader...
    c.run(7 * TICK)
    c.partition({old}, {first, late})  # ... the other survivor 7 ticks later
    cut = c.now
    bound = (E + 2 * CAMPAIGN_DELAY_TICKS + 1) * TICK
    assert c.run_until(lambda: any(c.core(0, i).role == Role.LEADER for i in (first, late)), bound), \
        f"no leader among {first, late} {bound // TICK} ticks after the leader was cut off from both"
    assert c.now - cut <= bound


@pytest.mark.parametrize("seed", range(1, 9))
def test_the_survivors_of_a_cut_off_leader_elect_its_designated_successor(seed: int) -> None:
    """Regression: the survivor that is not the designated successor has its own randomized
    election timeout run out (here at its shortest, election_ticks) at the very tick its node
    liveness finds the leader's node gone, and campaigned before the successor (20 % of the
    cuts: timeouts of 10 or 11 ticks beat the successor's campaign 2 ticks after). The cut-off
    leader had sent its clients to the successor (server/cut_off.py), so they asked the wrong
    node until they learned of the election. It now leaves the first try to the successor."""
    c = MultiCluster(3, 1, seed=seed, config=lambda i: RaftConfig(election_ticks=E, quiesce_after_heartbeats=0))
    assert c.run_until(c.all_have_leaders, 100 * TICK)
    old = c.leader(0)
    assert old is not None
    first = successor("g0", c.core(0, old).voters, old, [i for i in c.ids if i != old])
    [other] = [i for i in c.ids if i not in (old, first)]
    # both survivors hold the leader's whole log (a lagging successor would be refused: it cannot win)
    assert c.run_until(lambda: all(c.core(0, i).leader_id == old and c.core(0, i).log.last_index()
                                   == c.core(0, old).log.last_index() for i in (first, other)), 10 * TICK)
    c.core(0, other).randomized_timeout = E
    term = c.core(0, old).term
    c.partition({old}, {first, other})
    assert c.run_until(lambda: c.leader(0) in (first, other), FAILOVER_BOUND_STEPS)
    assert c.leader(0) == first
    assert c.core(0, first).term == term + 1  # the epoch the cut-off leader named with it


def test_cut_off_leader_woken_by_reads_only_steps_down() -> None:
    """Regression: a quiescent leader cut off from its followers, woken by reads (no writes),
    quiesced again after a few heartbeat rounds -- counting followers it had not heard from
    since waking as caught up -- before CheckQuorum could run, so it never stepped down and
    Metadata kept naming it. It quiesces only with a majority heard from."""
    c = MultiCluster(3, 1, seed=8)
    settle(c)
    old = c.leader(0)
    assert old is not None
    c.partition({old}, {i for i in c.ids if i != old})
    node = c.core(0, old)
    for _ in range(4 * E):
        node.wake()  # a read at the old leader, every tick
        c.groups[0].process(old)
        c.run(TICK)
        if node.role != Role.LEADER:
            break
    assert node.role != Role.LEADER, "a cut-off leader woken only by reads never stepped down"


def test_lagging_follower_on_a_restarted_node_is_caught_up() -> None:
    c = MultiCluster(3, 2, seed=7)
    settle(c)
    leader = c.leader(0)
    assert leader is not None
    lagging = next(i for i in c.ids if i != leader and c.leader(1) != i)
    c.crash(lagging)
    index = c.groups[0].propose(leader, b"missed")
    assert c.run_until(c.quiescent_everywhere, 60 * TICK), "a leader with a dead follower never quiesced"
    c.restart(lagging)
    assert c.run_until(lambda: c.groups[0].nodes[lagging].applied >= index, 30 * TICK)
    assert c.run_until(c.quiescent_everywhere, 60 * TICK)


def test_node_liveness_down_up_and_restart() -> None:
    live = NodeLiveness(3)
    live.add_peer(2)
    assert not live.tick() and not live.tick()
    assert live.tick() == LivenessChange(down=(2,))
    assert not live.is_alive(2) and live.is_down(2)
    assert not live.is_alive(9) and not live.is_down(9)  # never heard of: not alive, not known down
    live.heard(2, incarnation=7)
    assert live.tick() == LivenessChange(up=(2,)) and live.is_alive(2) and not live.is_down(2)
    live.heard(2, incarnation=7)
    assert not live.tick()
    live.heard(2, incarnation=8)
    assert live.tick() == LivenessChange(restarted=(2,))


def test_quorum_contact_counts_the_voters_heard_within_a_timeout() -> None:
    live = NodeLiveness(2)
    for peer in (2, 3, 4, 5):
        live.add_peer(peer)
    assert live.in_contact_with_quorum((1, 2, 3), 1) and live.in_contact_with_quorum((1, 2, 3, 4, 5), 1)
    live.tick()
    live.heard(2)
    live.tick()  # 3, 4, 5 silent for two ticks: down
    assert [live.is_alive(p) for p in (2, 3, 4, 5)] == [True, False, False, False]
    assert live.in_contact_with_quorum((1, 2, 3), 1)  # itself and 2: two of three
    assert not live.in_contact_with_quorum((1, 2, 3, 4, 5), 1)  # two of five
    assert not live.in_contact_with_quorum((2, 3, 4), 1)  # a learner counts only the voters it hears
    assert live.in_contact_with_quorum((), 1)  # no configuration known yet: nothing to be cut off from
    live.heard(3)
    live.tick()
    assert not live.is_alive(2) and live.is_alive(3)
    assert live.in_contact_with_quorum((1, 3, 4, 5, 6), 1) is False
    live.heard(4)
    assert live.in_contact_with_quorum((1, 3, 4, 5, 6), 1)


def test_successor_spreads_groups_over_the_survivors() -> None:
    picks = [successor(f"stream-{i}", (1, 2, 3), 1, [2, 3]) for i in range(1000)]
    assert set(picks) == {2, 3}
    assert 400 < picks.count(2) < 600
    assert successor("s", (1, 2, 3), 1, []) == 0
    assert successor("s", (1, 2, 3), 1, [3]) == 3


def test_quiesce_messages_round_trip_the_wire() -> None:
    from vdl_broker.raft import Message
    from vdl_broker.raft.wire import decode_frame, encode_frame

    message = Message(MessageType.HEARTBEAT, 2, 1, 5, index=9, commit=4, quiesce=True)
    frame = decode_frame(b"".join(bytes(p) for p in encode_frame(1, [("s", message)])))
    assert frame.messages[0][1].quiesce is True


# ---------------------------------------------------------------------------------- fuzz


def _config(rng: random.Random, drift: float = 0.1):
    # PreVote and CheckQuorum always, as every driver here runs them: without PreVote a
    # candidate that cannot win resets everyone's election timer with each new term, and no
    # election bound holds (plain Raft's livelock, quiescent or not).
    heartbeat = rng.choice([1, 1, 2])
    inflight = rng.choice([1, 8, 256])
    append_bytes = rng.choice([8, 1 << 20])
    after = rng.choice([1, 2, 3])

    def make(i: int) -> RaftConfig:
        return RaftConfig(election_ticks=E, heartbeat_ticks=heartbeat, pre_vote=True, check_quorum=True,
                          max_inflight_messages=inflight, max_append_bytes=append_bytes,
                          quiesce_after_heartbeats=after, max_clock_drift=drift)

    return make


def run_seed(seed: int, steps: int, drift: float = 0.0) -> MultiCluster:
    """`drift`: the nodes' clocks run at rates drawn in [1, 1 + drift], and the read lease is
    shortened for that much (RaftConfig.max_clock_drift)."""
    rng = random.Random(seed * 7 + 3)
    n = rng.choice([3, 3, 5])
    net = NetConfig(loss=rng.choice([0.0, 0.0, 0.02, 0.1]), duplicate=rng.choice([0.0, 0.05]),
                    max_delay=rng.choice([1, 3, 8]))
    c = MultiCluster(n, rng.randint(1, 4), seed, net=net, config=_config(rng, drift or 0.1))
    if drift:
        clocks = random.Random(seed * 17 + 1)  # its own generator: the other draws stay the same
        c.set_tick_rates({i: 1.0 + clocks.random() * drift for i in c.ids})
    for group in c.groups:
        group.early_send = rng.random() < 0.5
        group.slow_disk = rng.choice([0.0, 0.0, 0.3])
    idle_until = 0
    counter = 0
    for _ in range(steps):
        c.step_time()
        if c.now < idle_until:
            continue  # an idle period: no faults, no proposals
        r = rng.random()
        if r < 0.003:
            idle_until = c.now + rng.randint(20, 200) * TICK
        elif r < 0.05:
            g = rng.randrange(len(c.groups))
            leader = c.leader(g)
            if leader is not None:
                counter += 1
                try:
                    c.groups[g].propose(leader, f"s{seed}-{counter}".encode())
                except NotLeaderError:
                    pass
        elif r < 0.053:
            alive = c.alive()
            if alive:
                c.crash(rng.choice(alive))
        elif r < 0.06:
            down = [i for i in c.ids if not c.up[i]]
            if down:
                c.restart(rng.choice(down))
        elif r < 0.062:
            ids = list(c.ids)
            rng.shuffle(ids)
            cut = rng.randint(1, len(ids))
            c.partition(set(ids[:cut]), set(ids[cut:]))
        elif r < 0.066:
            c.heal()
        elif r < 0.068:
            g = rng.randrange(len(c.groups))
            i = rng.choice(c.ids)
            node = c.groups[g].nodes[i].node
            if node is not None:
                node.wake()  # a read at a leader, a stray driver wake elsewhere
                c.groups[g].process(i)
        elif r < 0.069:
            g = rng.randrange(len(c.groups))
            leader = c.leader(g)
            if leader is not None:
                c.crash(leader)
    _check_liveness(c)
    return c


def _check_liveness(c: MultiCluster) -> None:
    """Faults stop: every group gets a leader within the bound without being asked, accepts a
    proposal that every node applies, and then everything goes quiet."""
    c.heal()
    for i in c.ids:
        c.restart(i)
    c.net.loss = 0.0
    c.net.duplicate = 0.0
    # Restarted nodes' groups and forgotten leaders: at most one liveness timeout, then elections.
    bound = FAILOVER_BOUND_STEPS + 2 * E * TICK
    assert c.run_until(c.all_have_leaders, bound), f"groups without a leader after healing (seed {c.seed})"
    for g, group in enumerate(c.groups):
        for attempt in range(5):
            assert c.run_until(lambda g=g: c.leader(g) is not None, bound), f"group {g} lost its leader (seed {c.seed})"
            leader = c.leader(g)
            try:
                index = group.propose(leader, f"final-{g}-{attempt}".encode())
            except NotLeaderError:
                c.run(TICK)
                continue
            if c.run_until(lambda index=index, group=group: all(group.nodes[i].applied >= index for i in c.ids),
                           40 * TICK):
                break
        else:
            pytest.fail(f"group {g} never applied a proposal everywhere (seed {c.seed})")
    assert c.run_until(c.quiescent_everywhere, 80 * TICK), f"idle groups did not quiesce (seed {c.seed})"


def _seeds() -> list[int]:
    one = os.environ.get("VDL_QUIESCE_SEED")
    if one is not None:
        return [int(one)]
    return list(range(int(os.environ.get("VDL_QUIESCE_SEEDS", 300))))


CHUNKS = 4


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_random_seeds(chunk: int) -> None:
    seeds = _seeds()
    if len(seeds) == 1 and chunk > 0:
        pytest.skip("single seed mode")
    steps = int(os.environ.get("VDL_QUIESCE_STEPS", 1500))
    for seed in seeds[chunk::CHUNKS] if len(seeds) > 1 else seeds:
        try:
            run_seed(seed, steps)
        except BaseException as exc:
            raise AssertionError(
                f"seed {seed} failed: {exc!r}\nreproduce: VDL_QUIESCE_SEED={seed} "
                f".venv/bin/python -m pytest tests/unit/raft/test_quiescence.py -q -k random") from exc


def test_a_follower_restarted_without_its_log_gets_it_back_without_a_new_write() -> None:
    """Its leader still counts it as holding everything: only a probe at the old match, on
    hearing of the restart, shows the leader what it lost."""
    c = MultiCluster(3, 1, seed=5)
    settle(c)
    leader = c.leader(0)
    assert leader is not None
    index = 0
    for k in range(5):
        index = c.groups[0].propose(leader, b"e%d" % k)
    assert c.run_until(c.quiescent_everywhere, 60 * TICK)
    wiped = next(i for i in c.ids if i != leader)
    c.crash(wiped)
    c.groups[0].wipe(wiped)
    c.restart(wiped)
    assert c.core(0, wiped).recovering
    assert c.run_until(lambda: not c.core(0, wiped).recovering, 30 * TICK), "the wiped follower never recovered"
    assert c.groups[0].committed_log(wiped)[:index] == c.groups[0].committed_log(leader)[:index]
    assert c.run_until(c.quiescent_everywhere, 60 * TICK)


def test_a_lost_recheck_of_a_restarted_follower_is_sent_again() -> None:
    """The leader's empty probe of a restarted follower that holds everything is lost: the next
    heartbeat response sends it again, and the group goes quiet once more."""
    c = MultiCluster(3, 1, seed=5)
    settle(c)
    leader = c.leader(0)
    assert leader is not None
    c.groups[0].propose(leader, b"x")
    assert c.run_until(c.quiescent_everywhere, 60 * TICK)
    restarted = next(i for i in c.ids if i != leader)
    dropped: list[Message] = []

    def drop_first_probe(m: Message) -> bool:
        if m.type == MessageType.APPEND and m.to == restarted and not m.entries and not dropped:
            dropped.append(m)
            return True
        return False

    c.groups[0].hold = drop_first_probe
    c.crash(restarted)
    c.restart(restarted)
    assert c.run_until(lambda: bool(dropped), 30 * TICK), "the leader never probed the restarted follower"
    assert c.run_until(c.quiescent_everywhere, 60 * TICK), "the group never went quiet again"


def learner_behind(seed: int) -> tuple[MultiCluster, int, int]:
    """One group of two voters and a learner (once a voter), all quiet: (cluster, leader, learner)."""
    c = MultiCluster(3, 1, seed=seed)
    assert c.run_until(c.all_have_leaders, 100 * TICK)
    group, leader = c.groups[0], c.leader(0)
    assert leader is not None
    learner = next(i for i in c.ids if i != leader)
    voters = tuple(i for i in c.ids if i != learner)
    core = c.core(0, leader)

    def committed(index: int | None) -> None:
        assert index is not None
        assert c.run_until(lambda: core.commit_index >= index, 50 * TICK)

    committed(group.propose(leader, b"first"))  # this leader's first entry: changes may follow
    committed(group.change_conf(leader, ConfState(voters)))  # one voter at a time: out, then a learner
    committed(group.change_conf(leader, ConfState(voters, (learner,))))
    assert c.run_until(c.quiescent_everywhere, 60 * TICK)
    assert c.core(0, leader).learners == (learner,)
    return c, leader, learner


def test_a_leader_never_quiesces_past_a_lagging_learner_whose_node_is_alive() -> None:
    """What the leader sends a learner is lost for a while (the integration case: a restarted
    node's new leader writes before its connection to the learner's node is up), while node
    liveness hears that node. Presuming it down, the leader would quiesce for good: no liveness
    change ever wakes it for a node that never went down, and a learner never campaigns."""
    c, leader, learner = learner_behind(seed=11)
    group = c.groups[0]
    group.hold = lambda m: m.sender == leader and m.to == learner
    index = group.propose(leader, b"missed")
    c.run(3 * E * TICK)
    assert c.liveness[leader].is_alive(learner)
    assert not c.core(0, leader).quiescent, "the leader quiesced past a live learner it could not reach"
    group.hold = None
    assert c.run_until(lambda: group.nodes[learner].applied >= index, 20 * TICK), "the learner was never caught up"
    assert c.run_until(c.quiescent_everywhere, 60 * TICK)


def test_a_learner_back_from_a_partition_wakes_its_leader() -> None:
    """Cut off, the learner is presumed down (its node too) and the leader quiesces past it;
    when its node is heard again, the leader wakes and catches it up, as it does a voter."""
    c, leader, learner = learner_behind(seed=12)
    group = c.groups[0]
    c.partition({learner}, {i for i in c.ids if i != learner})
    index = group.propose(leader, b"missed")
    assert c.run_until(lambda: c.core(0, leader).quiescent, 60 * TICK), \
        "the leader never quiesced past the cut-off learner"
    assert group.nodes[learner].applied < index
    c.heal()
    assert c.run_until(lambda: group.nodes[learner].applied >= index, 30 * TICK), "the learner was never caught up"
    assert c.run_until(c.quiescent_everywhere, 60 * TICK)

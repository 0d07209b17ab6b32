"""Random-seed fuzzing of the Raft core in the simulator: thousands of seeds, invariants after
every step, liveness once the faults stop. Faults: loss, duplication, delay, partitions, crashes
(torn ones too), slow disks, storage damage (a cut log, a lost hard state, a lost group directory,
a node's whole disk lost: vdl_broker.cluster.identity), leadership transfers. Half the seeds
also change the membership at random (learners added, promoted, demoted, removed; voters
removed; new nodes joining; removed nodes coming back) under the same faults.

Reproduce one seed: VDL_RAFT_SEED=1234 .venv/bin/python -m pytest tests/unit/raft/test_raft_fuzz.py -q
More seeds: VDL_RAFT_SEEDS=20000 (default 1200); steps per seed: VDL_RAFT_STEPS (default 800).
"""

from __future__ import annotations

import os
import random
import time

import pytest
from raft_sim import Cluster, NetConfig

from vdl_broker.raft import ConfState, NotLeaderError, RaftConfig

SLOW = True  # a minute or more: left out of make test-unit, run by make test

DEFAULT_SEEDS = 1200
DEFAULT_STEPS = 800
CHUNKS = 10


def _config_for(rng: random.Random):
    heartbeat = rng.choice([1, 1, 2, 3])
    pre_vote = rng.random() < 0.8
    check_quorum = rng.random() < 0.8
    inflight = rng.choice([1, 2, 8, 256])
    append_bytes = rng.choice([1, 8, 64, 1 << 20])
    inflight_bytes = rng.choice([16, 1 << 20])

    def make(i: int) -> RaftConfig:
        return RaftConfig(
            election_ticks=10,
            heartbeat_ticks=heartbeat,
            pre_vote=pre_vote,
            check_quorum=check_quorum,
            max_inflight_messages=inflight,
            max_inflight_bytes=inflight_bytes,
            max_append_bytes=append_bytes,
            max_committed_bytes=rng.choice([None, 8]),
            quiesce_after_heartbeats=0,
        )

    return make


def run_seed(seed: int, steps: int = DEFAULT_STEPS, corruption_aware: bool = True) -> Cluster:
    rng = random.Random(seed * 31 + 17)
    n = rng.choice([1, 3, 3, 3, 5, 5])
    net = NetConfig(
        loss=rng.choice([0.0, 0.02, 0.1, 0.3]),
        duplicate=rng.choice([0.0, 0.05, 0.2]),
        max_delay=rng.choice([1, 3, 8, 20]),
    )
    c = Cluster(n, seed, net=net, config=_config_for(rng))
    c.corruption_aware = corruption_aware
    c.torn_crash = rng.choice([0.0, 0.0, 0.002, 0.01])
    c.slow_disk = rng.choice([0.0, 0.0, 0.3, 0.8])
    c.early_send = rng.random() < 0.5
    corruption = rng.random() < 0.5 and n > 1
    # Membership changes draw from their own generator: the other seeds keep their runs.
    changes = random.Random(seed * 7 + 3)
    membership = changes.random() < 0.5
    # Whole-disk losses too (the node's driver then asks its peers), from a generator of their own.
    disks = random.Random(seed * 11 + 5)
    counter = 0
    for _ in range(steps):
        c.step_time()
        if membership and changes.random() < 0.02:
            # A damaged voter counts in no majority until given back its entries: with damage
            # about, keep three voters so that an intact majority remains (CTRL's premise).
            _random_change(c, changes, min_voters=3 if corruption else 1)
        r = rng.random()
        if r < 0.08:
            leader = c.leader()
            if leader is not None:
                for _ in range(rng.randint(1, 4)):
                    counter += 1
                    try:
                        c.propose(leader, f"s{seed}-{counter}".encode() * rng.randint(0, 3))
                    except NotLeaderError:
                        break
        elif r < 0.085:
            alive = c.alive()
            if alive:
                c.crash(rng.choice(alive))
        elif r < 0.095:
            down = [i for i in c.ids if i not in c.alive()]
            if down:
                c.restart(rng.choice(down))
        elif r < 0.099:
            ids = list(c.ids)
            rng.shuffle(ids)
            cut = rng.randint(1, len(ids))
            c.partition(set(ids[:cut]), set(ids[cut:]))
        elif r < 0.105:
            c.heal()
        elif r < 0.11:
            alive = c.alive()
            if alive:
                i = rng.choice(alive)
                sn = c.nodes[i]
                if sn.applied >= sn.storage.first_index:
                    sn.storage.compact(rng.randint(sn.storage.first_index, sn.applied + 1))
        elif r < 0.113:
            leader = c.leader()
            if leader is not None:
                c.crash(leader)
        elif r < 0.115:
            leader = c.leader()
            targets = [i for i in c.node(leader).voters if i != leader] if leader is not None else []
            if targets:
                c.node(leader).transfer_leadership(rng.choice(targets))
                c.process(leader)
        elif r < 0.12 and corruption and not c.damaged():
            # One damaged node at a time: every committed entry keeps an intact copy elsewhere
            # (CTRL's premise); it restarts at the next restart fault.
            i = rng.choice(c.ids)
            st = c.nodes[i].storage
            if rng.random() < 0.2:
                if disks.random() < 0.5 and i in c.initial:
                    c.lose_disk(i)  # its whole data directory lost: nothing says it held the group
                else:
                    c.wipe(i)  # the group's directory lost, its driver knows it held the group
            else:
                cut = rng.randint(st.first_index, st.last_index) if st.last_index >= st.first_index else None
                c.corrupt(i, cut_at=cut, lose_hard_state=rng.random() < 0.3)
    _check_liveness(c, counter)
    return c


MAX_NODES = 7


def _random_change(c: Cluster, rng: random.Random, min_voters: int) -> None:
    """The leader proposes one random configuration change allowed by the rules (the core
    refuses it while another is pending or before its own term's first commit)."""
    leader = c.leader()
    if leader is None:
        return
    conf = c.node(leader).conf
    voters, learners = set(conf.voters), set(conf.learners)
    outsiders = [i for i in c.ids if i not in voters | learners]
    choice = rng.random()
    if choice < 0.3 and (outsiders or len(c.ids) < MAX_NODES):
        # A new learner: a node that never was (it joins knowing nothing) or one removed before.
        newcomer = rng.choice(outsiders) if outsiders and (len(c.ids) >= MAX_NODES or rng.random() < 0.5) \
            else c.add_node()
        learners.add(newcomer)
    elif choice < 0.55 and learners:
        promoted = rng.choice(sorted(learners))  # caught up or not: safety must not depend on it
        learners.discard(promoted)
        voters.add(promoted)
    elif choice < 0.75 and len(voters) > min_voters:
        demoted = rng.choice(sorted(voters - {leader}))
        voters.discard(demoted)
        if rng.random() < 0.5:
            learners.add(demoted)
    elif learners:
        learners.discard(rng.choice(sorted(learners)))
    else:
        return
    c.change_conf(leader, ConfState(tuple(sorted(voters)), tuple(sorted(learners))))


def _check_liveness(c: Cluster, counter: int) -> None:
    """Once faults stop, a leader emerges and every node applies a new entry."""
    c.heal()
    c.torn_crash = 0.0
    for i in c.ids:
        c.restart(i)
    c.net.loss = 0.0
    c.net.duplicate = 0.0
    for attempt in range(6):
        assert c.run_until(lambda: c.leader() is not None, 3000), f"no leader after healing (seed {c.seed})"
        leader = c.leader()
        assert leader is not None
        try:
            index = c.propose(leader, f"final-{attempt}".encode())
        except NotLeaderError:
            c.run(50)
            continue
        term = c.node(leader).term
        members = c.node(leader).conf.members  # removed nodes hear nothing more
        if c.run_until(lambda index=index, members=members: all(c.nodes[i].applied >= index for i in members),
                       3000):
            if c.oracle[index][0] == term:
                break
    else:
        pytest.fail(f"cluster never converged after healing (seed {c.seed}); rerun with VDL_RAFT_SEED={c.seed}")
    logs = {i: c.committed_log(i) for i in members}
    tails = {i: [t for t in log if t[0] >= max(c.nodes[j].storage.first_index for j in members)]
             for i, log in logs.items()}
    ref = tails[members[0]]
    for i in members:
        common = min(len(ref), len(tails[i]))
        assert tails[i][:common] == ref[:common], f"committed logs differ on node {i} (seed {c.seed})"


def _seeds() -> list[int]:
    one = os.environ.get("VDL_RAFT_SEED")
    if one is not None:
        return [int(one)]
    return list(range(int(os.environ.get("VDL_RAFT_SEEDS", DEFAULT_SEEDS))))


# Seeds beyond the default range, with more steps, that found defects. 100155, 107492: a voter
# demoted by a configuration change only it had appended, the leader gone, no leader ever again
# (the others needed its vote; it refused them as less up to date and never campaigned).
# 112313, 118177, 120851: a wiped node whose log its leader reset to an entry of the leader's
# term took that entry for the leader's commit index, ended its recovery and voted, though
# entries committed after it were gone with its disk: a leader lacking them was elected.
# 206099: the newest intact log on a learner (the voter that also had it damaged), the voter
# left asking for the learner's vote (an uncommitted promotion counted it) and refused: no
# leader, the learner never campaigning.
FOUND = ((100155, 1600), (107492, 1600), (112313, 1600), (118177, 1600), (120851, 1600), (206099, 3000))


@pytest.mark.parametrize(("seed", "steps"), FOUND)
def test_seeds_that_found_defects(seed: int, steps: int) -> None:
    run_seed(seed, steps)


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_random_seeds(chunk: int) -> None:
    seeds = _seeds()
    if len(seeds) == 1 and chunk > 0:
        pytest.skip("single seed mode")
    steps = int(os.environ.get("VDL_RAFT_STEPS", DEFAULT_STEPS))
    for seed in seeds[chunk::CHUNKS] if len(seeds) > 1 else seeds:
        try:
            run_seed(seed, steps)
        except BaseException as exc:
            raise AssertionError(
                f"seed {seed} failed: {exc!r}\nreproduce: VDL_RAFT_SEED={seed} "
                f".venv/bin/python -m pytest tests/unit/raft/test_raft_fuzz.py -q"
            ) from exc


if __name__ == "__main__":  # quick timing: python tests/unit/raft/test_raft_fuzz.py
    start = time.perf_counter()
    for s in _seeds():
        run_seed(s)
    print(f"{len(_seeds())} seeds in {time.perf_counter() - start:.1f}s")

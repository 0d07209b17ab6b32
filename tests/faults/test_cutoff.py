"""A node cut off from the others (Raft links only: clients still reach it) never holds its
clients: producers of confluent-kafka, kafka-python, aiokafka and the Java client, bootstrapped
with that node first (running at the cut, and started at it), resume acknowledged writes within
seconds, and every acknowledged record is stored exactly once after the cut heals
(tests/faults/cutoff.py; `make cutoff ROUNDS=N` for more rounds and the p99 table). Then what a
cut-off node answers, request by request."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.faults.chaos.world import start_world
from tests.faults.cutoff import MEASURED, SHAPES, run_rounds, table
from tests.faults.harness import (
    ProbeLog,
    fetch_raw,
    metadata_raw,
    one_record_batch,
    probe_write,
    produce_raw,
    wait_for_full_isr,
    wait_until,
)
from tests.support.kafka import coordinator_raw
from vdl_wire.errors import ErrorCode

pytestmark = pytest.mark.timeout(300)

# Measured, not a target: the issue asks for writes back within 3 s; on this shared machine a
# round is allowed much more, and the table printed says what it took.
STALL_BOUND_S = 10.0


def test_producers_bootstrapped_at_a_cut_off_node_resume_within_seconds(tmp_path: Path) -> None:
    results = run_rounds(tmp_path, len(SHAPES), with_java=True)
    print("\n" + table(results))
    assert [r.shape for r in results] == list(SHAPES)
    for result in results:
        assert sorted(result.stalls) == sorted(MEASURED)
        slow = {client: round(s, 2) for client, s in result.stalls.items() if s > STALL_BOUND_S}
        assert not slow, f"{result.shape} (node {result.cut_node} cut off): writes stalled {slow} s"


def test_a_cut_off_node_names_the_others_and_refuses_produce_and_fetch(tmp_path: Path) -> None:
    stream = "cut-answers"
    world = start_world(tmp_path, 3, seed=5, streams=[stream])
    try:
        wait_for_full_isr(world.cluster, stream, timeout=60)
        old, _ = probe_write(world.cluster, stream, ProbeLog(), timeout=30)
        others = [n for n in world.node_ids if n != old]
        address = world.address(old)
        [led] = metadata_raw(address, [stream]).topics[0].partitions
        assert (led.leader_id, led.error_code) == (old, 0) and led.leader_epoch >= 0
        world.links.partition([[old], others])

        def sends_elsewhere() -> object:
            response = metadata_raw(address, [stream])
            [partition] = response.topics[0].partitions
            return response if partition.leader_id in others else None
        response = wait_until(sends_elsewhere, 30, f"node {old}, cut off, naming another node as {stream}'s leader")
        # Itself too: librdkafka drops a broker left out, and loses the leader it just learned
        # with it (server/cut_off.py).
        assert sorted(b.node_id for b in response.brokers) == world.node_ids
        assert response.controller_id in others
        # Groups and transactions: coordinated by another node, not by this one, which could
        # coordinate nothing (and would be asked again after each NOT_COORDINATOR).
        assert coordinator_raw(address, "cut-group") in [(0, n) for n in others]
        [topic] = response.topics
        assert topic.error_code == 0 and topic.partitions[0].error_code == 0
        # The epoch after its own (the others elect in a later term), not -1: a client that took
        # this answer drops as outdated the Metadata of a follower that still names this node
        # (KIP-320), instead of going back and forth (ReplicaManager.leader_when_cut_off).
        assert topic.partitions[0].leader_epoch == led.leader_epoch + 1
        assert produce_raw(address, stream, one_record_batch(b"held?"))[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert fetch_raw(address, stream, 0)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert fetch_raw(address, stream, 0, version=None)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER  # follower reads too
        # The others elect a leader among themselves and say so.
        new, _ = probe_write(world.cluster, stream, ProbeLog(), timeout=30, exclude=[old])
        assert new in others
        world.links.heal()

        def agrees() -> bool:
            [mine] = metadata_raw(address, [stream]).topics[0].partitions
            [theirs] = metadata_raw(world.address(new), [stream]).topics[0].partitions
            return mine.leader_epoch >= 0 and (mine.leader_id, mine.leader_epoch) == (theirs.leader_id, theirs.leader_epoch)
        # Healed, it follows the leader again: first-hand answers (with the epoch), as the others'.
        wait_until(agrees, 30, f"node {old} naming {stream}'s leader and epoch as node {new} does once healed")
    finally:
        world.close()


def test_a_follower_cut_from_the_leader_only_names_the_leader_the_others_follow(tmp_path: Path) -> None:
    """Bridge: the link between the leader and one follower cut. That follower forgets the
    leader and can win no election (the bridge node still hears the leader), so it knows no
    leader of its own; it says the one the bridge node follows, not "no leader" (which a client
    bootstrapped there would ask again, there, for as long as the cut lasts)."""
    stream = "bridged"
    world = start_world(tmp_path, 3, seed=9, streams=[stream])
    try:
        wait_for_full_isr(world.cluster, stream, timeout=60)
        probes = ProbeLog()
        leader, _ = probe_write(world.cluster, stream, probes, timeout=30)
        follower, bridge = [n for n in world.node_ids if n != leader]
        world.links.cut(leader, follower)
        address = world.address(follower)
        cut = time.monotonic()
        answers: list[tuple[float, int, int]] = []  # (seconds after the cut, error code, leader)

        def answered_for(seconds: float) -> bool:
            # Writes at the leader keep its group awake, as producers would.
            assert produce_raw(world.address(leader), stream, one_record_batch(b"w"))[0] == 0
            [partition] = metadata_raw(address, [stream]).topics[0].partitions
            answers.append((time.monotonic() - cut, int(partition.error_code), int(partition.leader_id)))
            return answers[-1][0] >= seconds
        # The follower forgets the silent leader after an election timeout (1 s); from then on
        # it must still name the leader (a few seconds of answers, measured).
        wait_until(lambda: answered_for(8.0), 60, "eight seconds of Metadata answers")
        late = [(round(t, 2), code, named) for t, code, named in answers if t >= 5.0]
        assert late and all((code, named) == (0, leader) for _, code, named in late), \
            f"node {follower} (cut from leader {leader}, bridged by {bridge}) answered {late[:5]}"
        response = metadata_raw(address, [stream])
        assert [(p.error_code, p.leader_id) for p in response.topics[0].partitions] == [(0, leader)]
        assert sorted(b.node_id for b in response.brokers) == world.node_ids  # not cut off: it names itself
    finally:
        world.close()

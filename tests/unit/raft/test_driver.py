"""RaftGroup/RaftHost carrying a stream, on the in-memory network and the virtual clock
(tests/support/raft_groups.py): three real drivers over real StreamLogs in tmp dirs, a Partition
over each node's group (Kafka offsets and the high watermark live there, the group knows
entries). Times are virtual: a deadline is a bound on the protocol, not on the machine's speed.
The same scenarios over real TCP: tests/integration/test_raft_driver.py."""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path

import pytest

from tests.support.raft_groups import GROUP, TICK, Cluster, Delivery, batch, produce, run, until
from tests.support.waiting import within
from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.raft.config import RaftConfig
from vdl_broker.raft.group import RaftGroup
from vdl_broker.raft.persistence import load_commit_point
from vdl_broker.raft.proposals import ProposalLostError
from vdl_broker.raft.types import EntryType
from vdl_broker.server.partition import PartitionError
from vdl_wire.records.record_batch import read_records

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]


def test_elect_replicate_commit(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        leader = await c.leader()
        assert sum(g.is_leader for g in c.groups()) == 1
        for g in c.groups():
            assert await g.wait_for(lambda g: g.leader_id == leader.node_id, 5)
        follower = next(g for g in c.groups() if not g.is_leader).node_id
        with pytest.raises(PartitionError, match="does not lead"):
            c.partition(follower).append(batch(b"x"))
        offsets = await produce(c, leader, [f"v{i}".encode() for i in range(200)])
        assert offsets == list(range(200))
        last = leader.last_index
        await c.all_committed(last)
        for g in c.groups():
            assert c.partition(g.node_id).high_watermark == 200
            assert c.applied[g.node_id][-1] == last
        reference = c.entries(leader.node_id, last)
        for i in c.ids:
            assert c.entries(i, last) == reference
        values = [r.value for e in reference if e[2] == EntryType.DATA for r in read_records(e[3])]
        assert values == [f"v{i}".encode() for i in range(200)]
        assert await leader.wait_for(lambda g: all(s.match == last for s in g.peer_status().values()), 5)
        assert leader.in_sync_replicas() == [1, 2, 3]
        durable = c.partition(leader.node_id).append(batch(b"d")).proposal
        assert durable is not None
        assert await within(durable.durable, 5) == durable.index
        await within(durable.committed, 5)
    run(tmp_path, body)


def test_restart_follower_catches_up_from_disk(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        leader = await c.leader()
        await produce(c, leader, [b"a"] * 20)
        follower = next(i for i in c.ids if i != leader.node_id)
        await c.stop_node(follower)
        offsets = await produce(c, leader, [b"b"] * 30)  # a majority (2 of 3) still commits
        assert offsets == list(range(20, 50))
        await c.start_node(follower)
        g = c.group(follower)
        last = leader.last_index
        assert await g.wait_for(lambda g: g.applied_index >= last, 10)
        assert c.partition(follower).high_watermark == 50
        assert c.entries(follower, last) == c.entries(leader.node_id, last)
        assert g.leader_id == leader.node_id
    run(tmp_path, body)


def test_graceful_leader_stop_transfers_and_restart_rejoins(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        leader = await c.leader()
        await produce(c, leader, [b"x"] * 10)
        old = leader.node_id
        roles: list[tuple[int, str]] = []
        for g in c.groups():
            g.add_role_listener(lambda g: roles.append((g.node_id, g.role.name)))
        loop = asyncio.get_running_loop()
        started = loop.time()
        await c.stop_node(old, transfer=True)
        new = await c.leader(timeout=5)
        assert new.node_id != old
        assert (old, "FOLLOWER") in roles and (new.node_id, "LEADER") in roles
        # A transfer needs no election timeout (TimeoutNow skips PreVote and the lease): a few
        # network round trips, well under the 10 ticks of the shortest election timeout.
        assert loop.time() - started < 10 * TICK
        assert await produce(c, new, [b"y"] * 5) == list(range(10, 15))
        await c.start_node(old)
        last = new.last_index
        await c.all_committed(last)
        assert c.entries(old, last) == c.entries(new.node_id, last)
    run(tmp_path, body)


def test_partitioned_leader_entries_are_truncated(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        leader = await c.leader()
        await produce(c, leader, [b"committed"] * 5)
        await c.all_committed(leader.last_index)
        old = leader.node_id
        c.network.isolate(old)
        doomed = [c.partition(old).append(batch(b"lost")) for _ in range(3)]
        assert [handle.base_offset for handle in doomed] == [5, 6, 7]
        new = await c.leader(timeout=10, exclude=old)
        written = await produce(c, new, [b"new-a", b"new-b"])
        assert written == [5, 6]  # the new leader reuses the offsets the old one never committed
        c.network.heal()
        for handle in doomed:
            assert handle.proposal is not None
            with pytest.raises(ProposalLostError):
                await within(handle.proposal.committed, 10)
        last = new.last_index
        await c.all_committed(last)
        assert not c.group(old).is_leader
        reference = c.entries(new.node_id, last)
        assert c.entries(old, last) == reference
        assert c.logs[old].last_index == last
        assert b"lost" not in b"".join(e[3] for e in reference)
        assert c.partition(old).high_watermark == 7
    run(tmp_path, body)


def test_idle_groups_quiesce_and_only_node_heartbeats_remain(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        names = [f"q{k}" for k in range(24)]
        logs: list[StreamLog] = []
        for i, host in c.hosts.items():
            for name in names:
                log = StreamLog.open(c.tmp / f"node{i}" / name, LogConfig(fsync=False))
                logs.append(log)
                host.create_group(name, c.ids, log)
        try:
            groups = [h.groups[n] for h in c.hosts.values() for n in [*names, GROUP]]
            await until(lambda: all(g.quiescent for g in groups), 10)
            await until(lambda: all(h.awake_groups() == 0 for h in c.hosts.values()), TICK)  # next tick
            t1 = c.hosts[1].transport
            before = (t1.stats(2).messages_sent, t1.stats(2).heartbeats_sent)
            await asyncio.sleep(TICK * 10)  # ten ticks of an idle node pair
            assert t1.stats(2).messages_sent == before[0], "a quiescent group sent Raft messages"
            assert t1.stats(2).heartbeats_sent - before[1] == 10, "one node heartbeat per tick and pair"
            # A write wakes its group only, commits on every node, and the group goes quiet again.
            leader = next(g for g in groups if g.name == "q3" and g.is_leader)
            proposal = leader.propose(batch(b"wake"), EntryType.DATA)
            await within(proposal.committed, 5)
            assert [g.name for g in groups if not g.quiescent] == ["q3"] * 3
            await until(lambda: all(g.quiescent for g in groups), 10)
            assert all(g.commit_index == leader.commit_index for g in groups if g.name == "q3")
        finally:
            for host in c.hosts.values():
                for name in names:
                    await host.remove_group(name)
            for log in logs:
                log.close()
    run(tmp_path, body)


def test_single_voter_group_elects_itself(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        g = c.group(1)
        assert await g.wait_for(lambda g: g.leader_ready, 5)
        assert await produce(c, g, [b"solo"] * 3) == [0, 1, 2]
        # Entries that are not Kafka data take no offsets: the next batch continues at 3.
        for payload, entry_type in ((b"", EntryType.NOOP), (b'{"op":"x"}', EntryType.METADATA)):
            proposal = g.propose(payload, entry_type)
            assert await within(proposal.committed, 5) == proposal.index
        assert await produce(c, g, [b"still fine"]) == [3]
        assert [(e[2], e[3]) for e in c.entries(1, g.last_index)][-3:-1] == [
            (EntryType.NOOP, b""), (EntryType.METADATA, b'{"op":"x"}')]
    run(tmp_path, body, n=1)


def test_many_groups_coalesce_their_heartbeats_into_few_frames(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        names = [f"s{k}" for k in range(24)]
        logs: list[StreamLog] = []
        awake = RaftConfig(election_ticks=10, quiesce_after_heartbeats=0)  # heartbeats all along
        for i, host in c.hosts.items():
            for name in names:
                log = StreamLog.open(c.tmp / f"node{i}" / name, LogConfig(fsync=False))
                logs.append(log)
                host.create_group(name, c.ids, log, config=awake)
        try:
            groups = [h.groups[n] for h in c.hosts.values() for n in names]
            await until(lambda: all(any(g.leader_ready for g in groups if g.name == n) for n in names), 10)
            t1 = c.hosts[1].transport
            before = (t1.stats(2).frames_sent, t1.stats(2).messages_sent)
            await asyncio.sleep(TICK * 10)  # observe ten ticks of idle heartbeating
            frames = t1.stats(2).frames_sent - before[0]
            messages = t1.stats(2).messages_sent - before[1]
            # Per tick, node 1 tells node 2 one thing per group led by either of them (its
            # heartbeat, or its response to node 2's), in two frames: all its heartbeats leave
            # together, and so do all its responses.
            leaders = [g.node_id for g in groups if g.is_leader]
            assert leaders.count(1) > 0 and leaders.count(2) > 0 and leaders.count(3) > 0
            assert messages == 10 * (leaders.count(1) + leaders.count(2))
            assert frames == 2 * 10
        finally:
            for host in c.hosts.values():
                for name in names:
                    await host.remove_group(name)
            for log in logs:
                log.close()
    run(tmp_path, body)


async def lag_behind_retention(c: Cluster) -> tuple[RaftGroup, int]:
    """(leader, a stopped follower) after retention deleted, on the others, entries it lacks."""
    leader = await c.leader()
    await produce(c, leader, [b"early"] * 5)
    lagger = next(i for i in c.ids if i != leader.node_id)
    await c.all_committed(leader.last_index)
    await c.stop_node(lagger)
    for _ in range(6):
        await produce(c, leader, [b"r" * 200] * 10)  # segments of ~1 KiB roll often
    other = next(i for i in c.ids if i not in (leader.node_id, lagger))
    await c.all_committed(leader.last_index)
    for i in (leader.node_id, other):
        assert c.logs[i].apply_retention(max_index=c.group(i).commit_index) > 0
    return leader, lagger


def test_follower_behind_retention_restarts_from_the_leaders_log_start(tmp_path: Path) -> None:
    """The entries a follower needs were deleted by retention on the leader, so it receives the
    leader's log start (a "snapshot") and continues from there."""
    async def body(c: Cluster) -> None:
        leader, lagger = await lag_behind_retention(c)
        start = c.logs[leader.node_id].log_start_offset
        assert start > 5 and c.logs[leader.node_id].first_index > 7
        await c.start_node(lagger)
        g = c.group(lagger)
        last = leader.last_index
        assert await g.wait_for(lambda g: g.applied_index >= last, 10)
        assert c.logs[lagger].log_start_offset == c.logs[leader.node_id].log_start_offset
        assert c.logs[lagger].first_index == c.logs[leader.node_id].first_index
        assert c.partition(lagger).high_watermark == c.partition(leader.node_id).high_watermark == 65
        assert c.entries(lagger, last) == c.entries(leader.node_id, last)
        assert await produce(c, leader, [b"after"]) == [65]
        await c.all_committed(leader.last_index)
    run(tmp_path, body, log_config=LogConfig(fsync=False, segment_bytes=1024, retention_bytes=1))


def test_a_follower_that_cannot_reset_its_log_tries_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A follower behind retention whose disk refuses its log's reset to the leader's log start
    (a full disk) waits and tries again, then catches up: the reset stopped its Raft group for
    good, as a refused cut of conflicting entries did (make chaos)."""
    refusals = {"left": 3}
    real_reset = StreamLog.reset

    def reset(log: StreamLog, first_index: int, previous_term: int, start_offset: int) -> None:
        if refusals["left"]:
            refusals["left"] -= 1
            raise OSError(errno.ENOSPC, "No space left on device")
        real_reset(log, first_index, previous_term, start_offset)

    async def body(c: Cluster) -> None:
        leader, lagger = await lag_behind_retention(c)
        monkeypatch.setattr(StreamLog, "reset", reset)
        await c.start_node(lagger)
        g = c.group(lagger)
        last = leader.last_index
        assert await g.wait_for(lambda g: g.applied_index >= last, 10)
        assert refusals["left"] == 0 and g.failure is None
        assert c.logs[lagger].first_index == c.logs[leader.node_id].first_index
        assert c.entries(lagger, last) == c.entries(leader.node_id, last)
        assert c.partition(lagger).high_watermark == c.partition(leader.node_id).high_watermark == 65
    run(tmp_path, body, log_config=LogConfig(fsync=False, segment_bytes=1024, retention_bytes=1))


def test_restart_resumes_from_the_commit_point(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        leader = await c.leader()
        await produce(c, leader, [b"a"] * 20)
        last = leader.last_index
        await c.all_committed(last)
        follower = next(i for i in c.ids if i != leader.node_id)
        await c.stop_node(follower)  # a clean stop saves the commit point
        await c.start_node(follower)
        g = c.group(follower)
        # Known committed before hearing from anyone: no replay of the old entries.
        assert g.commit_index == last and c.partition(follower).high_watermark == 20
        await produce(c, leader, [b"b"] * 5)
        assert await g.wait_for(lambda g: g.applied_index == leader.last_index, 10)
        assert c.applied[follower] and min(c.applied[follower]) > last
        assert c.partition(follower).high_watermark == 25
    run(tmp_path, body, resume=True)


def test_a_group_going_quiet_saves_its_commit_point(tmp_path: Path) -> None:
    """Quiet groups are not ticked, so the periodic save (every 20 ticks) cannot be what saves
    the entries applied just before going quiet: a follower told to go quiet by its leader kept
    an old commit point (a longer replay at its next start) until its next write."""
    async def body(c: Cluster) -> None:
        leader = await c.leader()
        for round_ in range(4):  # each round, the quiet moment falls elsewhere between two saves
            await produce(c, leader, [f"r{round_}".encode()] * 3)
            await c.all_committed(leader.last_index)
            await until(lambda: all(g.quiescent for g in c.groups()), 10)
            await until(lambda: all(load_commit_point(c.logs[g.node_id]) == g.applied_index == leader.last_index
                                    for g in c.groups()), 3)
    run(tmp_path, body, resume=True)


def test_crashed_leader_is_replaced_and_catches_up_after_recovery(tmp_path: Path) -> None:
    async def body(c: Cluster) -> None:
        leader = await c.leader()
        await produce(c, leader, [b"before"] * 10)
        old = leader.node_id
        await c.stop_node(old, crash=True)
        new = await c.leader(timeout=10)
        assert new.node_id != old and c.partition(new.node_id).high_watermark >= 10
        assert await produce(c, new, [b"after"] * 10) == list(range(10, 20))
        await c.start_node(old)
        last = new.last_index
        await c.all_committed(last)
        assert c.entries(old, last) == c.entries(new.node_id, last)
        assert c.partition(old).high_watermark == 20
    run(tmp_path, body)


def test_a_graceful_stop_returns_after_the_role_listeners_heard_of_the_step_down(tmp_path: Path) -> None:
    """stop(transfer=True) cancels the Ready loop once the core no longer leads: the Ready that
    carries the step-down must have reached the role listeners by then (a server closes its
    leader-only state there), even with writes in flight when the transfer starts."""
    async def body(c: Cluster) -> None:
        leader = await c.leader()
        await produce(c, leader, [b"x"] * 5)
        old = leader.node_id
        roles: list[tuple[str, bool]] = []
        leader.add_role_listener(lambda g: roles.append((g.role.name, g.is_leader)))
        pending = [c.partition(old).append(batch(b"w")) for _ in range(3)]
        await c.stop_node(old, transfer=True)
        assert roles == [("FOLLOWER", False)]
        assert [handle.base_offset for handle in pending] == [5, 6, 7]
        new = await c.leader(exclude=old)
        assert await produce(c, new, [b"y"]) == [8]
    run(tmp_path, body)


def test_a_graceful_stop_during_a_step_down_lets_the_role_listeners_hear_of_it(tmp_path: Path) -> None:
    """The node is told to stop as a vote request in a newer term reaches it: its core steps
    down at once, its Ready loop has not carried that out yet. A graceful stop lets it finish
    (the new term saved, the vote sent, the role listeners told) before cancelling the loop."""
    async def body(c: Cluster) -> None:
        leader = await c.leader()
        await produce(c, leader, [b"x"] * 5)
        old = leader.node_id
        target = next(i for i in c.ids if i != old)
        roles: list[tuple[str, int]] = []
        leader.add_role_listener(lambda g: roles.append((g.role.name, g.term)))
        stopping: list[asyncio.Task[None]] = []

        def on_delivery(delivery: Delivery) -> None:
            if delivery.to == old and delivery.type == "VOTE" and not stopping:
                stopping.append(asyncio.ensure_future(c.stop_node(old, transfer=True)))
        c.network.on_delivery = on_delivery
        leader.transfer_leadership(target)
        new = await c.leader(exclude=old)
        assert new.node_id == target
        await stopping[0]
        assert roles == [("FOLLOWER", leader.term)]
        assert leader.term == new.term == 2
    run(tmp_path, body)


def test_lost_answers_to_commit_notices_do_not_keep_a_group_awake(tmp_path: Path) -> None:
    """Seed 8: the leader sends a caught-up follower two empty appends (commit notices) whose
    answers the lossy link drops. Their inflight slots (last index 22 = the follower's match)
    are freed by no later answer -- nothing more is sent, and a heartbeat answer frees nothing --
    and a follower with appends in flight keeps its leader from quiescing until the next write."""
    async def body(c: Cluster) -> None:
        leader = await c.leader()
        old = leader.node_id
        c.network.isolate(old)
        new = await c.leader(exclude=old)
        c.network.heal()
        c.network.drop_rate = 0.2
        await produce(c, new, [f"b{i}".encode() for i in range(20)])
        c.network.drop_rate = 0.0
        await c.all_committed(new.last_index)
        await until(lambda: all(g.quiescent for g in c.groups()), 10, "every replica quiet")
    run(tmp_path, body, seed=8)


async def settled(c: Cluster) -> tuple[RaftGroup, int, int]:
    """The leader once 5 records are committed everywhere, and its followers (lower id first)."""
    leader = await c.leader()
    await produce(c, leader, [b"x"] * 5)
    await c.all_committed(leader.last_index)
    lower, higher = sorted(i for i in c.ids if i != leader.node_id)
    return leader, lower, higher


def test_a_whole_cluster_stopping_at_once_does_not_wait_out_the_transfers(tmp_path: Path) -> None:
    """Every node stops gracefully at the same moment (stop every node of a cluster, `docker
    compose down`): the leader's transferee is stopping too and ignores TIMEOUT_NOW. Its LEAVING
    notice ends the leader's wait: a few network trips, not the 2 s transfer timeout."""
    async def body(c: Cluster) -> None:
        await settled(c)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await asyncio.gather(*(c.stop_node(i, transfer=True) for i in list(c.hosts)))
        assert loop.time() - started < 10 * TICK
    run(tmp_path, body)


def test_a_graceful_stop_never_hands_over_to_a_peer_that_is_leaving(tmp_path: Path) -> None:
    """Of two caught-up followers the transfer picks the higher id, unless that one said it is
    stopping: then the other takes over."""
    async def body(c: Cluster) -> None:
        leader, staying, leaving = await settled(c)
        old = leader.node_id
        c.hosts[leaving].transport.announce_leaving()
        await until(lambda: c.hosts[old].transport.is_leaving(leaving), 1, "the leader hearing of the leaving node")
        assert not c.hosts[old].transport.is_leaving(staying)
        await c.stop_node(old, transfer=True)
        new = await c.leader(timeout=5)
        assert new.node_id == staying
        assert await produce(c, new, [b"y"]) == [5]
    run(tmp_path, body)


def test_a_leader_stops_waiting_for_a_transferee_that_says_it_is_leaving(tmp_path: Path) -> None:
    """The transferee's group is stopped (it ignores TIMEOUT_NOW): the graceful stop waits for it
    -- until its node says it is leaving; then the stop hands over to the other follower at once
    instead of waiting out its timeout."""
    async def body(c: Cluster) -> None:
        leader, staying, leaving = await settled(c)
        old = leader.node_id
        await c.group(leaving).stop(transfer=False)  # its node has not said so yet
        loop = asyncio.get_running_loop()
        stopping = asyncio.ensure_future(c.stop_node(old, transfer=True))
        await asyncio.sleep(20 * TICK)  # virtual time: the transfer to `leaving` cannot land
        assert not stopping.done() and leader.is_leader
        term = leader.term
        announced = loop.time()
        c.hosts[leaving].transport.announce_leaving()
        await within(stopping, 10 * TICK)
        assert loop.time() - announced < 10 * TICK
        handovers = [(d.to, d.time >= announced) for d in c.network.trace if d.type == "TIMEOUT_NOW"]
        assert handovers == [(leaving, False), (staying, True)]
        # It campaigned at once (its new leadership needs the stopped leader's vote, which the
        # in-memory network drops with the stopped node's connection: not asserted).
        assert c.group(staying).term == term + 1
    run(tmp_path, body)

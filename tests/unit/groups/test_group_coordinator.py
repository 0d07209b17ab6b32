"""Consumer-group membership: joins, generations, pass-through assignment, timeouts."""

from __future__ import annotations

import asyncio
import itertools

from tests.support.waiting import within
from vdl_broker.groups.coordinator import CoordinatorConfig, GroupCoordinator, GroupState
from vdl_wire.errors import ErrorCode

PROTOCOLS = [("range", b"meta-range"), ("roundrobin", b"meta-rr")]


def make(initial_delay_ms: int = 0) -> GroupCoordinator:
    counter = itertools.count()
    return GroupCoordinator(CoordinatorConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=initial_delay_ms),
                            new_member_id=lambda client: f"{client}-{next(counter)}")


async def join(c: GroupCoordinator, member_id: str = "", session_ms: int = 5000, rebalance_ms: int = 5000,
               protocols=PROTOCOLS, require: bool = False, client: str = "c"):
    return await c.join_group("g", member_id, None, client, "h", session_ms, rebalance_ms,
                              "consumer", protocols, require)


def test_single_member_join_sync_heartbeat_leave() -> None:
    async def run() -> None:
        c = make()
        joined = await join(c)
        assert joined.error is ErrorCode.NONE and joined.generation_id == 1
        assert joined.leader == joined.member_id and joined.protocol_name == "range"
        assert joined.members == [(joined.member_id, None, b"meta-range")]
        synced = await c.sync_group("g", 1, joined.member_id, [(joined.member_id, b"A")])
        assert synced.error is ErrorCode.NONE and synced.assignment == b"A"
        assert c.heartbeat("g", 1, joined.member_id) is ErrorCode.NONE
        assert c.heartbeat("g", 0, joined.member_id) is ErrorCode.ILLEGAL_GENERATION
        assert c.heartbeat("g", 1, "nobody") is ErrorCode.UNKNOWN_MEMBER_ID
        assert c.leave_group("g", joined.member_id) is ErrorCode.NONE
        assert c.group("g") is None
        c.close()
    asyncio.run(run())


def test_member_id_required_for_new_protocol_versions() -> None:
    async def run() -> None:
        c = make()
        first = await join(c, require=True)
        assert first.error is ErrorCode.MEMBER_ID_REQUIRED and first.member_id
        second = await join(c, member_id=first.member_id, require=True)
        assert second.error is ErrorCode.NONE and second.member_id == first.member_id
        assert (await join(c, member_id="stranger")).error is ErrorCode.UNKNOWN_MEMBER_ID
        c.close()
    asyncio.run(run())


def test_second_member_triggers_rebalance_and_assignment_passes_through() -> None:
    async def run() -> None:
        c = make()
        a = await join(c, client="a")
        await c.sync_group("g", 1, a.member_id, [(a.member_id, b"all")])
        b_task = asyncio.create_task(join(c, client="b"))
        await asyncio.sleep(0)
        assert c.group("g").state is GroupState.PREPARING_REBALANCE
        assert c.heartbeat("g", 1, a.member_id) is ErrorCode.REBALANCE_IN_PROGRESS
        assert (await c.sync_group("g", 1, a.member_id, [])).error is ErrorCode.REBALANCE_IN_PROGRESS
        a2 = await join(c, member_id=a.member_id)
        b = await b_task
        assert a2.generation_id == b.generation_id == 2
        assert a2.leader == a.member_id and len(a2.members) == 2 and b.members == []
        follower = asyncio.create_task(c.sync_group("g", 2, b.member_id, []))
        await asyncio.sleep(0)
        assert not follower.done()
        leader = await c.sync_group("g", 2, a.member_id, [(a.member_id, b"x"), (b.member_id, b"y")])
        assert leader.assignment == b"x" and (await follower).assignment == b"y"
        assert c.group("g").state is GroupState.STABLE
        c.close()
    asyncio.run(run())


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    async def run() -> None:
        c = make()
        a = await join(c, client="a", rebalance_ms=50)
        await c.sync_group("g", 1, a.member_id, [])
        b = await within(join(c, client="b", rebalance_ms=50), 2)
        assert b.error is ErrorCode.NONE and b.generation_id == 2 and b.leader == b.member_id
        assert list(c.group("g").members) == [b.member_id]
        assert c.heartbeat("g", 2, a.member_id) is ErrorCode.UNKNOWN_MEMBER_ID
        c.close()
    asyncio.run(run())


def test_session_timeout_expires_silent_member() -> None:
    async def run() -> None:
        c = make()
        a = await join(c, client="a", session_ms=60)
        await c.sync_group("g", 1, a.member_id, [])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 2
        while c.group("g") is not None and loop.time() < deadline:
            await asyncio.sleep(0.02)
        assert c.group("g") is None
        c.close()
    asyncio.run(run())


def test_leave_completes_pending_rebalance_and_bad_inputs() -> None:
    async def run() -> None:
        c = make()
        a = await join(c, client="a")
        b_task = asyncio.create_task(join(c, client="b"))
        await asyncio.sleep(0)
        # a never rejoins but leaves: the rebalance completes with b alone.
        assert c.leave_group("g", a.member_id) is ErrorCode.NONE
        b = await within(b_task, 2)
        assert b.generation_id == 2 and b.leader == b.member_id
        assert c.leave_group("g", "ghost") is ErrorCode.UNKNOWN_MEMBER_ID
        # Kafka (GroupMetadata.supportsProtocols): a join into a non-empty group needs one protocol
        # every current member supports, the joiner's current protocols included; b offered
        # range/roundrobin, so it cannot switch to sticky alone.
        bad = await join(c, member_id=b.member_id, protocols=[("sticky", b"")])
        assert bad.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert c.group("g").generation_id == 2 and c.group("g").protocol_name == "range"
        other_type = await c.join_group("g", "", None, "c", "h", 5000, 5000, "connect", PROTOCOLS, False)
        assert other_type.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert (await c.join_group("", "", None, "c", "h", 5000, 5000, "consumer", PROTOCOLS, False)).error \
            is ErrorCode.INVALID_GROUP_ID
        assert (await join(c, session_ms=1)).error is ErrorCode.INVALID_SESSION_TIMEOUT
        c.close()
    asyncio.run(run())


def test_unchanged_follower_rejoin_gets_current_generation() -> None:
    async def run() -> None:
        c = make()
        a = await join(c, client="a")
        b_task = asyncio.create_task(join(c, client="b"))
        await asyncio.sleep(0)
        await join(c, member_id=a.member_id)
        b = await b_task
        leader_sync = asyncio.create_task(c.sync_group("g", 2, a.member_id, [(b.member_id, b"for-b")]))
        assert (await c.sync_group("g", 2, b.member_id, [])).assignment == b"for-b"
        await leader_sync
        again = await join(c, member_id=b.member_id)  # same protocols, stable, not the leader
        assert again.generation_id == 2 and c.group("g").state is GroupState.STABLE
        changed = asyncio.create_task(join(c, member_id=b.member_id, protocols=[("range", b"new")]))
        await asyncio.sleep(0)
        assert c.group("g").state is GroupState.PREPARING_REBALANCE
        changed.cancel()
        c.close()
    asyncio.run(run())


def test_join_needs_one_protocol_every_member_supports() -> None:
    async def run() -> None:
        c = make()
        a = await join(c, client="a", protocols=[("x", b""), ("y", b"")])
        assert a.error is ErrorCode.NONE
        b_task = asyncio.create_task(join(c, client="b", protocols=[("y", b""), ("z", b"")]))
        await asyncio.sleep(0)  # b is a member now, waiting for the rebalance
        assert len(c.group("g").members) == 2
        # x is a's, z is b's: each member shares one with the joiner, but no protocol is shared by all
        refused = await join(c, client="c", protocols=[("x", b""), ("z", b"")])
        assert refused.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert len(c.group("g").members) == 2
        accepted_task = asyncio.create_task(join(c, client="d", protocols=[("z", b""), ("y", b"")]))
        await asyncio.sleep(0)
        assert len(c.group("g").members) == 3
        rejoin = await join(c, member_id=a.member_id, client="a", protocols=[("x", b""), ("y", b"")])
        b, accepted = await within(asyncio.gather(b_task, accepted_task), 2)
        assert {rejoin.error, b.error, accepted.error} == {ErrorCode.NONE}
        assert rejoin.generation_id == b.generation_id == accepted.generation_id == 2
        assert c.group("g").protocol_name == "y"
        c.close()
    asyncio.run(run())


def test_default_initial_delay_is_kafkas() -> None:
    # Kafka's group.initial.rebalance.delay.ms defaults to 3000 (broker configs).
    assert CoordinatorConfig().initial_rebalance_delay_ms == 3_000


def test_members_joining_within_the_initial_delay_form_one_generation() -> None:
    async def run() -> None:
        # The sleeps place the joins on the delay's timeline (the behaviour under test is a
        # timer); a second-long delay leaves ample margin for a busy machine's late wake-ups.
        c = make(initial_delay_ms=1000)
        loop = asyncio.get_running_loop()
        started = loop.time()
        first = asyncio.create_task(join(c, client="a"))
        await asyncio.sleep(0.3)
        # b joins during the first delay, so the coordinator waits one delay more (Kafka's
        # InitialDelayedJoin) before the first generation.
        second = asyncio.create_task(join(c, client="b"))
        await asyncio.sleep(0.3)
        assert not first.done() and c.group("g").state is GroupState.PREPARING_REBALANCE
        a, b = await asyncio.gather(first, second)
        assert loop.time() - started >= 2.0
        assert a.generation_id == b.generation_id == 1 and a.leader == a.member_id
        assert sorted(m for m, _, _ in a.members) == sorted([a.member_id, b.member_id]) and b.members == []
        c.close()
    asyncio.run(run())


def test_initial_delay_never_runs_past_the_rebalance_timeout() -> None:
    async def run() -> None:
        c = make(initial_delay_ms=10_000)
        loop = asyncio.get_running_loop()
        started = loop.time()
        a = await join(c, client="a", rebalance_ms=150)
        assert a.generation_id == 1 and 0.15 <= loop.time() - started < 5
        c.close()
    asyncio.run(run())


def test_member_id_handed_out_stays_valid_after_the_join_completes() -> None:
    async def run() -> None:
        c = make(initial_delay_ms=50)
        a_id = (await join(c, client="a", require=True)).member_id
        b_id = (await join(c, client="b", require=True)).member_id
        a = await join(c, member_id=a_id, require=True)  # b has not come back within the delay
        assert a.generation_id == 1 and [m for m, _, _ in a.members] == [a_id]
        await c.sync_group("g", 1, a_id, [(a_id, b"all")])
        # Kafka keeps a pending member until its session times out: b joining now is a new
        # member of the next generation, not an UNKNOWN_MEMBER_ID.
        b_task = asyncio.create_task(join(c, member_id=b_id, require=True))
        await asyncio.sleep(0)
        assert c.heartbeat("g", 1, a_id) is ErrorCode.REBALANCE_IN_PROGRESS
        a2 = await join(c, member_id=a_id, require=True)
        b = await b_task
        assert a2.generation_id == b.generation_id == 2 and b.error is ErrorCode.NONE
        assert sorted(m for m, _, _ in a2.members) == sorted([a_id, b_id])
        c.close()
    asyncio.run(run())


# -- commits and the replicated form of a group ---------------------------------------------------

def test_commit_checks_follow_kafka() -> None:
    from vdl_broker.groups.commits import check_commit

    async def run() -> None:
        c = make()
        assert check_commit(None, -1, "") is ErrorCode.NONE  # standalone commit
        assert check_commit(None, 3, "gone") is ErrorCode.ILLEGAL_GENERATION
        joined = await join(c)
        group = c.group("g")
        assert check_commit(group, 1, joined.member_id) is ErrorCode.REBALANCE_IN_PROGRESS
        await c.sync_group("g", 1, joined.member_id, [(joined.member_id, b"A")])
        assert check_commit(group, 1, joined.member_id) is ErrorCode.NONE
        assert check_commit(group, 0, joined.member_id) is ErrorCode.ILLEGAL_GENERATION
        assert check_commit(group, 1, "stranger") is ErrorCode.UNKNOWN_MEMBER_ID
        assert check_commit(group, -1, "") is ErrorCode.UNKNOWN_MEMBER_ID  # no standalone commits to a live group
        c.close()
    asyncio.run(run())


def test_transactional_commit_checks_follow_kafka() -> None:
    """TxnOffsetCommit v3+ (KIP-447): a consumer fenced out of the group commits nothing; a
    commit naming no member always may (Kafka's ClassicGroup.validateOffsetCommit, transactional)."""
    from vdl_broker.groups.commits import check_txn_commit

    async def run() -> None:
        c = make()
        assert check_txn_commit(None, False, -1, "", None) is ErrorCode.NONE
        assert check_txn_commit(None, False, 3, "gone", None) is ErrorCode.ILLEGAL_GENERATION
        assert check_txn_commit(None, True, 3, "gone", None) is ErrorCode.UNKNOWN_MEMBER_ID  # an emptied group
        joined = await c.join_group("g", "", "instance-1", "c", "h", 5000, 5000, "consumer", PROTOCOLS, False)
        group = c.group("g")
        # Unlike OffsetCommit, not refused while the generation's assignment is not out yet.
        assert check_txn_commit(group, True, 1, joined.member_id, "instance-1") is ErrorCode.NONE
        await c.sync_group("g", 1, joined.member_id, [(joined.member_id, b"A")])
        assert check_txn_commit(group, True, 1, joined.member_id, "instance-1") is ErrorCode.NONE
        assert check_txn_commit(group, True, 0, joined.member_id, "instance-1") is ErrorCode.ILLEGAL_GENERATION
        assert check_txn_commit(group, True, 1, "stranger", None) is ErrorCode.UNKNOWN_MEMBER_ID
        assert check_txn_commit(group, True, 1, "stranger", "instance-1") is ErrorCode.FENCED_INSTANCE_ID
        assert check_txn_commit(group, True, 1, joined.member_id, "instance-2") is ErrorCode.UNKNOWN_MEMBER_ID
        assert check_txn_commit(group, True, -1, "", None) is ErrorCode.NONE  # names no member: v0-2
        c.close()
    asyncio.run(run())


def test_settled_generations_are_reported_and_restored_on_a_new_coordinator() -> None:
    from vdl_broker.cluster.groups import StoredGroup
    from vdl_broker.groups.commits import restore_group, stored_members

    async def run() -> None:
        settled: list[tuple[str, int, int]] = []
        counter = itertools.count()
        c = GroupCoordinator(CoordinatorConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=0),
                             new_member_id=lambda client: f"{client}-{next(counter)}",
                             on_settled=lambda g: settled.append((g.state.value, g.generation_id, len(g.members))))
        joined = await join(c)
        await c.sync_group("g", 1, joined.member_id, [(joined.member_id, b"A")])
        assert settled == [("Stable", 1, 1)]
        group = c.group("g")
        stored = StoredGroup("g", group.generation_id, group.protocol_type, group.protocol_name, group.leader_id,
                             tuple(stored_members(group)), 0)
        c.leave_group("g", joined.member_id)
        assert settled[-1] == ("Empty", 2, 0)
        c.close()
        # A new coordinator takes the stored generation over: the member heartbeats on, unchanged.
        fresh = make()
        fresh.adopt(restore_group(stored))
        assert fresh.heartbeat("g", 1, joined.member_id) is ErrorCode.NONE
        synced = await fresh.sync_group("g", 1, joined.member_id, [])
        assert synced.error is ErrorCode.NONE and synced.assignment == b"A"
        fresh.close()
    asyncio.run(run())


def test_a_recreated_group_continues_its_stored_generations() -> None:
    async def run() -> None:
        c = GroupCoordinator(CoordinatorConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=0),
                             initial_generation=lambda group_id: 7)
        assert (await join(c)).generation_id == 8
        c.close()
    asyncio.run(run())


async def _static_join(c: GroupCoordinator, instance: str, client: str, member_id: str = "",
                       protocols=PROTOCOLS):
    return await c.join_group("g", member_id, instance, client, "h", 5000, 5000, "consumer", protocols, True)


def test_a_restarted_static_member_takes_its_place_without_a_rebalance() -> None:
    """KIP-345: a static member joins without MEMBER_ID_REQUIRED; the same group.instance.id
    joining again (a restart: the old process sent no LeaveGroup) replaces the old member at
    once, in the same generation and with its assignment, and the old member id is fenced."""
    async def run() -> None:
        settled: list[tuple[int, list[str]]] = []
        counter = itertools.count()
        c = GroupCoordinator(CoordinatorConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=0),
                             new_member_id=lambda client: f"{client}-{next(counter)}",
                             on_settled=lambda g: settled.append((g.generation_id, list(g.members))))
        a = await _static_join(c, "instance-a", "a")
        assert (a.error, a.member_id, a.generation_id, a.leader) == (ErrorCode.NONE, "a-0", 1, "a-0")
        b_task = asyncio.create_task(_static_join(c, "instance-b", "b"))
        await asyncio.sleep(0)
        a = await _static_join(c, "instance-a", "a", member_id="a-0")
        b = await b_task
        assert (a.generation_id, b.generation_id, b.member_id) == (2, 2, "b-1")
        follower = asyncio.create_task(c.sync_group("g", 2, "b-1", [], group_instance_id="instance-b"))
        await c.sync_group("g", 2, "a-0", [("a-0", b"A"), ("b-1", b"B")], group_instance_id="instance-a")
        assert (await follower).assignment == b"B"

        # The leader's instance restarts: same generation, no rebalance, the old leader's id
        # named as leader so the new member does not assign.
        restarted = await _static_join(c, "instance-a", "a")
        assert (restarted.error, restarted.member_id, restarted.generation_id, restarted.leader,
                restarted.members) == (ErrorCode.NONE, "a-2", 2, "a-0", [])
        group = c.group("g")
        assert group.state is GroupState.STABLE and group.leader_id == "a-2"
        assert settled[-1] == (2, ["b-1", "a-2"])  # replicated with the new member id
        synced = await c.sync_group("g", 2, "a-2", [], group_instance_id="instance-a")
        assert (synced.error, synced.assignment) == (ErrorCode.NONE, b"A")
        assert c.heartbeat("g", 2, "a-2", "instance-a") is ErrorCode.NONE
        assert c.heartbeat("g", 2, "b-1", "instance-b") is ErrorCode.NONE

        # The old instance, still running, is fenced on every request naming its instance id.
        assert c.heartbeat("g", 2, "a-0", "instance-a") is ErrorCode.FENCED_INSTANCE_ID
        assert (await c.sync_group("g", 2, "a-0", [], group_instance_id="instance-a")).error \
            is ErrorCode.FENCED_INSTANCE_ID
        assert (await _static_join(c, "instance-a", "a", member_id="a-0")).error is ErrorCode.FENCED_INSTANCE_ID
        from vdl_broker.groups.commits import check_commit
        assert check_commit(group, 2, "a-0", "instance-a") is ErrorCode.FENCED_INSTANCE_ID
        assert check_commit(group, 2, "a-2", "instance-a") is ErrorCode.NONE
        assert check_commit(group, 2, "a-2", "instance-x") is ErrorCode.UNKNOWN_MEMBER_ID
        assert c.heartbeat("g", 2, "a-0") is ErrorCode.UNKNOWN_MEMBER_ID  # no instance id: just gone
        assert c.group("g").state is GroupState.STABLE

        # LeaveGroup v3+ by instance id alone (the admin clients' removeMembersFromConsumerGroup).
        assert c.leave_group("g", "b-0", "instance-b") is ErrorCode.FENCED_INSTANCE_ID
        assert c.leave_group("g", "", "instance-x") is ErrorCode.UNKNOWN_MEMBER_ID
        assert c.leave_group("g", "", "instance-b") is ErrorCode.NONE
        assert list(c.group("g").members) == ["a-2"] and c.group("g").state is GroupState.PREPARING_REBALANCE
        c.close()
    asyncio.run(run())


def test_a_static_member_restarting_during_a_rebalance_joins_it() -> None:
    """A restart while the generation is completing redoes it (the leader may be assigning to
    the old member id), and the old instance's parked SyncGroup is fenced."""
    async def run() -> None:
        counter = itertools.count()
        c = GroupCoordinator(CoordinatorConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=0),
                             new_member_id=lambda client: f"{client}-{next(counter)}")
        a = await _static_join(c, "instance-a", "a")
        b_task = asyncio.create_task(_static_join(c, "instance-b", "b"))
        await asyncio.sleep(0)
        await _static_join(c, "instance-a", "a", member_id=a.member_id)
        b = await b_task
        assert c.group("g").state is GroupState.COMPLETING_REBALANCE and b.generation_id == 2
        parked_sync = asyncio.create_task(c.sync_group("g", 2, b.member_id, [], group_instance_id="instance-b"))
        await asyncio.sleep(0)
        restarted = asyncio.create_task(_static_join(c, "instance-b", "b"))
        assert (await parked_sync).error is ErrorCode.FENCED_INSTANCE_ID
        assert c.group("g").state is GroupState.PREPARING_REBALANCE
        rejoined = await _static_join(c, "instance-a", "a", member_id=a.member_id)
        assert (rejoined.generation_id, sorted(m for m, _, _ in rejoined.members)) == (3, ["a-0", "b-2"])
        assert ((await restarted).error, (await restarted).generation_id) == (ErrorCode.NONE, 3)
        c.close()
    asyncio.run(run())

"""Membership changes through the real driver: RaftGroups over StreamLogs on the in-memory network
and the virtual clock (tests/support/raft_groups.py). A replica joins knowing no configuration,
gets the log start (with the configuration in force there) after retention, is promoted; a voter
leaves; every replica restarts into the configuration it had, from its saved records."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.support import virtual_time
from tests.support.raft_groups import Cluster, produce, until
from tests.support.waiting import within
from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.raft.group import RaftGroup
from vdl_broker.raft.membership import ConfigChangeError
from vdl_broker.raft.persistence import load_membership
from vdl_broker.raft.types import ConfState
from vdl_broker.server.partition import Partition

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]


class MembershipCluster(Cluster):
    """Nodes 1..3 create the group; later nodes join it (no configuration of their own)."""

    def __init__(self, tmp: Path, log_config: LogConfig) -> None:
        super().__init__(tmp, 3, log_config)
        self.initial = list(self.ids)

    async def start_node(self, i: int) -> None:
        if i not in self.ids:
            self.ids.append(i)
            self.applied[i] = []
        joining = i not in self.initial
        saved_ids, self.ids = self.ids, (self.initial if not joining else [])
        try:
            await super().start_node(i)  # creates the group with voters = self.ids
        finally:
            self.ids = saved_ids


async def change(leader: RaftGroup, conf: ConfState, timeout: float = 10.0) -> None:
    """Propose `conf` (retrying while the previous change or the leader's first commit is
    pending) and wait for its commit."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            proposal = leader.propose_conf_change(conf)
            break
        except ConfigChangeError:
            assert loop.time() < deadline, "the change stayed refused"
            await leader.wait_for(lambda g: not g.node.conf_pending, 0.2)
    await within(proposal.committed, timeout)


RETAINED = LogConfig(fsync=False, segment_bytes=4096, retention_bytes=8192)


def run(tmp_path: Path, body: Callable[[MembershipCluster, RaftGroup], Awaitable[None]],
        log_config: LogConfig = RETAINED, recovery_rate: int | None = None) -> None:
    """Start nodes 1-3, wait for a leader, run `body(cluster, leader)`, close everything."""
    async def main() -> None:
        c = MembershipCluster(tmp_path, log_config)
        c.recovery_rate = recovery_rate
        await c.start()
        try:
            await body(c, await c.leader())
        finally:
            await c.close()
    virtual_time.run(main())


async def load(c: MembershipCluster, leader: RaftGroup, values: list[bytes], retention: bool = False) -> None:
    """Produce `values`, wait until every node applied them, then (if asked) apply retention."""
    await produce(c, leader, values)
    await c.all_committed(leader.last_index)
    if retention:
        for i in c.initial:
            assert c.logs[i].apply_retention(max_index=c.group(i).applied_index) > 0
            assert c.logs[i].first_index > 1


def test_join_after_retention_promote_remove_and_restart(tmp_path: Path) -> None:
    async def body(c: MembershipCluster, leader: RaftGroup) -> None:
        await load(c, leader, [b"x" * 200 for _ in range(300)], retention=True)
        await c.start_node(4)
        joiner = c.group(4)
        assert joiner.conf == ConfState() and not joiner.is_leader
        await change(leader, ConfState((1, 2, 3), (4,)))
        last = leader.last_index
        assert await joiner.wait_for(lambda g: g.applied_index >= last, 10)
        # It started from the leader's log start, which told it the configuration in force.
        assert c.logs[4].first_index > 1
        assert joiner.conf == ConfState((1, 2, 3), (4,))
        assert 4 not in leader.in_sync_replicas()  # a learner is never in the ISR
        await change(leader, ConfState((1, 2, 3, 4)))
        removed = next(i for i in c.initial if i != leader.node_id)
        await change(leader, ConfState(tuple(sorted({1, 2, 3, 4} - {removed}))))
        expected = ConfState(tuple(sorted({1, 2, 3, 4} - {removed})))
        offsets = await produce(c, leader, [b"after"] * 5)
        assert offsets == list(range(300, 305))
        for i in expected.voters:
            assert await c.group(i).wait_for(lambda g: g.conf == expected, 5)
        # Saved once the Ready holding it is carried out (the core has it before: wait for it).
        await until(lambda: [r.conf for r in load_membership(c.logs[4].directory) or []][-1:] == [expected],
                    5, "node 4's saved configuration")
        commit = leader.commit_index
        assert await c.group(4).wait_for(lambda g: g.applied_index >= commit, 5)
        assert c.entries(4, commit)[-5:] == c.entries(leader.node_id, commit)[-5:]
        # Every member restarts into the configuration it had (saved records, log gone).
        for i in expected.voters:
            await c.stop_node(i, crash=True)
        for i in expected.voters:
            await c.start_node(i)
            assert c.group(i).conf == expected
        new_leader = await c.leader(exclude=removed)
        assert new_leader.node_id in expected.voters
        offsets = await produce(c, new_leader, [b"later"])
        assert offsets == [305]

    run(tmp_path, body)


def test_partition_of_a_joining_replica_applies_from_the_reset(tmp_path: Path) -> None:
    """The joiner's Partition starts at the leader's log start offset (not 0) and reaches the
    same high watermark."""
    async def body(c: MembershipCluster, leader: RaftGroup) -> None:
        await load(c, leader, [b"y" * 200 for _ in range(200)], retention=True)
        start = c.logs[leader.node_id].log_start_offset
        await c.start_node(4)
        await change(leader, ConfState((1, 2, 3), (4,)))
        partition: Partition = c.partition(4)
        hw = c.partition(leader.node_id).high_watermark
        assert await c.group(4).wait_for(lambda g: partition.high_watermark >= hw, 10)
        assert isinstance(c.logs[4], StreamLog) and c.logs[4].log_start_offset == start
        assert partition.log_end_offset == c.partition(leader.node_id).log_end_offset

    run(tmp_path, body)


def test_a_learner_catches_up_through_the_throttle(tmp_path: Path) -> None:
    """Entries for a learner far behind leave at recovery_rate_bytes; its last stretch (8 MiB) does
    not. Megabyte entries: a lag counted in entries alone would throttle none of them."""
    rate = 8 << 20

    async def body(c: MembershipCluster, leader: RaftGroup) -> None:
        await load(c, leader, [b"z" * 1_000_000 for _ in range(24)])  # 24 MB in 1 MB entries
        # The leader sizes its entries at its ticks (the lag in bytes): a learner added within a
        # tick of the load would get its first max_inflight_bytes unthrottled. Quiet, it ticked.
        await until(lambda: leader.quiescent, 5, "the leader going quiet")
        await c.start_node(4)
        started = asyncio.get_running_loop().time()
        await change(leader, ConfState((1, 2, 3), (4,)))
        last = leader.last_index
        assert await c.group(4).wait_for(lambda g: g.applied_index >= last, 30)
        took = asyncio.get_running_loop().time() - started
        throttle = c.hosts[leader.node_id].throttle
        assert throttle is not None
        # All but the learner's last 8 MiB went through the throttle.
        assert throttle.sent_bytes >= 14_000_000
        # The bucket's burst, and the debt of the last message (up to max_append_bytes), go unpaced.
        assert took >= (throttle.sent_bytes - throttle.burst - (1 << 20)) / rate
        # And the pacing is all it waits for: the network costs a millisecond per hop here.
        assert took < (throttle.sent_bytes - throttle.burst) / rate

    run(tmp_path, body, LogConfig(fsync=False), recovery_rate=rate)

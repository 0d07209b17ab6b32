"""`RaftGroup.wait_for` wakes its waiters once committed entries are applied, not once the Ready
that applied them has also synced the new entries it carried.

A follower often learns a commit from the append that brings the next entries (always so for a
stream group, which sends no prompt commit notices; often so for the metadata group under load):
that Ready applies the committed entries first, then fdatasyncs the new ones. A stream leader
waiting for its copy of the cluster metadata to show a transaction (a produce after
AddPartitionsToTxn, WriteTxnMarkers after EndTxn) must go on at the apply, not an fsync later.
In-process groups over real StreamLogs, on the virtual clock (tests/support/virtual_time.py); the
follower's sync of the next entry is held open by the test."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from tests.support import virtual_time
from tests.support.raft_groups import ticking
from tests.support.waiting import until, within
from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.raft.config import RaftConfig
from vdl_broker.raft.group import RaftGroup
from vdl_broker.raft.types import Entry, EntryType, Message

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]


def test_a_waiter_goes_on_at_the_apply_while_the_same_ready_still_syncs(tmp_path: Path) -> None:
    virtual_time.run(_run(tmp_path))


async def _run(tmp_path: Path) -> None:
    ids = [1, 2, 3]
    logs = {i: StreamLog.open(tmp_path / f"n{i}", LogConfig(fsync=False)) for i in ids}
    applied = dict.fromkeys(ids, 0)
    log_end_at_apply: dict[int, list[tuple[int, int]]] = {i: [] for i in ids}  # (applied, log's last)
    groups: dict[int, RaftGroup] = {}

    def send(_name: str, message: Message) -> bool:
        asyncio.get_running_loop().call_soon(groups[message.to].step, message)
        return True

    def apply_on(node: int):  # noqa: ANN202
        def apply(entries: list[Entry]) -> None:
            applied[node] = entries[-1].index
            log_end_at_apply[node].append((entries[-1].index, logs[node].last_index))
        return apply

    # No prompt commit notices (a stream group's setting): a follower learns a commit from the
    # next append, or from the leader's tick; ticks far apart so the next append comes first.
    for i in ids:
        groups[i] = RaftGroup("g", i, ids, logs[i], send, apply=apply_on(i), rng=random.Random(i),
                              config=RaftConfig(election_ticks=5))

    async with ticking(groups, logs.values(), every_s=0.2):
        await until(lambda: any(g.leader_ready for g in groups.values()), 30, "a leader")
        leader = next(g for g in groups.values() if g.leader_ready)
        follower_id = next(i for i in ids if i != leader.node_id)
        follower = groups[follower_id]
        first = leader.propose(b"first", EntryType.METADATA)
        await until(lambda: logs[follower_id].last_index >= first.index, 10, "the first entry on the follower")

        # From the next entry on, the follower's sync does not finish until released.
        release = asyncio.Event()
        original = logs[follower_id].sync
        held_from = first.index + 1

        async def held_sync() -> None:
            if logs[follower_id].last_index >= held_from:
                await release.wait()
            await original()

        logs[follower_id].sync = held_sync  # type: ignore[method-assign]
        await first.committed
        assert applied[follower_id] < first.index, "the follower learned the commit before the next append"
        second = leader.propose(b"second", EntryType.METADATA)
        assert second.index == held_from
        waiter = asyncio.ensure_future(follower.wait_for(lambda _: applied[follower_id] >= first.index, 5.0))
        await until(lambda: applied[follower_id] >= first.index, 5, "the follower applying the first entry")
        # The same Ready brought the second entry, whose sync is still held open.
        assert (first.index, second.index) in log_end_at_apply[follower_id]
        assert not release.is_set()
        assert await within(waiter, 0.5) is True
        assert not release.is_set()
        release.set()
        await within(second.committed, 5)

"""RaftGroup restarted with its configuration records unreadable (a byte flipped in the
`membership` file): it follows without campaigning, and its answers ask the leader for the
configuration, which the leader appends again; the node adopts and saves it and may lead again.
In-process groups over real StreamLogs, on the virtual clock (tests/support/virtual_time.py)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from tests.support import virtual_time
from tests.support.disk import flip_byte
from tests.support.raft_groups import ticking
from tests.support.waiting import until
from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.raft.config import RaftConfig
from vdl_broker.raft.group import RaftGroup
from vdl_broker.raft.persistence import MEMBERSHIP_FILE, load_membership
from vdl_broker.raft.types import ConfState, EntryType, Message

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]


def test_a_node_that_lost_its_configuration_gets_it_back_and_may_lead_again(tmp_path: Path) -> None:
    virtual_time.run(_test(tmp_path))


async def _test(tmp_path: Path) -> None:
    logs = {i: StreamLog.open(tmp_path / f"n{i}", LogConfig(fsync=False)) for i in (1, 2, 3)}
    groups: dict[int, RaftGroup] = {}

    def send(_name: str, message: Message) -> bool:
        group = groups.get(message.to)
        if group is not None:
            asyncio.get_running_loop().call_soon(group.step, message)
        return True

    def make_group(i: int) -> RaftGroup:
        groups[i] = RaftGroup("g", i, [1, 2, 3], logs[i], send, config=RaftConfig(election_ticks=5),
                              rng=random.Random(i))
        return groups[i]

    for i in logs:
        make_group(i)
    async with ticking(groups, logs.values()):
        await until(lambda: sum(g.is_leader and g.leader_ready for g in groups.values()) == 1)
        leader = next(g for g in groups.values() if g.is_leader)
        await leader.propose(b"before", EntryType.METADATA).committed
        damaged = next(i for i in groups if i != leader.node_id)
        await until(lambda: leader.match_index(damaged) == leader.last_index)

        await groups.pop(damaged).stop(transfer=False)
        logs[damaged].close()
        membership = tmp_path / f"n{damaged}" / MEMBERSHIP_FILE
        flip_byte(membership, membership.stat().st_size // 2)
        logs[damaged] = StreamLog.open(tmp_path / f"n{damaged}", LogConfig(fsync=False))
        make_group(damaged).start()  # the creation voters are not guessed from: the file is unreadable
        assert groups[damaged].conf == ConfState(())

        await leader.propose(b"after", EntryType.METADATA).committed
        await until(lambda: groups[damaged].conf == ConfState((1, 2, 3)))
        await until(lambda: _readable(membership) == ConfState((1, 2, 3)))
        # It campaigns again: handed leadership, it takes it.
        leader.transfer_leadership(damaged)
        await until(lambda: groups[damaged].is_leader and groups[damaged].leader_ready)
        assert [bytes(e.data) for e in logs[damaged].entries(1, logs[damaged].last_index + 1)
                if e.type == EntryType.METADATA] == [b"before", b"after"]


def _readable(path: Path) -> ConfState | None:
    try:
        records = load_membership(path.parent)
    except ValueError:
        return None
    return records[-1].conf if records else None

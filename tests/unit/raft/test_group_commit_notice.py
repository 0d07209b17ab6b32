"""A leader tells its followers of a commit only once it has applied it itself: followers serve
reads up to the commit point they learn (KIP-392 follower reads), so a follower's high watermark
must never pass the leader's. In-process groups over real StreamLogs; a Ready applies at most one
entry here (max_committed_bytes=1), so the core's commit index runs ahead of what is applied.
On the virtual clock (tests/support/virtual_time.py)."""

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
from vdl_broker.raft.types import Entry, EntryType, Message, MessageType

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]


def test_followers_never_learn_a_commit_the_leader_has_not_applied(tmp_path: Path) -> None:
    virtual_time.run(_run(tmp_path))


async def _run(tmp_path: Path) -> None:
    ids = [1, 2, 3]
    logs = {i: StreamLog.open(tmp_path / f"n{i}", LogConfig(fsync=False)) for i in ids}
    applied = dict.fromkeys(ids, 0)
    ahead: list[tuple[int, int, int]] = []  # (sender, commit told, applied by the sender)
    told: list[int] = []
    groups: dict[int, RaftGroup] = {}

    def send(_name: str, message: Message) -> bool:
        if message.type in (MessageType.APPEND, MessageType.HEARTBEAT) and message.commit:
            told.append(message.commit)
            if message.commit > applied[message.sender]:
                ahead.append((message.sender, message.commit, applied[message.sender]))
        asyncio.get_running_loop().call_soon(groups[message.to].step, message)
        return True

    def apply_on(node: int):  # noqa: ANN202
        def apply(entries: list[Entry]) -> None:
            applied[node] = entries[-1].index
        return apply

    for i in ids:
        groups[i] = RaftGroup("g", i, ids, logs[i], send, apply=apply_on(i), rng=random.Random(i),
                              config=RaftConfig(election_ticks=5, max_committed_bytes=1))

    async with ticking(groups, logs.values()):
        await until(lambda: any(g.leader_ready for g in groups.values()), 10, "a leader")
        leader = next(g for g in groups.values() if g.leader_ready)
        proposals = [leader.propose(b"x" * 100, EntryType.METADATA) for _ in range(200)]
        await within(asyncio.gather(*(p.committed for p in proposals)), 20)
        last = proposals[-1].index
        await until(lambda: all(applied[i] >= last for i in ids), 10, "every replica applying the burst")
    assert max(told) >= last  # the followers did learn the commits (through the burst)
    assert ahead == [], f"commit indexes sent before the sender applied them: {ahead[:5]}"

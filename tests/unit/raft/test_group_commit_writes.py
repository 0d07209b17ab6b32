"""The log's file writes follow its group commits, on the leader and on its followers: everything
proposed (or received) while one sync is in flight lands in the next Ready, which the Ready loop
appends with one call -- one writev -- and then syncs. So no replica writes its log more often
than it syncs it: holding appends back to write them together before the fdatasync would save
no write call. In-process groups over real StreamLogs, on the virtual clock
(tests/support/virtual_time.py: each sync is in flight for a while, as a disk's)."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from pathlib import Path

import pytest

from tests.support import virtual_time
from tests.support.raft_groups import ticking
from tests.support.waiting import until, within
from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.log.group_commit import GroupCommit, _SyncJob
from vdl_broker.log.segment import Segment
from vdl_broker.raft.config import RaftConfig
from vdl_broker.raft.group import RaftGroup
from vdl_broker.raft.types import Entry, EntryType, Message

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]

PROPOSALS = 300


def test_no_replica_writes_its_log_more_often_than_it_syncs_it(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    writes: Counter[Path] = Counter()  # file writes of each log (its directory)
    syncs: Counter[Path] = Counter()  # sync jobs of each log
    write, job = Segment.write, GroupCommit._job

    def counted_write(segment: Segment, parts: list[bytes | memoryview], total: int = -1) -> None:
        writes[segment.directory] += 1
        write(segment, parts, total)

    def counted_job(commit: GroupCommit) -> _SyncJob:
        syncs[commit.directory] += 1
        return job(commit)

    monkeypatch.setattr(Segment, "write", counted_write)
    monkeypatch.setattr(GroupCommit, "_job", counted_job)
    appended = virtual_time.run(_run(tmp_path))
    directories = [tmp_path / f"n{i}" for i in (1, 2, 3)]
    for directory in directories:
        # every replica stored the whole burst, in fewer writes than entries (batched)...
        assert appended[directory] >= PROPOSALS
        assert 0 < writes[directory] < PROPOSALS
        # ...and never more writes than syncs (one segment, so no roll splits an append)
        assert writes[directory] <= syncs[directory], (directory, writes[directory], syncs[directory])


async def _run(tmp_path: Path) -> dict[Path, int]:
    ids = [1, 2, 3]
    logs = {i: StreamLog.open(tmp_path / f"n{i}", LogConfig(fsync=False)) for i in ids}
    groups: dict[int, RaftGroup] = {}

    def send(_name: str, message: Message) -> bool:
        asyncio.get_running_loop().call_soon(groups[message.to].step, message)
        return True

    def ignore(_entries: list[Entry]) -> None:
        pass

    for i in ids:
        groups[i] = RaftGroup("g", i, ids, logs[i], send, apply=ignore, rng=random.Random(i),
                              config=RaftConfig(election_ticks=5))

    async with ticking(groups, logs.values()):
        await until(lambda: any(g.leader_ready for g in groups.values()), 10, "a leader")
        leader = next(g for g in groups.values() if g.leader_ready)
        proposals = []
        for k in range(PROPOSALS):  # in bursts, so that several group commits take part
            proposals.append(leader.propose(b"x" * 100, EntryType.METADATA))
            if k % 50 == 49:
                await asyncio.sleep(0.001)
        await within(asyncio.gather(*(p.committed for p in proposals)), 20)
        last = proposals[-1].index
        await until(lambda: all(log.durable_index >= last for log in logs.values()), 10, "every replica durable")
        return {logs[i].directory: logs[i].last_index for i in ids}

"""RaftGroup when its log cannot be written (disk full): in-process groups over real StreamLogs,
messages passed through the event loop, the write failure injected into one node's StreamLog; on
the virtual clock (tests/support/virtual_time.py)."""

from __future__ import annotations

import asyncio
import errno
import random
from pathlib import Path

import pytest

from tests.support import virtual_time
from tests.support.raft_groups import stored
from tests.support.waiting import until
from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.raft.config import RaftConfig
from vdl_broker.raft.group import RaftGroup
from vdl_broker.raft.proposals import ProposalStorageError
from vdl_broker.raft.types import Entry, EntryType, Message, NotLeaderError, Role

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]


class Nodes:
    def __init__(self, tmp: Path, n: int) -> None:
        self.logs = {i: StreamLog.open(tmp / f"n{i}", LogConfig(fsync=False)) for i in range(1, n + 1)}
        self.failing: set[int] = set()
        self.isolated: set[int] = set()  # nodes whose messages, both ways, are lost
        self.refused_cuts: dict[int, int] = {}  # node -> how many more truncations fail (ENOSPC)
        self.groups: dict[int, RaftGroup] = {}
        for i, stream_log in self.logs.items():
            self._inject(i, stream_log)
            self.groups[i] = RaftGroup("g", i, list(self.logs), stream_log, self._send,
                                       config=RaftConfig(election_ticks=5), rng=random.Random(i))
        self._ticker: asyncio.Task[None] | None = None

    def _inject(self, i: int, stream_log: StreamLog) -> None:
        real = stream_log.append

        def append(entries: list[Entry]) -> None:
            if i in self.failing:
                raise OSError(errno.ENOSPC, "No space left on device")
            real(entries)

        stream_log.append = append  # type: ignore[method-assign]
        real_cut = stream_log.truncate_suffix

        def truncate_suffix(from_index: int) -> None:
            if self.refused_cuts.get(i):
                self.refused_cuts[i] -= 1
                raise OSError(errno.ENOSPC, "No space left on device")
            real_cut(from_index)

        stream_log.truncate_suffix = truncate_suffix  # type: ignore[method-assign]

    def _send(self, _name: str, message: Message) -> bool:
        if message.to in self.isolated or message.sender in self.isolated:
            return True
        asyncio.get_running_loop().call_soon(self.groups[message.to].step, message)
        return True

    async def start(self) -> None:
        for group in self.groups.values():
            group.start()
        self._ticker = asyncio.get_running_loop().create_task(self._tick())

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0.01)
            for group in self.groups.values():
                group.tick()

    async def stop(self) -> None:
        assert self._ticker is not None
        self._ticker.cancel()
        for group in self.groups.values():
            await group.stop(transfer=False)
        for stream_log in self.logs.values():
            stream_log.close()

    def leader(self) -> RaftGroup | None:
        leaders = [g for g in self.groups.values() if g.is_leader and g.leader_ready and g.node_id not in self.failing]
        return leaders[0] if len(leaders) == 1 else None

    async def leader_after_a_commit(self) -> RaftGroup:
        """The elected leader, once it committed an entry of its own."""
        await until(self.leader)
        leader = self.leader()
        assert leader is not None
        await leader.propose(b"before", EntryType.METADATA).committed
        return leader




def test_single_voter_leader_fails_the_proposal_and_stays_leader(tmp_path: Path) -> None:
    virtual_time.run(_test_single_voter_leader_fails_the_proposal_and_stays_leader(tmp_path))


async def _test_single_voter_leader_fails_the_proposal_and_stays_leader(tmp_path: Path) -> None:
    nodes = Nodes(tmp_path, 1)
    await nodes.start()
    try:
        group = nodes.groups[1]
        await until(lambda: group.leader_ready)
        term = group.term
        ok = await group.propose(b"one", EntryType.METADATA).committed
        nodes.failing.add(1)
        lost = group.propose(b"lost", EntryType.METADATA)
        with pytest.raises(ProposalStorageError):
            await lost.committed
        with pytest.raises(ProposalStorageError):
            await lost.durable
        assert group.is_leader and group.term == term and group.failure is None
        assert group.last_index == ok and nodes.logs[1].last_index == ok
        nodes.failing.clear()
        again = await group.propose(b"two", EntryType.METADATA).committed
        assert again == lost.index  # the dropped entry's index, same term: nobody ever saw it
        assert [data for _, _, data in stored(nodes.logs[1])][-2:] == [b"one", b"two"]
        assert group.write_failures == 1 and not group.write_failing
    finally:
        await nodes.stop()


def test_full_follower_never_acknowledges_then_catches_up(tmp_path: Path) -> None:
    virtual_time.run(_test_full_follower_never_acknowledges_then_catches_up(tmp_path))


async def _test_full_follower_never_acknowledges_then_catches_up(tmp_path: Path) -> None:
    nodes = Nodes(tmp_path, 3)
    await nodes.start()
    try:
        leader = await nodes.leader_after_a_commit()
        follower = next(i for i in nodes.groups if i != leader.node_id)
        await until(lambda: leader.match_index(follower) == leader.last_index)
        acknowledged = leader.match_index(follower)
        nodes.failing.add(follower)
        for n in range(5):
            await leader.propose(f"while-full-{n}".encode(), EntryType.METADATA).committed
        await until(lambda: nodes.groups[follower].write_failures > 0)
        assert leader.match_index(follower) == acknowledged  # never acknowledged what it lacks
        assert nodes.logs[follower].last_index == acknowledged
        assert nodes.groups[follower].failure is None and leader.is_leader
        nodes.failing.clear()
        await until(lambda: leader.match_index(follower) == leader.last_index)
        await until(lambda: nodes.logs[follower].last_index == leader.last_index)
        assert stored(nodes.logs[follower]) == stored(nodes.logs[leader.node_id])
    finally:
        await nodes.stop()


def test_leader_that_cannot_write_steps_down_and_never_reuses_an_index(tmp_path: Path) -> None:
    virtual_time.run(_test_leader_that_cannot_write_steps_down_and_never_reuses_an_index(tmp_path))


async def _test_leader_that_cannot_write_steps_down_and_never_reuses_an_index(tmp_path: Path) -> None:
    nodes = Nodes(tmp_path, 3)
    await nodes.start()
    try:
        old = await nodes.leader_after_a_commit()
        nodes.failing.add(old.node_id)
        lost = old.propose(b"unwritten-on-the-leader", EntryType.METADATA)
        with pytest.raises(ProposalStorageError):
            await lost.committed
        assert old.role != Role.LEADER or old.term > lost.term
        await until(nodes.leader)
        new = nodes.leader()
        assert new is not None and new.term > lost.term
        await new.propose(b"after", EntryType.METADATA).committed
        nodes.failing.clear()
        await until(lambda: all(log.last_index == new.last_index for log in nodes.logs.values()))
        reference = stored(nodes.logs[new.node_id])
        for i, stream_log in nodes.logs.items():
            assert stored(stream_log) == reference, f"node {i} diverged"
        # Whatever became of the entry the old leader could not write, an (index, term) names
        # one entry everywhere: the logs are identical.
        assert all(group.failure is None for group in nodes.groups.values())
    finally:
        await nodes.stop()


def test_conflicting_entries_are_cut_once_the_disk_lets_them(tmp_path: Path) -> None:
    virtual_time.run(_test_conflicting_entries_are_cut_once_the_disk_lets_them(tmp_path))


async def _test_conflicting_entries_are_cut_once_the_disk_lets_them(tmp_path: Path) -> None:
    """Regression (make chaos: "raft group chaos on node 4 failed", OSError 28 from
    truncate_suffix in the Ready loop): a replica whose disk refused to cut the entries a new
    leader replaces stopped for good, and never came back in sync. It now tries again."""
    nodes = Nodes(tmp_path, 3)
    await nodes.start()
    try:
        old = await nodes.leader_after_a_commit()
        nodes.isolated.add(old.node_id)
        stranded = [old.propose(f"stranded-{n}".encode(), EntryType.METADATA) for n in range(3)]
        await until(lambda: nodes.logs[old.node_id].last_index == stranded[-1].index)

        def new_leader() -> RaftGroup | None:
            return next((g for g in nodes.groups.values()
                         if g is not old and g.is_leader and g.leader_ready), None)

        await until(new_leader)
        new = new_leader()
        assert new is not None
        for n in range(4):
            await new.propose(f"after-{n}".encode(), EntryType.METADATA).committed
        nodes.refused_cuts[old.node_id] = 3
        nodes.isolated.clear()
        await until(lambda: nodes.logs[old.node_id].last_index == new.last_index
                    and stored(nodes.logs[old.node_id]) == stored(nodes.logs[new.node_id]))
        assert nodes.refused_cuts[old.node_id] == 0  # all three refusals were met
        assert all(group.failure is None for group in nodes.groups.values())
        assert [data for _, _, data in stored(nodes.logs[old.node_id]) if data.startswith(b"stranded")] == []
        for proposal in stranded:
            with pytest.raises(NotLeaderError):  # lost with the leadership, or replaced
                await proposal.committed
    finally:
        await nodes.stop()


def test_commit_point_save_on_a_full_disk_is_logged_and_retried(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (chaos campaign, disk full: "Task exception was never retrieved ... OSError
    28" from the background commit-point save): the failure is logged and the save retried."""
    import vdl_broker.raft.group as group_module
    from vdl_broker.raft.persistence import load_commit_point

    saved: list[int] = []
    real_save = group_module.save_commit_point

    def save(directory: Path, index: int, term: int) -> None:
        saved.append(index)
        if len(saved) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_save(directory, index, term)

    monkeypatch.setattr(group_module, "save_commit_point", save)

    async def main() -> None:
        stream_log = StreamLog.open(tmp_path / "n1", LogConfig(fsync=False))
        # Never quiescent: this is about the periodic save (a quiescent group stops ticking).
        group = RaftGroup("g", 1, [1], stream_log, lambda *_: True, resume_from_commit_point=True,
                          config=RaftConfig(quiesce_after_heartbeats=0))
        group.start()
        try:
            await until(lambda: group.is_leader and group.node.applied_index > 0)
            for attempt in (1, 2):
                for _ in range(group_module._COMMIT_POINT_TICKS):
                    group.tick()
                await until(lambda a=attempt: len(saved) == a and group._saving is not None and group._saving.done())
                assert group._saving.exception() is None
            assert load_commit_point(stream_log) == saved[-1] == group.node.applied_index
        finally:
            await group.stop(transfer=False)
            stream_log.close()
    virtual_time.run(main())

"""RaftGroup when an entry it reads from its log fails its CRC or lies past the end of a file cut
short (a byte flipped, a truncation, on disk while the node runs): in-process groups over real
StreamLogs without a tail cache (every read comes from the segments), on the virtual clock
(tests/support/virtual_time.py)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import virtual_time
from tests.support.disk import cut_at_page, flip_byte
from tests.support.raft_groups import stored, ticking
from tests.support.waiting import until
from vdl_broker.log import DamagedEntry, LogConfig, StreamLog
from vdl_broker.log.entry import HEADER_SIZE
from vdl_broker.raft.config import RaftConfig
from vdl_broker.raft.group import RaftGroup
from vdl_broker.raft.proposals import GroupStoppedError
from vdl_broker.raft.types import EntryType, Message

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]


def flipped(path: Path, position: int) -> None:
    flip_byte(path, position + HEADER_SIZE + 10)


@pytest.mark.parametrize("damage", [flipped, cut_at_page])
def test_a_leader_meeting_a_damaged_entry_stops_and_sends_none_of_it(
        tmp_path: Path, damage: Callable[[Path, int], None]) -> None:
    virtual_time.run(_test_a_leader_meeting_a_damaged_entry_stops_and_sends_none_of_it(tmp_path, damage))


async def _test_a_leader_meeting_a_damaged_entry_stops_and_sends_none_of_it(
        tmp_path: Path, damage: Callable[[Path, int], None]) -> None:
    config = LogConfig(fsync=False, tail_cache_bytes=0, segment_bytes=2000)
    logs = {i: StreamLog.open(tmp_path / f"n{i}", config) for i in (1, 2, 3)}
    cut_off: set[int] = set()
    damaged: list[tuple[int, DamagedEntry]] = []
    loop_errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: loop_errors.append(context))
    groups: dict[int, RaftGroup] = {}

    def send(_name: str, message: Message) -> bool:
        if message.to not in cut_off and message.sender not in cut_off:
            asyncio.get_running_loop().call_soon(groups[message.to].step, message)
        return True

    for i, stream_log in logs.items():
        groups[i] = RaftGroup("g", i, [1, 2, 3], stream_log, send, config=RaftConfig(election_ticks=5),
                              rng=random.Random(i), on_failure=lambda error, i=i: damaged.append((i, error)))

    async with ticking(groups, logs.values()):
        await until(lambda: sum(g.is_leader and g.leader_ready for g in groups.values()) == 1)
        leader = next(g for g in groups.values() if g.is_leader)
        behind, intact = (i for i in groups if i != leader.node_id)
        await leader.propose(b"before", EntryType.METADATA).committed
        await until(lambda: leader.match_index(behind) == leader.last_index)
        cut_off.add(behind)
        for n in range(40):  # several segments the cut-off follower lacks
            await leader.propose(f"entry-{n:02d}".ljust(100, ".").encode(), EntryType.METADATA).committed
        target = leader.last_index - 20
        segment = logs[leader.node_id]._ensure_loaded(logs[leader.node_id]._segment_for_index(target))
        damage(segment.log_path, segment.position_of(target))

        cut_off.clear()  # the leader now reads the entries the follower lacks, from its segments
        await until(lambda: leader.failure is not None)
        assert damaged == [(leader.node_id, leader.failure)]
        assert isinstance(leader.failure, DamagedEntry) and leader.failure.segment_base == segment.base_index
        with pytest.raises(GroupStoppedError):
            leader.propose(b"after", EntryType.METADATA)
        assert loop_errors == []  # nothing raised out of a step or a tick
        # None of the damaged entry left: the follower holds the intact prefix before it.
        reference = stored(logs[intact])
        caught_up = stored(logs[behind])
        assert caught_up == reference[:len(caught_up)] and logs[behind].last_index < target

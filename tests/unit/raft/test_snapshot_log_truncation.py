"""A snapshot's log truncation and the group's own use of its log: the log (its segments and tail
cache) is changed on the event loop's thread only. Truncated behind a snapshot on a worker thread,
it raced with the loop's appends and reads: a read of the tail cache found its slots moved under
it (IndexError in TailCache.read_entries) and the metadata group died."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path

from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.raft.config import RaftConfig
from vdl_broker.raft.group import RaftGroup
from vdl_broker.raft.types import Entry, EntryType

TIER = "component"  # the group saves its snapshots on worker threads
COMMANDS = 12_000


class Counters:
    """A state machine: the latest value written to each of 50 keys."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def apply(self, entries: list[Entry]) -> None:
        for entry in entries:
            if entry.type == EntryType.METADATA:
                key, value = json.loads(bytes(entry.data))
                self.values[key] = value

    def snapshot(self) -> bytes:
        return json.dumps(self.values).encode()

    def restore(self, data: bytes, index: int) -> None:
        self.values = json.loads(data)


def test_the_log_is_truncated_behind_snapshots_while_the_group_appends_and_reads_it(tmp_path: Path) -> None:
    async def body() -> None:
        stream_log = StreamLog.open(tmp_path / "metadata", LogConfig(segment_bytes=4096, fsync=False))
        # where the log's tail cache is cut behind a snapshot (the race needs a thread switch in
        # the middle of a read, too rare to show in a test's time: the thread is what is checked)
        threads: list[threading.Thread] = []
        drop_before = stream_log.cache.drop_before

        def recorded(index: int) -> None:
            threads.append(threading.current_thread())
            drop_before(index)

        stream_log.cache.drop_before = recorded  # type: ignore[method-assign]
        machine = Counters()
        config = RaftConfig(election_ticks=5, quiesce_after_heartbeats=0, snapshot_entries=100, snapshot_bytes=0)
        group = RaftGroup("__metadata", 1, [1], stream_log, lambda *_: False, config=config, apply=machine.apply,
                          state_machine=machine)
        group.start()
        try:
            assert await group.wait_for(lambda g: g.leader_ready, 10)
            last = None
            for n in range(COMMANDS):
                last = group.propose(json.dumps([f"k{n % 50}", n]).encode(), EntryType.METADATA)
                if n % 200 == 199:
                    await last.committed
                    await asyncio.sleep(0)  # let a snapshot's truncation run between the writes
            assert last is not None
            await last.committed
            assert await group.wait_for(lambda g: g.applied_through >= g.commit_index, 10)
            assert machine.values == {f"k{k}": COMMANDS - 50 + k for k in range(50)}
            assert stream_log.first_index > COMMANDS // 2  # truncated behind the snapshots
            assert threads and set(threads) == {threading.current_thread()}
        finally:
            await group.stop(transfer=False)
            stream_log.close()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch at almost every bytecode: a race shows at once
    try:
        asyncio.run(body())
    finally:
        sys.setswitchinterval(interval)

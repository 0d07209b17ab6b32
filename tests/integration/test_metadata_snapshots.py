"""Metadata snapshots at the component level: RaftGroups over real StreamLogs (no processes), the
metadata state machine (ClusterState) applying consumer-group offset commits.

- Bounded: the metadata directory after N commits stays under a bound that does not depend on N
  (the latest snapshot, the log since it, one segment), and a restart takes about the same time
  whatever N, because it restores the snapshot and replays only what follows it.
- A follower cut off while the leader truncated its log behind a snapshot gets the snapshot
  (InstallSnapshot) and ends with the same state.

The suite runs 30,000 commits against 10,000; `make metadata-snapshot-soak` runs 1,000,000
(VDL_SNAPSHOT_COMMITS) with the node's default settings.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.raft_groups import ticking
from tests.support.waiting import until
from vdl_broker.cluster.groups import commit_offsets_command
from vdl_broker.cluster.metadata import (
    ClusterState,
    create_stream_command,
    encode_command,
    register_node_command,
)
from vdl_broker.config import NodeConfig
from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.raft.config import RaftConfig
from vdl_broker.raft.group import RaftGroup
from vdl_broker.raft.types import Entry, EntryType, Message

COMMITS = int(os.environ.get("VDL_SNAPSHOT_COMMITS", 30_000))
pytestmark = pytest.mark.timeout(600 if COMMITS < 1_000_000 else 7200)

GROUPS, STREAMS = 50, 20  # 1,000 (group, stream) offsets, however many commits
ENTRY_BYTES = 300  # an offset commit in the log: its JSON (~170 bytes), header and index entries, rounded up


class Machine:
    """The metadata service's part: ClusterState applying METADATA entries, snapshotted."""

    def __init__(self) -> None:
        self.state = ClusterState()

    def apply(self, entries: list[Entry]) -> None:
        for entry in entries:
            if entry.type == EntryType.METADATA:
                self.state.apply_entry(entry.index, [json.loads(bytes(entry.data))])

    def snapshot(self) -> bytes:
        return self.state.snapshot()

    def restore(self, data: bytes, index: int) -> None:
        self.state.load_snapshot(data)


def _config(entries: int, nbytes: int) -> RaftConfig:
    return RaftConfig(election_ticks=5, quiesce_after_heartbeats=0, snapshot_entries=entries, snapshot_bytes=nbytes)


def _setup_commands() -> list[dict]:
    commands: list[dict] = [register_node_command(1, "h:1", "h:2")]
    commands += [create_stream_command(f"s{k}", 1) for k in range(STREAMS)]
    return commands


def _commit(n: int) -> dict:
    return commit_offsets_command(f"g{n % GROUPS}", 1000 + n, {f"s{(n // GROUPS) % STREAMS}": (n, 0, None)})


async def _single(directory: Path, config: RaftConfig, segment_bytes: int) -> tuple[RaftGroup, Machine, StreamLog]:
    stream_log = StreamLog.open(directory, LogConfig(segment_bytes=segment_bytes, fsync=False))
    machine = Machine()
    group = RaftGroup("__metadata", 1, [1], stream_log, lambda *_: False, config=config, apply=machine.apply,
                      state_machine=machine)
    group.start()
    await group.wait_for(lambda g: g.leader_ready, 10)
    return group, machine, stream_log


async def _write(group: RaftGroup, commands: list[dict]) -> None:
    last = None
    for k, command in enumerate(commands):
        last = group.propose(encode_command(command), EntryType.METADATA)
        if k % 2000 == 1999:
            await last.committed  # keep the unapplied backlog small
    if last is not None:
        await last.committed


def _size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


async def _run(tmp: Path, commits: int, config: RaftConfig, segment_bytes: int) -> tuple[int, float, ClusterState]:
    """(metadata directory bytes, seconds to restart, the state) after `commits` offset commits."""
    directory = tmp / f"metadata-{commits}"
    group, machine, stream_log = await _single(directory, config, segment_bytes)
    await _write(group, _setup_commands())
    batch = 10_000
    for start in range(0, commits, batch):
        await _write(group, [_commit(n) for n in range(start, min(commits, start + batch))])
    await until(lambda: group._snapshotting is None or group._snapshotting.done(), 60)
    expected = machine.state
    await group.stop(transfer=False)
    stream_log.close()
    size = _size(directory)
    started = time.perf_counter()
    group, machine, stream_log = await _single(directory, config, segment_bytes)
    await group.wait_for(lambda g: g.applied_through >= g.commit_index, 30)
    restart = time.perf_counter() - started
    try:
        for name in ("nodes", "streams", "groups"):
            assert getattr(machine.state, name) == getattr(expected, name)
    finally:
        await group.stop(transfer=False)
        stream_log.close()
    return size, restart, expected


def test_metadata_disk_and_restart_do_not_grow_with_the_commits(tmp_path: Path) -> None:
    many = COMMITS
    if many >= 1_000_000:  # the long form: the node's own settings (metadata_snapshot_*, broker.py)
        node = NodeConfig(data_dir=tmp_path)
        entries, nbytes, segment = node.metadata_snapshot_entries, node.metadata_snapshot_bytes, 4 << 20
    else:
        entries, nbytes, segment = 2_000, 1 << 20, 256 << 10
    config = _config(entries, nbytes)
    few = min(many // 3, 100_000)
    small = asyncio.run(_run(tmp_path, few, config, segment))
    large = asyncio.run(_run(tmp_path, many, config, segment))
    # The bound: the latest snapshot (an older one is deleted once it is written), the log since
    # it (at most `entries` entries, or `nbytes` of them), the part of the segment before it, and
    # the active segment.
    snapshot_bytes = len(large[2].snapshot())
    bound = 2 * snapshot_bytes + min(entries * ENTRY_BYTES, 2 * nbytes) + 2 * segment
    print(f"\nmetadata directory: {small[0]} bytes after {few} commits, {large[0]} after {many} "
          f"(bound {bound}); restart {small[1]:.2f} s and {large[1]:.2f} s")
    assert small[0] <= bound and large[0] <= bound
    assert large[1] < max(1.0, 3 * small[1])  # no replay of the whole history
    assert large[2].groups.offsets == {f"g{g}": large[2].groups.offsets[f"g{g}"] for g in range(GROUPS)}


def test_a_follower_behind_the_truncated_log_gets_the_snapshot(tmp_path: Path) -> None:
    async def body() -> None:
        logs = {i: StreamLog.open(tmp_path / f"n{i}", LogConfig(segment_bytes=64 << 10, fsync=False))
                for i in (1, 2, 3)}
        machines = {i: Machine() for i in logs}
        cut: set[int] = set()
        groups: dict[int, RaftGroup] = {}

        def send(_name: str, message: Message) -> bool:
            if message.to not in cut and message.sender not in cut:
                asyncio.get_running_loop().call_soon(groups[message.to].step, message)
            return True

        # A heartbeat's round trip is five event-loop turns here (tick, leader's Ready loop,
        # follower's step, its Ready loop, leader's step) and each turn may tick once when the
        # writes make turns longer than a tick: check-quorum needs election_ticks well above five.
        config = replace(_config(500, 1 << 20), election_ticks=30)
        for i, stream_log in logs.items():
            groups[i] = RaftGroup("__metadata", i, [1, 2, 3], stream_log, send, config=config,
                                  apply=machines[i].apply, state_machine=machines[i], rng=random.Random(i))
        async with ticking(groups, logs.values()):
            groups[1].campaign()
            await until(lambda: groups[1].leader_ready, 10)
            await _write(groups[1], _setup_commands())
            cut.add(3)
            await _write(groups[1], [_commit(n) for n in range(5_000)])
            await until(lambda: logs[1].first_index > 1000, 30)  # truncated behind a snapshot
            assert logs[3].last_index < logs[1].first_index  # what 3 needs is gone from the log
            cut.clear()
            await until(lambda: groups[3].applied_through >= groups[1].commit_index, 30)
            assert machines[3].state.groups.offsets == machines[1].state.groups.offsets
            assert logs[3].first_index > 1000  # its log was reset after the snapshot it got

    asyncio.run(body())


def test_the_node_settings_name_the_snapshot_thresholds() -> None:
    config = NodeConfig(data_dir=Path("/tmp/x"))
    assert (config.metadata_snapshot_entries, config.metadata_snapshot_bytes) == (20_000, 16 << 20)

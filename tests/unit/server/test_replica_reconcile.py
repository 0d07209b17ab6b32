"""The replica manager at a node's start, fed the metadata views a restart sees in the order it
sees them: first the state of its last metadata snapshot (the metadata group replays only what
follows it once its leader tells the commit index), then the current one.

In each case node 2 holds the only copy of a one-replica stream, with acknowledged records; it
restarts cleanly, its last metadata snapshot older than the stream's placement there; the replay
that follows is applied in steps, the manager reconciling after each (its loop may run between
two batches of replayed entries). Whatever it sees meanwhile, the replica opens with every
record, at its offset: nothing deletes it from a view that is not the cluster's of now.

Also: a replica whose Raft group stopped on its own (a read met damage, an error it could not
recover from) always opens again.

Real ClusterState (the metadata snapshot taken and restored as the node does), real StreamLogs,
ReplicaRegistry, RaftHost and RaftGroups on a virtual clock; the broker around the manager is a
stand-in with the attributes it reads.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support import virtual_time
from tests.support.kafka import record_values
from tests.support.raft_groups import TICK, batch, until
from tests.support.waiting import within
from vdl_broker.cluster.membership import complete_reassignment_command, reassign_stream_command
from vdl_broker.cluster.metadata import (
    ApplyResult,
    ClusterState,
    create_stream_command,
    delete_stream_command,
    register_node_command,
)
from vdl_broker.config import NodeConfig
from vdl_broker.log.damage import load_damage
from vdl_broker.log.entry import DamagedEntry
from vdl_broker.log.tail_cache import CacheBudget
from vdl_broker.raft.config import RaftConfig
from vdl_broker.raft.host import RaftHost
from vdl_broker.server.partition import Partition, PartitionError
from vdl_broker.server.replica_manager import REOPEN_PAUSE_S, ReplicaManager
from vdl_broker.server.replica_registry import ReplicaRegistry
from vdl_wire.errors import ErrorCode

pytestmark = pytest.mark.unit

STREAM = "orders"
NODE = 2  # the node restarted
VALUES = [b"first", b"second", b"third"]
EXPECTED = [(0, b"first"), (1, b"second"), (2, b"third")]
NODES = [register_node_command(n, f"h:{n}", f"h:{n + 10}") for n in (1, 2, 3)]
Command = dict[str, Any]


class MetadataGroup:
    """What `_metadata_current` reads of the metadata RaftGroup: not current until the leader
    (node 1) has told a commit index this node has applied."""

    def __init__(self, applied: int) -> None:
        self.leader_ready = False
        self.leader_id = 0
        self.applied_index = applied
        self.node = SimpleNamespace(leader_commit=0)

    def caught_up(self, index: int) -> None:
        self.leader_id, self.node.leader_commit, self.applied_index = 1, index, index


def stand_in(data_dir: Path, state: ClusterState, group: MetadataGroup, host: RaftHost) -> Any:
    config = NodeConfig(data_dir=data_dir, node_id=NODE, fsync=False)
    return SimpleNamespace(node_id=NODE, config=config, metadata=SimpleNamespace(state=state, group=group),
                           host=host, cache_budget=CacheBudget(config.tail_cache_bytes), aio_sync=None)


async def start_host() -> RaftHost:
    loop = asyncio.get_running_loop()
    host = RaftHost(NODE, None, raft_config=RaftConfig(election_ticks=10, tick_interval_s=TICK), clock=loop.time)
    await host.start()
    return host


async def stop(manager: ReplicaManager, host: RaftHost) -> None:
    await manager.stop()
    await host.stop()
    manager.close()


def records(manager: ReplicaManager, below: int | None = None) -> list[tuple[int, bytes | None]]:
    """(offset, value) of the records in node 2's replica of the stream (below `below`)."""
    partition = manager.local(STREAM)
    assert partition is not None
    if partition.log.log_end_offset == 0:
        return []
    read = partition.log.read(0, 1 << 20, below)
    return record_values(b"".join(bytes(b) for b in read.buffers))


def apply(state: ClusterState, first_index: int, commands: list[Command]) -> list[ApplyResult]:
    return [result for index, command in enumerate(commands, first_index)
            for result in state.apply_entry(index, [command])]


async def before_the_restart(data_dir: Path, commands: list[Command]) -> None:
    """Node 2 with the whole history applied: its replica the stream's only voter, the records
    acknowledged (committed); then a clean stop (SIGTERM)."""
    state = ClusterState()
    apply(state, 1, commands)
    assert state.streams[STREAM].replicas == (NODE,) and not state.membership.reassignments
    group = MetadataGroup(applied=len(commands))
    group.caught_up(len(commands))
    host = await start_host()
    manager = ReplicaManager(stand_in(data_dir, state, group, host))
    await manager.reconcile()
    partition = manager.local(STREAM)
    assert partition is not None
    await until(lambda: partition.is_leader, 5, "node 2 leads its one-replica stream")
    handles = [partition.append(batch(value)) for value in VALUES]
    await within(asyncio.gather(*(h.wait(-1, 10_000) for h in handles)), 5)
    assert [h.base_offset for h in handles] == [0, 1, 2]
    assert records(manager, partition.high_watermark) == EXPECTED
    await stop(manager, host)


async def running(data_dir: Path, commands: list[Command]) -> tuple[ReplicaManager, RaftHost]:
    """Node 2 started again with the whole history applied and its view current, the manager's
    loop running (it reconciles again when asked to, as the broker runs it)."""
    state = ClusterState()
    apply(state, 1, commands)
    group = MetadataGroup(applied=len(commands))
    group.caught_up(len(commands))
    host = await start_host()
    manager = ReplicaManager(stand_in(data_dir, state, group, host))
    await manager.reconcile()
    manager.start()
    return manager, host


async def restart(data_dir: Path, commands: list[Command], snapshot_after: int, steps: list[int]) -> None:
    """Node 2 restarted: its metadata state is its snapshot taken after entry `snapshot_after`
    (the manager reconciles with it at once), then the entries after it replayed, `steps` at a
    time, the manager told of each step's results and reconciling after it; the last step
    makes the view current. Then its replica holds every record, and serves them."""
    state = ClusterState()
    apply(state, 1, commands[:snapshot_after])
    restarted = ClusterState()
    restarted.load_snapshot(state.snapshot())
    group = MetadataGroup(applied=snapshot_after)
    host = await start_host()
    manager = ReplicaManager(stand_in(data_dir, restarted, group, host))
    await manager.reconcile()
    index = snapshot_after + 1
    for count in steps:
        results = apply(restarted, index, commands[index - 1:index - 1 + count])
        index += count
        manager.on_metadata_change(results)
        if index > len(commands):
            group.caught_up(len(commands))
        await manager.reconcile()
    assert index == len(commands) + 1
    partition = manager.local(STREAM)
    assert partition is not None
    assert records(manager) == EXPECTED, "the only copy of the stream was wiped"
    assert load_damage(data_dir / STREAM) is None
    await until(lambda: partition.is_leader, 5, "node 2 leads its one-replica stream again")
    assert partition.high_watermark == 3
    assert records(manager, partition.high_watermark) == EXPECTED
    await stop(manager, host)


def test_a_finished_move_seen_half_way_from_the_snapshot_keeps_the_only_copy(tmp_path: Path) -> None:
    """Moved from node 1 to node 2, the move finished (node 1 deleted its copy); node 2's
    snapshot shows it half-way (node 2 joining, not yet in the replica set). Opened from that
    view, `_open_log` wiped the replica as a stale copy left from an earlier placement."""
    commands = [*NODES, create_stream_command(STREAM, 1), reassign_stream_command(STREAM, 4, [NODE]),
                complete_reassignment_command(STREAM, 4, [NODE])]

    async def main() -> None:
        await before_the_restart(tmp_path, commands)
        await restart(tmp_path, commands, snapshot_after=5, steps=[1])

    virtual_time.run(main())


def test_a_stream_recreated_here_after_the_snapshot_keeps_its_records(tmp_path: Path) -> None:
    """The stream was created on node 1, deleted, and created again -- on node 2; node 2's
    snapshot is older than the deletion. Replayed alone, the deletion of the first incarnation
    deleted the directory of that name: the second incarnation's, the only copy of it."""
    commands = [*NODES, create_stream_command(STREAM, 1), delete_stream_command(STREAM),
                create_stream_command("other", 1), create_stream_command(STREAM, 1)]

    async def main() -> None:
        await before_the_restart(tmp_path, commands)
        await restart(tmp_path, commands, snapshot_after=4, steps=[1, 2])

    virtual_time.run(main())


def test_a_replica_remembered_from_an_older_incarnation_keeps_the_newer_ones_records(tmp_path: Path) -> None:
    """The stream's first incarnation was on node 2, deleted, and the stream created again on
    node 2; the node had stopped between deleting the first one's directory and forgetting it
    (its registry still names it). Its snapshot, older than the deletion, places the first
    incarnation here: opened from that view, `_open_log` wiped the directory as another
    incarnation's -- the second one's, its only copy."""
    commands = [*NODES, create_stream_command("other", 1), create_stream_command(STREAM, 1),
                delete_stream_command(STREAM), create_stream_command(STREAM, 1)]

    async def main() -> None:
        await before_the_restart(tmp_path, commands)
        ReplicaRegistry(tmp_path, durable=False).add(STREAM, 5)
        await restart(tmp_path, commands, snapshot_after=5, steps=[2])

    virtual_time.run(main())


@pytest.mark.parametrize("snapshot_after", [0, 5])
def test_a_stream_moved_away_and_back_keeps_its_records_through_the_replay(tmp_path: Path,
                                                                           snapshot_after: int) -> None:
    """The stream was created on node 2, moved to node 3 and back to node 2 (the copy it holds
    now). Node 2's replay (from no snapshot, or one from before the first move) shows its replica
    here, then the move away: removing the replica on that view deleted the directory -- the
    current copy, its only one -- and the move back then opened it empty."""
    commands = [*NODES, create_stream_command("other", 1), create_stream_command(STREAM, 1),
                reassign_stream_command(STREAM, 5, [3]), complete_reassignment_command(STREAM, 5, [3]),
                reassign_stream_command(STREAM, 5, [NODE]), complete_reassignment_command(STREAM, 5, [NODE])]

    async def main() -> None:
        await before_the_restart(tmp_path, commands)
        await restart(tmp_path, commands, snapshot_after=snapshot_after,
                      steps=[5 - snapshot_after, 2, 2] if snapshot_after < 5 else [2, 2])

    virtual_time.run(main())


def test_a_new_stream_placed_here_has_its_leader_imminent_before_its_replica_opens(tmp_path: Path) -> None:
    """Metadata waits, briefly, for the leader of a stream whose leader is imminent here. A new
    stream the metadata places on this node is such a stream from the moment the node applies
    its creation, before the manager has begun to open its replica (its loop busy with other
    streams): it was not, and a node asked right then answered "no leader" while the others named
    the leader. A replica placed here with a directory (a restart reopening it) and a stream
    placed elsewhere are not: they are answered at once."""
    state = ClusterState()
    apply(state, 1, [*NODES, create_stream_command("fresh", 3), create_stream_command("reopened", 3),
                     *(create_stream_command(f"single-{n}", 1) for n in range(3))])
    [elsewhere, *_] = [name for name, info in state.streams.items() if NODE not in info.replicas]
    (tmp_path / "reopened").mkdir()
    group = MetadataGroup(applied=len(NODES) + 5)
    group.caught_up(len(NODES) + 5)
    manager = ReplicaManager(stand_in(tmp_path, state, group, None))  # type: ignore[arg-type]
    assert manager.local("fresh") is None
    assert [manager.leader_imminent(name) for name in ("fresh", "reopened", elsewhere, "missing")] == \
        [True, False, False, False]
    # A restart's replay, not yet the cluster's view of now, may place here what has moved away.
    replaying = ReplicaManager(stand_in(tmp_path, state, MetadataGroup(applied=len(NODES) + 5), None))  # type: ignore[arg-type]
    assert not replaying.leader_imminent("fresh")


def test_a_replica_whose_close_for_a_check_fails_opens_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read met damage in the replica's log (RaftGroup.storage_damaged): the manager closes the
    replica to open it again, checked. Whatever fails in that close, the replica opens again, with
    its records: it stayed closed (NOT_LEADER_OR_FOLLOWER here) until a placement changed or the
    node restarted when the failure was not an OSError."""
    commands = [*NODES, create_stream_command("other", 1), create_stream_command(STREAM, 1)]

    async def main() -> None:
        await before_the_restart(tmp_path, commands)
        manager, host = await running(tmp_path, commands)
        damaged = manager.local(STREAM)
        assert damaged is not None

        def failing_close(**_: bool) -> None:
            raise RuntimeError("closing failed")

        monkeypatch.setattr(damaged, "close", failing_close)
        manager._failed(damaged, DamagedEntry(tmp_path / STREAM / "segment.log", 0, damaged.log.first_index))
        await until(lambda: manager.local(STREAM) not in (None, damaged), 5, "the replica opens again")
        reopened = manager.local(STREAM)
        assert reopened is not None
        await until(lambda: reopened.is_leader, 5, "node 2 leads its one-replica stream again")
        assert records(manager, reopened.high_watermark) == EXPECTED
        await stop(manager, host)

    virtual_time.run(main())


def test_a_replica_whose_group_fails_opens_again_after_a_pause(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error the replica's Raft group cannot recover from (its log's append raising what no
    storage error is: a bug nobody foresaw) stops the group (RaftGroup.failure). The write it
    failed on is not acknowledged; the manager closes the replica and opens it again after
    REOPEN_PAUSE_S, as a restart of that one replica: it leads again with every acknowledged
    record and takes new ones. Failing again soon after, it waits twice as long. Before, the
    replica stayed closed until the node restarted."""
    commands = [*NODES, create_stream_command("other", 1), create_stream_command(STREAM, 1)]

    def failing_append(entries: object) -> None:
        raise RuntimeError("a bug nobody foresaw")

    async def fail(manager: ReplicaManager, replica: Partition) -> float:
        """Make `replica`'s group fail on its next write; how long until the replica opened again."""
        loop = asyncio.get_running_loop()
        monkeypatch.setattr(replica.log, "append", failing_append)
        failed_at = loop.time()
        handle = replica.append(batch(b"lost"))
        with pytest.raises(PartitionError) as refused:
            await within(handle.wait(-1, 10_000), 5)
        assert refused.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        await until(lambda: manager.local(STREAM) not in (None, replica), 10, "the replica opens again")
        return loop.time() - failed_at

    async def leads_with(manager: ReplicaManager, expected: list[tuple[int, bytes | None]]) -> Partition:
        replica = manager.local(STREAM)
        assert replica is not None
        await until(lambda: replica.is_leader, 5, "node 2 leads its one-replica stream again")
        assert replica.high_watermark == len(expected)
        assert records(manager, replica.high_watermark) == expected
        return replica

    async def main() -> None:
        await before_the_restart(tmp_path, commands)
        manager, host = await running(tmp_path, commands)
        replica = await leads_with(manager, EXPECTED)
        assert REOPEN_PAUSE_S <= await fail(manager, replica) < 2 * REOPEN_PAUSE_S
        replica = await leads_with(manager, EXPECTED)
        handle = replica.append(batch(b"fourth"))
        await within(handle.wait(-1, 10_000), 5)
        assert handle.base_offset == 3
        replica = await leads_with(manager, [*EXPECTED, (3, b"fourth")])
        assert 2 * REOPEN_PAUSE_S <= await fail(manager, replica) < 4 * REOPEN_PAUSE_S
        await leads_with(manager, [*EXPECTED, (3, b"fourth")])
        await stop(manager, host)

    virtual_time.run(main())


def test_a_leader_waited_for_before_its_replica_opens_is_answered_when_it_is_elected(tmp_path: Path) -> None:
    """CreateTopics (and Metadata, for a stream whose leader is imminent here) answer once the new
    stream has a leader. A wait that began before the replica was open here looked again only
    every 50 ms: a one-replica stream, leading a few milliseconds after its creation, was answered
    up to 50 ms later (a create took 54 ms on one node, 6 ms since)."""
    commands = [*NODES, create_stream_command("other", 1), create_stream_command(STREAM, 1)]

    async def main() -> None:
        loop = asyncio.get_running_loop()
        state = ClusterState()
        apply(state, 1, commands)
        assert state.streams[STREAM].replicas == (NODE,)
        group = MetadataGroup(applied=len(commands))
        group.caught_up(len(commands))
        host = await start_host()
        manager = ReplicaManager(stand_in(tmp_path, state, group, host))
        answered: list[float] = []
        waiter = asyncio.ensure_future(manager.wait_for_leader(STREAM, 5))
        waiter.add_done_callback(lambda _: answered.append(loop.time()))
        # One turn of the loop (no time passes on the virtual clock): the waiter takes its first
        # step before the replica opens, the case the fix is about.
        await asyncio.sleep(0)
        assert manager.local(STREAM) is None and not waiter.done()
        await manager.reconcile()
        partition = manager.local(STREAM)
        assert partition is not None
        await until(lambda: partition.is_leader, 5, "node 2 leads its one-replica stream")
        elected_at = loop.time()
        assert await within(waiter, 5)
        assert answered[0] - elected_at <= 0.001  # until() looks every virtual millisecond
        await stop(manager, host)

    virtual_time.run(main())

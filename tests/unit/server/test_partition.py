"""Partition (the one partition type) on a single-voter RaftGroup over a real StreamLog:
offsets, the high watermark, append handles per acks level, fetch wake-ups, idempotence
(in-flight and committed), producer state rebuilt after a restart (from the log up to the commit
point and by replay), NOT_LEADER_OR_FOLLOWER when the group has no leader here."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.kafka import numbered_batch as batch
from tests.support.waiting import within
from vdl_broker.log import FrozenBuffer, LogConfig, StreamLog
from vdl_broker.raft import types as raft_types
from vdl_broker.raft.group import RaftGroup
from vdl_broker.raft.persistence import COMMIT_POINT_FILE
from vdl_broker.raft.types import Entry, EntryType
from vdl_broker.server.partition import (
    STAMP_IN_PLACE_FROM,
    AppendHandle,
    Partition,
    PartitionError,
    leader_epoch_error,
)
from vdl_wire.errors import ErrorCode
from vdl_wire.records.batch_header import ATTRIBUTES_OFFSET, parse_batch_header
from vdl_wire.records.control import end_txn_marker
from vdl_wire.records.record_batch import RecordBatchBuilder, iter_batches, validate_batch

TIER = "component"  # real sockets, threads or sleeps in this process
pytestmark = pytest.mark.timeout(30)


async def open_partition(directory: Path, voters: tuple[int, ...] = (1,), config: LogConfig | None = None) -> Partition:
    stream_log = StreamLog.open(directory, config or LogConfig(fsync=False))
    partition = Partition("s", stream_log, node_id=1)
    group = RaftGroup("s#1", 1, voters, stream_log, lambda name, message: True, apply=partition.on_apply,
                      on_snapshot=partition.on_snapshot, resume_from_commit_point=True)
    partition.attach(group)
    group.start()
    if len(voters) == 1:
        assert await group.wait_for(lambda g: g.leader_ready, 5)
    return partition


async def close(partition: Partition) -> None:
    assert partition.group is not None
    await partition.group.stop(transfer=False)
    partition.close()


def test_offsets_high_watermark_and_wakeups(tmp_path: Path) -> None:
    async def run() -> None:
        partition = await open_partition(tmp_path / "s")
        assert partition.is_leader and partition.leader_id == 1
        first = partition.append(batch(3))
        assert first.base_offset == 0 and partition.high_watermark == 0  # proposed, not committed
        await first.wait(-1, 1000)
        assert partition.high_watermark == 3
        waiter = partition.changed_future()
        second = partition.append(batch(2))
        third = partition.append(batch(1))
        assert (second.base_offset, third.base_offset) == (3, 5)  # contiguous, assigned at once
        await third.wait(-1, 1000)
        assert partition.high_watermark == 6
        await within(waiter, 1)  # a commit wakes long-poll fetches
        result = partition.log.read(0, 1 << 20, partition.high_watermark)
        assert result.next_offset == 6
        await close(partition)
    asyncio.run(run())


def test_acks_levels(tmp_path: Path) -> None:
    async def run() -> None:
        partition = await open_partition(tmp_path / "s")
        handle = partition.append(batch(2))
        await handle.wait(1, 1000)  # the leader's own durable copy
        assert partition.log.durable_end_offset >= 2
        await handle.wait(-1, 1000)
        assert partition.high_watermark == 2
        # acks=0: nobody waits, and the batch still becomes durable, committed and visible.
        unawaited = partition.append(batch(1))
        await unawaited.wait(0, 1000)
        assert unawaited.base_offset == 2
        assert await partition.group.wait_for(lambda _: partition.high_watermark == 3, 5)
        await close(partition)
    asyncio.run(run())


def test_idempotent_producer_in_flight_committed_and_after_restart(tmp_path: Path) -> None:
    async def run() -> None:
        directory = tmp_path / "s"
        partition = await open_partition(directory)
        first = partition.append(batch(2, producer_id=7, seq=0))
        retry = partition.append(batch(2, producer_id=7, seq=0))  # retried while in flight
        assert retry.duplicate and retry.base_offset == first.base_offset == 0
        assert retry.proposal is first.proposal  # answered once the original commits
        await retry.wait(-1, 1000)
        assert partition.high_watermark == 2
        await partition.append(batch(1, producer_id=7, seq=2)).wait(-1, 1000)
        with pytest.raises(PartitionError) as gap:
            partition.append(batch(1, producer_id=7, seq=9))
        assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert partition.high_watermark == 3
        await close(partition)  # saves the commit point: the restart rebuilds from the log

        partition = await open_partition(directory)
        again = partition.append(batch(1, producer_id=7, seq=2))
        assert again.duplicate and again.base_offset == 2 and again.proposal is None  # committed already
        fresh = partition.append(batch(1, producer_id=7, seq=3))
        assert fresh.base_offset == 3
        await fresh.wait(-1, 1000)
        await close(partition)

        (directory / COMMIT_POINT_FILE).unlink()  # no commit point: committed entries are replayed
        partition = await open_partition(directory)
        assert partition.high_watermark == 4
        again = partition.append(batch(1, producer_id=7, seq=3))
        assert again.duplicate and again.base_offset == 3
        await close(partition)
    asyncio.run(run())


def test_producer_state_snapshots_at_rolls_and_close_bound_the_restart_replay(tmp_path: Path) -> None:
    async def run() -> None:
        directory = tmp_path / "s"
        config = LogConfig(segment_bytes=500, fsync=False)
        partition = await open_partition(directory, config=config)
        for seq in range(60):  # three producers, about 6 batches (of 1 record) per segment
            await partition.append(batch(1, producer_id=7 + seq % 3, seq=seq // 3)).wait(-1, 1000)
        rolls = partition.log.segment_count - 1
        taken = partition.log.state_snapshot_offsets()
        assert rolls > 5 and len(taken) == rolls  # one per roll, at committed offsets
        assert all(0 < offset <= partition.high_watermark for offset in taken)
        await close(partition)  # a clean close snapshots the end: the next start reads nothing
        assert partition.log.state_snapshot_offsets()[-1] == 60

        partition = await open_partition(directory, config=config)
        assert (partition.rebuilt_from, partition.rebuilt_batches) == (60, 0)
        retry = partition.append(batch(1, producer_id=8, seq=19))
        assert retry.duplicate and retry.base_offset == 58
        await partition.append(batch(1, producer_id=8, seq=20)).wait(-1, 1000)
        # A crash: no close-time snapshot (the commit point is saved every 2 s and at a stop).
        assert partition.group is not None
        await partition.group.stop(transfer=False)
        partition.close(clean=False)
        newest = partition.log.state_snapshot_offsets()[-1]
        (directory / f"{newest:020d}.snapshot").unlink()
        partition.log.close()

        partition = await open_partition(directory, config=config)
        assert 0 < partition.rebuilt_from < 61 and partition.rebuilt_batches == 61 - partition.rebuilt_from
        assert partition.rebuilt_batches <= 8  # about one segment, not the 61 batches of the log
        for producer_id, seq, offset in ((8, 20, 60), (9, 19, 59), (7, 19, 57)):
            again = partition.append(batch(1, producer_id=producer_id, seq=seq))
            assert again.duplicate and again.base_offset == offset
        with pytest.raises(PartitionError) as gap:
            partition.append(batch(1, producer_id=8, seq=22))
        assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        await close(partition)
    asyncio.run(run())


def test_retention_forgets_the_producers_whose_batches_it_deleted_as_a_restart_does(tmp_path: Path) -> None:
    async def run() -> None:
        directory = tmp_path / "s"
        config = LogConfig(segment_bytes=500, fsync=False, retention_bytes=1)
        partition = await open_partition(directory, config=config)
        for producer_id in range(1, 21):  # 20 producers of one batch each, a few per segment
            await partition.append(batch(1, producer_id=producer_id, seq=0)).wait(-1, 1000)
        assert partition.group is not None and len(partition.producers) == 20
        assert partition.log.apply_retention(max_index=partition.group.applied_index) > 0
        partition.forget_deleted()
        start = partition.log.log_start_offset
        assert sorted(partition.producers.producer_ids()) == list(range(start + 1, 21))
        assert sorted(partition._leader_producers.producer_ids()) == list(range(start + 1, 21))
        remaining = sorted(partition.producers.producer_ids())
        await close(partition)
        partition = await open_partition(directory, config=config)
        assert sorted(partition.producers.producer_ids()) == remaining  # the restarted state is the same
        await close(partition)
    asyncio.run(run())


def test_new_term_rederives_leader_producer_state_from_committed(tmp_path: Path) -> None:
    async def run() -> None:
        partition = await open_partition(tmp_path / "s")
        await partition.append(batch(1, producer_id=5, seq=0)).wait(-1, 1000)
        # A proposal of ours that another leader replaced: recorded for the leader only...
        partition._leader_producers.record(5, 0, 1, 1, 1)
        assert [b.first_seq for b in partition.producers.last_batches(5)] == [0]  # ...never committed
        partition._serving = (-1, -1)  # as if leadership came back in a later term
        assert partition.is_leader
        with pytest.raises(PartitionError) as refused:  # seq 2 follows the phantom only
            partition.append(batch(1, producer_id=5, seq=2))
        assert refused.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        handle = partition.append(batch(1, producer_id=5, seq=1))
        assert handle.base_offset == 1
        await handle.wait(-1, 1000)
        await close(partition)
    asyncio.run(run())


def test_not_leader_without_quorum(tmp_path: Path) -> None:
    async def run() -> None:
        partition = await open_partition(tmp_path / "s", voters=(1, 2))
        assert not partition.is_leader
        with pytest.raises(PartitionError) as refused:
            partition.append(batch(1))
        assert refused.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert refused.value.message == "node 1 does not lead stream s (leader: unknown)"
        await close(partition)
        with pytest.raises(PartitionError) as gone:
            partition.append(batch(1))
        assert gone.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    asyncio.run(run())


def test_an_elected_leader_not_serving_yet_says_so(tmp_path: Path) -> None:
    """A leader refuses appends until it serves (elected, committed entries still to apply):
    the refusal it would give then says so, instead of "does not lead (leader: itself)"."""
    async def run() -> None:
        partition = await open_partition(tmp_path / "s")
        assert partition.leader_id == 1
        assert partition.not_leader_error().message == "node 1 leads stream s but does not serve it yet"
        await close(partition)
    asyncio.run(run())


def test_a_node_cut_off_answers_the_produce_requests_waiting_for_a_commit_at_once(tmp_path: Path) -> None:
    async def run() -> None:
        partition = await open_partition(tmp_path / "s")
        loop = asyncio.get_running_loop()
        # A proposal its cut-off leader can no longer commit (its followers are out of reach).
        stuck = SimpleNamespace(committed=loop.create_future(), durable=loop.create_future())
        handle = AppendHandle(partition, 0, False, stuck)  # type: ignore[arg-type]
        waiting = [loop.create_task(handle.wait(-1, 60_000)) for _ in range(2)]
        await asyncio.sleep(0)  # one loop turn: both run until they park on the commit
        assert not any(task.done() for task in waiting)
        partition.cut_off_now()
        for task in waiting:
            with pytest.raises(PartitionError) as refused:
                await within(task, 5)
            assert refused.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert refused.value.message == "stream s: node 1 is cut off from the cluster"
        # A later wait is not answered by that old cut; a timeout still is REQUEST_TIMED_OUT.
        with pytest.raises(PartitionError) as late:
            await handle.wait(-1, 50)
        assert late.value.code == ErrorCode.REQUEST_TIMED_OUT
        await close(partition)
    asyncio.run(run())


def test_produce_requests_waiting_on_one_partition_share_no_future(tmp_path: Path) -> None:
    """A request that stops waiting takes its callback off every future it waited on, a pass
    over that future's callbacks (Future.remove_done_callback). On a future every waiting
    request shared, that was a pass over all the others: work quadratic in the requests in
    flight (10,000 pipelined produce requests answered seconds late)."""
    scanned = 0

    class CountingFuture(asyncio.futures._PyFuture):  # type: ignore[name-defined,misc]
        def remove_done_callback(self, fn: object) -> int:
            nonlocal scanned
            scanned += len(self._callbacks)
            return int(super().remove_done_callback(fn))

    async def run() -> None:
        partition = await open_partition(tmp_path / "s")
        loop = asyncio.get_running_loop()
        loop.create_future = lambda: CountingFuture(loop=loop)  # type: ignore[method-assign]
        requests = 1000
        proposals = [SimpleNamespace(committed=loop.create_future(), durable=loop.create_future())
                     for _ in range(requests)]
        waiting = [loop.create_task(AppendHandle(partition, offset, False, proposal).wait(-1, 60_000))  # type: ignore[arg-type]
                   for offset, proposal in enumerate(proposals)]
        await asyncio.sleep(0)  # one loop turn: every request parks on its commit
        assert not any(task.done() for task in waiting)
        for proposal in proposals:
            proposal.committed.set_result(None)
        await within(asyncio.gather(*waiting), 5)
        # Each request passes over its own cut-off future's one callback (its commit's were
        # cleared when it resolved); a shared future made it 1000 + 999 + ... + 1.
        assert scanned == requests
        await close(partition)
    asyncio.run(run())


def test_concurrent_requests_each_wait_for_their_own_batches(tmp_path: Path) -> None:
    async def run() -> None:
        partition = await open_partition(tmp_path / "s")

        async def produce(data: bytes) -> int:
            handle = partition.append(data)
            await handle.wait(-1, 1000)
            assert partition.high_watermark > handle.base_offset  # committed when answered
            return handle.base_offset

        offsets = await asyncio.gather(*(produce(batch(2)) for _ in range(5)))
        assert sorted(offsets) == [0, 2, 4, 6, 8]

        # A retry of an in-flight idempotent batch, from another request, is answered once the
        # original commits, and not before.
        async def retried() -> int:
            again = partition.append(batch(1, producer_id=3, seq=0))
            assert again.duplicate
            await again.wait(-1, 1000)
            assert partition.high_watermark > again.base_offset
            return again.base_offset

        first = partition.append(batch(1, producer_id=3, seq=0))
        retry = asyncio.create_task(retried())
        await first.wait(-1, 1000)
        assert (first.base_offset, await retry) == (10, 10)
        await close(partition)
    asyncio.run(run())


def _leader_epochs(partition: Partition) -> list[int]:
    """partition_leader_epoch of every committed batch, in offset order."""
    read = partition.log.read(partition.log_start_offset, 1 << 20, partition.high_watermark)
    data = b"".join(bytes(b) for b in read.buffers)
    return [parse_batch_header(batch).partition_leader_epoch for _, batch in iter_batches(data)]


def test_a_produced_batchs_entry_checksum_extends_the_crc_its_produce_path_checked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checksum a produced batch's entry is stored under (and its followers' frames carry)
    extends the batch's own CRC, which the produce path checked: the leader reads the batch once.
    Read back from disk, the entry is intact: the checksum is its bytes'."""
    extended: list[tuple[int, int]] = []
    combine = raft_types.crc32c_combine

    def spy(first: int, second: int, second_length: int) -> int:
        extended.append((second, second_length))
        return combine(first, second, second_length)

    monkeypatch.setattr(raft_types, "crc32c_combine", spy)
    builder = RecordBatchBuilder()
    for i in range(1_000):
        builder.append(1_000 + i, None, b"%0100d" % i)
    produced = builder.build()
    header = validate_batch(produced)

    async def run() -> tuple[int, bytes]:
        partition = await open_partition(tmp_path / "s")
        handle = partition.append(produced, header)
        await handle.wait(-1, 1000)
        index, stored = partition.log.last_index, bytes(partition.log.read(0, 1 << 20).buffers[0])
        await close(partition)
        return index, stored
    index, stored = asyncio.run(run())
    assert extended == [(header.crc, len(produced) - ATTRIBUTES_OFFSET)]
    reopened = StreamLog.open(tmp_path / "s", LogConfig(fsync=False, tail_cache_bytes=0))
    [entry] = reopened.entries(index, index + 1)
    assert bytes(entry.data) == stored and stored[ATTRIBUTES_OFFSET:] == produced[ATTRIBUTES_OFFSET:]
    assert entry.crc == raft_types.entry_checksum(Entry(index, entry.term, EntryType.DATA, stored))
    reopened.close()


def test_a_large_batch_most_of_its_request_buffer_is_stored_where_it_lies_any_other_is_copied(tmp_path: Path) -> None:
    """The leader stamps a large produced batch in the request's own buffer (no copy of its
    bytes); a small one, one that is a small part of its buffer (a view would pin the rest in the
    tail cache) and one in bytes are copied, their buffers left as they were. Every one is
    stored stamped: its base offset and the leader's epoch."""
    large = RecordBatchBuilder()
    large.append(1_000, None, b"L" * STAMP_IN_PLACE_FROM)
    large_batch = large.build()
    request_head = b"h" * 100  # what precedes the records in a Produce request

    def in_request(batch_bytes: bytes, after: int = 0) -> tuple[FrozenBuffer, memoryview]:
        buffer = FrozenBuffer(request_head + batch_bytes + b"t" * after)
        return buffer, memoryview(buffer)[len(request_head):len(request_head) + len(batch_bytes)]

    async def run() -> None:
        partition = await open_partition(tmp_path / "s")
        await partition.append(batch(3)).wait(-1, 1000)  # offsets 0-2: the next base offsets are not 0
        cases = {"large, most of its buffer": in_request(large_batch),
                 "large, a third of its buffer": in_request(large_batch, after=2 * len(large_batch)),
                 "small": in_request(batch(2))}
        originals = {name: bytes(buffer) for name, (buffer, _) in cases.items()}
        bases = {}
        for name, (_, view) in cases.items():
            handle = partition.append(view)
            await handle.wait(-1, 1000)
            bases[name] = handle.base_offset
        bytes_batch = partition.append(large_batch)  # bytes: read-only, copied
        await bytes_batch.wait(-1, 1000)
        epoch = partition.leader_epoch
        assert bases == {"large, most of its buffer": 3, "large, a third of its buffer": 4, "small": 5}
        assert bytes_batch.base_offset == 7

        stamped_where_it_lies = cases["large, most of its buffer"][0]
        header = parse_batch_header(stamped_where_it_lies, len(request_head))
        assert (header.base_offset, header.partition_leader_epoch) == (3, epoch)
        assert stamped_where_it_lies[:len(request_head)] == request_head
        for name in ("large, a third of its buffer", "small"):
            assert bytes(cases[name][0]) == originals[name], name  # copied: the request left as it was

        read = partition.log.read(3, 1 << 24, partition.high_watermark)
        stored = list(iter_batches(b"".join(bytes(b) for b in read.buffers)))
        assert [(parse_batch_header(b).base_offset, parse_batch_header(b).partition_leader_epoch) for _, b in stored] == [
            (3, epoch), (4, epoch), (5, epoch), (7, epoch)]
        # Each stored batch is its produced bytes but for the two stamped fields (bytes 0-7, 12-15).
        produced = [large_batch, large_batch, batch(2), large_batch]
        assert [bytes(b[8:12]) + bytes(b[16:]) for _, b in stored] == [p[8:12] + p[16:] for p in produced]
        await close(partition)
    asyncio.run(run())


def test_leader_epochs_are_terms_and_end_where_the_next_term_begins(tmp_path: Path) -> None:
    async def term_with(batches: list[int]) -> int:
        partition = await open_partition(tmp_path / "s")
        for count in batches:
            await partition.append(batch(count)).wait(-1, 1000)
        term = partition.leader_epoch
        await close(partition)
        return term

    async def run() -> None:
        # a single voter elects itself again at each start: one term per opening
        first = await term_with([2, 3])  # offsets 0-4
        second = await term_with([1])  # offset 5
        await term_with([])  # a term without records: Kafka's epoch cache has no entry for it
        partition = await open_partition(tmp_path / "s")
        await partition.append(batch(2)).wait(-1, 1000)  # offsets 6-7
        current = partition.leader_epoch
        assert first < second < current - 1
        assert _leader_epochs(partition) == [first, first, second, current]
        assert partition.end_offset_for_epoch(current) == (current, 8)  # its own term: the log end
        assert partition.end_offset_for_epoch(current - 1) == (second, 6)  # the empty term: as its floor
        assert partition.end_offset_for_epoch(second) == (second, 6)
        assert partition.end_offset_for_epoch(first) == (first, 5)
        # Older than the log (kafka-python stamps 0 on what older releases stored as sent): no
        # truncation to report, the log end.
        assert partition.end_offset_for_epoch(first - 1) == (first - 1, 8)
        assert partition.end_offset_for_epoch(0) == (0, 8)
        assert partition.end_offset_for_epoch(current + 1) == (-1, -1)  # unknown to this leader
        assert (partition.epoch_at(0), partition.epoch_at(5), partition.epoch_at(7), partition.epoch_at(8)) == (
            first, second, current, current)
        # records deleted below 6: an epoch ending below the new log start ends at it
        start, proposal = partition.delete_records(6)
        assert proposal is not None and start == 6
        await proposal.committed
        assert partition.log_start_offset == 6
        assert partition.end_offset_for_epoch(first) == (first, 6)
        await close(partition)
    asyncio.run(run())


def test_delete_records_moves_the_start_and_keeps_it_across_a_restart(tmp_path: Path) -> None:
    async def run() -> None:
        partition = await open_partition(tmp_path / "s")
        await partition.append(batch(5)).wait(-1, 1000)
        with pytest.raises(PartitionError) as refused:
            partition.delete_records(6)
        assert refused.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
        start, proposal = partition.delete_records(3)
        assert (start, proposal is not None) == (3, True)
        await proposal.committed
        assert (partition.log_start_offset, partition.deleted_below, partition.log.log_start_offset) == (3, 3, 0)
        assert partition.delete_records(2) == (3, None)  # below the start: nothing to do
        await close(partition)
        partition = await open_partition(tmp_path / "s")
        assert partition.log_start_offset == 3
        start, proposal = partition.delete_records(-1)  # the high watermark
        assert start == 5 and proposal is not None
        await proposal.committed
        assert partition.log_start_offset == 5
        await close(partition)
    asyncio.run(run())


def _txn_records(producer_id: int, seq: int, count: int) -> bytes:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0, base_sequence=seq, is_transactional=True)
    for i in range(count):
        builder.append(1000, None, b"r%d" % (seq + i))
    return builder.build()


def test_a_late_marker_of_an_earlier_decision_does_not_end_the_next_transaction(tmp_path: Path) -> None:
    """The classic protocol gives every transaction of a producer the same id and epoch. Decision
    1 (commit) is written; the producer's next transaction writes here; its abort (decision 2) is
    decided; then decision 1's marker arrives again -- sent by a deposed coordinator, or a copy a
    retry already wrote. It used to be written: it committed the next transaction's records (an
    aborted read). The marker's coordinator epoch names its decision: the same one is already
    written, an earlier one is refused (TRANSACTION_COORDINATOR_FENCED), after a restart too."""
    async def run() -> None:
        directory = tmp_path / "s"
        partition = await open_partition(directory)
        await partition.append(_txn_records(7, 0, 2)).wait(-1, 1000)  # transaction n: offsets 0-1
        first = partition.append(end_txn_marker(7, 0, True, 1, 1000))  # its commit: offset 2
        await first.wait(-1, 1000)
        next_txn = partition.append(_txn_records(7, 2, 2))  # transaction n+1: offsets 3-4
        await next_txn.wait(-1, 1000)
        assert partition.last_stable_offset == 3
        late = partition.append(end_txn_marker(7, 0, True, 1, 1000))
        assert late.duplicate and late.base_offset == first.base_offset  # written already: not again
        await late.wait(-1, 1000)
        assert (partition.high_watermark, partition.last_stable_offset) == (5, 3)  # n+1 still open
        aborted = partition.append(end_txn_marker(7, 0, False, 2, 1000))  # n+1's own abort
        await aborted.wait(-1, 1000)
        assert aborted.base_offset == 5 and partition.last_stable_offset == 6
        assert [(a.producer_id, a.first_offset, a.last_offset) for a in partition.aborted_between(0, 6)] == \
            [(7, 3, 5)]
        await close(partition)

        partition = await open_partition(directory)  # the fence survives a restart (snapshot, replay)
        await partition.append(_txn_records(7, 4, 1)).wait(-1, 1000)  # transaction n+2: offset 6
        with pytest.raises(PartitionError) as fenced:
            partition.append(end_txn_marker(7, 0, True, 1, 1000))
        assert fenced.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
        again = partition.append(end_txn_marker(7, 0, False, 2, 1000))
        assert again.duplicate and again.base_offset == 5
        assert (partition.high_watermark, partition.last_stable_offset) == (7, 6)
        # A marker of no numbered decision (a coordinator before the numbering) is written as before.
        unnumbered = partition.append(end_txn_marker(7, 0, True, 0, 1000))
        await unnumbered.wait(-1, 1000)
        assert (unnumbered.base_offset, partition.last_stable_offset) == (7, 8)
        await close(partition)
    asyncio.run(run())


def test_leader_epoch_stays_the_last_leaders_term_while_an_election_runs(tmp_path: Path) -> None:
    """A follower whose term moved on (an election under way, no leader known in the new term)
    keeps fencing by the term of the last leader it knew: Metadata still names that leader with
    that epoch, and a Fetch naming it is served (librdkafka, fenced here, went back to the stopped
    leader and waited out its socket timeout). A new leader's term fences the old epoch."""
    partition = Partition("s", StreamLog.open(tmp_path / "s", LogConfig(fsync=False)), node_id=2)
    group = SimpleNamespace(leader_id=0, term=3)
    partition.group = group  # type: ignore[assignment]  # the two fields leader_epoch reads
    assert partition.leader_epoch == 3  # no leader known yet at all: the term
    group.leader_id = 1  # node 1 leads term 3
    assert partition.leader_epoch == 3
    group.leader_id, group.term = 0, 4  # node 1 stopped; this node's election moved it to term 4
    assert partition.leader_epoch == 3
    assert leader_epoch_error(3, partition.leader_epoch) is ErrorCode.NONE
    group.term = 5  # another round, still no leader
    assert partition.leader_epoch == 3
    group.leader_id = 3  # node 3 won term 5
    assert partition.leader_epoch == 5
    assert leader_epoch_error(3, partition.leader_epoch) is ErrorCode.FENCED_LEADER_EPOCH
    group.leader_id, group.term = 0, 6
    assert partition.leader_epoch == 5
    partition.group = None
    partition.close()

"""Producer and transaction state rebuilt from the log's state snapshots equals the state a
replay of the whole log gives: random logs of idempotent and transactional producers (epoch
bumps, commits, aborts, open transactions), snapshots at random offsets, some damaged, retention
of whole segments, any end offset."""

from __future__ import annotations

import os
import random
import struct
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.log.recovery import CLEAN_SHUTDOWN_FILE
from vdl_broker.log.state_snapshots import snapshot_path
from vdl_broker.raft.types import Entry, EntryType
from vdl_broker.server.partition import Partition
from vdl_broker.server.producer_state import (
    Check,
    ProducerStateTable,
    Verdict,
    decode_state,
    encode_state,
    rebuild_producer_state,
    replay_producer_state,
)
from vdl_broker.server.txn_index import AbortedTxn, LastMarker, StreamTxns
from vdl_wire.records.batch_header import with_base_offset
from vdl_wire.records.control import end_txn_marker
from vdl_wire.records.record_batch import RecordBatchBuilder

pytestmark = pytest.mark.unit


def untimed(table: ProducerStateTable, txns: StreamTxns) -> bytes:
    """The state as `encode_state` writes it with every producer's last-batch time at 0: the
    times are the clock of whoever booked the batches, the rest must match."""
    times = [(entry, entry.last_ms) for _, entry in table.entries()]
    for entry, _ in times:
        entry.last_ms = 0
    try:
        return encode_state(table, txns)
    finally:
        for entry, last_ms in times:
            entry.last_ms = last_ms


def full_replay(log: StreamLog, end: int) -> bytes:
    table, txns = ProducerStateTable(0), StreamTxns()
    replay_producer_state(log, table, end, txns)
    return encode_state(table, txns)


@dataclass
class Workload:
    """A random log: `clean` holds the offsets at which no transaction is open (retention may
    cut there and the whole-log replay still sees every transaction whole)."""
    log: StreamLog
    boundaries: list[int] = field(default_factory=list)  # every batch's base offset, and the end
    clean: set[int] = field(default_factory=set)


def build(directory: Path, rng: random.Random, batches: int) -> Workload:
    log = StreamLog.open(directory, LogConfig(segment_bytes=2000, index_interval_bytes=200, tail_cache_bytes=0,
                                              fsync=False))
    work = Workload(log)
    producers = {pid: {"epoch": 0, "seq": 0, "txn": False, "transactional": pid >= 3, "decision": 0}
                 for pid in range(1, 6)}
    for _ in range(batches):
        offset = log.log_end_offset
        work.boundaries.append(offset)
        if not any(p["txn"] for p in producers.values()):
            work.clean.add(offset)
        pid = rng.choice(list(producers))
        state = producers[pid]
        roll = rng.random()
        if state["txn"] and roll < 0.5:  # end the transaction: commit or abort
            state["decision"] += 1  # the marker's coordinator epoch (0 now and then: an unnumbered one)
            data = end_txn_marker(pid, state["epoch"], rng.random() < 0.6,
                                  state["decision"] if rng.random() < 0.9 else 0, 1000)
            state["txn"] = False
        else:
            if roll > 0.97 and not state["txn"]:  # a new epoch (a restarted producer) restarts sequences
                state["epoch"] += 1
                state["seq"] = 0
            count = rng.randint(1, 3)
            builder = RecordBatchBuilder(producer_id=pid if pid != 5 or rng.random() < 0.5 else -1,
                                         producer_epoch=state["epoch"], base_sequence=state["seq"],
                                         is_transactional=bool(state["transactional"]))
            for i in range(count):
                builder.append(1000, None, b"v%d" % i)
            data = builder.build()
            state["seq"] += count
            state["txn"] = bool(state["transactional"])
        stored = bytes(with_base_offset(data, offset))
        entries = [Entry(log.last_index + 1, 1, EntryType.DATA, stored)]
        if rng.random() < 0.1:
            entries.insert(0, Entry(log.last_index + 1, 1, EntryType.NOOP, b""))
            entries[1] = Entry(log.last_index + 2, 1, EntryType.DATA, stored)
        log.append(entries)
    work.boundaries.append(log.log_end_offset)
    if not any(p["txn"] for p in producers.values()):
        work.clean.add(log.log_end_offset)
    log.sync_now()
    return work


@pytest.mark.parametrize("seed", range(16))
def test_rebuilt_from_snapshots_equals_the_whole_log_replay(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    work = build(tmp_path, rng, 300)
    log = work.log
    assert log.segment_count > 5
    points = sorted(rng.sample(work.boundaries, 8))
    for offset in points:
        log.save_state_snapshot(offset, full_replay(log, offset))
    for offset in rng.sample(points, 2):  # damaged: the next older one serves
        path = snapshot_path(tmp_path, offset)
        data = bytearray(path.read_bytes())
        data[rng.randrange(len(data))] ^= 0xFF
        path.write_bytes(bytes(data))
    if seed % 3:
        # Retention of whole segments, up to one that starts where no transaction is open (one
        # straddling the log start keeps its true first offset, which a replay cannot see).
        bases = [b for b in log._base_offsets[1:-1] if b in work.clean]
        if bases:
            log.delete_through(log.index_for_offset(bases[len(bases) // 2]) - 1)
            assert log.log_start_offset == bases[len(bases) // 2]
    for end in sorted(rng.sample([b for b in work.boundaries if b >= log.log_start_offset], 6)) + [log.log_end_offset]:
        rebuilt = rebuild_producer_state(log, end, 0)
        assert encode_state(rebuilt.table, rebuilt.txns) == full_replay(log, end), f"end {end}"
        usable = [o for o in log.state_snapshot_offsets() if log.log_start_offset <= o <= end]
        assert rebuilt.snapshot_offset == max(usable, default=-1)
        replayed_from = max(usable, default=log.log_start_offset)
        assert rebuilt.batches_replayed == sum(1 for b in work.boundaries[:-1] if replayed_from <= b < end)
    log.close()


def test_state_roundtrip_and_versions() -> None:
    table = ProducerStateTable(1_000)
    table.record(7, 2, 0, 4, base_offset=10)
    table.now_ms = 2_000
    table.record(7, 2, 5, 9, base_offset=20)
    table.record(2**62 + 5, 0, 2**31 - 3, 1, base_offset=30)  # a writer id; a wrapped sequence
    txns = StreamTxns(open={9: 40}, aborted=[AbortedTxn(35, 8, 31)], markers={8: LastMarker(2**31 - 1, 35)})
    payload = encode_state(table, txns)
    decoded_table, decoded_txns = decode_state(payload, 5_000)
    assert encode_state(decoded_table, decoded_txns) == payload
    assert [(b.first_seq, b.last_seq, b.base_offset) for b in decoded_table.last_batches(7)] == [(0, 4, 10), (5, 9, 20)]
    assert decoded_table.epoch_of(7) == 2 and decoded_txns.open == {9: 40}
    assert [(pid, entry.last_ms) for pid, entry in decoded_table.entries()] == [(7, 2_000), (2**62 + 5, 2_000)]
    assert decoded_txns.aborted == [AbortedTxn(35, 8, 31)]
    assert decoded_txns.markers == {8: LastMarker(2**31 - 1, 35)}
    # Versions 2 (no producer times) and 1 (no markers either) are still read: their producers
    # count as seen when read, no markers are known from version 1.
    producers = (struct.pack(">I", 2)
                 + struct.pack(">qhB", 7, 2, 2) + struct.pack(">iiq", 0, 4, 10) + struct.pack(">iiq", 5, 9, 20)
                 + struct.pack(">qhB", 2**62 + 5, 0, 1) + struct.pack(">iiq", 2**31 - 3, 1, 30))
    txn_part = payload[payload.index(struct.pack(">I", 1) + struct.pack(">qq", 9, 40)):]
    version_2 = bytes([2]) + producers + txn_part
    v2_table, v2_txns = decode_state(version_2, 5_000)
    assert [(pid, entry.last_ms) for pid, entry in v2_table.entries()] == [(7, 5_000), (2**62 + 5, 5_000)]
    v2_table.now_ms = 2_000
    for _, entry in v2_table.entries():
        entry.last_ms = 2_000
    assert encode_state(v2_table, v2_txns) == payload
    version_1 = bytes([1]) + producers + txn_part[:-(4 + 20)]
    old_table, old_txns = decode_state(version_1, 2_000)
    assert encode_state(old_table, StreamTxns(open=old_txns.open, aborted=old_txns.aborted, markers=txns.markers)) \
        == payload
    assert old_txns.markers == {}
    # Version 3 (no batch timestamps): each batch's is -1 (unknown).
    timed = (struct.pack(">I", 2)
             + struct.pack(">qhqB", 7, 2, 2_000, 2) + struct.pack(">iiq", 0, 4, 10) + struct.pack(">iiq", 5, 9, 20)
             + struct.pack(">qhqB", 2**62 + 5, 0, 2_000, 1) + struct.pack(">iiq", 2**31 - 3, 1, 30))
    v3_table, v3_txns = decode_state(bytes([3]) + timed + txn_part, 5_000)
    assert encode_state(v3_table, v3_txns) == payload
    with pytest.raises(ValueError, match=r"producer state version 9, this node reads versions 1, 2, 3, 4"):
        decode_state(bytes([9]) + payload[1:], 0)
    with pytest.raises(ValueError, match="bytes after the producer state"):
        decode_state(payload + b"\0", 0)


def test_a_duplicate_is_answered_its_originals_max_timestamp_after_a_snapshot() -> None:
    """Kafka keeps each batch's max timestamp with the producer state (BatchMetadata.timestamp):
    a retry on a LogAppendTime stream is answered its original's append time, after a restart too."""
    table = ProducerStateTable(0)
    table.record(7, 0, 0, 4, base_offset=10, max_timestamp=1_800_000_000_001)
    table.record(7, 0, 5, 9, base_offset=15, max_timestamp=1_800_000_000_002)
    decoded, _ = decode_state(encode_state(table, StreamTxns()), 0)
    for state in (table, decoded):
        assert state.check(7, 0, 0, 4) == Check(Verdict.DUPLICATE, 10, 1_800_000_000_001)
        assert state.check(7, 0, 5, 9) == Check(Verdict.DUPLICATE, 15, 1_800_000_000_002)


def test_an_unreadable_payload_falls_back_to_the_log(tmp_path: Path) -> None:
    work = build(tmp_path, random.Random(99), 60)
    log = work.log
    end = log.log_end_offset
    log.save_state_snapshot(end, b"\x01\x00")  # a valid file whose payload is cut short
    rebuilt = rebuild_producer_state(log, end, 0)
    assert rebuilt.snapshot_offset == -1 and rebuilt.batches_replayed == 60
    assert encode_state(rebuilt.table, rebuilt.txns) == full_replay(log, end)
    assert log.state_snapshot_offsets() == []  # deleted: not tried again
    log.close()


@dataclass
class Writer:
    """Random batches of idempotent producers and a transactional one, appended to a partition's
    log and applied to it (no Raft group: its apply callback is fed by hand, as the group would);
    `boundaries` holds every batch's base offset."""
    partition: Partition
    rng: random.Random
    boundaries: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)  # each batch's bytes
    sequences: dict[int, int] = field(default_factory=lambda: dict.fromkeys(range(1, 5), 0))
    open_txn: bool = False

    def write(self, batches: int) -> None:
        for _ in range(batches):
            log = self.partition.log
            pid = self.rng.randint(1, 4)
            if pid == 4 and self.open_txn and self.rng.random() < 0.5:
                data = end_txn_marker(4, 0, self.rng.random() < 0.5, 0, 1000)
                self.open_txn = False
            else:
                builder = RecordBatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=self.sequences[pid],
                                             is_transactional=pid == 4)
                count = self.rng.randint(1, 4)
                for i in range(count):
                    builder.append(1000, None, b"value %d" % i)
                data = builder.build()
                self.sequences[pid] += count
                self.open_txn = self.open_txn or pid == 4
            self.boundaries.append(log.log_end_offset)
            self.sizes.append(len(data))
            entry = Entry(log.last_index + 1, 1, EntryType.DATA, bytes(with_base_offset(data, log.log_end_offset)))
            log.append([entry])
            self.partition.on_apply([entry])


def applied_log(directory: Path, rng: random.Random, batches: int, snapshot_bytes: int) -> tuple[Partition, list[int]]:
    """A partition over a log of one segment that applied `batches` random batches (Writer);
    every batch's base offset, and the end."""
    writer = open_writer(directory, rng, snapshot_bytes)
    writer.write(batches)
    return writer.partition, [*writer.boundaries, writer.partition.log.log_end_offset]


def open_writer(directory: Path, rng: random.Random, snapshot_bytes: int) -> Writer:
    config = LogConfig(segment_bytes=1 << 20, index_interval_bytes=200, tail_cache_bytes=0, fsync=False,
                       state_snapshot_bytes=snapshot_bytes)
    return Writer(Partition("s", StreamLog.open(directory, config), node_id=1), rng)


def test_snapshots_by_size_within_a_segment_bound_the_replay_and_give_the_whole_log_state(tmp_path: Path) -> None:
    partition, boundaries = applied_log(tmp_path, random.Random(5), 200, snapshot_bytes=1500)
    log = partition.log
    assert log.segment_count == 1  # no roll: every snapshot here was taken by size
    snapshots = log.state_snapshot_offsets()
    assert len(snapshots) == 1  # the older ones by size were superseded
    newest = snapshots[0]
    assert 0 < newest < log.log_end_offset
    # What a crash now leaves to replay: the batches after the newest snapshot, less than
    # state_snapshot_bytes of them (each batch is under 150 bytes).
    replayed = [b for b in boundaries[:-1] if b >= newest]
    assert 0 < len(replayed) <= 1500 // 70
    end = log.log_end_offset
    rebuilt = rebuild_producer_state(log, end, 0)
    assert (rebuilt.snapshot_offset, rebuilt.batches_replayed) == (newest, len(replayed))
    assert untimed(rebuilt.table, rebuilt.txns) == full_replay(log, end)
    assert untimed(rebuilt.table, rebuilt.txns) == untimed(partition.producers, partition.txns)
    log.close()


def test_snapshots_taken_while_applying_are_not_fsynced_the_clean_stops_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Applying runs in the node's event loop: a snapshot's two fsyncs (the file's, the
    # directory's) there stalled every stream's requests on the node for their duration.
    config = LogConfig(segment_bytes=3000, index_interval_bytes=200, tail_cache_bytes=0, fsync=True,
                       state_snapshot_bytes=1500)
    writer = Writer(Partition("s", StreamLog.open(tmp_path, config), node_id=1), random.Random(5))
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", synced.append)
    monkeypatch.setattr(os, "fdatasync", synced.append)
    writer.write(120)
    log = writer.partition.log
    assert log.segment_count > 2
    snapshots = log.state_snapshot_offsets()
    assert len(snapshots) >= log.segment_count - 1  # at every roll, and by size
    assert synced == []  # none of them synced
    end = log.log_end_offset
    assert rebuild_producer_state(log, end, 0).snapshot_offset == snapshots[-1]

    log.save_state_snapshot(end, encode_state(writer.partition.producers, writer.partition.txns))
    assert len(synced) == 2  # the one a clean stop writes: the file and the directory
    monkeypatch.undo()
    log.close()


def crash(log: StreamLog) -> None:
    """Close the log's files as a kill -9 leaves them: without the clean-shutdown marker."""
    log.sync_now()
    log.close()
    (log.directory / CLEAN_SHUTDOWN_FILE).unlink()


def test_a_crash_after_a_snapshot_by_size_recovers_the_state_of_what_the_log_kept(tmp_path: Path) -> None:
    partition, boundaries = applied_log(tmp_path, random.Random(11), 120, snapshot_bytes=2000)
    log = partition.log
    (snapshot,) = log.state_snapshot_offsets()
    later = [b for b in boundaries[:-1] if b >= snapshot]
    assert len(later) >= 2  # batches appended after the snapshot, then the crash
    expected = untimed(partition.producers, partition.txns)
    cut_at = boundaries[boundaries.index(snapshot) - 2]  # two batches below the snapshot
    cut_position = log._segments[-1].position_of(log.index_for_offset(cut_at))
    crash(log)  # no close-time snapshot (Partition.close(clean=True) would write one)

    reopened = StreamLog.open(tmp_path, log.config)
    assert reopened.state_snapshot_offsets() == [snapshot]
    rebuilt = rebuild_producer_state(reopened, reopened.log_end_offset, 0)
    assert (rebuilt.snapshot_offset, rebuilt.batches_replayed) == (snapshot, len(later))
    assert untimed(rebuilt.table, rebuilt.txns) == expected == full_replay(reopened, reopened.log_end_offset)
    crash(reopened)

    # A crash that also lost the log's unsynced tail from two batches below the snapshot on (a
    # torn write there): the snapshot describes batches the log no longer holds, so it goes,
    # and the state is that of what is left, replayed whole.
    (segment,) = tmp_path.glob("*.log")
    with segment.open("r+b") as file:
        file.truncate(cut_position + 7)
    recovered = StreamLog.open(tmp_path, log.config)
    assert recovered.log_end_offset == cut_at
    assert recovered.state_snapshot_offsets() == []
    rebuilt = rebuild_producer_state(recovered, cut_at, 0)
    assert (rebuilt.snapshot_offset, rebuilt.batches_replayed) == (-1, boundaries.index(cut_at))
    assert encode_state(rebuilt.table, rebuilt.txns) == full_replay(recovered, cut_at)
    assert rebuilt.table.last_batches(1)
    recovered.close()


def test_after_a_crash_the_tail_replayed_counts_toward_the_next_snapshot_by_size(tmp_path: Path) -> None:
    # Without counting it, a node that crashes again and again could leave up to twice
    # state_snapshot_bytes unsnapshotted each time.
    writer = open_writer(tmp_path, random.Random(3), snapshot_bytes=2000)
    writer.write(100)
    partition = writer.partition
    (snapshot,) = partition.log.state_snapshot_offsets()
    first = writer.boundaries.index(snapshot)
    replayed_bytes = sum(writer.sizes[first:])
    assert 0 < replayed_bytes < 2000
    crash(partition.log)

    partition = writer.partition = Partition("s", StreamLog.open(tmp_path, partition.log.config), node_id=1)
    assert partition._rebuild(partition.log.last_index) == len(writer.sizes) - first
    before = len(writer.sizes)
    while partition.log.state_snapshot_offsets() == [snapshot]:
        writer.write(1)
    (newer,) = partition.log.state_snapshot_offsets()  # the older one by size is gone
    assert newer == partition.log.log_end_offset
    since = replayed_bytes + sum(writer.sizes[before:])
    assert 2000 <= since < 2000 + max(writer.sizes)  # the replayed tail counted: not 2000 more
    partition.log.close()

"""Partition 0 of the topic that stands for one log stream: the one partition type, over the
stream's Raft group on this node (a cluster of one included).

Raft knows entries; the partition knows Kafka:

- Offsets: while this node leads, the partition gives each appended RecordBatch the next Kafka
  offset (its base offset field is rewritten, one copy per batch) before proposing it as a DATA
  entry. When a term's serving starts, every entry of the log is committed (the new leader's
  no-op is), so the next offset is the log's end offset; from then on only this partition
  proposes DATA entries.
- High watermark: the offset after the last committed DATA entry, advanced as the group applies
  committed entries; it never moves backwards (a new leader serves only once its own-term no-op
  committed, so its commit index is at least every earlier leader's).
- Leader epoch (KIP-101, KIP-320) = the Raft term: the leader stamps each batch's
  partition_leader_epoch with the term it serves in, Metadata reports the term, and
  OffsetForLeaderEpoch answers from the terms of the log's entries (`end_offset_for_epoch`).
- Log start: the segments' start (retention), or higher where DeleteRecords (KIP-107) moved it:
  a LOG_START entry through the stream's Raft group, so every replica applies it at the same
  point of the log; each keeps it (log/log_start.py) until retention deletes the segments below.
  A follower that misses the entry because the leader's log no longer holds it loses nothing:
  the entry follows every record below its offset, so a log without it starts at or above it,
  and the follower's reset to that log (on_snapshot) starts there too.
- Producer state (KIP-98) follows the replicated log on every replica: committed batches are
  recorded as they are applied. After a restart it is rebuilt up to the saved commit point from
  the newest state snapshot (written at each segment roll and at a clean close, as Kafka's
  producer-state snapshots) and the batches after it, not from the whole log. A leader checks batches against a copy of that table taken when its term began plus
  its own proposals, so a retry of an in-flight batch is recognised, and a proposal another
  leader later replaces never pollutes the committed table.

`append` is synchronous (no await between choosing an offset and proposing, so concurrent
produce requests get contiguous offsets) and returns an AppendHandle the handler awaits for the
acks level it needs. Long-poll fetches park on `changed_future()`, resolved after every commit
and role change.

Hot path: everything here is per batch (a header parse, one copy to set the base offset, one
proposal), never per record.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import struct
import time
from dataclasses import dataclass

from vdl_broker.cluster.stream_configs import LONG_MAX, TIMESTAMP_AFTER_MAX_MS, StreamSettings
from vdl_broker.log import FrozenBuffer, StreamLog
from vdl_broker.log.log_start import load_deleted_below, save_deleted_below
from vdl_broker.raft.group import RaftGroup
from vdl_broker.raft.proposals import Proposal, ProposalStorageError
from vdl_broker.raft.types import Entry, EntryType, RaftError, SnapshotMeta
from vdl_broker.server.producer_state import (
    ProducerStateTable,
    Verdict,
    encode_state,
    last_sequence,
    rebuild_producer_state,
    record_batch,
)
from vdl_broker.server.txn_index import (
    AbortedTxn,
    LastMarker,
    MarkerVerdict,
    StreamTxns,
    forget_markers_before,
    marker_verdict,
    observe,
)
from vdl_wire.errors import ErrorCode
from vdl_wire.records.batch_header import (
    ATTRIBUTES_OFFSET,
    BatchHeader,
    check_batch,
    parse_batch_header,
    stamp,
    with_base_offset,
)
from vdl_wire.records.compression import Compression
from vdl_wire.records.control import read_marker

log = logging.getLogger(__name__)

_OFFSET = struct.Struct(">q")  # a LOG_START entry's payload
# A batch stamped in place is kept as a view (~300 B of objects, and its request's other bytes)
# where a copy is kept as one FrozenBuffer (~100 B): the tail cache charges each entry's memory
# as ENTRY_OVERHEAD + its payload, and from this size on the difference is under 0.5% of it,
# while the copy saved is most of a large batch's cost here.
STAMP_IN_PLACE_FROM = 64 << 10
MAX_WAITERS = 256  # idle long polls time out without a wake: past this, drop the finished ones

# KIP-98: what a refused idempotent batch is answered.
VERDICT_ERRORS = {
    Verdict.DUPLICATE_SEQUENCE: ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
    Verdict.OUT_OF_ORDER: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    Verdict.INVALID_EPOCH: ErrorCode.INVALID_PRODUCER_EPOCH,
}


NO_LEADER_EPOCH = -1  # a request's current_leader_epoch -1: the client knows none, nothing is fenced


def leader_epoch_error(requested: int, ours: int) -> ErrorCode:
    """KIP-320: what a request naming the leader epoch its client knows (Fetch v9+, ListOffsets
    v4+, OffsetForLeaderEpoch v2+) is answered at a replica whose epoch is `ours`: one older than
    ours is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH (the client refreshes its
    metadata, then asks again); -1, or a replica without an epoch yet, is not checked.
    # Kafka: Partition.checkCurrentLeaderEpoch, before its leader check."""
    if requested == NO_LEADER_EPOCH or ours < 0 or requested == ours:
        return ErrorCode.NONE
    return ErrorCode.FENCED_LEADER_EPOCH if requested < ours else ErrorCode.UNKNOWN_LEADER_EPOCH


class PartitionError(Exception):
    """An append refused with a Kafka error code (the batch was not stored)."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


@dataclass(slots=True)
class AppendHandle:
    """What one appended batch became: its base offset now, its durability later.

    `proposal` is the Raft entry holding the batch: this append's own, or, for a retried batch
    whose original is still in flight, the original's (same term: it commits no later). None
    when the batch is a duplicate of one already committed. `max_timestamp` is the stored
    batch's (a duplicate's: its original's), the append time on a LogAppendTime stream."""

    partition: Partition
    base_offset: int
    duplicate: bool = False
    proposal: Proposal | None = None
    max_timestamp: int = -1

    async def wait(self, acks: int, timeout_ms: int) -> None:
        """acks 0: nothing; 1: the leader's own durable copy; -1: the commit by a majority.
        Raises PartitionError REQUEST_TIMED_OUT (not within `timeout_ms`) or
        NOT_LEADER_OR_FOLLOWER (leadership lost: the outcome is unknown, the client retries)."""
        if acks == 0 or self.proposal is None:
            return
        future = self.proposal.committed if acks == -1 else self.proposal.durable
        if not future.done():
            # Futures are not cancelled by asyncio.wait: the proposal lives on either way.
            cut_off = self.partition.cut_off_future()
            try:
                await asyncio.wait((future, cut_off), timeout=max(0, timeout_ms) / 1000,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                self.partition.forget_cut_off_future(cut_off)
            if not future.done():
                if cut_off.done():  # the outcome is unknown: the client retries elsewhere
                    raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"stream {self.partition.name}: node "
                                         f"{self.partition.node_id} is cut off from the cluster")
                raise PartitionError(ErrorCode.REQUEST_TIMED_OUT, f"stream {self.partition.name}: "
                                     f"not {'committed' if acks == -1 else 'stored'} within {timeout_ms} ms")
        if (failure := future.exception()) is not None:
            raise self.partition.proposal_error(failure)


def _now_ms() -> int:
    """Wall-clock ms: producers' idle times survive a restart in the state snapshots."""
    return int(time.time() * 1000)


def _stamped(batch: bytes | bytearray | memoryview, base_offset: int, leader_epoch: int) -> memoryview:
    """The batch as the log stores it (base offset and leader epoch stamped), as a view: a Raft
    entry's payload is bytes or a memoryview. Nothing writes it after, so the log and its tail
    cache keep views of it as it is. A large batch that is most of a request's own buffer (a
    FrozenBuffer the request was read into, which nothing reads after the append) is stamped
    where it lies: no copy of the produced bytes. Any other is copied into a FrozenBuffer of its
    own: a small part of its buffer would pin the rest in the tail cache, and bytes cannot be
    written."""
    if (isinstance(batch, memoryview) and isinstance(batch.obj, FrozenBuffer) and not batch.readonly
            and batch.contiguous and batch.nbytes >= STAMP_IN_PLACE_FROM and 2 * batch.nbytes >= len(batch.obj)):
        stamp(batch, base_offset, leader_epoch)
        return batch
    return memoryview(with_base_offset(batch, base_offset, leader_epoch, into=FrozenBuffer))


class Partition:
    """Partition 0 of one stream's topic, replicated by its Raft group (`attach` it right after
    creating the group with `apply=partition.on_apply, on_snapshot=partition.on_snapshot`)."""

    def __init__(self, name: str, stream_log: StreamLog, node_id: int, settings: StreamSettings | None = None) -> None:
        self.name = name
        self.log = stream_log
        self.node_id = node_id
        self.settings = settings  # the stream's config as applied here (None: the node's defaults)
        self.group: RaftGroup | None = None
        self.producers = ProducerStateTable(_now_ms())  # committed batches, on every replica
        self.txns = StreamTxns()  # committed transactions: open ones (the LSO) and aborted ones
        self._leader_producers = ProducerStateTable(_now_ms())  # while leading: this term's view
        self._leader_markers: dict[int, LastMarker] = {}  # while leading: each producer's last marker
        self.closed = False
        self._serving = (-1, -1)  # (term, write failures) this node serves as leader for
        self._next_offset = -1  # while serving: the base offset of the next batch
        self._deleted_below = load_deleted_below(stream_log.directory)
        self._high_watermark = stream_log.log_start_offset
        self._inflight: dict[int, Proposal] = {}  # base offset -> proposal not yet committed/lost
        # The last produce waiting for a batch of it recompressed on a worker thread: later
        # produces to this stream append after it (server/handlers/produce.py).
        self.produce_queue: asyncio.Future[None] | None = None
        self._waiters: list[asyncio.Future[None]] = []
        self._cut_off: set[asyncio.Future[None]] = set()  # of the waiting requests (cut_off_future)
        self.last_leader = 0  # the leader this replica last knew (kept while it knows none)
        self._last_leader_term = -1  # the term it led in (leader_epoch)
        self._snapshot_segment = stream_log.active_base_index  # the segment last snapshotted in
        self._unsnapshotted_bytes = 0  # batch bytes applied (or replayed at open) since the last state snapshot
        self.rebuilt_from = -1  # the state snapshot's offset the last rebuild started at (-1: none)
        self.rebuilt_batches = 0  # batches it read from the log

    def attach(self, group: RaftGroup) -> None:
        """Bind the group (before its task first runs) and rebuild producer state from the
        entries it will not replay (those up to its saved commit point)."""
        self.group = group
        self._high_watermark = self.log.offset_for_index(max(group.commit_index, self.log.first_index - 1))
        self._rebuild(group.applied_index)
        group.add_commit_listener(self._on_change)
        group.add_role_listener(self._on_change)

    # -- state -------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """This node leads the group, its own-term no-op committed, and every committed entry
        is applied here (so the high watermark and producer state are complete)."""
        group = self.group
        if group is None or self.closed or group.stopped or not group.leader_ready:
            return False
        # A write failure the leader survived (disk full) dropped proposals whose offsets were
        # handed out: serving starts over from the log as it is, as in a new term.
        serving = (group.term, group.write_failures)
        if self._serving != serving:
            if group.applied_index < group.commit_index:
                return False
            self._start_serving(serving)
        return True

    @property
    def serves_reads(self) -> bool:
        """Leader holding its read lease (RaftGroup.has_read_lease): its high watermark is the
        newest. A leader cut off from its majority stops serving reads before another leader
        can be elected, so no reader sees the high watermark go back or a stale end."""
        return self.is_leader and self.group is not None and self.group.has_read_lease()

    @property
    def serves_follower_reads(self) -> bool:
        """A replica that does not serve as leader answers Fetch v11+ below its own high
        watermark (KIP-392): that watermark comes from the entries applied here, which are
        committed, and the leader tells a follower of a commit only once it applied it itself
        (RaftGroup._send), so it never passes the leader's. Not while the replica is recovering
        entries its storage lost (its log may lack some of what it had applied)."""
        group = self.group
        return group is not None and not self.closed and not group.stopped and not group.node.recovering

    def follower_read_offsets(self, max_lag_entries: int) -> dict[int, int]:
        """Leader only: each in-sync follower -> the offset below which it holds records this
        leader has applied, i.e. what it can serve once told of the commit (Kafka's
        ReplicaManager.findPreferredReadReplica looks at the followers' log end offsets)."""
        group = self.group
        if group is None:
            return {}
        applied = group.applied_through
        status = group.peer_status()
        offsets = {}
        for peer in group.in_sync_replicas(max_lag_entries):
            st = status.get(peer)
            if peer == self.node_id or st is None:
                continue
            index = min(st.match, applied)
            if index >= self.log.first_index - 1:
                offsets[peer] = self.log.offset_for_index(index)
        return offsets

    @property
    def leader_id(self) -> int:
        """The known leader (0 = unknown, as raft.NONE)."""
        return self.group.leader_id if self.group is not None else 0

    def wake(self) -> bool:
        """Wake a quiescent group (a read needs the leader's lease back); False if it was awake."""
        return self.group is not None and self.group.wake()

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def last_stable_offset(self) -> int:
        """Below it every transaction is decided: what read_committed consumers, retention and
        the Delta tiering writer may reach (KIP-98)."""
        self.txns.forget_before(self.log.log_start_offset)
        return max(self.txns.last_stable_offset(self._high_watermark), self.log.log_start_offset)

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        return self.txns.aborted_between(start, end)

    @property
    def log_start_offset(self) -> int:
        return max(self.log.log_start_offset, self._deleted_below)

    @property
    def deleted_below(self) -> int:
        """Where DeleteRecords moved the log start (0: never); retention deletes the segments
        below (ReplicaManager.apply_retention)."""
        return self._deleted_below

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def max_message_bytes(self) -> int | None:
        """The stream's produce batch size limit (None: the node's)."""
        return self.settings.max_message_bytes if self.settings is not None else None

    @property
    def timestamp_limits(self) -> tuple[int, int]:
        """(message.timestamp.before.max.ms, message.timestamp.after.max.ms) of the stream."""
        if self.settings is None:
            return LONG_MAX, TIMESTAMP_AFTER_MAX_MS
        return self.settings.timestamp_before_max_ms, self.settings.timestamp_after_max_ms

    @property
    def recompression(self) -> tuple[Compression, int | None] | None:
        """compression.type's codec and level every produced batch is stored with (None:
        `producer`, each batch as its producer compressed it)."""
        settings = self.settings
        if settings is None or settings.compression is None:
            return None
        return settings.compression, settings.compression_level

    @property
    def log_append_time(self) -> bool:
        """message.timestamp.type=LogAppendTime: the leader stamps each produced batch."""
        return self.settings is not None and self.settings.log_append_time

    @property
    def leader_epoch(self) -> int:
        """The term of the stream's leader as this replica knows it (-1: no group). While an
        election runs here (a term in which no leader is known yet) it stays the term of the last
        leader known, as Kafka's epoch changes only with a new leader: Metadata keeps naming that
        leader with that epoch until another is known, and a Fetch naming it must not be fenced
        meanwhile (librdkafka, fenced by a follower whose Metadata names the old leader and epoch,
        goes back to that leader and, when it is the one that stopped, waits out its socket
        timeout). Reads here stay below the high watermark: committed records only."""
        group = self.group
        if group is None:
            return -1
        if group.leader_id:
            self._note_leader(group)
            return group.term
        return self._last_leader_term if self._last_leader_term >= 0 else group.term

    def _note_leader(self, group: RaftGroup) -> None:
        self.last_leader, self._last_leader_term = group.leader_id, group.term

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) as Kafka's leader epoch cache answers OffsetForLeaderEpoch
        (LeaderEpochFileCache.endOffsetFor): for the leader's own term the log end offset; for
        an older one the start of the next term that has entries here (where the records of
        later leaders begin), with the term of the last record before it; (-1, -1) for a term
        this leader does not know. Leader only (`is_leader`)."""
        log = self.log
        current = self._serving[0]
        if epoch == current:
            return epoch, self.log_end_offset
        if epoch > current or epoch < 0:
            return -1, -1
        if log.first_index <= log.last_index and epoch < log.term_at(log.first_index):
            # Older than every entry here: batches that releases before leader epochs stored
            # carry what their producer set (kafka-python: 0), not a term. Kafka would answer the
            # start of the first term, which a consumer past it takes for a truncation and resets
            # its position to the start; but a consumer reads committed entries only, which Raft
            # never truncates, so its epoch ends at the log end.
            return epoch, self.log_end_offset
        # Terms never decrease along the log: the first entry of a later term, by bisection.
        low, high = log.first_index, log.last_index + 1
        while low < high:
            middle = (low + high) // 2
            if log.term_at(middle) > epoch:
                high = middle
            else:
                low = middle + 1
        end = max(log.offset_for_index(low - 1), self.log_start_offset)
        if end <= self.log_start_offset:
            return epoch, end  # Kafka: an epoch older than the log's first answers the log start
        return log.term_at(log.index_for_offset(end - 1)), end

    def epoch_at(self, offset: int) -> int:
        """The term of the entry holding `offset`; the current term at or past the log end."""
        if offset >= self.log_end_offset or offset < self.log_start_offset:
            return self.leader_epoch
        return self.log.term_at(self.log.index_for_offset(offset))

    def in_sync_replicas(self, max_lag_entries: int) -> list[int]:
        return self.group.in_sync_replicas(max_lag_entries) if self.group is not None else []

    # -- following the replicated log --------------------------------------------------------

    def _start_serving(self, serving: tuple[int, int]) -> None:
        self._leader_producers = copy.deepcopy(self.producers)
        self._leader_markers = dict(self.txns.markers)
        self._next_offset = self.log.log_end_offset
        self._serving = serving
        term = serving[0]
        log.info("stream %s: node %d leads (term %d), high watermark %d", self.name, self.node_id, term,
                 self._high_watermark)

    def _rebuild(self, through_index: int) -> int:
        """The committed producer table from the log's DATA entries up to Raft index
        `through_index` (at open: the group replays only the entries after it)."""
        end = self._applied_offset(through_index)
        rebuilt = rebuild_producer_state(self.log, end, _now_ms())
        self.producers, self.txns = rebuilt.table, rebuilt.txns
        self.rebuilt_from, self.rebuilt_batches = rebuilt.snapshot_offset, rebuilt.batches_replayed
        # What was replayed is not in a snapshot either: it counts toward the next one by size.
        self._unsnapshotted_bytes = rebuilt.bytes_replayed
        if rebuilt.snapshot_offset >= 0:
            log.info("stream %s: producer state from the snapshot at offset %d and %d batches after it",
                     self.name, rebuilt.snapshot_offset, rebuilt.batches_replayed)
        elif rebuilt.batches_replayed:
            log.info("stream %s: producer state from the whole log (%d batches)", self.name, rebuilt.batches_replayed)
        return rebuilt.batches_replayed

    def _applied_offset(self, index: int) -> int:
        return self.log.offset_for_index(max(index, self.log.first_index - 1))

    def _save_state_snapshot(self, through_index: int, durable: bool) -> int:
        """The committed producer and transaction state (every entry up to `through_index` is
        applied) as the log's state snapshot there; its offset, -1 when it was not written (a
        failure costs restart time only). Those taken while applying are not `durable`: their
        fsyncs (the file's and the directory's) would stall the node's event loop, every
        stream's requests with it, for what a machine's crash costs only restart time."""
        offset = self._applied_offset(through_index)
        self._unsnapshotted_bytes = 0
        try:
            self.log.save_state_snapshot(offset, encode_state(self.producers, self.txns), durable)
        except (OSError, ValueError) as error:
            log.warning("stream %s: producer state snapshot at offset %d not written: %s", self.name, offset, error)
            return -1
        return offset

    def on_apply(self, entries: list[Entry]) -> None:
        """RaftGroup apply callback: committed entries, in order, on every replica."""
        self.producers.now_ms = _now_ms()
        for entry in entries:
            if entry.type == EntryType.DATA:
                self._unsnapshotted_bytes += len(entry.data)
                header = parse_batch_header(entry.data)
                record_batch(self.producers, header, header.base_offset)
                if header.is_transactional:
                    observe(self.txns, header, entry.data)
                self._high_watermark = max(self._high_watermark, header.base_offset + header.last_offset_delta + 1)
            elif entry.type == EntryType.LOG_START:
                (offset,) = _OFFSET.unpack_from(entry.data)
                if offset > self._deleted_below:
                    save_deleted_below(self.log.directory, offset, self.log.config.fsync)
                    self._deleted_below = offset
        if entries and self.log.active_base_index != self._snapshot_segment \
                and entries[-1].index >= self.log.active_base_index:
            # The log rolled and the new segment's first entries are applied: one snapshot per
            # segment bounds what a restart reads to about a segment.
            self._snapshot_segment = self.log.active_base_index
            self._save_state_snapshot(entries[-1].index, durable=False)
        elif entries and self._unsnapshotted_bytes >= self.log.config.state_snapshot_bytes:
            # ... and one every state_snapshot_bytes within a segment bounds it to that much
            # after a crash (a clean close snapshots the end). The active segment keeps only its
            # newest snapshot (older ones there save nothing once it exists); earlier segments'
            # stay, as fallbacks should it be unreadable.
            offset = self._save_state_snapshot(entries[-1].index, durable=False)
            active_base = self._applied_offset(self.log.active_base_index - 1)
            for older in self.log.state_snapshot_offsets():
                if active_base <= older < offset:
                    self.log.discard_state_snapshot(older)

    def forget_deleted(self) -> None:
        """Retention or DeleteRecords deleted segments: forget the producers and aborted
        transactions whose batches all went with them, as a restart (which reads what is left)
        would, so the tables do not grow with every producer id the stream ever saw (Kafka evicts
        them likewise when its log start moves)."""
        start = self.log.log_start_offset
        self.producers.forget_batches_below(start)
        self._leader_producers.forget_batches_below(start)
        forget_markers_before(self._leader_markers, start)
        self.txns.forget_before(start)

    def expire_producers(self, now_ms: int, idle_ms: int, writer_idle_ms: int) -> int:
        """Forget the producers idle that long here (ProducerStateTable.expire), but those of open
        transactions, in the committed table and the leader's; returns how many went. Each
        replica decides on its own clock, as each Kafka replica does."""
        open_txns = self.txns.open
        gone = self.producers.expire(now_ms, idle_ms, writer_idle_ms, open_txns)
        self._leader_producers.expire(now_ms, idle_ms, writer_idle_ms, open_txns)
        return len(gone)

    def on_snapshot(self, snapshot: SnapshotMeta) -> None:
        """The leader reset our log start (we lagged behind its retention): the producer state
        of the dropped prefix is gone, as after retention (KIP-360 accepts unknown producers);
        everything before the new start is committed."""
        self.producers = ProducerStateTable(_now_ms())
        self.txns = StreamTxns()
        self._high_watermark = max(self._high_watermark, self.log.log_start_offset)

    # -- append ------------------------------------------------------------------------------

    def append(self, batch: bytes | bytearray | memoryview, header: BatchHeader | None = None,
               operator_marker: bool = False) -> AppendHandle:
        """Idempotence check, offset assignment and proposal of one validated RecordBatch v2,
        synchronously; raises PartitionError. `header`: the batch's, as validate_batch returned it
        (its CRC checked: the entry's checksum extends it rather than reading the batch again).
        `operator_marker`: an operator's abort marker (Admin.abortTransaction), written even when
        the producer's last marker here carries the same coordinator epoch: the operator took that
        epoch from DescribeProducers, and Kafka refuses only a lower one
        (ProducerAppendInfo.checkCoordinatorEpoch)."""
        if self.closed:
            raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"stream {self.name} was deleted")
        if not self.is_leader:
            raise self.not_leader_error()
        group = self.group
        assert group is not None
        known_crc = None if header is None else (ATTRIBUTES_OFFSET, header.crc)
        if header is None:
            header = parse_batch_header(batch)
        idempotent = header.producer_id >= 0 and not header.is_control  # markers carry no sequence
        marker = read_marker(batch, header) if header.is_control and header.producer_id >= 0 else None
        if marker is not None:
            last = self._leader_markers.get(header.producer_id)
            verdict = marker_verdict(None if last is None else last.coordinator_epoch, marker.coordinator_epoch)
            if verdict is MarkerVerdict.FENCED:
                assert last is not None
                raise PartitionError(ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                                     f"stream {self.name}: a marker of producer {header.producer_id} at coordinator "
                                     f"epoch {marker.coordinator_epoch}, after its marker at {last.coordinator_epoch}")
            if verdict is MarkerVerdict.WRITTEN and not operator_marker:
                assert last is not None  # the same decision's marker: written (or in flight)
                return AppendHandle(self, last.offset, True, self._inflight.get(last.offset))
        if idempotent:
            last_seq = last_sequence(header.base_sequence, header.last_offset_delta)
            check = self._leader_producers.check(header.producer_id, header.producer_epoch, header.base_sequence,
                                                 last_seq)
            if check.verdict is Verdict.DUPLICATE:
                # Its original is committed, or in flight in this term: then wait for it too.
                return AppendHandle(self, check.base_offset, True, self._inflight.get(check.base_offset),
                                    check.max_timestamp)
            if check.verdict is not Verdict.APPEND:
                raise PartitionError(VERDICT_ERRORS[check.verdict])
        base_offset = self._next_offset
        stored = _stamped(batch, base_offset, self._serving[0])
        try:
            last_offset = check_batch(stored).last_offset  # a bad batch must never reach the replicated log
            proposal = group.propose(stored, EntryType.DATA, known_crc)
        except ValueError as error:
            raise PartitionError(ErrorCode.CORRUPT_MESSAGE, str(error)) from None
        except RaftError:
            raise self.not_leader_error() from None
        self._next_offset = last_offset + 1
        if idempotent:
            self._leader_producers.now_ms = _now_ms()
            record_batch(self._leader_producers, header, base_offset)
        elif marker is not None and marker.coordinator_epoch > 0:
            self._leader_markers[header.producer_id] = LastMarker(marker.coordinator_epoch, base_offset)
        self._inflight[base_offset] = proposal
        proposal.committed.add_done_callback(lambda _: self._inflight.pop(base_offset, None))
        return AppendHandle(self, base_offset, False, proposal, header.max_timestamp)

    def delete_records(self, offset: int) -> tuple[int, Proposal | None]:
        """DeleteRecords (KIP-107): the log start moves up to `offset` (-1: the high watermark)
        once the returned proposal commits; (the new start, None) when it is there already.
        Raises PartitionError: POLICY_VIOLATION on a stream whose cleanup.policy lacks delete (as
        Kafka), OFFSET_OUT_OF_RANGE beyond the high watermark, or not leader."""
        if self.closed:
            raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"stream {self.name} was deleted")
        if not self.is_leader:
            raise self.not_leader_error()
        if self.settings is not None and not self.settings.retention_deletes:
            # Kafka (Partition.deleteRecordsOnLeader): a topic without the delete policy keeps its records
            raise PartitionError(ErrorCode.POLICY_VIOLATION, f"Records of partition {self.name}-0 can not be "
                                 "deleted due to the configured policy")
        group = self.group
        assert group is not None
        high_watermark = self._high_watermark
        if offset == -1:
            offset = high_watermark
        if offset < 0 or offset > high_watermark:
            raise PartitionError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                 f"stream {self.name}: offset {offset} is not in [0, {high_watermark}] "
                                 f"(-1: the high watermark)")
        if offset <= self.log_start_offset:
            return self.log_start_offset, None
        try:
            return offset, group.propose(_OFFSET.pack(offset), EntryType.LOG_START)
        except RaftError:
            raise self.not_leader_error() from None

    def proposal_error(self, error: BaseException) -> PartitionError:
        """What a failed proposal answers: KAFKA_STORAGE_ERROR when the leader could not write
        it (nothing acknowledged; the client retries), else NOT_LEADER_OR_FOLLOWER."""
        if isinstance(error, ProposalStorageError):
            return PartitionError(ErrorCode.KAFKA_STORAGE_ERROR, f"stream {self.name}: {error}")
        return self.not_leader_error()

    def not_leader_error(self) -> PartitionError:
        leader = self.leader_id
        if leader == self.node_id:
            # Elected, but its own-term no-op is not committed or not yet applied here.
            return PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                  f"node {self.node_id} leads stream {self.name} but does not serve it yet")
        where = f"node {leader}" if leader else "unknown"
        return PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                              f"node {self.node_id} does not lead stream {self.name} (leader: {where})")

    # -- waiting for data (delayed fetch) ----------------------------------------------------

    def changed_future(self) -> asyncio.Future[None]:
        """Resolved at the next commit or role change (or when the stream goes away)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if len(self._waiters) >= MAX_WAITERS:
            self._waiters = [waiter for waiter in self._waiters if not waiter.done()]
        self._waiters.append(future)
        return future

    def cut_off_future(self) -> asyncio.Future[None]:
        """A future of the caller's own, resolved when this node finds itself cut off from the
        cluster (`cut_off_now`); hand it back with `forget_cut_off_future` when done waiting.
        One future shared by every waiting request cost each of them, when it stopped waiting,
        a pass over all the others' callbacks (Future.remove_done_callback): quadratic in the
        requests waiting, a fifth of a broker's CPU with 10,000 of them."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._cut_off.add(future)
        return future

    def forget_cut_off_future(self, future: asyncio.Future[None]) -> None:
        self._cut_off.discard(future)

    def cut_off_now(self) -> None:
        """This node lost contact with a majority: produce requests waiting for a commit here
        are answered now (NOT_LEADER_OR_FOLLOWER) instead of at their timeout."""
        waiting, self._cut_off = self._cut_off, set()
        for future in waiting:
            if not future.done():
                future.set_result(None)

    def _on_change(self, _group: RaftGroup | None = None) -> None:
        group = self.group
        if group is not None and group.leader_id:
            self._note_leader(group)
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self, clean: bool = True, failed: bool = False) -> None:
        """The group must be stopped first (RaftHost.remove_group / stop). The log of a group that
        `failed` (RaftGroup.failure: a read met damage, or an error it could not recover from)
        is closed without a state snapshot, as a crash leaves it: taking one reads the log where
        the damage may be, and the next open replays from the last snapshot anyway."""
        if self.closed:
            return
        self.closed = True
        self._on_change()
        if clean:
            if not failed and self.group is not None and self.group.applied_index >= self.log.first_index:
                self._save_state_snapshot(self.group.applied_index, durable=True)  # the next start reads nothing
            self.log.close()


# A leader's read lease is renewed by every heartbeat round trip (every tick): one that has
# just been elected, or whose heartbeat came back late on a loaded machine, usually holds it
# again within this long, so a read waits that much before answering NOT_LEADER_OR_FOLLOWER.
READ_LEASE_WAIT_S = 0.3
# A read that wakes quiescent groups waits for one heartbeat round of each: hundreds of them in
# one request (a consumer of many idle streams) take longer than one round on a loaded node, so
# each group woken adds this much, up to WOKEN_LEASE_WAIT_MAX_S.
WOKEN_LEASE_WAIT_PER_GROUP_S = 0.003
WOKEN_LEASE_WAIT_MAX_S = 2.0


async def await_read_lease(partitions: list[Partition | RemotePartition], timeout_s: float = READ_LEASE_WAIT_S) -> None:
    """Return once every partition that this node leads serves reads, or after `timeout_s` (plus
    WOKEN_LEASE_WAIT_PER_GROUP_S per quiescent group it had to wake)."""
    loop = asyncio.get_running_loop()
    woken = 0
    for partition in partitions:
        if partition.is_leader and not partition.serves_reads:
            woken += partition.wake()  # a quiescent leader has no lease: it heartbeats again now
    extra = min(WOKEN_LEASE_WAIT_MAX_S, woken * WOKEN_LEASE_WAIT_PER_GROUP_S)
    deadline = loop.time() + timeout_s + extra
    while any(p.is_leader and not p.serves_reads for p in partitions) and loop.time() < deadline:
        await asyncio.sleep(0.005)


class RemotePartition:
    """A stream with no replica on this node (or not opened yet): every client request gets
    NOT_LEADER_OR_FOLLOWER so the client refreshes its metadata and goes to the leader."""

    closed = False
    is_leader = False
    serves_reads = False
    serves_follower_reads = False
    max_message_bytes = None
    timestamp_limits = (0, 0)  # never consulted: Produce refuses NOT_LEADER_OR_FOLLOWER first
    recompression = None
    log_append_time = False
    produce_queue: asyncio.Future[None] | None = None
    high_watermark = -1
    log_start_offset = -1
    log_end_offset = -1
    deleted_below = 0
    leader_epoch = -1

    def __init__(self, name: str, leader_id: int) -> None:
        self.name = name
        self.leader_id = leader_id

    def append(self, batch: bytes | bytearray | memoryview, header: BatchHeader | None = None,
               operator_marker: bool = False) -> AppendHandle:
        raise self.not_leader_error()

    def not_leader_error(self) -> PartitionError:
        return PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"this node holds no replica of stream {self.name}")

    def changed_future(self) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future

    def wake(self) -> bool:
        return False


__all__ = ["NO_LEADER_EPOCH", "VERDICT_ERRORS", "AppendHandle", "Partition", "PartitionError", "RemotePartition",
           "leader_epoch_error"]

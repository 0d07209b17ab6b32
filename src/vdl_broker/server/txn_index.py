"""A stream's transactions as its committed log shows them (KIP-98; pure, no I/O).

Per producer: the first offset of its open transaction (transactional batches seen, no marker
yet). The last stable offset (LSO) is the first offset of the earliest open transaction, else
the high watermark: read_committed consumers read below it. Aborted transactions (producer id,
first offset, last offset = the abort marker's) are what Kafka's `.txnindex` files hold; a
read_committed fetch returns those overlapping its range so the consumer drops their records.
Rebuilt from the log at open (the same scan as the producer state), like Kafka's recovery.

Per producer also the coordinator epoch of its last marker here, and where that marker is. A
marker names its decision by that epoch (the transactional id's decision number: TxnMeta.decision),
so a marker arriving late -- sent by a deposed coordinator, or a copy of one a retry already wrote
-- cannot end the producer's next transaction here, whose records carry the same producer id and
epoch under the classic protocol: an older epoch is refused (TRANSACTION_COORDINATOR_FENCED, as
Kafka's ProducerStateManager refuses a marker of a lower coordinator epoch), the same one is
already written (`marker_verdict`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from enum import Enum

from vdl_wire.records.batch_header import BatchHeader
from vdl_wire.records.control import MARKER_EPOCHS, read_marker


@dataclass(frozen=True, order=True, slots=True)
class AbortedTxn:
    last_offset: int  # first: the list is kept ordered by it
    producer_id: int
    first_offset: int


# Decision numbers wrap around within 1 .. MARKER_EPOCHS: compared as serial numbers (RFC 1982).


class MarkerVerdict(Enum):
    WRITE = "write"  # a later decision (or one that carries no epoch, or a producer's first)
    WRITTEN = "written"  # the decision of the producer's last marker here: a copy
    FENCED = "fenced"  # an earlier decision's: its marker is long written


def marker_verdict(last: int | None, epoch: int) -> MarkerVerdict:
    """What to do with a marker carrying coordinator epoch `epoch` when the producer's last
    marker here carried `last` (None: no marker known)."""
    if epoch <= 0 or last is None or last <= 0:
        return MarkerVerdict.WRITE
    ahead = (epoch - last) % MARKER_EPOCHS
    if ahead == 0:
        return MarkerVerdict.WRITTEN
    return MarkerVerdict.WRITE if ahead < MARKER_EPOCHS // 2 else MarkerVerdict.FENCED


@dataclass(frozen=True, slots=True)
class LastMarker:
    coordinator_epoch: int
    offset: int


@dataclass
class StreamTxns:
    open: dict[int, int] = field(default_factory=dict)  # producer id -> first offset of its open transaction
    aborted: list[AbortedTxn] = field(default_factory=list)
    markers: dict[int, LastMarker] = field(default_factory=dict)  # producer id -> its last marker here

    def data(self, producer_id: int, base_offset: int) -> None:
        """A transactional data batch of `producer_id` at `base_offset`."""
        self.open.setdefault(producer_id, base_offset)

    def marker(self, producer_id: int, offset: int, commit: bool, coordinator_epoch: int = 0) -> None:
        if coordinator_epoch > 0:
            self.markers[producer_id] = LastMarker(coordinator_epoch, offset)
        first = self.open.pop(producer_id, None)
        if not commit and first is not None:
            entry = AbortedTxn(offset, producer_id, first)
            if not self.aborted or self.aborted[-1] < entry:
                self.aborted.append(entry)  # markers come in offset order: no search
            else:
                bisect.insort(self.aborted, entry)

    def last_stable_offset(self, high_watermark: int) -> int:
        return min(min(self.open.values(), default=high_watermark), high_watermark)

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions with records in [start, end): those ending at or after `start`
        and beginning before `end`."""
        found = []
        for entry in self.aborted[bisect.bisect_left(self.aborted, AbortedTxn(start, -1, -1)):]:
            if entry.first_offset < end:
                found.append(entry)
        return found

    def forget_before(self, log_start: int) -> None:
        """Retention dropped everything below `log_start`: so go the aborted transactions that
        ended there."""
        cut = bisect.bisect_left(self.aborted, AbortedTxn(log_start, -1, -1))
        del self.aborted[:cut]
        forget_markers_before(self.markers, log_start)


def forget_markers_before(markers: dict[int, LastMarker], log_start: int) -> None:
    """Markers retention deleted go from the table, as a replay of what is left would find them:
    replicas agree whether they rebuilt from a snapshot or from the log."""
    for producer_id in [p for p, m in markers.items() if m.offset < log_start]:
        del markers[producer_id]


def observe(txns: StreamTxns, header: BatchHeader, batch: bytes | bytearray | memoryview) -> None:
    """Book one committed batch (at its stored base offset) in `txns`."""
    if not header.is_transactional or header.producer_id < 0:
        return
    if header.is_control:
        marker = read_marker(batch, header)
        if marker is not None:
            txns.marker(header.producer_id, header.base_offset, marker.commit, marker.coordinator_epoch)
    else:
        txns.data(header.producer_id, header.base_offset)

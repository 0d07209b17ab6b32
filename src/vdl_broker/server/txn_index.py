"""A stream's transactions as its committed log shows them (KIP-98; pure, no I/O).

Per producer: the first offset of its open transaction (transactional batches seen, no marker
yet). The last stable offset (LSO) is the first offset of the earliest open transaction, else
the high watermark: read_committed consumers read below it. Aborted transactions (producer id,
first offset, last offset = the abort marker's) are what Kafka's `.txnindex` files hold; a
read_committed fetch returns those overlapping its range so the consumer drops their records.
Rebuilt from the log at open (the same scan as the producer state), like Kafka's recovery.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from vdl_wire.records.batch_header import BatchHeader
from vdl_wire.records.control import marker_commits


@dataclass(frozen=True, order=True, slots=True)
class AbortedTxn:
    last_offset: int  # first: the list is kept ordered by it
    producer_id: int
    first_offset: int


@dataclass
class StreamTxns:
    open: dict[int, int] = field(default_factory=dict)  # producer id -> first offset of its open transaction
    aborted: list[AbortedTxn] = field(default_factory=list)

    def data(self, producer_id: int, base_offset: int) -> None:
        """A transactional data batch of `producer_id` at `base_offset`."""
        self.open.setdefault(producer_id, base_offset)

    def marker(self, producer_id: int, offset: int, commit: bool) -> None:
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


def observe(txns: StreamTxns, header: BatchHeader, batch: bytes | bytearray | memoryview) -> None:
    """Book one committed batch (at its stored base offset) in `txns`."""
    if not header.is_transactional or header.producer_id < 0:
        return
    if header.is_control:
        commits = marker_commits(batch, header)
        if commits is not None:
            txns.marker(header.producer_id, header.base_offset, commits)
    else:
        txns.data(header.producer_id, header.base_offset)

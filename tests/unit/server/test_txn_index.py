"""A stream's transactions from its batches (server/txn_index.py): open transactions hold the last
stable offset, abort markers add aborted transactions, retention forgets them."""

from __future__ import annotations

import struct

import pytest

from vdl_broker.server.txn_index import (
    AbortedTxn,
    LastMarker,
    MarkerVerdict,
    StreamTxns,
    marker_verdict,
    observe,
)
from vdl_wire.records.batch_header import parse_batch_header, with_base_offset
from vdl_wire.records.control import MARKER_EPOCHS, Marker, end_txn_marker, marker_commits, read_marker
from vdl_wire.records.record_batch import RecordBatchBuilder

pytestmark = pytest.mark.unit


def batch(producer_id: int, base_offset: int, count: int = 1, transactional: bool = True) -> bytes:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0, base_sequence=0,
                                 is_transactional=transactional)
    for i in range(count):
        builder.append(1000, None, f"v{i}".encode())
    return bytes(with_base_offset(builder.build(), base_offset))


def marker(producer_id: int, offset: int, commit: bool) -> bytes:
    return bytes(with_base_offset(end_txn_marker(producer_id, 0, commit, 0, 1000), offset))


def feed(txns: StreamTxns, *batches: bytes) -> None:
    for data in batches:
        observe(txns, parse_batch_header(data), data)


def test_markers_say_commit_or_abort() -> None:
    for commit in (True, False):
        data = end_txn_marker(7, 3, commit, 0, 1000)
        header = parse_batch_header(data)
        assert (header.is_control, header.is_transactional, header.producer_id, header.producer_epoch) == \
            (True, True, 7, 3)
        assert marker_commits(data, header) is commit
    plain = batch(7, 0)
    assert marker_commits(plain, parse_batch_header(plain)) is None


def test_control_records_read_in_place() -> None:
    """Markers are read in place (a multi-byte varint before the key included); a control record
    of another type is no marker."""
    def control(kind: int, value_size: int) -> bytes:
        builder = RecordBatchBuilder(producer_id=7, producer_epoch=0, is_transactional=True,
                                     is_control=True)
        builder.append(1000, struct.pack(">hh", 0, kind), struct.pack(">hi", 0, 3).ljust(value_size, b"."))
        return builder.build()

    for kind, expected in ((0, False), (1, True), (5, None)):
        for delta in (6, 300):  # a one- and a two-byte record length before the key
            data = control(kind, delta)
            assert marker_commits(data, parse_batch_header(data)) is expected, (kind, delta)


def test_the_earliest_open_transaction_is_the_last_stable_offset() -> None:
    txns = StreamTxns()
    feed(txns, batch(-1, 0, transactional=False), batch(1, 1, 2), batch(2, 3), batch(1, 4))
    assert txns.last_stable_offset(5) == 1
    feed(txns, marker(1, 5, commit=True))
    assert txns.last_stable_offset(6) == 3
    feed(txns, marker(2, 6, commit=False))
    assert txns.last_stable_offset(7) == 7
    assert txns.last_stable_offset(2) == 2  # never past the high watermark
    assert txns.aborted == [AbortedTxn(6, 2, 3)]


def test_aborted_transactions_of_a_range_and_retention() -> None:
    txns = StreamTxns()
    feed(txns, batch(1, 0, 3), marker(1, 3, commit=False), batch(2, 4), batch(3, 5), marker(3, 6, commit=False),
         marker(2, 7, commit=False))
    assert [(a.producer_id, a.first_offset) for a in txns.aborted_between(0, 8)] == [(1, 0), (3, 5), (2, 4)]
    assert [(a.producer_id, a.first_offset) for a in txns.aborted_between(4, 5)] == [(2, 4)]
    assert txns.aborted_between(8, 20) == []
    txns.forget_before(4)
    assert [a.producer_id for a in txns.aborted] == [3, 2]


def test_a_marker_without_data_aborts_nothing_here() -> None:
    txns = StreamTxns()
    feed(txns, marker(9, 0, commit=False))
    assert (txns.aborted, txns.open) == ([], {})


def test_a_marker_carries_its_coordinator_epoch() -> None:
    for commit, epoch in ((True, 1), (False, MARKER_EPOCHS), (True, 0)):
        data = end_txn_marker(7, 3, commit, epoch, 1000)
        assert read_marker(data, parse_batch_header(data)) == Marker(commit, epoch)
    # A marker whose value is short (another writer's): no epoch.
    builder = RecordBatchBuilder(producer_id=7, producer_epoch=3, is_transactional=True, is_control=True)
    builder.append(1000, struct.pack(">hh", 0, 1), b"\0")
    data = builder.build()
    assert read_marker(data, parse_batch_header(data)) == Marker(True, 0)
    txns = StreamTxns()
    feed(txns, batch(7, 0), bytes(with_base_offset(end_txn_marker(7, 0, True, 5, 1000), 1)),
         bytes(with_base_offset(end_txn_marker(8, 0, True, 0, 1000), 2)))
    assert txns.markers == {7: LastMarker(5, 1)}  # an unnumbered marker (epoch 0) leaves none
    txns.forget_before(2)
    assert txns.markers == {}


def test_a_marker_of_the_same_decision_is_written_and_of_an_earlier_one_fenced() -> None:
    assert marker_verdict(None, 3) is MarkerVerdict.WRITE
    assert marker_verdict(3, 0) is MarkerVerdict.WRITE  # no number: unchecked, as before
    assert marker_verdict(0, 3) is MarkerVerdict.WRITE
    assert marker_verdict(3, 4) is MarkerVerdict.WRITE
    assert marker_verdict(3, 3) is MarkerVerdict.WRITTEN
    assert marker_verdict(3, 2) is MarkerVerdict.FENCED
    # Numbers wrap around: compared as serial numbers.
    assert marker_verdict(MARKER_EPOCHS, 1) is MarkerVerdict.WRITE
    assert marker_verdict(1, MARKER_EPOCHS) is MarkerVerdict.FENCED

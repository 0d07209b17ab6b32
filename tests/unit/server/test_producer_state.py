"""Idempotent-producer bookkeeping (KIP-98 semantics)."""

from __future__ import annotations

from vdl_broker.server.producer_state import (
    INT32_MAX,
    WRITER_SPACE,
    ProducerIdAllocator,
    ProducerStateTable,
    Verdict,
    last_sequence,
)


def test_new_producer_accepts_any_sequence() -> None:
    table = ProducerStateTable(0)
    assert table.check(7, 0, 0, 9).verdict is Verdict.APPEND
    assert table.check(7, 0, 42, 50).verdict is Verdict.APPEND


def test_in_sequence_then_retry_is_duplicate_with_original_offset() -> None:
    table = ProducerStateTable(0)
    table.record(7, 0, 0, 9, base_offset=100)
    table.record(7, 0, 10, 19, base_offset=110)
    assert table.check(7, 0, 20, 29).verdict is Verdict.APPEND
    retry = table.check(7, 0, 0, 9)
    assert retry.verdict is Verdict.DUPLICATE and retry.base_offset == 100
    assert table.check(7, 0, 10, 19).base_offset == 110


def test_gap_is_out_of_order() -> None:
    table = ProducerStateTable(0)
    table.record(7, 0, 0, 9, base_offset=0)
    assert table.check(7, 0, 11, 20).verdict is Verdict.OUT_OF_ORDER


def test_only_last_five_batches_remembered() -> None:
    table = ProducerStateTable(0)
    for i in range(7):
        table.record(1, 0, i * 10, i * 10 + 9, base_offset=i * 10)
    assert len(table.last_batches(1)) == 5
    assert table.check(1, 0, 0, 9).verdict is Verdict.DUPLICATE_SEQUENCE
    assert table.check(1, 0, 20, 29).verdict is Verdict.DUPLICATE
    assert table.check(1, 0, 70, 79).verdict is Verdict.APPEND


def test_epochs() -> None:
    table = ProducerStateTable(0)
    table.record(1, 3, 0, 4, base_offset=0)
    assert table.check(1, 2, 5, 9).verdict is Verdict.INVALID_EPOCH
    assert table.check(1, 4, 0, 4).verdict is Verdict.APPEND
    assert table.check(1, 4, 5, 9).verdict is Verdict.OUT_OF_ORDER
    table.record(1, 4, 0, 4, base_offset=5)
    assert table.last_batches(1)[0].base_offset == 5 and len(table.last_batches(1)) == 1


def test_sequence_wraps() -> None:
    table = ProducerStateTable(0)
    assert last_sequence(INT32_MAX - 1, 3) == 1
    table.record(1, 0, INT32_MAX - 4, INT32_MAX, base_offset=0)
    assert table.check(1, 0, 0, 4).verdict is Verdict.APPEND


def test_allocator_fresh_ids_and_writer_ids_are_stable() -> None:
    first = ProducerIdAllocator(start_ms=1_000)
    a = first.allocate()
    b = first.allocate()
    assert b == a + 1
    first.observe(b + 100)
    assert first.allocate() == b + 101
    t1 = first.derived("writer-x")
    t2 = ProducerIdAllocator(start_ms=2_000).derived("writer-x")
    assert t1 == t2 and t1[1] == 0 and WRITER_SPACE <= t1[0] < 2**63
    assert first.derived("writer-y") != t1


def test_forgetting_batches_below_the_log_start_keeps_what_a_replay_from_there_sees() -> None:
    table = ProducerStateTable(0)
    table.record(1, 0, 0, 0, base_offset=0)  # all its batches below the start: forgotten
    table.record(2, 0, 0, 0, base_offset=1)
    table.record(2, 0, 1, 1, base_offset=5)  # one batch below, one above: the one above stays
    table.record(3, 1, 0, 0, base_offset=6)
    table.forget_batches_below(5)
    assert sorted(table.producer_ids()) == [2, 3]
    assert [b.base_offset for b in table.last_batches(2)] == [5]
    assert table.check(2, 0, 0, 0).verdict is Verdict.DUPLICATE_SEQUENCE  # still known: in sequence from 1
    assert table.check(1, 0, 7, 7).verdict is Verdict.APPEND  # unknown again (KIP-360)


def test_idle_producers_are_forgotten_each_by_its_own_limit() -> None:
    """Kafka's producer.id.expiration.ms (KIP-854): a producer without a batch that long is
    forgotten, so a stream's table does not keep every producer id it ever saw; the Spark sink's
    writer-keyed ids have their own, longer limit, and a producer in an open transaction stays."""
    day, week = 86_400_000, 7 * 86_400_000
    table = ProducerStateTable(0)
    writer = WRITER_SPACE + 12
    for producer_id in (1, 2, 3, writer):
        table.record(producer_id, 0, 0, 9, base_offset=10 * producer_id)
    table.now_ms = day - 1
    table.record(2, 0, 10, 19, base_offset=100)  # 2 wrote again: idle for less than a day at `day + 5`
    assert table.expire(day + 5, day, week, keep={3}) == [1]
    assert table.producer_ids() == [2, 3, writer]
    assert table.check(1, 0, 500, 509).verdict is Verdict.APPEND  # forgotten: any sequence (KIP-360)
    assert table.check(2, 0, 10, 19).verdict is Verdict.DUPLICATE  # remembered: a retry is no copy
    assert table.expire(2 * day, day, week, keep={3}) == [2]
    assert table.expire(week, day, week, keep=set()) == [3, writer]
    assert len(table) == 0
    # Batches booked after a pass are stamped with its time.
    table.record(5, 0, 0, 0, base_offset=1)
    assert table.entries()[0][1].last_ms == week

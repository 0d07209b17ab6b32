"""Every StreamLog operation, on small segments so rolls happen."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from log_testing import config_entry, data_entry, make_batch, noop_entry

from tests.support.waiting import until, within
from vdl_broker.log import (
    IndexOutOfRange,
    LogConfig,
    OffsetOutOfRange,
    StreamLog,
)
from vdl_broker.log.log_start import DELETED_BELOW_FILE, load_deleted_below, save_deleted_below
from vdl_broker.log.recovery import load_recovery_point
from vdl_broker.log.segment import Segment
from vdl_broker.log.tail_cache import ENTRY_OVERHEAD
from vdl_broker.raft.types import Entry, EntryType

TIER = "component"  # real sockets, threads or sleeps in this process


def small_config(**overrides: object) -> LogConfig:
    values: dict[str, object] = dict(segment_bytes=1000, index_interval_bytes=150, tail_cache_bytes=0, fsync=False)
    values.update(overrides)
    return LogConfig(**values)  # type: ignore[arg-type]


def fill(log: StreamLog, count: int, term: int = 1, records: int = 2, body: int = 30) -> list[Entry]:
    """Append `count` entries (every 4th a no-op), timestamps 1000 + index."""
    entries: list[Entry] = []
    offset = log.log_end_offset
    for _ in range(count):
        index = log.last_index + 1 + len(entries)
        if index % 4 == 0:
            entries.append(noop_entry(index, term))
        else:
            entries.append(data_entry(index, term, offset, records, 1000 + index, body))
            offset += records
    log.append(entries)
    return entries


@pytest.fixture(params=[0, 1 << 20], ids=["disk", "cache"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> StreamLog:
    stream = StreamLog.open(tmp_path / "s", small_config(tail_cache_bytes=request.param))
    yield stream
    stream.close()


def test_empty_log(tmp_path: Path) -> None:
    log = StreamLog.open(tmp_path / "s", small_config())
    assert (log.first_index, log.last_index, log.log_start_offset, log.log_end_offset) == (1, 0, 0, 0)
    assert log.term_at(0) == 0
    assert log.entries(1, 1) == []
    result = log.read(0, 100)
    assert result.buffers == [] and result.next_offset == 0
    assert log.offset_for_timestamp(0) is None
    assert log.offset_for_index(0) == 0
    log.close()
    assert (tmp_path / "s" / "00000000000000000001.log").exists()


def test_append_validates(log: StreamLog) -> None:
    with pytest.raises(ValueError):
        log.append([data_entry(2, 1, 0)])  # index gap
    with pytest.raises(ValueError):
        log.append([data_entry(1, 1, 5)])  # base offset != log end offset
    bad = bytearray(make_batch(0))
    bad[16] = 1
    with pytest.raises(ValueError):
        log.append([Entry(1, 1, EntryType.DATA, bytes(bad))])
    with pytest.raises(ValueError):
        log.append([Entry(1, 1, EntryType.DATA, make_batch(0)[:-1])])
    with pytest.raises(ValueError):  # all or nothing: the valid first entry is not stored either
        log.append([data_entry(1, 1, 0), data_entry(2, 1, 7)])
    assert log.last_index == 0
    log.append([data_entry(1, 2, 0)])
    with pytest.raises(ValueError):
        log.append([noop_entry(2, 1)])  # term going backwards


def test_append_and_read_entries(log: StreamLog) -> None:
    written = fill(log, 60)
    written += [config_entry(61, 2, b"x" * 50)]
    log.append(written[-1:])
    assert log.segment_count > 3
    assert log.last_index == 61 and log.last_term == 2
    got = log.entries(1, 62)
    assert [(e.index, e.term, e.type, bytes(e.data)) for e in got] == \
        [(e.index, e.term, e.type, bytes(e.data)) for e in written]
    assert [e.index for e in log.entries(10, 20)] == list(range(10, 20))
    few = log.entries(5, 62, max_bytes=200)
    assert 1 <= len(few) < 57 and few[0].index == 5
    assert sum(25 + len(e.data) for e in few) <= 200
    one = log.entries(5, 62, max_bytes=1)
    assert [e.index for e in one] == [5]
    for entry in written:
        assert log.term_at(entry.index) == entry.term
    with pytest.raises(IndexOutOfRange):
        log.entries(0, 3)
    with pytest.raises(IndexOutOfRange):
        log.entries(1, 63)
    with pytest.raises(IndexOutOfRange):
        log.term_at(62)


def test_read_by_offset(log: StreamLog) -> None:
    written = fill(log, 80)
    batches = {bytes(e.data)[:8]: bytes(e.data) for e in written if e.type == EntryType.DATA}
    end = log.log_end_offset
    assert end == 2 * sum(1 for e in written if e.type == EntryType.DATA)
    whole = log.read(0, 1 << 30)
    assert b"".join(whole.buffers) == b"".join(bytes(e.data) for e in written if e.type == EntryType.DATA)
    assert whole.first_offset == 0 and whole.next_offset == end
    # never a copy: views of the segment files, or (from the tail cache) the payloads as appended
    appended = {id(e.data) for e in written}
    assert all(isinstance(b, memoryview) or id(b) in appended for b in whole.buffers)
    # an offset inside a batch starts at that batch
    part = log.read(7, 1)
    assert len(part.buffers) == 1 and part.first_offset == 6 and part.next_offset == 8
    assert bytes(part.buffers[0]) == batches[bytes(part.buffers[0])[:8]]
    # max_bytes bounds the answer, max_offset (high watermark) is never passed
    bounded = log.read(0, 400)
    assert sum(len(b) for b in bounded.buffers) <= 400 and len(bounded.buffers) >= 1
    capped = log.read(0, 1 << 30, max_offset=21)
    assert capped.next_offset == 20
    assert log.read(20, 1 << 30, max_offset=21).buffers == []
    assert log.read(end, 100).buffers == []
    with pytest.raises(OffsetOutOfRange):
        log.read(end + 1, 100)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100)


def test_offsets_and_indexes(log: StreamLog) -> None:
    written = fill(log, 40)
    for entry in written:
        expected_end = max([int.from_bytes(bytes(e.data)[:8], "big") + 2 for e in written
                            if e.type == EntryType.DATA and e.index <= entry.index], default=0)
        assert log.offset_for_index(entry.index) == expected_end
        if entry.type == EntryType.DATA:
            base = int.from_bytes(bytes(entry.data)[:8], "big")
            assert log.index_for_offset(base) == entry.index
            assert log.index_for_offset(base + 1) == entry.index
            assert log.offset_for_timestamp(1000 + entry.index) == (base, 1000 + entry.index)
    with pytest.raises(OffsetOutOfRange):
        log.index_for_offset(log.log_end_offset)
    assert log.offset_for_timestamp(0) == (0, 1001)
    assert log.offset_for_timestamp(10_000) is None


def test_truncate_suffix(log: StreamLog) -> None:
    fill(log, 50)
    segments = log.segment_count
    log.truncate_suffix(30)
    assert log.last_index == 29 and log.segment_count <= segments
    assert log.log_end_offset == log.offset_for_index(29)
    replaced = fill(log, 5, term=3)
    assert log.last_index == 34 and log.term_at(34) == 3 and log.term_at(29) == 1
    assert [bytes(e.data) for e in log.entries(30, 35)] == [bytes(e.data) for e in replaced]
    log.truncate_suffix(1)
    assert log.last_index == 0 and log.log_end_offset == 0 and log.segment_count == 1
    fill(log, 3)
    log.truncate_suffix(100)  # nothing to do
    assert log.last_index == 3


def test_truncate_keeps_old_buffers_valid(tmp_path: Path) -> None:
    log = StreamLog.open(tmp_path / "s", small_config())
    fill(log, 60)
    held = log.read(0, 1 << 30).buffers  # mmap slices of sealed segments
    snapshot = [bytes(b) for b in held]
    log.truncate_suffix(3)
    fill(log, 30, term=2)
    assert [bytes(b) for b in held] == snapshot
    log.close()


def test_reopen_clean(tmp_path: Path) -> None:
    log = StreamLog.open(tmp_path / "s", small_config())
    written = fill(log, 70)
    log.close()
    log = StreamLog.open(tmp_path / "s", small_config())
    assert log.last_index == 70
    assert [bytes(e.data) for e in log.entries(1, 71)] == [bytes(e.data) for e in written]
    more = fill(log, 5)
    assert log.entries(71, 76)[0].data == more[0].data
    log.close()


def test_roll_by_age(tmp_path: Path) -> None:
    now = [1000.0]
    log = StreamLog.open(tmp_path / "s", small_config(segment_bytes=1 << 20, segment_ms=60_000),
                         clock=lambda: now[0])
    fill(log, 3)
    assert log.segment_count == 1
    now[0] += 61
    fill(log, 1)
    assert log.segment_count == 2
    fill(log, 1)
    assert log.segment_count == 2
    log.close()


def test_retention_by_bytes_and_time(tmp_path: Path) -> None:
    log = StreamLog.open(tmp_path / "s", small_config(retention_bytes=3000))
    fill(log, 100)
    before = log.segment_count
    size = log.size_bytes
    assert log.apply_retention(now_ms=0) == 0  # nothing durable yet: nothing may go
    log.sync_now()
    deleted = log.apply_retention(now_ms=0)
    assert deleted > 0 and log.segment_count == before - deleted
    assert log.size_bytes >= 3000 and log.size_bytes < size
    first = log.first_index
    assert log.term_at(first - 1) == 1
    assert log.log_start_offset == log.offset_for_index(first - 1)
    with pytest.raises(OffsetOutOfRange):
        log.read(log.log_start_offset - 1, 10)
    assert log.read(log.log_start_offset, 10).first_offset == log.log_start_offset
    log.close()
    log = StreamLog.open(tmp_path / "s", small_config())
    assert log.first_index == first and log.term_at(first - 1) == 1
    # time: every segment whose newest batch is older than now - retention.ms goes
    log.config.retention_ms = 10
    # max_index keeps every segment holding an entry above it, however old
    oldest_end = log._ensure_loaded(0).last_index
    assert oldest_end > first + 5
    assert log.apply_retention(now_ms=10_000, max_index=first + 5) == 0 and log.first_index == first
    assert log.apply_retention(now_ms=10_000, max_index=oldest_end) == 1 and log.first_index == oldest_end + 1
    # ... the active one too once it is all that is left (below)
    log.apply_retention(now_ms=10_000, max_index=99)
    assert log.segment_count == 1 and log.last_index == 100 and log.first_index <= 100
    log.close()


def test_retention_deletes_an_expired_active_segment_as_kafka_does(tmp_path: Path) -> None:
    """Kafka deletes the active segment too once its newest record is older than retention.ms
    (it rolls a new empty one first): a stream whose every record expired keeps none of them --
    a Kafka Streams windowed changelog gone quiet, say. VDL kept the last segment for good."""
    log = StreamLog.open(tmp_path / "s", small_config(retention_ms=10))
    fill(log, 6)  # timestamps 1001..1006, one segment
    log.sync_now()
    assert log.segment_count == 1 and (log.log_start_offset, log.log_end_offset, log.last_index) == (0, 10, 6)
    # not yet expired; then expired but for an entry the caller still needs (not applied)
    assert log.apply_retention(now_ms=1010, max_index=6) == 0
    assert log.apply_retention(now_ms=10_000, max_index=5) == 0
    assert log.apply_retention(now_ms=10_000, max_index=6) == 1
    assert (log.first_index, log.last_index, log.term_at(6)) == (7, 6, 1)
    assert (log.log_start_offset, log.log_end_offset, log.segment_count) == (10, 10, 1)
    assert log.read(10, 1000).size == 0
    with pytest.raises(OffsetOutOfRange):
        log.read(9, 1000)
    assert log.apply_retention(now_ms=20_000) == 0  # the empty active segment stays
    for clean in (True, False):
        log.close() if clean else log._release()
        log = StreamLog.open(tmp_path / "s", small_config(retention_ms=10))
        assert (log.first_index, log.last_index, log.term_at(6), log.log_start_offset, log.log_end_offset) == \
            (7, 6, 1, 10, 10)
    # the log goes on where it was: next index 7, next offset 10
    fill(log, 2, term=2)
    assert (log.first_index, log.last_index, log.log_start_offset, log.log_end_offset) == (7, 8, 10, 12)
    assert log.read(10, 1000).first_offset == 10
    log.close()


def test_retention_by_bytes_keeps_the_active_segment_unless_the_limit_is_zero(tmp_path: Path) -> None:
    """retention.bytes deletes while the log stays at least that large without the segment
    (Kafka's rule): the active segment alone goes only at 0."""
    log = StreamLog.open(tmp_path / "s", small_config(retention_bytes=1))
    fill(log, 6)
    log.sync_now()
    assert log.apply_retention(now_ms=0) == 0 and log.first_index == 1
    log.config.retention_bytes = 0
    assert log.apply_retention(now_ms=0) == 1
    assert (log.first_index, log.log_start_offset, log.log_end_offset) == (7, 10, 10)
    log.close()


def test_reset(tmp_path: Path) -> None:
    log = StreamLog.open(tmp_path / "s", small_config())
    fill(log, 20)
    log.reset(first_index=500, previous_term=7, start_offset=9000)
    assert (log.first_index, log.last_index, log.term_at(499), log.log_start_offset, log.log_end_offset) == \
        (500, 499, 7, 9000, 9000)
    log.append([data_entry(500, 8, 9000), noop_entry(501, 8)])
    log.close()
    log = StreamLog.open(tmp_path / "s", small_config())
    assert (log.first_index, log.last_index, log.term_at(499), log.log_end_offset) == (500, 501, 7, 9001)
    log._release()  # unclean
    log = StreamLog.open(tmp_path / "s", small_config())
    assert (log.first_index, log.last_index, log.term_at(499), log.log_end_offset) == (500, 501, 7, 9001)
    log.reset(first_index=900, previous_term=9, start_offset=10_000)
    log._release()
    log = StreamLog.open(tmp_path / "s", small_config())
    assert (log.first_index, log.last_index, log.log_start_offset) == (900, 899, 10_000)
    log.close()


def test_delete(tmp_path: Path) -> None:
    log = StreamLog.open(tmp_path / "s", small_config())
    fill(log, 20)
    log.delete()
    assert list(tmp_path.iterdir()) == []


def test_tail_cache_reads_touch_no_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache_bytes = 20 * (ENTRY_OVERHEAD + 91)  # the last 20 or so entries of fill()'s (91-byte batches, no-ops)
    log = StreamLog.open(tmp_path / "s", small_config(segment_bytes=1 << 20, tail_cache_bytes=cache_bytes))
    fill(log, 100)
    calls: list[str] = []
    for name in ("pread", "read", "open"):
        original = getattr(os, name)
        monkeypatch.setattr(os, name, lambda *a, _o=original, _n=name, **k: (calls.append(_n), _o(*a, **k))[1])
    original_span = Segment.span  # every byte of a segment file is read through span()
    monkeypatch.setattr(Segment, "span", lambda self, a, b: (calls.append("span"), original_span(self, a, b))[1])
    tail = log.read(log.log_end_offset - 6, 1 << 20)
    assert tail.next_offset == log.log_end_offset and len(tail.buffers) == 3
    assert [e.index for e in log.entries(95, 101)] == list(range(95, 101))
    assert log.term_at(97) == 1 and log.offset_for_index(98) > 0
    assert calls == []
    # older data comes from disk, and the cache stays within its budget
    assert log.read(0, 1 << 20).first_offset == 0
    assert calls
    assert log.cache.bytes <= cache_bytes
    monkeypatch.undo()
    log.close()


def gated_fdatasync(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], threading.Event]:
    """Make every fdatasync record its fd, then wait for the returned gate (at most 5 s)."""
    syncs: list[int] = []
    gate = threading.Event()
    real = os.fdatasync

    def slow_fdatasync(fd: int) -> None:
        syncs.append(fd)
        gate.wait(5)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", slow_fdatasync)
    return syncs, gate


def test_a_sync_waiter_cancelled_leaves_the_sync_to_the_others(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The fdatasync job is shared: a waiter that goes away (its group stopping) cancels only its
    wait, and the entries become durable for the waiters that stay."""
    log = StreamLog.open(tmp_path / "s", small_config(segment_bytes=1 << 20, fsync=True))
    syncs, gate = gated_fdatasync(monkeypatch)

    async def scenario() -> None:
        fill(log, 3)
        leaving, staying = asyncio.create_task(log.sync()), asyncio.create_task(log.sync())
        await until(lambda: len(syncs) == 1)
        leaving.cancel()
        await asyncio.gather(leaving, return_exceptions=True)
        assert leaving.cancelled() and not staying.done()
        gate.set()
        await staying
        assert log.durable_index == 3
        assert len(syncs) == 1

    asyncio.run(within(scenario(), 10))
    monkeypatch.undo()
    log.close()


def test_group_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = StreamLog.open(tmp_path / "s", small_config(segment_bytes=1 << 20, fsync=True))
    syncs, gate = gated_fdatasync(monkeypatch)

    async def scenario() -> None:
        fill(log, 3)
        first = [asyncio.create_task(log.sync()) for _ in range(10)]
        await until(lambda: len(syncs) == 1)  # the one fdatasync now waits on the gate
        assert not any(task.done() for task in first)
        assert len(syncs) == 1  # ten callers, one fdatasync
        fill(log, 2)  # arrives during the sync: covered by the next one
        second = [asyncio.create_task(log.sync()) for _ in range(5)]
        gate.set()
        await asyncio.gather(*first)
        assert log.durable_index >= 3
        await asyncio.gather(*second)
        assert log.durable_index == 5
        assert len(syncs) == 2
        await log.sync()  # nothing new: no fdatasync at all
        assert len(syncs) == 2

    asyncio.run(within(scenario(), 10))
    assert log.durable_end_offset == log.log_end_offset
    monkeypatch.undo()
    log.close()


def test_with_fsync_off_a_sync_with_nothing_to_do_takes_no_worker_thread(tmp_path: Path) -> None:
    """fsync off (test clusters, --no-fsync benchmarks): a sync with no recovery point to move
    has nothing to do, and books the entries durable at once. Each used to go to a worker thread
    and back, a round trip that was 40% of a 3-node cluster's CPU per one-record produce request
    (1,390 vs 810 us) and held each request ~0.4 ms. A sync that moves the recovery point (after
    a roll) still writes it, on a thread."""
    log = StreamLog.open(tmp_path / "s", small_config(fsync=False))
    handed: list[object] = []

    class Counting(ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            handed.append(fn)
            return super().submit(fn, *args, **kwargs)

    async def scenario() -> None:
        asyncio.get_running_loop().set_default_executor(Counting(1))
        for count in range(1, 5):  # ~100-byte entries: all in the first 1000-byte segment
            fill(log, 1)
            await log.sync()
            assert log.durable_index == count
        assert handed == [] and log.active_base_index == 1
        fill(log, 30)  # rolls: the next sync moves the recovery point to the new active segment
        await log.sync()
        assert len(handed) == 1 and log.durable_index == 34
        assert log.active_base_index > 1 and load_recovery_point(tmp_path / "s") == log.active_base_index

    asyncio.run(within(scenario(), 10))
    log.close()


def test_sync_now_and_durable_offsets(tmp_path: Path) -> None:
    log = StreamLog.open(tmp_path / "s", small_config(fsync=True))
    fill(log, 30)  # several segments: sealed ones are synced too
    assert log.durable_index == 0 and log.durable_end_offset == 0
    log.sync_now()
    assert log.durable_index == 30 and log.durable_end_offset == log.log_end_offset
    log.truncate_suffix(10)
    assert log.durable_index == 9
    log.close()


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        LogConfig(segment_bytes=1 << 31)
    with pytest.raises(ValueError):
        LogConfig(index_interval_bytes=0)


def test_many_appends_one_write_per_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = StreamLog.open(tmp_path / "s", small_config(segment_bytes=1 << 20))
    writes: list[int] = []
    real = os.writev
    monkeypatch.setattr(os, "writev", lambda fd, parts: (writes.append(len(parts)), real(fd, parts))[1])
    fill(log, 200)
    assert writes == [400]  # one writev: 200 headers + 200 payloads, no user-space copy
    monkeypatch.undo()
    start = time.perf_counter()
    log.close()
    assert time.perf_counter() - start < 5


def test_purge_deleted_and_reads_across_cache_boundary(tmp_path: Path) -> None:
    (tmp_path / ".old.1234.deleted").mkdir()
    (tmp_path / ".old.1234.deleted" / "x.log").write_bytes(b"x")
    assert StreamLog.purge_deleted(tmp_path) == 1
    assert list(tmp_path.iterdir()) == []
    log = StreamLog.open(tmp_path / "s", small_config(tail_cache_bytes=5 * (ENTRY_OVERHEAD + 91)))
    written = fill(log, 120)
    data = [bytes(e.data) for e in written if e.type == EntryType.DATA]
    assert log.cache.first_offset is not None and log.cache.first_offset > 0
    # one read spanning sealed segments, the active segment on disk and the tail cache
    assert [bytes(b) for b in log.read(0, 1 << 30).buffers] == data
    assert [bytes(e.data) for e in log.entries(1, 121)] == [bytes(e.data) for e in written]
    log.close()


def test_recovery_logs_what_was_cut(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = StreamLog.open(tmp_path / "s", small_config(segment_bytes=1 << 20))
    fill(log, 10)
    log.sync_now()
    log._release()  # crash
    segment = tmp_path / "s" / "00000000000000000001.log"
    with open(segment, "r+b") as f:
        f.truncate(segment.stat().st_size - 3)
    with caplog.at_level("WARNING"):
        log = StreamLog.open(tmp_path / "s", small_config(segment_bytes=1 << 20))
    assert log.last_index == 9
    assert any("cut segment 00000000000000000001.log" in r.getMessage() and "index 10" in r.getMessage()
               for r in caplog.records)
    log.close()


def test_delete_below_offset_deletes_whole_segments_below_it(tmp_path: Path) -> None:
    log = StreamLog.open(tmp_path / "s", small_config())
    fill(log, 100)
    assert log.segment_count > 3
    second = log._segments[1]
    assert log.delete_below_offset(second.base_offset + 1, max_index=100) == 0  # nothing durable yet
    log.sync_now()
    # never past max_index: the entries above it may not be applied yet
    assert log.delete_below_offset(second.base_offset + 1, max_index=second.base_index - 2) == 0
    assert log.delete_below_offset(second.base_offset - 1, max_index=100) == 0  # the first still has records kept
    assert log.delete_below_offset(second.base_offset + 1, max_index=100) == 1
    assert (log.log_start_offset, log.first_index) == (second.base_offset, second.base_index)
    log.delete_below_offset(10_000, max_index=100)
    assert log.segment_count == 1 and log.last_index == 100  # the active segment stays
    log.close()


def test_deleted_below_is_kept_with_a_checksum(tmp_path: Path) -> None:
    assert load_deleted_below(tmp_path) == 0
    save_deleted_below(tmp_path, 1234, durable=True)
    assert load_deleted_below(tmp_path) == 1234
    (tmp_path / DELETED_BELOW_FILE).write_bytes(b"\x00" * 12)  # checksum wrong: ignored
    assert load_deleted_below(tmp_path) == 0


def test_a_start_after_a_crash_syncs_what_it_now_calls_durable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A killed process's last writes may be in the page cache only; the reopened log counts them
    durable (its node acknowledges and votes with them), so the open syncs them first. A clean
    stop synced everything: nothing to sync then."""
    directory = tmp_path / "s"
    log = StreamLog.open(directory, small_config(fsync=True))
    fill(log, 30)
    log.close()
    segments = sorted(directory.glob("*.log"))
    assert len(segments) > 2
    synced: list[str] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd)))

    reopened = StreamLog.open(directory, small_config(fsync=True))
    assert synced == []  # after a clean stop
    reopened.close()
    (directory / ".clean-shutdown").unlink()  # as if the process had been killed
    synced.clear()
    reopened = StreamLog.open(directory, small_config(fsync=True))
    assert str(segments[-1]) in synced  # the active segment, unsynced when the process died
    assert reopened.durable_index == reopened.last_index
    reopened.close()


def test_mapped_segments_keep_no_descriptor_each(tmp_path: Path) -> None:
    """Sealed segments (and any a read touches) stay mapped; a mapping must not hold a
    descriptor, or a broker with many segments runs into the open-files limit (ulimit -n)."""
    before = len(os.listdir("/proc/self/fd"))
    log = StreamLog.open(tmp_path / "s", small_config())
    entries = fill(log, 400)
    assert log.segment_count >= 40
    assert log.entries(1, log.last_index + 1) == entries  # reads every segment through its mapping
    assert len(os.listdir("/proc/self/fd")) - before <= 3  # the active segment's and its indexes'
    log.close()

"""The tail cache holds at most its capacity: an evicted entry's buffer is released at once, not
at the cache's next compaction (which waits for more than a thousand evictions: with batches of
half a megabyte each, a stream kept hundreds of megabytes of evicted batches alive, and every
append's buffer came from fresh memory)."""

from __future__ import annotations

import gc
import random
import weakref
from pathlib import Path

from vdl_broker.log import FrozenBuffer, LogConfig, StreamLog
from vdl_broker.log.tail_cache import ENTRY_OVERHEAD, CachedEntry, TailCache
from vdl_broker.raft.types import Entry, EntryType, entry_checksum
from vdl_wire.records.batch_header import Buffer

BATCH = 1000


def _checksum(index: int, term: int, entry_type: int, data: Buffer) -> int:
    return entry_checksum(Entry(index, term, EntryType(entry_type), data))


def _entry(index: int, data: memoryview) -> CachedEntry:
    base = (index - 1) * 10
    return CachedEntry(index, 1, 1, data, base, base + 9, base + 10)


def test_an_evicted_entrys_buffer_is_released_at_once() -> None:
    cache = TailCache(capacity_bytes=3 * (ENTRY_OVERHEAD + BATCH))
    buffers: list[weakref.ref[FrozenBuffer]] = []
    for index in range(1, 11):
        buffer = FrozenBuffer(bytes([index]) * BATCH)
        buffers.append(weakref.ref(buffer))
        cache.add([_entry(index, memoryview(buffer))])
        del buffer
    gc.collect()
    assert [ref() is not None for ref in buffers] == [False] * 7 + [True] * 3
    assert cache.first_index == 8 and cache.first_offset == 70 and cache.bytes == 3 * (ENTRY_OVERHEAD + BATCH)
    # What is cached reads as before.
    entries: list[Entry] = []
    cache.read_entries(entries, 8, 11, 1 << 20)
    assert [(e.index, bytes(e.data)) for e in entries] == [(i, bytes([i]) * BATCH) for i in (8, 9, 10)]
    batches: list[memoryview] = []
    assert cache.read_batches(batches, 85, 100, 1 << 20) == (80, 100)
    assert [bytes(b) for b in batches] == [bytes([9]) * BATCH, bytes([10]) * BATCH]
    assert cache.index_for_offset(85) == 9
    assert cache.get(7) is None and cache.get(10) is not None and cache.get(10).index == 10  # type: ignore[union-attr]


def _model_batches(cached: list[CachedEntry], offset: int, limit: int, max_bytes: int,
                   out: list[bytes]) -> tuple[list[bytes], int, int]:
    """What a read of the cache returns, walked entry by entry (as the cache once did)."""
    data = [e for e in cached if e.base_offset >= 0 and e.last_offset >= offset]
    taken: list[bytes] = []
    total, first, next_offset = 0, -1, offset
    for e in data:
        if e.last_offset >= limit or ((out or taken) and total + len(e.data) > max_bytes):
            break
        if first < 0:
            first = e.base_offset
        taken.append(bytes(e.data))
        total += len(e.data)
        next_offset = e.last_offset + 1
    return taken, first, next_offset


def test_reads_by_offset_and_index_match_the_entries_cached_through_evictions_and_truncations() -> None:
    """The cache keeps entries as arrays of their fields and one buffer reference each (the
    appended buffer itself when the payload is all of it, the Raft frame and the payload's span
    when the entry names its frame, else the view): every read returns the
    entries a walk over them would, the buffers themselves (no copy), through evictions,
    compactions, truncations and entries without offsets (NOOP, CONFIG) among the batches."""
    rng = random.Random(7)
    frame = FrozenBuffer(rng.randbytes(1 << 16))
    frame_view = memoryview(frame)
    cache = TailCache(capacity_bytes=60 * (ENTRY_OVERHEAD + 600))
    model: list[CachedEntry] = []
    index, end_offset = 1, 0
    for step in range(1500):
        if step % 97 == 96 and len(model) > 3:  # a follower's log cut back by a new leader
            cut = model[rng.randrange(1, len(model))].index
            cache.truncate_from(cut)
            model = [e for e in model if e.index < cut]
            index = cut
            end_offset = model[-1].end_offset if model else end_offset
        size = rng.randrange(61, 400) if rng.random() < 0.9 else rng.randrange(4096, 6000)
        start = rng.randrange(0, len(frame) - size)
        kind = rng.choice([EntryType.DATA] * 6 + [EntryType.NOOP, EntryType.CONFIG])
        source = rng.random()
        payload = (memoryview(frame)[start:start + size] if source < 0.6
                   else memoryview(FrozenBuffer(rng.randbytes(size))))
        if kind == EntryType.DATA:
            records = rng.randrange(1, 5)
            entry = CachedEntry(index, 1 + index // 300, kind, payload, end_offset, end_offset + records - 1,
                                end_offset + records)
        else:
            entry = CachedEntry(index, 1 + index // 300, kind, payload, -1, -1, end_offset)
        if source < 0.3:  # an entry decoded from a Raft frame: the frame and the payload's start
            cache.append(entry.index, entry.term, entry.type, payload, entry.base_offset, entry.last_offset,
                         entry.end_offset, _checksum(entry.index, entry.term, entry.type, payload), frame_view, start)
            cache.evict()
        else:
            cache.add([entry])
        model.append(entry)
        model = model[len(model) - len(cache):]  # what eviction kept: the newest
        index, end_offset = index + 1, entry.end_offset
        assert cache.first_index == model[0].index and cache.bytes == sum(ENTRY_OVERHEAD + len(e.data)
                                                                            for e in model)
        if step % 5:
            continue
        data = [e for e in model if e.base_offset >= 0]
        if not data:
            assert cache.first_offset is None
            continue
        assert cache.first_offset == data[0].base_offset
        offset = rng.randrange(data[0].base_offset, end_offset)
        limit = rng.choice([end_offset, rng.randrange(offset, end_offset + 1)])
        max_bytes = rng.choice([0, 150, 700, 1 << 20])
        for out in ([], [b"x"]):
            buffers: list[Buffer] = list(out)
            first, next_offset = cache.read_batches(buffers, offset, limit, max_bytes)
            assert ([bytes(b) for b in buffers[len(out):]], first, next_offset) == _model_batches(
                model, offset, limit, max_bytes, out)
        holder = next(e for e in data if e.last_offset >= offset)
        assert cache.index_for_offset(offset) == holder.index
        a = rng.randrange(model[0].index, index)
        b = rng.randrange(a, index + 1)
        entries: list[Entry] = []
        cache.read_entries(entries, a, b, rng.choice([0, 1000, 1 << 20]))
        expected = model[a - model[0].index:b - model[0].index]
        assert [(e.index, e.term, e.type, bytes(e.data), e.crc) for e in entries] == [
            (e.index, e.term, e.type, bytes(e.data), _checksum(e.index, e.term, e.type, e.data))
            for e in expected[:len(entries)]]
        assert len(entries) >= min(1, b - a)
        for e in entries:  # the payload itself (the appended buffer or view, or a view of the frame), not a
            appended = expected[e.index - a].data  # copy; but a small part of the frame is copied
            assert e.data is appended or e.data is appended.obj or (
                isinstance(e.data, memoryview) and e.data.obj is frame) or (
                len(appended) < 4096 and appended.obj is frame and type(e.data) is bytes)
        probe = model[rng.randrange(len(model))]
        assert cache.end_offset_at(probe.index) == probe.end_offset
        got = cache.get(probe.index)
        assert got is not None and (got.base_offset, got.last_offset, bytes(got.data)) == (
            probe.base_offset, probe.last_offset, bytes(probe.data))
    assert cache.get(model[0].index - 1) is None and cache.get(index) is None


def test_a_payload_read_from_a_cache_is_kept_as_it_is_when_appended_again() -> None:
    """Reads hand out the cached buffer itself (a leader's FrozenBuffer): appended to another log's
    cache (a learner caught up from this log, say), it is kept as it is, not copied."""
    buffer = FrozenBuffer(b"b" * BATCH)
    source = TailCache(capacity_bytes=1 << 20)
    source.add([_entry(1, memoryview(buffer))])
    read: list[Entry] = []
    source.read_entries(read, 1, 2, 1 << 20)
    assert read[0].data is buffer
    copy = TailCache(capacity_bytes=1 << 20)
    copy.append(1, read[0].term, read[0].type, read[0].data, 0, 9, 10, 0)
    batches: list[Buffer] = []
    assert copy.read_batches(batches, 0, 10, 1 << 20) == (0, 10) and batches[0] is buffer
    # A buffer its owner may still change is copied (bytes(...)): the cache's stays as appended.
    mutable = bytearray(b"m" * BATCH)
    copy.append(2, 1, 1, memoryview(mutable), 10, 19, 20, 0)
    mutable[:] = bytes(BATCH)
    assert bytes(copy.get(2).data) == b"m" * BATCH  # type: ignore[union-attr]


def test_a_truncation_while_every_entry_is_evicted_keeps_the_new_entries_at_their_index() -> None:
    """An entry larger than the cache evicts everything; a Raft truncation then found no cached
    entry and left the dead slots, so the entries appended after it were cached one slot per
    dead entry too far: entry 3 answered as 5, with entry 3's term and payload."""
    cache = TailCache(capacity_bytes=3 * ENTRY_OVERHEAD + 200)
    for index in (1, 2, 3):
        cache.append(index, 1, int(EntryType.NOOP), bytes([index]) * 100, -1, -1, 0, 0)
        cache.evict()
    cache.append(4, 1, int(EntryType.NOOP), b"\x04" * 1000, -1, -1, 0, 0)  # larger than the cache
    cache.evict()
    assert cache.first_index is None
    cache.truncate_from(3)  # a new leader's log differs from index 3 on
    for index in (3, 4):
        cache.append(index, 2, int(EntryType.NOOP), bytes([index + 10]) * 50, -1, -1, 0, 0)
        cache.evict()
    assert (cache.first_index, len(cache)) == (3, 2)
    assert [None if (e := cache.get(i)) is None else e.term for i in (2, 3, 4, 5)] == [None, 2, 2, None]
    entries: list[Entry] = []
    cache.read_entries(entries, 3, 5, 1 << 20)
    assert [(e.index, e.term, bytes(e.data)) for e in entries] == [(3, 2, b"\x0d" * 50), (4, 2, b"\x0e" * 50)]


def test_a_logs_entries_after_a_truncation_behind_an_emptied_cache_read_as_written(tmp_path: Path) -> None:
    log = StreamLog.open(tmp_path / "s", LogConfig(tail_cache_bytes=3 * ENTRY_OVERHEAD + 200, fsync=False))
    log.append([Entry(i, 1, EntryType.CONFIG, bytes([i]) * 100) for i in (1, 2, 3)])
    log.append([Entry(4, 1, EntryType.CONFIG, b"\x04" * 1000)])
    log.truncate_suffix(3)
    log.append([Entry(3, 2, EntryType.CONFIG, b"\x0d" * 50), Entry(4, 2, EntryType.CONFIG, b"\x0e" * 50),
                Entry(5, 2, EntryType.CONFIG, b"\x0f" * 50)])
    assert [log.term_at(i) for i in range(1, 6)] == [1, 1, 2, 2, 2]
    assert [(e.index, e.term, bytes(e.data)) for e in log.entries(1, 6)] == [
        (1, 1, b"\x01" * 100), (2, 1, b"\x02" * 100), (3, 2, b"\x0d" * 50), (4, 2, b"\x0e" * 50),
        (5, 2, b"\x0f" * 50)]
    log.close()

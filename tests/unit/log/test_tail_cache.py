"""The tail cache holds at most its capacity: an evicted entry's buffer is released at once, not
at the cache's next compaction (which waits for more than a thousand evictions: with batches of
half a megabyte each, a stream kept hundreds of megabytes of evicted batches alive, and every
append's buffer came from fresh memory)."""

from __future__ import annotations

import gc
import weakref

from vdl_broker.log import FrozenBuffer
from vdl_broker.log.tail_cache import ENTRY_OVERHEAD, CachedEntry, TailCache

BATCH = 1000


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
    assert [bytes(e.data) for e in cache.entries(8, 11)] == [bytes([i]) * BATCH for i in (8, 9, 10)]
    data, k = cache.data_from(85)
    assert data[k].index == 9 and [e.index for e in data[k:]] == [9, 10]
    assert cache.get(7) is None and cache.get(10) is not None and cache.get(10).index == 10  # type: ignore[union-attr]

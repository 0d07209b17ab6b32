"""Tail cache (seed 000): the most recent entries in memory, so tailing readers touch no disk.

Entries are views into the buffers that were written by append (one buffer per append call), so
caching costs no copy. The cache always ends at the log's last entry; eviction drops the oldest.

A node's caches share one budget (`CacheBudget`, the node's `tail_cache_bytes`): each holds at
most its log's own capacity and at most an equal share of the budget, so a node's cache memory
is bounded by the budget whatever the number of streams it holds (not streams x capacity).
Capacity and budget bound memory, not payload: each entry is charged its payload and
ENTRY_OVERHEAD, the Python objects that hold it.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from dataclasses import dataclass

# Evicted slots are deleted from the lists' fronts once they are more than half of them (each
# deletion moves fewer slots than were evicted since the last: O(1) per entry) and more than this
# many: a cache of a few entries does not move them at every append. Not more, so a log's dead
# slots stay within one per cached entry (part of ENTRY_OVERHEAD), not a thousand per log
# whatever its share: with thousands of streams, each share is a few dozen small entries.
_COMPACT_AT = 64

# Memory one cached entry costs beyond its payload bytes, charged with them: with small batches
# the objects around a payload outweigh it (a 200-byte batch costs ~900 bytes), so a cache that
# counted payloads alone held 3-5x its budget. Measured with tracemalloc on CPython 3.11: the
# memory a StreamLog with a cache retains per appended entry, less the same log's without a
# cache, less the payload. A leader's entry: 619-649 B (1,024 to 20,000 entries; the same for
# 100 B to 64 KiB payloads): this CachedEntry (88), four int objects (112), three list slots,
# the memoryview (184), its managed buffer (120) and the FrozenBuffer object around the payload
# (96). A follower's: 449 B (a view into a Raft frame shared by its entries, with the frame's
# 21-byte entry header). pymalloc's 16-byte size classes, which tracemalloc does not show, bring
# the leader's to ~680 B; evicted slots awaiting compaction (_COMPACT_AT) add at most one per
# cached entry in each of the three lists, 24 B. The larger is charged for both, so the budget
# is a bound. tests/unit/log/test_tail_cache_memory.py re-measures it.
ENTRY_OVERHEAD = 704


@dataclass(frozen=True, slots=True)
class CachedEntry:
    index: int
    term: int
    type: int
    data: memoryview  # the entry's payload
    base_offset: int  # -1 for entries without data
    last_offset: int  # -1 for entries without data
    end_offset: int  # log end offset right after this entry


# Stands in the lists for an evicted entry until the next compaction: eviction drops the
# reference to the entry's buffer at once, so the cache holds at most its capacity (left in
# place, up to _COMPACT_AT evicted entries of a big batch each kept ~1 GB alive per stream, and
# every new buffer came from fresh memory: a page fault per 4 KiB appended).
_EVICTED = CachedEntry(0, 0, 0, memoryview(b""), -1, -1, 0)


class CacheBudget:
    """Bytes the tail caches of one node may hold together (payloads and ENTRY_OVERHEAD each),
    shared equally among its caches."""

    def __init__(self, limit_bytes: int) -> None:
        if limit_bytes < 0:
            raise ValueError(f"a tail cache budget must be >= 0 bytes, got {limit_bytes}")
        self.limit = limit_bytes
        self._caches: dict[int, TailCache] = {}
        self.share = limit_bytes
        # Logs open on worker threads (many at once at a start) while the event loop's appends
        # use the caches; joining only changes the share: each cache shrinks to it at its next
        # append, on the thread that owns it (evicting another log's cache from here would race
        # with that log's reads and appends).
        self._lock = threading.Lock()

    def join(self, cache: TailCache) -> None:
        with self._lock:
            self._caches[id(cache)] = cache
            self.share = self.limit // len(self._caches)

    def leave(self, cache: TailCache) -> None:
        with self._lock:
            if self._caches.pop(id(cache), None) is not None:
                self.share = self.limit // max(1, len(self._caches))

    @property
    def bytes(self) -> int:
        with self._lock:
            caches = list(self._caches.values())
        return sum(cache.bytes for cache in caches)

    def __len__(self) -> int:
        return len(self._caches)


class TailCache:
    def __init__(self, capacity_bytes: int, budget: CacheBudget | None = None) -> None:
        self.capacity = capacity_bytes
        self.budget = budget
        self._entries: list[CachedEntry] = []
        self._head = 0
        self._data_offsets: list[int] = []  # base offsets of cached data entries (bisect key)
        self._data: list[CachedEntry] = []
        self._data_head = 0
        self.bytes = 0
        if budget is not None and capacity_bytes > 0:
            budget.join(self)

    @property
    def limit(self) -> int:
        """What this cache may hold now: its own capacity, within its share of the budget."""
        return self.capacity if self.budget is None else min(self.capacity, self.budget.share)

    def close(self) -> None:
        """The log is closed: free the entries and give the share back."""
        self.clear()
        if self.budget is not None:
            self.budget.leave(self)

    def __len__(self) -> int:
        return len(self._entries) - self._head

    @property
    def first_index(self) -> int | None:
        return self._entries[self._head].index if len(self) else None

    @property
    def first_offset(self) -> int | None:
        """Base offset of the oldest cached data batch: reads from there on are served here."""
        return self._data_offsets[self._data_head] if self._data_head < len(self._data) else None

    def add(self, entries: list[CachedEntry]) -> None:
        if self.capacity <= 0:
            return
        for entry in entries:
            self._entries.append(entry)
            if entry.base_offset >= 0:
                self._data_offsets.append(entry.base_offset)
                self._data.append(entry)
            self.bytes += ENTRY_OVERHEAD + len(entry.data)
        self.evict()

    def evict(self) -> None:
        """Drop the oldest entries until the cache is within its limit."""
        entries = self._entries
        limit = self.limit
        while self.bytes > limit and self._head < len(entries):
            self._drop_oldest()
        self._compact()

    def _drop_oldest(self) -> None:
        # the slot is overwritten, not just skipped, so the entry's buffer is freed now rather
        # than at the next compaction
        entry = self._entries[self._head]
        self._entries[self._head] = _EVICTED
        self._head += 1
        self.bytes -= ENTRY_OVERHEAD + len(entry.data)
        if entry.base_offset >= 0:
            self._data[self._data_head] = _EVICTED
            self._data_offsets[self._data_head] = -1  # its int object goes too (bisect starts past it)
            self._data_head += 1

    def _compact(self) -> None:
        if self._head > _COMPACT_AT and self._head * 2 > len(self._entries):
            del self._entries[: self._head]
            self._head = 0
        if self._data_head > _COMPACT_AT and self._data_head * 2 > len(self._data):
            del self._data[: self._data_head]
            del self._data_offsets[: self._data_head]
            self._data_head = 0

    def get(self, index: int) -> CachedEntry | None:
        first = self.first_index
        if first is None or index < first:
            return None
        k = self._head + index - first
        return self._entries[k] if k < len(self._entries) else None

    def entries(self, start: int, end: int) -> list[CachedEntry]:
        first = self.first_index
        assert first is not None and start >= first
        return self._entries[self._head + start - first: self._head + end - first]

    def data_from(self, offset: int) -> tuple[list[CachedEntry], int]:
        """The cached data list and the position in it of the batch holding `offset`."""
        k = bisect_right(self._data_offsets, offset, self._data_head) - 1
        return self._data, max(k, self._data_head)

    def drop_before(self, index: int) -> None:
        """The log no longer holds entries below `index` (retention, a truncation behind a
        snapshot): neither does the cache, so it never holds more than the log."""
        entries = self._entries
        while self._head < len(entries) and entries[self._head].index < index:
            self._drop_oldest()
        self._compact()

    def truncate_from(self, index: int) -> None:
        first = self.first_index
        if first is None:
            return
        if index <= first:
            self.clear()
            return
        k = self._head + index - first
        for entry in self._entries[k:]:
            self.bytes -= ENTRY_OVERHEAD + len(entry.data)
            if entry.base_offset >= 0:
                self._data.pop()
                self._data_offsets.pop()
        del self._entries[k:]

    def clear(self) -> None:
        self._entries.clear()
        self._data.clear()
        self._data_offsets.clear()
        self._head = self._data_head = 0
        self.bytes = 0

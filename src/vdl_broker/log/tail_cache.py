"""Tail cache (seed 000): the most recent entries in memory, so tailing readers touch no disk.

Entries keep the buffers that were written by append (one buffer per append call, or one per
batch), so caching costs no copy. The cache always ends at the log's last entry; eviction drops
the oldest.

An entry is not an object: its fields are slots of per-cache arrays (machine integers, no int
objects) and its payload one reference, to the appended buffer itself when the payload is all of
it (a leader's batch), else to the view appended (an entry of a follower's Raft frame). Readers
get these as they are: a read makes no object per batch, and a cached entry costs 160-270 B of
memory beyond its payload (not 450-640 B: an object, int objects, a memoryview and its managed
buffer each).

A node's caches share one budget (`CacheBudget`, the node's `tail_cache_bytes`): each holds at
most its log's own capacity and at most an equal share of the budget, so a node's cache memory
is bounded by the budget whatever the number of streams it holds (not streams x capacity).
Capacity and budget bound memory, not payload: each entry is charged its payload and
ENTRY_OVERHEAD, the memory that holds it.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

from vdl_broker.log.entry import HEADER_SIZE, FrozenBuffer
from vdl_broker.raft.types import Entry, EntryType
from vdl_wire.records.batch_header import Buffer

# Evicted slots are deleted from the arrays' fronts once they are more than a quarter of them
# (each deletion moves at most three live slots per slot evicted since the last: O(1) per
# entry) and more than this many: a cache of a few entries does not move them at every append.
# Not more, so a log's dead slots stay within this many or a third of one per cached entry
# (part of ENTRY_OVERHEAD), not a thousand per log whatever its share: with thousands of
# streams, each share is a few dozen small entries.
_COMPACT_AT = 64

# Memory one cached entry costs beyond its payload bytes, charged with them: with small batches
# the memory around a payload can outweigh it, and a cache that counted payloads alone held 3-5x
# its budget. Measured with tracemalloc on CPython 3.11: the memory a StreamLog with a cache
# retains per appended entry, less the same log's without a cache, less the payload (1,024 to
# 20,000 entries; the same for 100 B to 64 KiB payloads). A follower's entry: 267-269 B, its
# memoryview into the Raft frame (184), the frame's 21-byte entry header it keeps alive and its
# slots in the arrays (57 B, ~61 with their room to grow). A leader's: 156-157 B, its slots and
# the FrozenBuffer object around the payload (~96). pymalloc's 16-byte size classes, which
# tracemalloc does not show, add up to 8 B to the view; evicted slots awaiting compaction
# (_COMPACT_AT) at most a third of an entry's slots, 19 B. The larger is charged for both, so
# the budget is a bound. tests/unit/log/test_tail_cache_memory.py re-measures it.
ENTRY_OVERHEAD = 296

_DATA = int(EntryType.DATA)
_ENTRY_TYPES = {int(t): t for t in EntryType}

# What the cache keeps of a payload: the appended buffer itself, or a view into it when the
# payload is only part of it (an entry of a Raft frame read whole into one buffer).
Kept = bytes | FrozenBuffer | memoryview
# An evicted entry's slot until the next compaction: its buffer is freed at once.
_EVICTED = b""


@dataclass(frozen=True, slots=True)
class CachedEntry:
    """A cached entry as one object, made on request (the cache does not keep these)."""

    index: int
    term: int
    type: int
    data: memoryview  # the entry's payload
    base_offset: int  # -1 for entries without data
    last_offset: int  # -1 for entries without data
    end_offset: int  # log end offset right after this entry


def _kept(payload: Buffer) -> Kept:
    """What the cache keeps of an appended payload. Only a buffer nobody can change later (else
    a copy); and the buffer itself when the payload is all of it: one reference rather than a
    memoryview and its managed buffer (~300 B)."""
    if type(payload) is bytes or isinstance(payload, FrozenBuffer):  # read back from a cache
        return payload
    if isinstance(payload, memoryview):
        owner = payload.obj
        if isinstance(owner, FrozenBuffer) or (payload.readonly and isinstance(owner, bytes)):
            # a contiguous view as long as its owner is all of it
            return owner if payload.nbytes == len(owner) and payload.contiguous else payload
    return bytes(payload)


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
        # Every cached entry, in index order: slot p holds index _base_index + p; the slots
        # before _head are evicted (their buffer references dropped at once).
        self._base_index = 0
        self._head = 0
        self._terms = array("q")
        self._types = bytearray()
        self._ends = array("q")  # log end offset right after the entry
        self._buffers: list[Kept] = []
        # The data entries among them, in offset order (bisect keys), from _data_head on.
        self._data_head = 0
        self._bases = array("q")
        self._lasts = array("q")
        # payload bytes of the data entries added before this one (_added after the last): a
        # read's byte budget is a bisect, not a walk over the batches
        self._sums = array("q")
        self._added = 0
        self._data_buffers: list[Kept] = []
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
        return len(self._terms) - self._head

    @property
    def first_index(self) -> int | None:
        return self._base_index + self._head if self._head < len(self._terms) else None

    @property
    def first_offset(self) -> int | None:
        """Base offset of the oldest cached data batch: reads from there on are served here."""
        return self._bases[self._data_head] if self._data_head < len(self._bases) else None

    # ---- filling ----------------------------------------------------------------------------
    def append(self, index: int, term: int, entry_type: int, payload: Buffer, base_offset: int,
               last_offset: int, end_offset: int) -> None:
        """Cache entry `index`, the one after the newest cached (any when the cache is empty);
        DATA entries carry their batch's offsets. evict() once the append's entries are in."""
        terms = self._terms
        if not terms:
            self._base_index = index
        kept = _kept(payload)
        terms.append(term)
        self._types.append(entry_type)
        self._ends.append(end_offset)
        self._buffers.append(kept)
        size = len(kept)
        self.bytes += ENTRY_OVERHEAD + size
        if entry_type == _DATA:
            self._bases.append(base_offset)
            self._lasts.append(last_offset)
            self._sums.append(self._added)
            self._added += size
            self._data_buffers.append(kept)

    def add(self, entries: Iterable[CachedEntry]) -> None:
        """append() each entry, then evict()."""
        if self.capacity <= 0:
            return
        for e in entries:
            self.append(e.index, e.term, e.type, e.data, e.base_offset, e.last_offset, e.end_offset)
        self.evict()

    # ---- dropping ---------------------------------------------------------------------------
    def evict(self) -> None:
        """Drop the oldest entries until the cache is within its limit."""
        limit = self.limit
        if self.bytes > limit:
            buffers, types, data_buffers = self._buffers, self._types, self._data_buffers
            head, data_head, end = self._head, self._data_head, len(buffers)
            dropped = 0
            while self.bytes - dropped > limit and head < end:
                # the slot is cleared, not just skipped, so the entry's buffer is freed now
                # rather than at the next compaction
                dropped += ENTRY_OVERHEAD + len(buffers[head])
                buffers[head] = _EVICTED
                if types[head] == _DATA:
                    data_buffers[data_head] = _EVICTED
                    data_head += 1
                head += 1
            self.bytes -= dropped
            self._head, self._data_head = head, data_head
        self._compact()

    def _compact(self) -> None:
        head = self._head
        if head > _COMPACT_AT and head * 4 > len(self._terms):
            del self._terms[:head], self._types[:head], self._ends[:head], self._buffers[:head]
            self._base_index += head
            self._head = 0
        head = self._data_head
        if head > _COMPACT_AT and head * 4 > len(self._bases):
            del self._bases[:head], self._lasts[:head], self._sums[:head], self._data_buffers[:head]
            self._data_head = 0

    def drop_before(self, index: int) -> None:
        """The log no longer holds entries below `index` (retention, a truncation behind a
        snapshot): neither does the cache, so it never holds more than the log."""
        buffers, types, data_buffers = self._buffers, self._types, self._data_buffers
        stop = min(index - self._base_index, len(buffers))
        while self._head < stop:
            head = self._head
            self.bytes -= ENTRY_OVERHEAD + len(buffers[head])
            buffers[head] = _EVICTED
            if types[head] == _DATA:
                data_buffers[self._data_head] = _EVICTED
                self._data_head += 1
            self._head = head + 1
        self._compact()

    def truncate_from(self, index: int) -> None:
        first = self.first_index
        if first is None:
            return
        if index <= first:
            self.clear()
            return
        p = index - self._base_index
        if p >= len(self._terms):
            return
        for kept in self._buffers[p:]:
            self.bytes -= ENTRY_OVERHEAD + len(kept)
        data = self._types.count(_DATA, p)
        del self._terms[p:], self._types[p:], self._ends[p:], self._buffers[p:]
        if data:
            d = len(self._bases) - data
            self._added = self._sums[d]
            del self._bases[d:], self._lasts[d:], self._sums[d:], self._data_buffers[d:]

    def clear(self) -> None:
        del self._terms[:], self._types[:], self._ends[:], self._buffers[:]
        del self._bases[:], self._lasts[:], self._sums[:], self._data_buffers[:]
        self._head = self._data_head = 0
        self._added = 0
        self.bytes = 0

    # ---- reading ----------------------------------------------------------------------------
    def _slot(self, index: int) -> int:
        """The slot of entry `index`, -1 if it is not cached."""
        p = index - self._base_index
        return p if self._head <= p < len(self._terms) else -1

    def term_at(self, index: int) -> int | None:
        p = self._slot(index)
        return self._terms[p] if p >= 0 else None

    def end_offset_at(self, index: int) -> int | None:
        """The log end offset right after entry `index`, None if it is not cached."""
        p = self._slot(index)
        return self._ends[p] if p >= 0 else None

    def get(self, index: int) -> CachedEntry | None:
        p = self._slot(index)
        if p < 0:
            return None
        end = self._ends[p]
        base = last = -1
        if self._types[p] == _DATA:
            d = bisect_left(self._lasts, end - 1, self._data_head)
            base, last = self._bases[d], self._lasts[d]
        return CachedEntry(index, self._terms[p], self._types[p], memoryview(self._buffers[p]),
                           base, last, end)

    def read_entries(self, out: list[Entry], start: int, end: int, max_bytes: int) -> None:
        """Append entries [start, end) to `out` (all cached: start >= first_index) while their
        stored size (header and payload) is within max_bytes, at least one if `out` is empty."""
        base = self._base_index
        terms, types, buffers = self._terms, self._types, self._buffers
        for p in range(start - base, end - base):
            data = buffers[p]
            size = HEADER_SIZE + len(data)
            if out and size > max_bytes:
                return
            max_bytes -= size
            out.append(Entry(base + p, terms[p], _ENTRY_TYPES[types[p]], data))

    def read_batches(self, out: list[Buffer], offset: int, limit: int, max_bytes: int) -> tuple[int, int]:
        """Append to `out` the cached batches from the one holding `offset` (>= first_offset) on,
        none whose last offset is >= limit, within max_bytes in all but at least one if `out` is
        empty. Returns the first one's base offset (-1 if none) and the offset after the last
        (`offset` if none)."""
        lasts = self._lasts
        n = len(lasts)
        k = bisect_left(lasts, offset, self._data_head)  # the batch holding offset
        if k == n:
            return -1, offset
        j = n if lasts[n - 1] < limit else bisect_left(lasts, limit, k, n)  # the first at or past limit
        if j == k:
            return -1, offset
        sums = self._sums
        room = sums[k] + max_bytes
        if (self._added if j == n else sums[j]) > room:
            # the first batch past the budget (the bytes before it are more than room) ends it
            j = max(bisect_right(sums, room, k, j) - 1, k if out else k + 1)
            if j == k:
                return -1, offset
        out += self._data_buffers[k:j]
        return self._bases[k], lasts[j - 1] + 1

    def index_for_offset(self, offset: int) -> int:
        """Raft index of the data entry holding `offset` (>= first_offset)."""
        # the first entry whose end offset is past `offset` moved the end past it: the batch
        return self._base_index + bisect_right(self._ends, offset, self._head)

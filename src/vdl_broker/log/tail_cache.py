"""Tail cache (seed 000): the most recent entries in memory, so tailing readers touch no disk.

Entries keep the buffers that were written by append (one buffer per append call, or one per
batch), so caching costs no copy. The cache always ends at the log's last entry; eviction drops
the oldest.

An entry is not an object: its fields are slots of per-cache arrays (machine integers, no int
objects) and its payload one reference, to the appended buffer itself when the payload is all of
it (a leader's batch), or to the Raft frame it came in, shared by the frame's entries, with its
span in the frame (a follower's entry: Entry.frame and Entry.start, from the Raft decoder).
Readers get a leader's buffers as they are (a read makes no object per batch) and a view of a
follower's payload, made when read. A cached entry costs 100-170 B of memory beyond its payload
(not 450-640 B: an object, int objects, a memoryview and its managed buffer each; nor the ~270 B
of a follower's entry that kept its own view into the frame).

A node's caches share one budget (`CacheBudget`, the node's `tail_cache_bytes`), so a node's
cache memory is bounded by the budget whatever the number of streams it holds (not streams x
capacity). Each cache holds at most its log's own capacity; when the caches together are over
the budget, those holding more than an equal share give entries back, least recently appended
first. Capacity and budget bound memory, not payload: each entry is charged its payload and
ENTRY_OVERHEAD, the memory that holds it.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from vdl_broker.log.entry import HEADER_SIZE, FrozenBuffer
from vdl_broker.raft.types import Entry, EntryType, entry_checksum
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
# 20,000 entries; the same for 100 B to 64 KiB payloads). A leader's entry: ~170 B, its slots in
# the arrays (70 B, ~74 with their room to grow) and the FrozenBuffer object around the payload
# (~96). A follower's: ~100 B, its slots, the frame's 25-byte entry header it keeps alive and a
# 64th of the frame's one view (the entries of a frame share it). Evicted slots awaiting
# compaction (_COMPACT_AT) add at most a third of an entry's slots, 23 B. The larger is charged
# for both, so the budget is a bound. tests/unit/log/test_tail_cache_memory.py re-measures it.
ENTRY_OVERHEAD = 192

_DATA = int(EntryType.DATA)
_ENTRY_TYPES = {int(t): t for t in EntryType}

# What the cache keeps of a payload: the appended buffer itself, the Raft frame holding it (with
# the payload's span), or a view into a buffer when the payload is only part of it.
Kept = bytes | FrozenBuffer | memoryview
# An evicted entry's slot until the next compaction: its buffer is freed at once.
_EVICTED = b""
# A slot's span: -1 when its buffer is the payload, else the payload's start in the frame
# (shifted) and its size (frames are at most the transport's max_frame_bytes, far below 4 GiB).
_WHOLE = -1
_SPAN_SHIFT = 32
_SIZE_MASK = (1 << _SPAN_SHIFT) - 1
# A part of a buffer this small is copied rather than kept in place: keeping it pins the rest
# of its buffer, and a quiet stream's follower gets each entry in a frame of its own (~100 B of
# headers and a frame object around a payload; ~500 B per entry beyond its payload). Copying
# costs ~0.1 us per entry, and a copy ~35 B of memory, less than a span; a larger payload
# outweighs its frame's headers and is kept in place (no copy of the replicated bytes).
_FRAMED_FROM = 4096


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
    if not len(payload):
        return b""
    if isinstance(payload, memoryview):
        owner = payload.obj
        if isinstance(owner, FrozenBuffer) or (payload.readonly and isinstance(owner, bytes)):
            if payload.nbytes == len(owner) and payload.contiguous:  # as long as its owner: all of it
                return owner
            if payload.nbytes >= _FRAMED_FROM:  # a small part is copied (_FRAMED_FROM)
                return payload
    return bytes(payload)


def _immutable(frame: memoryview) -> bool:
    """A frame nothing changes after it was read: its entries' spans stay their payloads."""
    owner = frame.obj
    return frame.contiguous and (isinstance(owner, FrozenBuffer) or (frame.readonly and type(owner) is bytes))


def _payload(kept: Kept, span: int) -> Kept:
    """A slot's payload: its buffer, or the view of its span in the frame it keeps."""
    if span < 0:
        return kept
    start = span >> _SPAN_SHIFT
    return memoryview(kept)[start:start + (span & _SIZE_MASK)]


class CacheBudget:
    """Bytes the tail caches of one node may hold together (payloads and ENTRY_OVERHEAD each).

    A cache grows up to its own capacity while the budget has room. Once the caches together are
    over it, those holding more than an equal share (`share`) give their oldest entries back,
    the least recently appended cache first, none below its share: a hot stream keeps a long
    tail in memory beside thousands of idle ones (an equal split left it limit/N, and its
    followers and tailing readers behind that read from disk), and a quiet one keeps its share.

    Caches change only on the event loop (appends, retention, truncations, closes), where one
    cache may take entries from another. Logs open on worker threads (many at once at a start):
    joining, with a cache still empty, only changes the share, under a lock."""

    def __init__(self, limit_bytes: int) -> None:
        if limit_bytes < 0:
            raise ValueError(f"a tail cache budget must be >= 0 bytes, got {limit_bytes}")
        self.limit = limit_bytes
        self.share = limit_bytes
        self.bytes = 0  # what the caches hold together (each adds its changes: TailCache._settle)
        self._caches: dict[int, TailCache] = {}
        self._lock = threading.Lock()
        # The caches that held more than the share at their last append, least recently
        # appended first: the ones that give entries back.
        self._over_share: OrderedDict[int, TailCache] = OrderedDict()
        # Logs joined since the caches were last listed: a smaller share, which caches not
        # appended to since may hold more than.
        self._joined = 0

    def join(self, cache: TailCache) -> None:
        with self._lock:
            self._caches[id(cache)] = cache
            self.share = self.limit // len(self._caches)
            self._joined += 1

    def leave(self, cache: TailCache) -> None:
        self._over_share.pop(id(cache), None)
        with self._lock:
            if self._caches.pop(id(cache), None) is not None:
                self.share = self.limit // max(1, len(self._caches))

    def appended(self, cache: TailCache) -> None:
        """`cache` appended (and settled): while the caches are over the budget, the least
        recently appended of those over their share, this one last, give entries back."""
        share, over = self.share, self._over_share
        key = id(cache)
        if cache.bytes > share:
            over[key] = cache
            over.move_to_end(key)
        elif over:
            over.pop(key, None)
        # Listed again once an eighth of the logs joined since: listing thousands of caches at
        # each of thousands of joins (a start) would cost their square. Until then the caches
        # not listed hold at most the budget, and the newcomers (an eighth) their shares.
        if self._joined > len(self._caches) // 8 and self.bytes > self.limit:
            self._list_over_share()
        while self.bytes > self.limit and over:
            key, lender = next(iter(over.items()))
            lender.shrink_to(max(share, lender.bytes - (self.bytes - self.limit)))
            if lender.bytes > share:
                break  # it gave back enough
            del over[key]

    def _list_over_share(self) -> None:
        """Add the caches over the share not listed yet, ahead of the listed ones: logs joined
        since they last appended."""
        with self._lock:
            self._joined = 0
            caches = list(self._caches.values())
        over, share = self._over_share, self.share
        for cache in reversed(caches):
            if cache.bytes > share and id(cache) not in over:
                over[id(cache)] = cache
                over.move_to_end(id(cache), last=False)

    def __len__(self) -> int:
        return len(self._caches)


class TailCache:
    def __init__(self, capacity_bytes: int, budget: CacheBudget | None = None) -> None:
        self.capacity = capacity_bytes
        self.budget = budget if capacity_bytes > 0 else None  # a cache that holds nothing takes no share
        # Every cached entry, in index order: slot p holds index _base_index + p; the slots
        # before _head are evicted (their buffer references dropped at once).
        self._base_index = 0
        self._head = 0
        self._terms = array("q")
        self._types = bytearray()
        self._ends = array("q")  # log end offset right after the entry
        self._buffers: list[Kept] = []
        self._spans = array("q")  # _WHOLE, or the payload's span in the frame _buffers holds
        self._crcs = array("I")  # entry_checksum: what a leader sends its followers with the entry
        # The data entries among them, in offset order (bisect keys), from _data_head on.
        self._data_head = 0
        self._bases = array("q")
        self._lasts = array("q")
        # payload bytes of the data entries added before this one (_added after the last): a
        # read's byte budget is a bisect, not a walk over the batches
        self._sums = array("q")
        self._added = 0
        # their buffers (as _buffers): the payloads themselves where _framed is 0, so a read of
        # a leader's batches is a slice of this list; 1 where the buffer is a frame
        self._data_buffers: list[Kept] = []
        self._framed = bytearray()
        self.bytes = 0
        self._settled = 0  # what the budget counts of this cache's bytes
        if self.budget is not None:
            self.budget.join(self)

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
               last_offset: int, end_offset: int, crc: int, frame: memoryview | None = None,
               start: int = 0) -> None:
        """Cache entry `index`, the one after the newest cached (any when the cache is empty);
        DATA entries carry their batch's offsets; an entry decoded from a Raft frame, the frame
        and its payload's start in it (payload is frame[start:start + len(payload)]).
        evict() once the append's entries are in."""
        terms = self._terms
        if not terms:
            self._base_index = index
        size = len(payload)
        if frame is not None and _FRAMED_FROM <= size <= _SIZE_MASK and start <= _SIZE_MASK and _immutable(frame):
            owner = frame.obj  # the frame's own buffer when the frame is all of it: no view kept
            kept: Kept = owner if isinstance(owner, bytes | FrozenBuffer) and frame.nbytes == len(owner) else frame
            span = start << _SPAN_SHIFT | size
        else:
            kept = _kept(payload)
            span = _WHOLE
            size = len(kept)
        terms.append(term)
        self._types.append(entry_type)
        self._ends.append(end_offset)
        self._buffers.append(kept)
        self._spans.append(span)
        self._crcs.append(crc)
        self.bytes += ENTRY_OVERHEAD + size
        if entry_type == _DATA:
            self._bases.append(base_offset)
            self._lasts.append(last_offset)
            self._sums.append(self._added)
            self._added += size
            self._data_buffers.append(kept)
            self._framed.append(span != _WHOLE)

    def add(self, entries: Iterable[CachedEntry]) -> None:
        """append() each entry, then evict()."""
        if self.capacity <= 0:
            return
        for e in entries:
            crc = entry_checksum(Entry(e.index, e.term, _ENTRY_TYPES[e.type], e.data))
            self.append(e.index, e.term, e.type, e.data, e.base_offset, e.last_offset, e.end_offset, crc)
        self.evict()

    # ---- dropping ---------------------------------------------------------------------------
    def evict(self) -> None:
        """The append's entries are in: drop the oldest beyond the cache's capacity, then settle
        with the budget (which may take more, from this cache or from others)."""
        self._evict_to(self.capacity)
        if self.budget is not None:
            self._settle()
            self.budget.appended(self)

    def shrink_to(self, limit: int) -> None:
        """Drop the oldest entries until the cache holds at most `limit` bytes (the budget asks)."""
        self._evict_to(limit)
        self._settle()

    def _settle(self) -> None:
        """Tell the budget what this cache's bytes changed by since it last did."""
        if self.budget is not None:
            self.budget.bytes += self.bytes - self._settled
            self._settled = self.bytes

    def _evict_to(self, limit: int) -> None:
        if self.bytes > limit:
            buffers, spans, types, data_buffers = self._buffers, self._spans, self._types, self._data_buffers
            head, data_head, end = self._head, self._data_head, len(buffers)
            dropped = 0
            while self.bytes - dropped > limit and head < end:
                # the slot is cleared, not just skipped, so the entry's buffer is freed now
                # rather than at the next compaction
                span = spans[head]
                dropped += ENTRY_OVERHEAD + (len(buffers[head]) if span < 0 else span & _SIZE_MASK)
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
            del (self._terms[:head], self._types[:head], self._ends[:head], self._buffers[:head], self._spans[:head],
                 self._crcs[:head])
            self._base_index += head
            self._head = 0
        head = self._data_head
        if head > _COMPACT_AT and head * 4 > len(self._bases):
            del (self._bases[:head], self._lasts[:head], self._sums[:head], self._data_buffers[:head],
                 self._framed[:head])
            self._data_head = 0

    def drop_before(self, index: int) -> None:
        """The log no longer holds entries below `index` (retention, a truncation behind a
        snapshot): neither does the cache, so it never holds more than the log."""
        buffers, spans, types, data_buffers = self._buffers, self._spans, self._types, self._data_buffers
        stop = min(index - self._base_index, len(buffers))
        while self._head < stop:
            head = self._head
            span = spans[head]
            self.bytes -= ENTRY_OVERHEAD + (len(buffers[head]) if span < 0 else span & _SIZE_MASK)
            buffers[head] = _EVICTED
            if types[head] == _DATA:
                data_buffers[self._data_head] = _EVICTED
                self._data_head += 1
            self._head = head + 1
        self._compact()
        self._settle()

    def truncate_from(self, index: int) -> None:
        first = self.first_index
        # Nothing cached (all evicted) is cleared too: its dead slots would place the entries
        # appended next at the index after them, not at their own.
        if first is None or index <= first:
            self.clear()
            return
        p = index - self._base_index
        if p >= len(self._terms):
            return
        for kept, span in zip(self._buffers[p:], self._spans[p:], strict=True):
            self.bytes -= ENTRY_OVERHEAD + (len(kept) if span < 0 else span & _SIZE_MASK)
        data = self._types.count(_DATA, p)
        del self._terms[p:], self._types[p:], self._ends[p:], self._buffers[p:], self._spans[p:], self._crcs[p:]
        if data:
            d = len(self._bases) - data
            self._added = self._sums[d]
            del self._bases[d:], self._lasts[d:], self._sums[d:], self._data_buffers[d:], self._framed[d:]
        self._settle()

    def clear(self) -> None:
        del self._terms[:], self._types[:], self._ends[:], self._buffers[:], self._spans[:], self._crcs[:]
        del self._bases[:], self._lasts[:], self._sums[:], self._data_buffers[:], self._framed[:]
        self._head = self._data_head = 0
        self._added = 0
        self.bytes = 0
        self._settle()

    # ---- reading ----------------------------------------------------------------------------
    def _slot(self, index: int) -> int:
        """The slot of entry `index`, -1 if it is not cached."""
        p = index - self._base_index
        return p if self._head <= p < len(self._terms) else -1

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
        return CachedEntry(index, self._terms[p], self._types[p],
                           memoryview(_payload(self._buffers[p], self._spans[p])), base, last, end)

    def read_entries(self, out: list[Entry], start: int, end: int, max_bytes: int) -> None:
        """Append entries [start, end) to `out` (all cached: start >= first_index) while their
        stored size (header and payload) is within max_bytes, at least one if `out` is empty."""
        base = self._base_index
        terms, types, buffers, spans, crcs, mask = (self._terms, self._types, self._buffers, self._spans, self._crcs,
                                                    _SIZE_MASK)
        for p in range(start - base, end - base):
            data, span = buffers[p], spans[p]
            size = HEADER_SIZE + (len(data) if span < 0 else span & mask)
            if out and size > max_bytes:
                return
            max_bytes -= size
            if span >= 0:
                data = _payload(data, span)
            out.append(Entry(base + p, terms[p], _ENTRY_TYPES[types[p]], data, crc=crcs[p]))

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
        if self._framed.find(1, k, j) < 0:  # a leader's batches: the buffers themselves
            out += self._data_buffers[k:j]
        else:  # the entries' slots, from the first batch's on, skipping entries without data
            p = bisect_right(self._ends, self._bases[k], self._head)
            types, buffers, spans = self._types, self._buffers, self._spans
            for _ in range(j - k):
                while types[p] != _DATA:
                    p += 1
                out.append(_payload(buffers[p], spans[p]))
                p += 1
        return self._bases[k], lasts[j - 1] + 1

    def index_for_offset(self, offset: int) -> int:
        """Raft index of the data entry holding `offset` (>= first_offset)."""
        # the first entry whose end offset is past `offset` moved the end past it: the batch
        return self._base_index + bisect_right(self._ends, offset, self._head)

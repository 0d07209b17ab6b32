"""Micro-benchmark of the tail cache, outside the broker: memory per cached entry and the time of
the reads it serves and of the appends that fill it, for this tree and (same run) a baseline tree.

    .venv/bin/python -m benchmarks.tail_cache_cost [--baseline-src DIR] [--rounds 5]

DIR is another checkout's `src` (e.g. `git archive main src | tar -x -C /tmp/base`). Each round
runs the measurement once per tree in a fresh process, the trees alternating; the table gives
medians over the rounds and the ratio to the baseline.

- memory: tracemalloc, per entry appended to a StreamLog with a 1 GiB cache, less the same log's
  without a cache, less the payload; payloads as a leader's (one FrozenBuffer per batch) and a
  follower's (one APPEND of 64 entries encoded and decoded as the transport reads a frame; and of
  one entry, a quiet stream's, in bytes as the transport copies a small frame).
- read: log.read() served by the cache of 4,000 batches of 300 B: a tailing consumer (the last 5)
  and a 1 MiB fetch from 4,000 back; log.entries() of the last 64 (a follower's catch-up); the
  same two reads of a follower's log (a follower fetch), its entries from Raft frames.
- busy beside idle: one log's cache beside 999 empty ones in the node's default budget (256 MiB):
  how many of its last 4,000 batches of 300 B it holds, and the 1 MiB read from 4,000 back.
- append: log.append() of 64 leader batches of 300 B to a log whose cache is full (each evicts
  one), per entry: the segment write included (fsync off), as the broker appends.
- add: TailCache.add of one 300 B CachedEntry to a full cache of 1,000 entries (each add evicts
  one). The log's path while the cache kept CachedEntry objects; the log now appends an entry's
  fields (measured in "append" above), add() is for callers holding CachedEntry objects (tests).

Times are the process's CPU time (the machine is shared: wall time counts other processes' turns).
"""

from __future__ import annotations

import gc
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from benchmarks.report import compare_source_trees

FRAME = 64


def _measure() -> dict[str, float]:
    """Runs in a child whose sys.path starts with the tree under test."""
    from vdl_broker.log import FrozenBuffer, LogConfig, StreamLog
    from vdl_broker.log.tail_cache import CacheBudget, CachedEntry, TailCache
    from vdl_broker.raft.types import Entry, EntryType, Message, MessageType
    from vdl_broker.raft.wire import decode_frame, encode_frame
    from vdl_wire.records.batch_header import HEADER, LOG_OVERHEAD, MAGIC

    def make_batch(base_offset: int, size: int) -> bytes:
        """A batch header the log accepts (one record), zero filler as body."""
        buf = bytearray(size)
        HEADER.pack_into(buf, 0, base_offset, size - LOG_OVERHEAD, 0, MAGIC, 0, 0, 0, 0, 0, 0, 0, 0, 1)
        return bytes(buf)

    def entries(index: int, count: int, size: int, follower: bool, small: bool = False) -> list[Entry]:
        payloads = [make_batch(index - 1 + i, size) for i in range(count)]
        if not follower:
            return [Entry(index + i, 1, EntryType.DATA, memoryview(FrozenBuffer(p))) for i, p in enumerate(payloads)]
        # encoded in one APPEND and decoded from one buffer, as the transport reads a frame
        made = [Entry(index + i, 1, EntryType.DATA, p) for i, p in enumerate(payloads)]
        parts = encode_frame(1, [("s", Message(MessageType.APPEND, 2, 1, 1, entries=made))])
        # a frame a read holds whole is copied into bytes of its own, a longer one read into a FrozenBuffer
        body = b"".join(parts) if small else FrozenBuffer(b"".join(parts))
        return list(decode_frame(memoryview(body)).messages[0][1].entries)

    def per_call_ns(read: Callable[[], object], calls: int) -> float:
        """CPU time of one call, the median of 5 runs of `calls` calls."""
        times = []
        for _ in range(5):
            started = time.process_time_ns()
            for _ in range(calls):
                read()
            times.append((time.process_time_ns() - started) / calls)
        return statistics.median(times)

    def retained(directory: Path, cache: int, size: int, count: int, follower: bool, per_frame: int = FRAME) -> float:
        log = StreamLog.open(directory, LogConfig(fsync=False, tail_cache_bytes=cache), cache_budget=CacheBudget(cache))
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for start in range(0, count, per_frame):
            log.append(entries(start + 1, min(per_frame, count - start), size, follower, per_frame == 1))
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        log.close()
        return used / count

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        for size, count in ((300, 2048), (65536, 128)):
            for follower in (False, True):
                name = f"{size}{follower}"
                cached = retained(root / f"c{name}", 1 << 30, size, count, follower)
                bare = retained(root / f"n{name}", 0, size, count, follower)
                out[f"memory/entry beyond payload, {'follower' if follower else 'leader'} {size} B"] = \
                    cached - bare - size
        # a quiet stream's follower: each APPEND carries one entry
        cached = retained(root / "c1", 1 << 30, 300, 2048, True, 1)
        bare = retained(root / "n1", 0, 300, 2048, True, 1)
        out["memory/entry beyond payload, follower 300 B, 1 entry per frame"] = cached - bare - 300

        log = StreamLog.open(root / "read", LogConfig(fsync=False, tail_cache_bytes=1 << 30))
        for start in range(0, 4000, FRAME):
            log.append(entries(start + 1, min(FRAME, 4000 - start), 300, False))
        end, last = log.log_end_offset, log.last_index
        copy = StreamLog.open(root / "read-follower", LogConfig(fsync=False, tail_cache_bytes=1 << 30))
        for start in range(0, 4000, FRAME):
            copy.append(entries(start + 1, min(FRAME, 4000 - start), 300, True))
        for label, read, calls in (("read, tail 5 batches", lambda: log.read(end - 5, 1 << 20, end), 20000),
                                   ("read, 1 MiB from cache", lambda: log.read(end - 4000, 1 << 20, end), 300),
                                   ("entries, last 64", lambda: log.entries(last - 63, last + 1, 1 << 20), 2000),
                                   ("follower's cache: read, tail 5 batches",
                                    lambda: copy.read(end - 5, 1 << 20, end), 20000),
                                   ("follower's cache: read, 1 MiB",
                                    lambda: copy.read(end - 4000, 1 << 20, end), 300)):
            out[f"{label} (ns)"] = per_call_ns(read, calls)
        log.close()
        copy.close()

        # one busy log beside 999 whose caches hold nothing, the node's default budget
        budget = CacheBudget(256 << 20)
        idle = [TailCache(64 << 20, budget) for _ in range(999)]
        busy = StreamLog.open(root / "busy", LogConfig(fsync=False), cache_budget=budget)
        for start in range(0, 4000, FRAME):
            busy.append(entries(start + 1, min(FRAME, 4000 - start), 300, False))
        out["busy log beside 999 idle: batches of the last 4,000 cached"] = len(busy.cache)
        out["busy log beside 999 idle: read 1 MiB from 4,000 back (ns)"] = per_call_ns(
            lambda: busy.read(end - 4000, 1 << 20, end), 100)
        busy.close()
        for cache in idle:
            cache.close()

        log = StreamLog.open(root / "append", LogConfig(fsync=False, tail_cache_bytes=1000 * (300 + 704)))
        made = [entries(start + 1, FRAME, 300, False) for start in range(0, 360 * FRAME, FRAME)]
        for batch in made[:40]:
            log.append(batch)
        times = []
        for round_start in range(40, 360, 64):
            started = time.process_time_ns()
            for batch in made[round_start:round_start + 64]:
                log.append(batch)
            times.append((time.process_time_ns() - started) / (64 * FRAME))
        out["append with eviction, per entry (ns)"] = statistics.median(times)
        log.close()

    from vdl_broker.log import tail_cache
    # what this tree charges per entry (a tree before ENTRY_OVERHEAD charged the 25-byte header)
    charge = getattr(tail_cache, "ENTRY_OVERHEAD", 25) + 300
    cache = TailCache(1000 * charge)
    payload = memoryview(bytes(300))
    made = [CachedEntry(i, 1, 1, payload, 10 * i, 10 * i + 9, 10 * i + 10) for i in range(1, 41001)]
    for entry in made[:1000]:
        cache.add([entry])
    started = time.process_time_ns()
    for entry in made[1000:]:
        cache.add([entry])
    out["add with eviction (ns)"] = (time.process_time_ns() - started) / 40000
    assert len(cache) == 1000
    return out


def main() -> None:
    compare_source_trees("tail_cache_cost", __doc__, _measure, 5,
                         lambda key: "B" if key.startswith("memory") else ("batches" if "cached" in key else "ns"),
                         lambda key: 0)


if __name__ == "__main__":
    main()

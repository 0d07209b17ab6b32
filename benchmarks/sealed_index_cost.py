"""Micro-benchmark of a log's sealed segments, outside the broker: the memory their indexes keep
per entry and the time of the lookups that use them, for this tree and (same run) a baseline tree.

    .venv/bin/python -m benchmarks.sealed_index_cost [--baseline-src DIR] [--rounds 3]

DIR is another checkout's `src` (e.g. `git archive main src | tar -x -C /tmp/base`). Each round
runs the measurement once per tree in a fresh process, the trees alternating; the table gives
medians over the rounds and the ratio to the baseline.

- memory: tracemalloc, what a StreamLog without a tail cache keeps per entry of its sealed
  segments (entries of 300 B, 64 per append), measured between two rolls (25 segments of 1 MiB,
  3 of 8 MiB: ~80,000 entries), which also gives the part of each segment (its objects and
  mappings, whatever its length) and the part of each entry; and per entry of the 1 MiB log
  reopened after a clean close with every segment in use (a term looked up in each).
- lookups, in sealed segments (no tail cache, so every one goes to the segment): term_at of a
  random index; entries() of one random entry and of 64 from a random index (a follower's
  catch-up); read() of 1 MiB from a random offset (a consumer's catch-up, through the offset
  index).

Times are the process's CPU time (the machine is shared: wall time counts other processes' turns).
"""

from __future__ import annotations

import gc
import random
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from benchmarks.report import compare_source_trees

PAYLOAD = 300
PER_APPEND = 64


def _measure() -> dict[str, float]:
    """Runs in a child whose sys.path starts with the tree under test."""
    from vdl_broker.log import LogConfig, StreamLog
    from vdl_broker.raft.types import Entry, EntryType
    from vdl_wire.records.batch_header import HEADER, LOG_OVERHEAD, MAGIC

    def batch(base_offset: int) -> bytes:
        """A batch header the log accepts (one record), zero filler as body."""
        buf = bytearray(PAYLOAD)
        HEADER.pack_into(buf, 0, base_offset, PAYLOAD - LOG_OVERHEAD, 0, MAGIC, 0, 0, 0, 0, 0, 0, 0, 0, 1)
        return bytes(buf)

    def retained(directory: Path, segment_bytes: int, first: int, last: int) -> tuple[float, float, int]:
        """Bytes the log's segments keep per sealed entry: between its roll into segment `first`
        and its roll into segment `last` (the entries sealed in between, each segment's objects
        and mappings), and reopened after a clean close with every segment in use (a term looked
        up in each), for all its entries; and the entries per segment."""
        config = LogConfig(fsync=False, tail_cache_bytes=0, segment_bytes=segment_bytes)
        log = StreamLog.open(directory, config)
        gc.collect()
        tracemalloc.start()
        marks: list[tuple[int, int]] = []  # (memory, last index) right after each roll
        index = 1
        while len(marks) < 2:
            segments = log.segment_count
            log.append([Entry(index + i, 1, EntryType.DATA, batch(index + i - 1)) for i in range(PER_APPEND)])
            index += PER_APPEND
            if log.segment_count != segments and log.segment_count in (first, last):
                gc.collect()
                marks.append((tracemalloc.get_traced_memory()[0], log.active_base_index - 1))
        sealed = marks[1][0] - marks[0][0], marks[1][1] - marks[0][1]
        per_segment = sealed[1] // (last - first)
        log.close()
        del log
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        log = StreamLog.open(directory, config)
        for i in range(1, log.last_index + 1, per_segment // 4):
            log.term_at(i)
        gc.collect()
        reopened = (tracemalloc.get_traced_memory()[0] - before) / log.last_index
        tracemalloc.stop()
        log.close()
        return sealed[0] / sealed[1], reopened, per_segment

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as d:
        small = retained(Path(d) / "small", 1 << 20, 3, 28)
        large = retained(Path(d) / "large", 8 << 20, 2, 5)
        out["memory per sealed entry, 1 MiB segments (B)"] = small[0]
        out["memory per sealed entry, 8 MiB segments (B)"] = large[0]
        # per sealed entry = per entry + per segment / entries per segment: two sizes, two equations
        per_segment = (small[0] - large[0]) / (1 / small[2] - 1 / large[2])
        out["memory per sealed entry, its segment's share aside (B)"] = small[0] - per_segment / small[2]
        out["memory per sealed segment (B)"] = per_segment
        out["memory per entry, reopened, 1 MiB segments all in use (B)"] = small[1]

        log = StreamLog.open(Path(d) / "small", LogConfig(fsync=False, tail_cache_bytes=0, segment_bytes=1 << 20))
        sealed_end = log.active_base_index - 1
        rng = random.Random(7)
        indexes = [rng.randint(1, sealed_end - 64) for _ in range(20_000)]
        offsets = [index - 1 for index in indexes]
        for label, lookup, calls in (("term_at, random sealed index", lambda i, _o: log.term_at(i), 20_000),
                                     ("entries, 1 at a random sealed index", lambda i, _o: log.entries(i, i + 1), 20_000),
                                     ("entries, 64 from a random sealed index",
                                      lambda i, _o: log.entries(i, i + 64, 1 << 20), 1_000),
                                     ("read, 1 MiB from a random sealed offset",
                                      lambda _i, o: log.read(o, 1 << 20, sealed_end), 100)):
            times = []
            for _ in range(5):
                started = time.process_time_ns()
                for k in range(calls):
                    lookup(indexes[k], offsets[k])
                times.append((time.process_time_ns() - started) / calls)
            out[f"{label} (ns)"] = statistics.median(times)
        assert [e.index for e in log.entries(indexes[0], indexes[0] + 64)] == list(range(indexes[0], indexes[0] + 64))
        log.close()
    return out


def main() -> None:
    compare_source_trees("sealed_index_cost", __doc__, _measure, 3,
                         lambda key: "B" if key.startswith("memory") else "ns", lambda key: 2 if key.startswith("memory") else 0)


if __name__ == "__main__":
    main()

"""Log storage benchmark: append throughput vs the disk's limit, sequential read speed,
and random-offset lookup cost as the log grows.

Run: .venv/bin/python -m benchmarks.bench_log [--quick] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import struct
import tempfile
import time
from pathlib import Path

from benchmarks.report import Report, median_seconds
from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.raft.types import Entry, EntryType

MiB = 1 << 20
GiB = 1 << 30
ENTRY_BYTES = 16 * 1024
RECORDS_PER_BATCH = 16


class BatchSource:
    """One reusable 16 KiB RecordBatch v2 buffer whose base offset and timestamp are patched per
    append (the log copies payloads into its write buffer, so reuse is safe)."""

    def __init__(self, size: int = ENTRY_BYTES) -> None:
        self.buf = bytearray(os.urandom(size))
        struct.pack_into(">qi", self.buf, 0, 0, size - 12)
        self.buf[16] = 2
        struct.pack_into(">i", self.buf, 23, RECORDS_PER_BATCH - 1)

    def entry(self, index: int, offset: int) -> Entry:
        struct.pack_into(">q", self.buf, 0, offset)
        struct.pack_into(">qq", self.buf, 27, 1_700_000_000_000 + index, 1_700_000_000_000 + index)
        return Entry(index, 1, EntryType.DATA, self.buf)


def append_vs_limit(directory: Path, total: int) -> tuple[float, float]:
    """(limit, append) in bytes/s. The limit: a plain file written in 1 MiB writes, fdatasync
    after each. The log: 16 KiB entries, one append call each, one sync per MiB. The disk is
    shared and noisy, so the two alternate MiB by MiB and see the same conditions. Payloads are
    made (fresh immutable bytes, as a producer's batches arrive) outside the timed part."""
    path = directory / "plain.bin"
    block = os.urandom(MiB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    log = StreamLog.open(directory / "append", LogConfig(fsync=True))
    source = BatchSource()
    per_sync = MiB // ENTRY_BYTES
    plain_seconds = log_seconds = 0.0
    try:
        index, offset = 1, 0
        for _ in range(total // MiB):
            start = time.perf_counter()
            os.write(fd, block)
            os.fdatasync(fd)
            plain_seconds += time.perf_counter() - start
            entries = []
            for _ in range(per_sync):
                entry = source.entry(index, offset)
                entries.append(Entry(index, 1, EntryType.DATA, bytes(entry.data)))
                index += 1
                offset += RECORDS_PER_BATCH
            start = time.perf_counter()
            for entry in entries:
                log.append([entry])
            log.sync_now()
            log_seconds += time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink()
        log.delete()
    return total / plain_seconds, total / log_seconds


def build_log(log: StreamLog, total: int) -> None:
    """Grow `log` to about `total` bytes of 16 KiB batches (no fsync: only reads are measured)."""
    source = BatchSource()
    per_call = 64
    while log.size_bytes < total:
        index = log.last_index + 1
        offset = log.log_end_offset
        batch = []
        for k in range(per_call):
            entry = source.entry(index + k, offset + k * RECORDS_PER_BATCH)
            batch.append(Entry(entry.index, 1, EntryType.DATA, bytes(entry.data)))
        log.append(batch)


def read_all(log: StreamLog, max_bytes: int = MiB) -> int:
    offset = log.log_start_offset
    end = log.log_end_offset
    total = 0
    while offset < end:
        result = log.read(offset, max_bytes, end)
        total += sum(len(b) for b in result.buffers)
        offset = result.next_offset
    return total


def read_all_copying(log: StreamLog, max_bytes: int = MiB) -> int:
    offset = log.log_start_offset
    end = log.log_end_offset
    total = 0
    while offset < end:
        result = log.read(offset, max_bytes, end)
        total += len(b"".join(result.buffers))
        offset = result.next_offset
    return total


def lookup_times(log: StreamLog, samples: int, seed: int = 1) -> tuple[list[float], list[float]]:
    """Seconds of read(offset, 1) at random offsets: first pass (pages of the mapping not yet
    faulted in) and second pass over the same offsets (steady state of a running broker)."""
    rng = random.Random(seed)
    end = log.log_end_offset
    offsets = [rng.randrange(log.log_start_offset, end) for _ in range(samples)]
    passes = []
    for _ in range(2):
        times = []
        for offset in offsets:
            start = time.perf_counter()
            log.read(offset, 1)
            times.append(time.perf_counter() - start)
        passes.append(times)
    return passes[0], passes[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where to put benchmark data")
    args = parser.parse_args()
    append_size, read_size, small, large = (
        (32 * MiB, 128 * MiB, 16 * MiB, 256 * MiB) if args.quick else (GiB, 2 * GiB, 100 * MiB, 4 * GiB))
    free = shutil.disk_usage(args.dir).free
    if free < large + append_size + GiB:
        raise SystemExit(f"not enough free space in {args.dir}: {free / GiB:.1f} GiB")
    root = Path(tempfile.mkdtemp(prefix="bench-log-", dir=args.dir))
    report = Report("bench_log" + ("_quick" if args.quick else ""))
    try:
        rounds = 4
        limits, appends = [], []
        started = time.perf_counter()
        for _ in range(rounds):
            limit, appended = append_vs_limit(root, append_size // rounds)
            limits.append((time.perf_counter() - started, limit / MiB))
            appends.append((time.perf_counter() - started, appended / MiB))
        # The plain file written with a sync per MiB is the same-run baseline of the log's appends.
        report.throughput("append 16 KiB entries, sync per MiB", appends, "MiB/s")
        report.throughput("disk limit: 1 MiB writes + fdatasync", limits, "MiB/s", baseline=True)
        limits = [value * MiB for _, value in limits]
        appends = [value * MiB for _, value in appends]
        ratios = [a / b for a, b in zip(appends, limits, strict=True)]
        report.add("disk limit: 1 MiB writes + fdatasync each", statistics.median(limits) / MiB, "MiB/s",
                   note=f"{rounds} rounds x {append_size // rounds // MiB} MiB; "
                        f"range {min(limits) / MiB:.0f}-{max(limits) / MiB:.0f}")
        report.add("append 16 KiB entries, sync per MiB", statistics.median(appends) / MiB, "MiB/s",
                   note=f"range {min(appends) / MiB:.0f}-{max(appends) / MiB:.0f}; interleaved MiB by MiB")
        report.add("append / disk limit", statistics.median(ratios), "ratio", goal=0.70,
                   note=f"median of rounds; range {min(ratios):.2f}-{max(ratios):.2f}")

        log = StreamLog.open(root / "big", LogConfig(fsync=False))
        build_log(log, read_size)
        read_all(log)  # warm the page cache
        size = log.size_bytes
        seconds = median_seconds(lambda: read_all(log), repeats=3)
        report.add(f"read {size / GiB:.2f} GiB log from start by offset", size / seconds / 1e9, "GB/s", goal=1.5,
                   note="zero-copy memoryviews, 1 MiB reads")
        seconds = median_seconds(lambda: read_all_copying(log), repeats=3)
        report.add("same, joining each read into bytes", size / seconds / 1e9, "GB/s",
                   note="one copy, for reference")

        small_log = StreamLog.open(root / "small", LogConfig(fsync=False))
        build_log(small_log, small)
        build_log(log, large)
        # Lookups measure the index path: without the tail cache, which would serve most of a
        # small log from memory and flatter the ratio.
        no_cache = LogConfig(fsync=False, tail_cache_bytes=0)
        small_log.close()
        log.close()
        small_log = StreamLog.open(root / "small", no_cache)
        log = StreamLog.open(root / "big", no_cache)
        samples = 2000 if not args.quick else 500
        for segment_log in (small_log, log):  # load every segment's indexes first
            for offset in range(segment_log.log_start_offset, segment_log.log_end_offset, 64 * MiB // 1024):
                segment_log.read(offset, 1)
        cold_small_times, warm_small_times = lookup_times(small_log, samples)
        cold_large_times, warm_large_times = lookup_times(log, samples)
        # The small log is the baseline the large log's lookups are held against.
        report.latency(f"random lookup, {small_log.size_bytes / MiB:.0f} MiB log",
                       [t * 1e6 for t in warm_small_times], "us", baseline=True)
        report.latency(f"random lookup, {log.size_bytes / GiB:.2f} GiB log", [t * 1e6 for t in warm_large_times], "us")
        cold_small, warm_small, cold_large, warm_large = (
            statistics.median(t) for t in (cold_small_times, warm_small_times, cold_large_times, warm_large_times))
        report.add(f"median random lookup, {small_log.size_bytes / MiB:.0f} MiB log", warm_small * 1e6, "us",
                   note=f"{small_log.segment_count} segment(s); first touch {cold_small * 1e6:.1f} us")
        report.add(f"median random lookup, {log.size_bytes / GiB:.2f} GiB log", warm_large * 1e6, "us",
                   note=f"{log.segment_count} segments; first touch {cold_large * 1e6:.1f} us")
        report.add("lookup time large / small", warm_large / warm_small, "ratio", goal=1.5, higher_is_better=False,
                   note="read(offset, 1), tail cache off, mapping warm")
        report.add("same, first touch of each page", cold_large / cold_small, "ratio",
                   note="includes minor page faults of a fresh mapping")
        small_log.close()
        log.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report.finish()


if __name__ == "__main__":
    main()

"""Micro-benchmark of the log's write path outside the broker: why new page-cache pages cost so
much here, and which file-I/O change cuts the kernel time per MB.

    .venv/bin/python -m benchmarks.append_io [--mb 256] [--rounds 5] [--batch-kb 64] [--per-commit 4]

Each variant writes `--mb` MiB to a fresh file as the log does: one writev (a 32-byte header and
the payload per entry) per append of `--batch-kb`, one fdatasync per `--per-commit` appends
(a group commit). Variants, in alternating order round by round:

  base      one writev per append: NOT the broker's path (see below)
  dontneed  posix_fadvise(DONTNEED) of the fsync'd range older than `--keep-mb` (the tail cache)
  sfr       sync_file_range(SYNC_FILE_RANGE_WRITE) of each append's range right after the writev
  onewrite  one writev per group commit (all its appends together): what the broker does
  falloc    fallocate(FALLOC_FL_KEEP_SIZE) 64 MiB ahead of the end (fallocN: N MiB)

Reported: the process's CPU user/sys and wall in microseconds per MiB (medians of the rounds), and
the ratio to base per round (median). Then a catch-up read of a written file from its start
(pread 1 MiB) after base (pages cached) and after dontneed (from disk). CPU of kernel threads
(writeback, the journal) is not in the process's rusage; wall time includes waiting for them.

What it showed on the 2-core dev VM (ext4 without a journal on virtio-blk, no memory-cgroup
limit, no reclaim during the runs): the write's copy is a few per cent of the kernel time; new
pages cost ext4's delayed-allocation bookkeeping per 4 KiB block (ext4_da_get_block_prep), the
page allocation with its memcg charge, and fdatasync's writeback (the virtio queue kick is a VM
exit). dontneed saves nothing (nothing was being reclaimed) and makes catch-up reads 2-4x slower;
sfr costs 1.5-2.4x; falloc saves 5-25 % here but did not measurably lower the broker's CPU per
record (bench_replication --vdl-only --baseline); onewrite (fewer, larger writev) saves the most.

The broker already writes that way: a replica's Ready loop appends everything proposed or received
while the last sync ran with one StreamLog.append (one writev) and then syncs, so each log gets one
writev per fdatasync, on the leader and on its followers (counted on a 3-node cluster under
bench_replication's load: writev == fdatasync on every node; pinned by
tests/unit/raft/test_group_commit_writes.py). Holding appends back in memory to write them from
the sync's worker thread (a prototype) saved no write call and moved no CPU per record
(bench_replication --vdl-only --baseline: leader 1.00x, follower 0.96x, within the noise).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.report import Report

MiB = 1 << 20
HEADER = 32

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
SYNC_FILE_RANGE_WRITE = 2
FALLOC_FL_KEEP_SIZE = 1


def _vmstat() -> dict[str, int]:
    out = {}
    with open("/proc/vmstat") as f:
        for line in f:
            key, value = line.split()
            out[key] = int(value)
    return out


def write_file(path: Path, variant: str, total: int, batch: int, per_commit: int, keep: int) -> dict[str, float]:
    payload = os.urandom(batch)
    header = bytes(HEADER)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    written = 0
    dropped = 0
    allocated = 0
    appends = 0
    pending: list[bytes] = []
    before = resource.getrusage(resource.RUSAGE_SELF)
    vm_before = _vmstat()
    start = time.perf_counter()
    try:
        while written < total:
            if variant.startswith("falloc") and written + 2 * (HEADER + batch) > allocated:
                chunk = int(variant[len("falloc"):] or 64) * MiB
                if _libc.fallocate(fd, FALLOC_FL_KEEP_SIZE, allocated, chunk) != 0:
                    raise OSError(ctypes.get_errno(), "fallocate")
                allocated += chunk
            if variant == "onewrite":
                pending += (header, payload)
            else:
                os.writev(fd, [header, payload])
                if variant == "sfr":
                    _libc.sync_file_range(fd, written, HEADER + batch, SYNC_FILE_RANGE_WRITE)
            written += HEADER + batch
            appends += 1
            if appends % per_commit == 0 or written >= total:
                if pending:
                    os.writev(fd, pending)
                    pending = []
                os.fdatasync(fd)
                if variant == "dontneed" and written - keep > dropped:
                    end = (written - keep) & ~(MiB - 1)  # whole MiB steps: fewer calls
                    if end > dropped:
                        os.posix_fadvise(fd, dropped, end - dropped, os.POSIX_FADV_DONTNEED)
                        dropped = end
        wall = time.perf_counter() - start
    finally:
        os.close(fd)
    after = resource.getrusage(resource.RUSAGE_SELF)
    vm_after = _vmstat()
    mb = written / MiB
    return {"user_us_per_mb": (after.ru_utime - before.ru_utime) / mb * 1e6,
            "sys_us_per_mb": (after.ru_stime - before.ru_stime) / mb * 1e6,
            "wall_us_per_mb": wall / mb * 1e6,
            "pgalloc_per_mb": (vm_after["pgalloc_normal"] - vm_before["pgalloc_normal"]) / mb,
            "pgsteal_per_mb": sum(vm_after[k] - vm_before[k] for k in ("pgsteal_kswapd", "pgsteal_direct")) / mb}


def read_file(path: Path) -> dict[str, float]:
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    position = 0
    try:
        while position < size:
            position += len(os.pread(fd, MiB, position))
        wall = time.perf_counter() - start
    finally:
        os.close(fd)
    after = resource.getrusage(resource.RUSAGE_SELF)
    mb = size / MiB
    return {"user_us_per_mb": (after.ru_utime - before.ru_utime) / mb * 1e6,
            "sys_us_per_mb": (after.ru_stime - before.ru_stime) / mb * 1e6,
            "wall_us_per_mb": wall / mb * 1e6}


VARIANTS = ("base", "dontneed", "sfr", "onewrite", "falloc")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-kb", type=int, default=64)
    parser.add_argument("--per-commit", type=int, default=4)
    parser.add_argument("--keep-mb", type=int, default=64)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--dir", default=None, help="where the files go (default: a temp dir under /tmp)")
    args = parser.parse_args()
    variants = args.variants.split(",")
    total, batch, keep = args.mb * MiB, args.batch_kb * 1024, args.keep_mb * MiB
    results: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    reads: dict[str, list[dict[str, float]]] = {"cached (after base)": [], "from disk (after dontneed)": []}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        directory = Path(tmp)
        for round_no in range(args.rounds):
            order = variants if round_no % 2 == 0 else variants[::-1]
            for variant in order:
                path = directory / f"{variant}.log"
                results[variant].append(write_file(path, variant, total, batch, args.per_commit, keep))
                if variant == "base":
                    reads["cached (after base)"].append(read_file(path))
                elif variant == "dontneed":
                    reads["from disk (after dontneed)"].append(read_file(path))
                path.unlink()
    load = os.getloadavg()

    def med(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    def ratio(variant: str, key: Callable[[dict[str, float]], float]) -> float:
        return statistics.median(key(v) / key(b) for v, b in zip(results[variant], results["base"], strict=True))

    def cpu(r: dict[str, float]) -> float:
        return r["user_us_per_mb"] + r["sys_us_per_mb"]

    report = Report("append_io")
    report.side_by_side(
        f"append file I/O: {args.mb} MiB per run, {args.batch_kb} KiB appends, fdatasync every {args.per_commit}, "
        f"{args.rounds} alternating rounds, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        ("variant", "user us/MB", "sys us/MB", "wall us/MB", "cpu/base", "wall/base", "pgalloc/MB", "pgsteal/MB"),
        [(variant, f"{med(results[variant], 'user_us_per_mb'):.0f}", f"{med(results[variant], 'sys_us_per_mb'):.0f}",
          f"{med(results[variant], 'wall_us_per_mb'):.0f}",
          f"{ratio(variant, cpu):.2f}" if "base" in results else "",
          f"{ratio(variant, lambda r: r['wall_us_per_mb']):.2f}" if "base" in results else "",
          f"{med(results[variant], 'pgalloc_per_mb'):.0f}", f"{med(results[variant], 'pgsteal_per_mb'):.0f}")
         for variant in variants])
    report.side_by_side("catch-up read", ("pages", "user us/MB", "sys us/MB", "wall us/MB"),
                        [(name, f"{med(rows, 'user_us_per_mb'):.0f}", f"{med(rows, 'sys_us_per_mb'):.0f}",
                          f"{med(rows, 'wall_us_per_mb'):.0f}") for name, rows in reads.items() if rows])
    if "base" in results:
        for variant in variants:
            if variant != "base":
                report.add(f"{variant} / base, CPU per MB", ratio(variant, cpu), "ratio", higher_is_better=False)
                report.add(f"{variant} / base, wall per MB", ratio(variant, lambda r: r["wall_us_per_mb"]), "ratio",
                           higher_is_better=False)
    report.finish()

if __name__ == "__main__":
    main()

"""A broker process with a memory watch (the soak's `--memwatch NODE`): runs
vdl_broker.server.main as usual; in the node named by SOAK_MEMWATCH_NODE it also traces Python
allocations (tracemalloc, 1 frame) and every SOAK_MEMWATCH_EVERY seconds appends one JSON line
to SOAK_MEMWATCH_OUT/memwatch-node<id>-<pid>.jsonl: the process's RSS, anonymous RSS and
threads, the bytes tracemalloc holds (what Python allocated and still references), the
objects the garbage collector tracks by type (top 25), and the allocation
sites that grew most since the first line (top 25). What Python holds against what the
process holds tells a Python leak from native memory (Rust, Arrow, the allocator) or a
cache filling to its bound. SOAK_MEMWATCH_NODE=0 watches every node. Costs CPU and memory:
diagnosis only, never in the suite. tracemalloc, the costly part, distorts what it watches:
it keeps a record per live allocation in glibc's heap and churns it, so a traced broker's
anonymous memory and glibc's free bytes grow several times faster than an untraced one's
(a 10-minute soak: the traced node 108 -> 385 MB anonymous and 24 -> 75 MB free in malloc,
the two untraced nodes of the same run 83 -> 143-158 MB; untraced brokers hold 3 -> 8-12 MB
free in malloc). Read RSS and mallinfo2 from a run with SOAK_MEMWATCH_TRACE=0 (no
tracemalloc, the rest kept), allocation sites from a traced one.

SOAK_MALLOC_KNOBS sets glibc's allocator per node (mallopt, periodic malloc_trim; see
__main__ below) to compare nodes of one run. What it showed (15-minute runs of the soak's
workload without Spark, restarts or moves, `--rolling-every 100000 --reassign-every 100000
--no-spark`): past the tail caches' fill (~400 s) the C heap's live bytes (mallinfo2 in use)
move by +0.1 to +0.8 MB per 5 minutes, while the footprint moves in steps of 1 MB or more
(pymalloc's 1 MiB arenas, the main heap's top, other anonymous maps) in either direction, so a
7-minute window reads anywhere from -1 to +16 %/h of a ~300 MB RSS. malloc_trim(0) every 60 s on
every node did not flatten it (within a process +13.0 +- 1.7 %/h, against +8.1 +- 1.8 without;
a trimmed follower's main heap still +2.4 MB per 5 minutes with +0.2 MB in use): the free bytes
sit in pages shared with live chunks, which trimming cannot return."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import sys
import threading
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

from vdl_broker.server import main as broker_main
from vdl_broker.server.main import load_config, main


def status() -> dict[str, float]:
    values = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "Threads"):
            values[key] = float(value.split()[0])
    return {"rss_mb": values["VmRSS"] / 1e3, "anon_mb": values["RssAnon"] / 1e3,
            "file_mb": values["RssFile"] / 1e3, "threads": values["Threads"]}


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                       "fsmblks", "uordblks", "fordblks", "keepcost")]


def malloc_mb() -> dict[str, float]:
    """glibc's mallinfo2: bytes malloc holds from the system (main arena and the others, plus
    mmapped blocks), in use, and free inside it (fragmentation a cache's churn leaves)."""
    try:
        function = ctypes.CDLL(None).mallinfo2
    except (AttributeError, OSError):
        return {}
    function.restype = _Mallinfo2
    info = function()
    return {"malloc_arena_mb": round(info.arena / 1e6, 2), "malloc_mmap_mb": round(info.hblkhd / 1e6, 2),
            "malloc_used_mb": round(info.uordblks / 1e6, 2), "malloc_free_mb": round(info.fordblks / 1e6, 2)}


def smaps_mb() -> dict[str, Any]:
    """Resident anonymous memory by who mapped it (/proc/self/smaps): the main arena's brk heap,
    glibc's other arenas (heaps in mappings of at most 64 MiB, 64 MiB-aligned), pymalloc's
    arenas (anonymous mappings of exactly 1 MiB in CPython 3.10+), and the rest (thread stacks,
    glibc's mmapped chunks, extensions' own maps); and the resident bytes of the mapped files
    (libraries, segments), the 40 largest by name."""
    sizes = {"heap": 0, "arenas": 0, "pymalloc": 0, "other": 0}
    files: dict[str, int] = {}  # resident kB of each mapped file
    kind = None
    name = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/smaps").read_text().splitlines():
            if not line[0].isupper() or "-" in line.split(" ", 1)[0]:  # a mapping's first line
                fields = line.split()
                low, high = (int(x, 16) for x in fields[0].split("-"))
                name = fields[5] if len(fields) > 5 else ""
                if name == "[heap]":
                    kind = "heap"
                elif name:
                    kind = None  # a file, the stack, vdso
                elif high - low == 1 << 20:
                    kind = "pymalloc"
                elif low % (64 << 20) == 0 and high - low <= 64 << 20:
                    kind = "arenas"
                else:
                    kind = "other"
            elif kind is not None and line.startswith("Anonymous:"):
                sizes[kind] += int(line.split()[1])
            elif kind is None and name.startswith("/") and line.startswith("Rss:"):
                files[name] = files.get(name, 0) + int(line.split()[1])
    largest = dict(sorted(files.items(), key=lambda item: -item[1])[:40])
    return {**{f"anon_{k}_mb": round(v / 1e3, 2) for k, v in sizes.items()},
            "file_rss_kb": largest, "file_rss_mb": round(sum(files.values()) / 1e3, 2)}


def apply_knobs(libc: ctypes.CDLL, knobs: dict[str, int]) -> None:
    """glibc's mallopt for this process (as its MALLOC_*_ environment variables would, but per
    node): arena_max (M_ARENA_MAX), mmap_threshold (M_MMAP_THRESHOLD, which also stops the
    threshold from rising), trim_threshold (M_TRIM_THRESHOLD)."""
    params = {"arena_max": -8, "mmap_threshold": broker_main.M_MMAP_THRESHOLD,
              "trim_threshold": broker_main.M_TRIM_THRESHOLD}
    for name, value in knobs.items():
        if name in params and not libc.mallopt(params[name], value):
            raise SystemExit(f"mallopt({name}={value}) failed")


def trim(libc: ctypes.CDLL, every: float, start: float) -> None:
    """malloc_trim(0) on a fixed schedule (a timer of this diagnostic thread, nothing waited on):
    every `every` seconds from `start` seconds after the process started."""
    time.sleep(start)
    while True:
        libc.malloc_trim(0)
        time.sleep(every)


def arrow_mb() -> dict[str, Any]:
    """pyarrow's memory pool (its own allocator, not glibc's), once pyarrow is loaded."""
    if "pyarrow" not in sys.modules:
        return {}
    import pyarrow

    pool = pyarrow.default_memory_pool()
    return {"arrow_backend": pool.backend_name, "arrow_allocated_mb": round(pool.bytes_allocated() / 1e6, 2),
            "arrow_max_mb": round(pool.max_memory() / 1e6, 2)}


def watch(out: Path, every: float) -> None:
    first: tracemalloc.Snapshot | None = None
    started = time.monotonic()
    while True:
        time.sleep(every)
        grown = []
        if tracemalloc.is_tracing():
            snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
            if first is None:
                first = snapshot
            grown = [{"site": str(stat.traceback[0]), "size_kb": round(stat.size / 1e3, 1),
                      "diff_kb": round(stat.size_diff / 1e3, 1), "count_diff": stat.count_diff}
                     for stat in snapshot.compare_to(first, "lineno")[:25]]
        kinds = Counter(type(o).__name__ for o in gc.get_objects())
        traced, peak = tracemalloc.get_traced_memory()
        line: dict[str, Any] = {"age_s": round(time.monotonic() - started, 1), **status(),
                                "traced_mb": round(traced / 1e6, 2), "traced_peak_mb": round(peak / 1e6, 2),
                                **malloc_mb(), **smaps_mb(), **arrow_mb(), "gc_objects": sum(kinds.values()), "types": dict(kinds.most_common(25)),
                                "grown": grown}
        with out.open("a") as stream:
            stream.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    config = load_config(sys.argv[1:])
    # Allocator knobs for one node, to compare nodes of one run: SOAK_MALLOC_KNOBS is JSON,
    # {"<node id>": {"arena_max": 2, "mmap_threshold": 262144, "trim_every": 30, "trim_from": 300}, ...}:
    # trim_every calls malloc_trim(0) every that many seconds from trim_from seconds after the start.
    knobs = json.loads(os.environ.get("SOAK_MALLOC_KNOBS", "{}")).get(str(config.node_id), {})
    if knobs:
        libc = ctypes.CDLL(None)
        apply_knobs(libc, knobs)
        broker_main.keep_freed_buffers = lambda: False  # these knobs, not the broker's own thresholds
        if knobs.get("trim_every"):
            threading.Thread(target=trim, args=(libc, float(knobs["trim_every"]), float(knobs.get("trim_from", 0))), daemon=True,
                             name="memwatch-trim").start()
    if os.environ.get("SOAK_MEMWATCH_NODE") in (str(config.node_id), "0"):
        if os.environ.get("SOAK_MEMWATCH_TRACE", "1") != "0":  # 0: no tracemalloc (its own cost), the rest kept
            tracemalloc.start(1)
        directory = Path(os.environ.get("SOAK_MEMWATCH_OUT", "."))
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / f"memwatch-node{config.node_id}-{os.getpid()}.jsonl"
        target.write_text(json.dumps({"knobs": knobs}) + "\n")
        threading.Thread(target=watch, args=(target, float(os.environ.get("SOAK_MEMWATCH_EVERY", "20"))),
                         daemon=True, name="memwatch").start()
    sys.exit(main(sys.argv[1:]))

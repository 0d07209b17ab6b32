"""`--memory-limit SIZE`: a benchmark, and every process it starts, in a memory cgroup of SIZE.

Why: on a VM that hands the memory its guest frees back to the host (free page reporting,
ballooning), the first write into a page the guest has not used lately costs a host fault. On
this project's 2-core VM, writing 3 GiB into the page cache took 6.9 s of system CPU with 18 GiB
free, and 0.9 s inside a 512 MiB cgroup, where the kernel reclaims the cgroup's own older pages
and each write lands in a page it has just used. A broker that has run for a while has its memory
full of page cache and writes into reclaimed pages, like the second case; a benchmark on a
fresh machine pays the first case for every byte its brokers store. Both are real costs: the
option says which one a run measures (the report gets a row naming the limit).

A cgroup starts empty, though: until its page cache reaches the limit, the run writes into
first-touch pages all the same (bench_replication in 1536M: the leader's CPU per record 0.74 us
in the first round, 0.29 in the second; with the cgroup filled first, 0.31 and 0.30). So the run
first fills it (`fill_page_cache`): a scratch file of SIZE, written and synced, whose clean pages
the kernel reclaims for the run's own writes.

Needs root (it makes a cgroup: v2's memory.max, or v1's memory.limit_in_bytes).
"""

from __future__ import annotations

import argparse
import atexit
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchmarks.report import Report

CGROUP_ROOT = Path("/sys/fs/cgroup")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """'1536M', '1.5G', '512k' or bytes -> bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?)(?:I?B)?\s*", text.upper())
    if match is None:
        raise ValueError(f"--memory-limit: {text!r} is not a size (e.g. 1536M, 1.5G)")
    size = int(float(match.group(1)) * _UNITS[match.group(2)])
    if size < 64 << 20:
        raise ValueError(f"--memory-limit: {text!r} is under 64M: the brokers themselves would not fit")
    return size


def enter_memory_cgroup(limit_bytes: int, name: str) -> Path:
    """Move this process (and so what it starts from now on) into a new memory cgroup of
    `limit_bytes`; it leaves the cgroup and removes it at exit. Raises SystemExit saying why
    when the machine does not let it (not root, no memory controller)."""
    group = _make_group(f"{name}-{os.getpid()}", limit_bytes)

    def leave() -> None:
        killed = oom_kills(group)
        if killed:
            # What the run printed before (a peer that never came up, a timeout) does not say it.
            print(f"--memory-limit {_size_text(limit_bytes)}: the memory cgroup killed {killed} process(es) of this run "
                  "for lack of memory (the kernel's log, dmesg, names them): its results are not valid. Give a "
                  "larger limit, or run fewer peers", file=sys.stderr)
        try:
            (group.parent / "cgroup.procs").write_text(str(os.getpid()))
            group.rmdir()
        except OSError:
            pass  # a child still in it: the (empty) group stays until someone removes it

    atexit.register(leave)
    return group


def oom_kills(group: Path) -> int:
    """How many processes the kernel killed in `group` for lack of memory (the oom_kill count of
    v2's memory.events, or of v1's memory.oom_control)."""
    for name in ("memory.events", "memory.oom_control"):
        try:
            lines = (group / name).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    return 0


_FILL_CHUNK = 4 << 20
_SYNC_EVERY = 64 << 20  # clean pages are reclaimed at once; dirty ones would first be written back


def fill_page_cache(size_bytes: int, directory: str | None = None) -> int | None:
    """Write `size_bytes` into the page cache of this process's cgroup and leave them there:
    a scratch file, synced as it grows, unlinked at once and held open until exit (its pages
    stay cached, nothing is left on disk). Returns the descriptor holding it; None, writing
    nothing, where the directory is memory itself (tmpfs: its pages are never reclaimed, and a
    cgroup full of them would leave the run no room)."""
    directory = directory or tempfile.gettempdir()
    if _filesystem(directory) == "tmpfs":
        print(f"--memory-limit: {directory} is a tmpfs, the cgroup's page cache is not filled first")
        return None
    fd, path = tempfile.mkstemp(prefix="vdl-page-cache-fill-", dir=directory)
    os.unlink(path)
    chunk = bytes(_FILL_CHUNK)
    written = 0
    while written < size_bytes:
        written += os.write(fd, chunk[:size_bytes - written])
        if written % _SYNC_EVERY == 0 or written >= size_bytes:
            os.fdatasync(fd)
    atexit.register(os.close, fd)
    return fd


def _filesystem(directory: str) -> str:
    """The type of the filesystem `directory` is on (the longest mount point above it)."""
    path, best, kind = os.path.realpath(directory), "", ""
    with open("/proc/self/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            point = fields[1].replace("\\040", " ")
            if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
                best, kind = point, fields[2]
    return kind


def _make_group(name: str, limit_bytes: int) -> Path:
    try:
        if (CGROUP_ROOT / "cgroup.controllers").exists():  # cgroup v2, unified
            parent = CGROUP_ROOT / Path("/proc/self/cgroup").read_text().split("::", 1)[1].strip().lstrip("/")
            if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
                (parent / "cgroup.subtree_control").write_text("+memory")
            group, limit_file = parent / name, "memory.max"
        else:  # v1: the memory hierarchy on its own
            group, limit_file = CGROUP_ROOT / "memory" / name, "memory.limit_in_bytes"
        group.mkdir(exist_ok=True)
        (group / limit_file).write_text(str(limit_bytes))
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError as error:
        raise SystemExit(f"--memory-limit needs a memory cgroup this process may create and join "
                         f"(root, a memory controller under {CGROUP_ROOT}): {error}") from error
    return group


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--memory-limit", metavar="SIZE", type=_size_argument,
                        help="run in a memory cgroup of SIZE (e.g. 1536M), with all the processes the run "
                             "starts: the page cache at its steady state, as on a broker that has run a while "
                             "(needs root; benchmarks/memory_limit.py says why)")


def apply(args: argparse.Namespace, name: str, needs: Sequence[tuple[str, int]] = ()) -> None:
    """Enter the cgroup --memory-limit asks for (nothing without it) and fill its page cache:
    before starting anything. `needs`: what the run's processes take at their peak, (what, bytes)
    each; a limit below their sum is refused, naming them, rather than the kernel killing one of
    them mid-run (a JVM peer that never comes up shows only as a timeout)."""
    if args.memory_limit is None:
        return
    least = sum(size for _, size in needs)
    if args.memory_limit < least:
        parts = " + ".join(f"{what} {_size_text(size)}" for what, size in needs)
        raise SystemExit(f"--memory-limit {_size_text(args.memory_limit)} is below what this run's processes "
                         f"need at their peak: {parts} = {_size_text(least)}; give at least that")
    enter_memory_cgroup(args.memory_limit, name)
    fill_page_cache(args.memory_limit)


def _size_text(size: int) -> str:
    """96M, 1.5G, 7.5G: the way --memory-limit is written (1536M prints as 1.5G)."""
    if size >= 1 << 30 and size % (1 << 29) == 0:
        return f"{size / (1 << 30):g}G"
    return f"{size >> 20}M"


def add_row(report: Report, args: argparse.Namespace) -> None:
    if args.memory_limit is not None:
        report.add("memory cgroup limit (--memory-limit)", args.memory_limit / (1 << 30), "GiB",
                   note="every process of the run inside it: its page cache reclaimed and reused")


def _size_argument(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("--memory-limit: ")) from error

"""A tier writer's Delta table in memory over many commits: level, not growing with each commit
(delta-rs's snapshot of a kept DeltaTable, tables/delta.py RELOAD_AFTER_COMMITS; deltalake's
allocator, vdl_broker/tables/__init__.py DELTALAKE_ALLOCATOR)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.unit.tables.test_table_delta import offsets
from vdl_broker.tables.delta import RELOAD_AFTER_COMMITS

TIER = "component"  # each writer measured in a Python process of its own
SLOW = True  # 2 x 500 Delta commits: ~16 s of CPU, a minute or more on a loaded machine

REPO = Path(__file__).resolve().parents[3]
JEMALLOC_CONF = "_RJEM_MALLOC_CONF"  # what deltalake's jemalloc (tikv-jemallocator, prefixed) reads

# One writer, 100 commits to warm (past the first checkpoint), then 400 more (no compaction: 400
# more files in the table's state); prints the growth of the process's resident heap over those
# (RssAnon: delta-rs's memory is Rust's, not Python's).
WRITER = """
import os
import sys

import vdl_broker.tables.delta as delta
from tests.soak.soak import anonymous_rss_mb
from tests.unit.tables.test_table_delta import SCHEMA, rows

delta.RELOAD_AFTER_COMMITS = int(sys.argv[2])
target = delta.DeltaTarget(sys.argv[1], SCHEMA, [])


def commit(n):
    for _ in range(n):
        offset = target.next_offset("app", 0)
        target.append(rows(offset, offset + 40), "app", offset + 39)


commit(100)
before = anonymous_rss_mb(os.getpid())
commit(400)
print(anonymous_rss_mb(os.getpid()) - before)
"""


def heap_growth(path: Path, reload_after_commits: int) -> float:
    """MB the writer's process heap grew over its last 400 commits."""
    run = subprocess.run([sys.executable, "-c", WRITER, str(path), str(reload_after_commits)], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert offsets(path) == list(range(500 * 40))  # every row once, in order
    return float(run.stdout.split()[-1])


def test_a_long_lived_writers_table_does_not_grow_with_its_commits(tmp_path: Path) -> None:
    """A writer keeps its DeltaTable between commits; delta-rs adds each commit a kept table is
    brought up to as a piece of its snapshot (~65 KB each here), consolidated only by a fresh load
    or a compaction: a tier writer's memory grew by tens of MB between compactions, and without
    them without bound. Loaded afresh once RELOAD_AFTER_COMMITS versions past its load, the same
    400 commits grow it by well under what they grow a table kept from its first load (what every
    writer did before): ~11 MB against ~22 here, what the 400 more files take either way
    included."""
    kept = heap_growth(tmp_path / "kept", 1 << 30)
    reloaded = heap_growth(tmp_path / "reloaded", RELOAD_AFTER_COMMITS)
    assert reloaded < 0.75 * kept, f"{reloaded:.1f} MB more after 400 commits, {kept:.1f} MB when never reloaded"


# What the broker's tier writer loads: vdl_broker.tables, then deltalake (through tables/delta.py)
# with jemalloc's statistics printed at exit, which list the options jemalloc runs with.
ALLOCATOR = """
import os
import sys

import vdl_broker.tables

given = os.environ.get("_RJEM_MALLOC_CONF")
os.environ["_RJEM_MALLOC_CONF"] = f"{given},stats_print:true" if given else "stats_print:true"
from vdl_broker.tables.delta import DeltaTarget
from tests.unit.tables.test_table_delta import SCHEMA, rows

target = DeltaTarget(sys.argv[1], SCHEMA, [])
target.next_offset("app", 0)
target.append(rows(0, 40), "app", 39)
"""


def jemalloc_options(path: Path, environ: dict[str, str]) -> dict[str, str]:
    run = subprocess.run([sys.executable, "-c", ALLOCATOR, str(path)], cwd=REPO, capture_output=True, text=True,
                         timeout=300, env=environ)
    assert run.returncode == 0, run.stderr
    return dict(re.findall(r"^\s*opt\.(\w+): (\S+)", run.stderr, re.M))


def test_deltalake_returns_freed_pages_at_once(tmp_path: Path) -> None:
    """deltalake allocates from its own jemalloc. With jemalloc's default decay (10 s) a tier
    writer's node grew ~7 %/h over an hour's soak where the other nodes grew ~2, and single tiered
    nodes side by side for 28 minutes grew +6 to +11 %/h against +0.5 to +1.4 with freed pages
    returned at once: what importing vdl_broker.tables (the broker's only way to deltalake) gives
    jemalloc, unless the operator chose otherwise."""
    environ = {k: v for k, v in os.environ.items() if k != JEMALLOC_CONF}
    options = jemalloc_options(tmp_path / "ours", environ)
    assert (options["dirty_decay_ms"], options["muzzy_decay_ms"], options["narenas"]) == ("0", "0", "1")
    theirs = jemalloc_options(tmp_path / "theirs", {**environ, JEMALLOC_CONF: "dirty_decay_ms:5000"})
    assert theirs["dirty_decay_ms"] == "5000"

"""A tier writer's Delta table in memory over many commits: level, not growing with each commit
(delta-rs's snapshot of a kept DeltaTable, tables/delta.py RELOAD_AFTER_COMMITS)."""

from __future__ import annotations

from pathlib import Path

from tests.unit.tables.test_table_delta import SCHEMA, offsets, rows
from vdl_broker.tables.delta import DeltaTarget

SLOW = True  # 500 Delta commits: ~8 s of CPU, a minute or more on a loaded machine


def anonymous_mb() -> float:
    """This process's resident heap (RssAnon): delta-rs's memory is Rust's, not Python's."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1e3
    raise AssertionError("no RssAnon in /proc/self/status")


def test_a_long_lived_writers_table_does_not_grow_with_its_commits(tmp_path: Path) -> None:
    """A writer keeps its DeltaTable between commits; delta-rs adds each commit a kept table is
    brought up to as a piece of its snapshot (~65 KB each here), consolidated only by a fresh load
    or a compaction: a tier writer's memory grew by tens of MB between compactions, and without
    them without bound. Loaded afresh once RELOAD_AFTER_COMMITS versions past its load, 400 more
    commits (no compaction: 400 more files in the table's state) add less than 12 MB (22 MB
    before)."""
    target = DeltaTarget(str(tmp_path / "t"), SCHEMA, [])
    start = target.next_offset("app", 0)

    def commit(n: int) -> None:
        for _ in range(n):
            offset = target.next_offset("app", 0)
            target.append(rows(offset, offset + 40), "app", offset + 39)

    commit(100)  # past the first checkpoint and a first reload: warm
    before = anonymous_mb()
    commit(400)
    grown = anonymous_mb() - before
    assert offsets(tmp_path / "t") == list(range(start, 500 * 40))  # every row once, in order
    assert grown < 12.0, f"{grown:.1f} MB more after 400 commits"

"""The node's tail cache budget: the logs' caches together stay within it, each within its own
capacity and an equal share; a log that closes gives its share back."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_testing import data_entry

from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.log.tail_cache import ENTRY_OVERHEAD, CacheBudget

pytestmark = pytest.mark.unit

ENTRY_BYTES = ENTRY_OVERHEAD + 61 + 939  # a batch header and 939 body bytes, and the objects holding them


def fill(log: StreamLog, count: int) -> None:
    for _ in range(count):
        log.append([data_entry(log.last_index + 1, 1, log.log_end_offset, body_size=939)])


def open_log(directory: Path, budget: CacheBudget, capacity: int = 64 << 20) -> StreamLog:
    return StreamLog.open(directory, LogConfig(tail_cache_bytes=capacity, fsync=False), cache_budget=budget)


def test_the_caches_of_many_logs_stay_within_the_node_budget(tmp_path: Path) -> None:
    budget = CacheBudget(100 * ENTRY_BYTES)
    logs = [open_log(tmp_path / f"s{i}", budget) for i in range(4)]
    assert budget.share == 25 * ENTRY_BYTES
    for log in logs:
        fill(log, 40)
    assert [len(log.cache) for log in logs] == [25] * 4  # not 4 x 64 MiB: 100 entries in all
    assert budget.bytes <= budget.limit
    # The newest entries are the ones kept: a tailing read is still served from memory.
    assert logs[0].cache.first_index == 16 and logs[0].entries(16, 41)[-1].index == 40

    late = open_log(tmp_path / "late", budget)  # one more log: every other cache shrinks at its next append
    assert budget.share == 20 * ENTRY_BYTES
    for log in logs:
        fill(log, 1)
    assert [len(log.cache) for log in logs] == [20] * 4 and len(late.cache) == 0
    for log in logs[:3]:
        log.close()  # their shares come back
    assert budget.share == 50 * ENTRY_BYTES
    fill(late, 60)
    assert len(late.cache) == 50 and budget.bytes <= budget.limit


def test_a_log_keeps_its_own_capacity_within_a_larger_share(tmp_path: Path) -> None:
    budget = CacheBudget(1 << 30)
    log = open_log(tmp_path / "s", budget, capacity=10 * ENTRY_BYTES)
    fill(log, 30)
    assert len(log.cache) == 10
    uncached = open_log(tmp_path / "t", budget, capacity=0)  # a log without a cache takes no share
    assert len(budget) == 1 and budget.share == 1 << 30
    uncached.close()
    log.close()
    assert len(budget) == 0


def test_a_negative_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="a tail cache budget must be >= 0 bytes, got -5"):
        CacheBudget(-5)


def test_retention_drops_the_cached_entries_it_deletes_from_the_log(tmp_path: Path) -> None:
    budget = CacheBudget(1 << 30)
    log = StreamLog.open(tmp_path / "s", LogConfig(segment_bytes=5 * ENTRY_BYTES, fsync=False), cache_budget=budget)
    fill(log, 40)
    assert len(log.cache) == 40
    log.sync_now()
    assert log.delete_through(30) > 0
    first = log.first_index
    # The cache held 40 entries after retention kept only the last few before: it now starts
    # where the log does (a cache larger than its log is memory no reader can use).
    assert log.cache.first_index == first and len(log.cache) == 40 - first + 1
    assert log.cache.bytes == len(log.cache) * ENTRY_BYTES and log.cache.first_offset == first - 1
    assert [e.index for e in log.entries(first, 41)] == list(range(first, 41))
    fill(log, 2)
    assert log.cache.first_index == first and len(log.cache) == 42 - first + 1

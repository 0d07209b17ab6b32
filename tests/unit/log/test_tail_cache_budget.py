"""The node's tail cache budget: the logs' caches together stay within it, each within its own
capacity; over it, those holding more than an equal share give entries back, the least recently
appended first; a log that closes gives its entries back."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from log_testing import data_entry

from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.log.tail_cache import ENTRY_OVERHEAD, CacheBudget, TailCache

pytestmark = pytest.mark.unit

ENTRY_BYTES = ENTRY_OVERHEAD + 61 + 939  # a batch header and 939 body bytes, and the objects holding them


def fill(log: StreamLog, count: int) -> None:
    for _ in range(count):
        log.append([data_entry(log.last_index + 1, 1, log.log_end_offset, body_size=939)])


def open_log(directory: Path, budget: CacheBudget, capacity: int = 64 << 20) -> StreamLog:
    return StreamLog.open(directory, LogConfig(tail_cache_bytes=capacity, fsync=False), cache_budget=budget)


def held(logs: list[StreamLog]) -> list[int]:
    return [len(log.cache) for log in logs]


def test_the_caches_of_many_logs_stay_within_the_node_budget(tmp_path: Path) -> None:
    budget = CacheBudget(100 * ENTRY_BYTES)
    logs = [open_log(tmp_path / f"s{i}", budget) for i in range(4)]
    assert budget.share == 25 * ENTRY_BYTES
    for log in logs:
        fill(log, 40)
    # Each appended in turn: each took what the others did not need, then gave back to the next
    # down to its share. Not 4 x 64 MiB: 100 entries in all.
    assert held(logs) == [25] * 4
    assert budget.bytes == sum(log.cache.bytes for log in logs) == budget.limit
    # The newest entries are the ones kept: a tailing read is still served from memory.
    assert logs[0].cache.first_index == 16 and logs[0].entries(16, 41)[-1].index == 40

    late = open_log(tmp_path / "late", budget)  # one more log: a smaller share
    assert budget.share == 20 * ENTRY_BYTES
    fill(late, 10)
    # Those the smaller share left over it give back first, down to it: s0, then s1.
    assert held(logs) == [20, 20, 25, 25] and len(late.cache) == 10
    fill(logs[3], 5)  # s2, appended to less recently, gives back before s3
    assert held([*logs, late]) == [20, 20, 20, 30, 10] and budget.bytes == budget.limit
    fill(late, 20)  # s3 gives back down to the share, then late itself
    assert held([*logs, late]) == [20, 20, 20, 20, 20] and budget.bytes == budget.limit
    fill(logs[3], 10)
    assert held([*logs, late]) == [20, 20, 20, 20, 20]
    for log in logs[:3]:
        log.close()  # their entries come back, and their shares
    assert budget.share == 50 * ENTRY_BYTES and budget.bytes == 40 * ENTRY_BYTES
    fill(late, 70)
    assert len(late.cache) == 80 and len(logs[3].cache) == 20 and budget.bytes == budget.limit


def test_a_busy_log_keeps_a_long_tail_beside_idle_ones(tmp_path: Path) -> None:
    """An equal split gave each of 10 logs a tenth of the budget, the busy one too: its tailing
    readers and followers more than 10 entries behind read from disk while the idle logs' shares
    held 2 entries each."""
    budget = CacheBudget(100 * ENTRY_BYTES)
    idle = [open_log(tmp_path / f"idle{i}", budget) for i in range(9)]
    busy = open_log(tmp_path / "busy", budget)
    for log in idle:
        fill(log, 2)
    fill(busy, 200)
    assert len(busy.cache) == 100 - 9 * 2 and held(idle) == [2] * 9
    assert busy.cache.first_index == 200 - 82 + 1 and budget.bytes == budget.limit
    # The idle logs keep their entries up to their share as the busy one goes on.
    fill(idle[0], 8)
    assert len(idle[0].cache) == 10 and len(busy.cache) == 82 - 8


def test_no_cache_gives_back_below_its_share(tmp_path: Path) -> None:
    budget = CacheBudget(100 * ENTRY_BYTES)
    first, second = open_log(tmp_path / "a", budget), open_log(tmp_path / "b", budget)
    fill(first, 50)
    fill(second, 80)  # the budget is full with first at its share: second keeps only its own
    assert (len(first.cache), len(second.cache)) == (50, 50)
    assert second.cache.first_index == 31


def test_caches_left_over_a_smaller_share_are_listed_once_an_eighth_of_the_logs_joined() -> None:
    """Listing every cache at every join would cost thousands squared at a start: the caches are
    listed again once an eighth of the logs joined since, and until then the budget holds an
    eighth more at most."""
    entry = ENTRY_OVERHEAD + 100
    budget = CacheBudget(160 * entry)
    caches = [TailCache(1 << 20, budget) for _ in range(16)]
    for n, cache in enumerate(caches):
        for i in range(10):
            cache.append(i + 1, 1, 0, bytes(100), -1, -1, 0, 0)
        cache.evict()
        assert cache.bytes == 10 * entry and budget.bytes == (n + 1) * 10 * entry

    def fill(cache: TailCache, count: int) -> None:
        first = cache.first_index or 1
        for i in range(len(cache), len(cache) + count):
            cache.append(first + i, 1, 0, bytes(100), -1, -1, 0, 0)
        cache.evict()

    fill(caches[0], 1)  # over the budget: the caches are listed (16 joined), caches[0] gives back
    assert len(caches[0]) == 10 and budget.bytes == budget.limit

    late = [TailCache(1 << 20, budget) for _ in range(2)]  # 18 logs: a share of 8 entries
    fill(late[0], 8)  # 2 joined of 18: not listed yet, the budget 8 entries over
    assert [len(c) for c in caches] == [10] * 16 and budget.bytes == 168 * entry
    third = TailCache(1 << 20, budget)  # 3 of 19 joined (share 8): listed, the first give back
    fill(third, 1)
    assert [len(c) for c in caches[:5]] == [8, 8, 8, 8, 9] and budget.bytes == budget.limit


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 5), st.integers(0, 3000)), max_size=80))
def test_appends_keep_the_budget_counted_and_bounded(appends: list[tuple[int, int, int]]) -> None:
    """Whatever the appends: the budget's count is the caches' bytes, within the limit; each
    cache within its capacity; and another's append leaves a cache at least its share less one
    entry (a cache drops whole entries) or what it held."""
    budget = CacheBudget(40_000)
    caches = [TailCache(capacity, budget) for capacity in (10_000, 25_000, 64 << 20, 64 << 20)]
    indexes = [1] * len(caches)
    for which, count, size in appends:
        before = [cache.bytes for cache in caches]
        cache = caches[which]
        for _ in range(count):
            cache.append(indexes[which], 1, 0, bytes(size), -1, -1, 0, 0)  # an entry without data
            indexes[which] += 1
        cache.evict()
        assert budget.bytes == sum(c.bytes for c in caches) <= budget.limit
        assert all(c.bytes <= c.capacity for c in caches)
        for other, (c, was) in enumerate(zip(caches, before, strict=True)):
            if other != which:
                assert c.bytes >= min(was, budget.share - ENTRY_OVERHEAD - 3000)


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

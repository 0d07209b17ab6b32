"""A log's terms of the entries it appended (TermRuns): answered from memory, right after every
change of the log, whatever its tail cache holds."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from log_testing import data_entry
from test_log_write_failure import FailingWriter

from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.log import segment as segment_module
from vdl_broker.log.term_runs import TermRuns

Operation = tuple[str, int]


@given(st.integers(0, 5), st.lists(st.tuples(st.sampled_from(["append", "append", "append", "new term", "truncate",
                                                                 "drop before", "restart"]),
                                                st.integers(0, 40)), max_size=60))
def test_runs_answer_as_the_entries_they_were_told_of(first: int, operations: list[Operation]) -> None:
    runs = TermRuns(first)
    terms: dict[int, int] = {}  # the model: index -> term of what is covered
    term = 1
    for name, n in operations:
        if name == "append":
            for _ in range(n % 5 + 1):
                terms[runs.end] = term
                runs.appended(runs.end, term)
        elif name == "new term":
            term += 1
        elif name == "truncate":
            cut = runs.first + n % (runs.end - runs.first + 2)
            runs.truncate_from(cut)
            terms = {i: t for i, t in terms.items() if i < cut}
        elif name == "drop before":
            cut = runs.first + n % (runs.end - runs.first + 2)
            runs.drop_before(cut)
            terms = {i: t for i, t in terms.items() if i >= cut}
        else:
            runs.restart(runs.end + n)
            terms = {}
        assert {i: runs.term_at(i) for i in range(runs.first - 2, runs.end + 2) if runs.term_at(i) is not None} \
            == terms
        assert runs.first + len(terms) == runs.end


def test_an_entry_out_of_order_is_refused() -> None:
    runs = TermRuns(10)
    with pytest.raises(ValueError, match="term runs end at index 10, not 11"):
        runs.appended(11, 1)


def test_terms_of_appended_entries_are_not_read_from_segments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No tail cache: each of Raft's term lookups (the commit index's, an append's previous
    # entry's) read the entry's header from its segment, on every produce request.
    log = StreamLog.open(tmp_path / "s", LogConfig(tail_cache_bytes=0, fsync=False, segment_bytes=400))
    log.append([data_entry(i, 1 + i // 4, i - 1, 1, 1000 + i, 60) for i in range(1, 11)])

    def from_segment(index: int) -> int:
        raise AssertionError(f"the term of entry {index} was read from its segment")

    monkeypatch.setattr(log, "_term_from_segment", from_segment)
    assert [log.term_at(i) for i in range(0, 11)] == [0, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3]
    log.truncate_suffix(6)
    log.append([data_entry(i, 4, i - 1, 1, 2000 + i, 60) for i in (6, 7)])
    assert [log.term_at(i) for i in range(1, 8)] == [1, 1, 1, 2, 2, 4, 4]
    monkeypatch.undo()
    log.close()
    # Reopened: the entries before the last are read from the segments, as written.
    reopened = StreamLog.open(tmp_path / "s", LogConfig(tail_cache_bytes=0, fsync=False, segment_bytes=400))
    assert [reopened.term_at(i) for i in range(0, 8)] == [0, 1, 1, 1, 2, 2, 4, 4]
    reopened.close()


def test_a_failed_append_leaves_no_term_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = StreamLog.open(tmp_path / "s", LogConfig(tail_cache_bytes=0, fsync=False, segment_bytes=1000))
    log.append([data_entry(i, 1, i - 1, 1, 1000 + i, 60) for i in range(1, 5)])
    # The first chunk fills the active segment and is written, the roll succeeds, the next fails.
    monkeypatch.setattr(segment_module, "writev_all", FailingWriter(1000 - log.size_bytes + 300, errno.ENOSPC))
    with pytest.raises(OSError):
        log.append([data_entry(i, 2, i - 1, 1, 1000 + i, 60) for i in range(5, 35)])
    monkeypatch.undo()
    assert log.last_index == 4
    log.append([data_entry(i, 3, i - 1, 1, 1000 + i, 60) for i in range(5, 35)])
    assert [log.term_at(i) for i in range(1, 35)] == [1] * 4 + [3] * 30
    log.close()


def test_retention_and_a_reset_move_the_runs(tmp_path: Path) -> None:
    config = LogConfig(tail_cache_bytes=0, fsync=False, segment_bytes=400)
    log = StreamLog.open(tmp_path / "s", config)
    log.append([data_entry(i, i, i - 1, 1, 1000 + i, 60) for i in range(1, 13)])
    log.sync_now()
    log.config.retention_bytes = 0
    log.apply_retention(now_ms=0)
    log.config.retention_bytes = -1
    assert (log.first_index, log.last_index, log.term_at(12)) == (13, 12, 12)
    log.append([data_entry(13, 13, 12, 1, 2000, 60)])
    assert [log.term_at(i) for i in (12, 13)] == [12, 13]
    log.reset(40, 20, 100)
    assert log.term_at(39) == 20
    log.append([data_entry(40, 21, 100, 1, 3000, 60)])
    assert log.term_at(40) == 21
    log.close()

"""A failed append (disk full, quota, I/O error) leaves the log exactly as it was.

The failure is injected with a fake segment writer (a short write, then the error) or a fake
index flush (a roll that cannot write the sealed segment's indexes); the last test runs into a
real full tmpfs when mounting one is permitted.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from log_testing import data_entry, noop_entry

from tests.support.disk import fill, small_disk
from vdl_broker.log import LogConfig, StreamLog, recovery
from vdl_broker.log import segment as segment_module
from vdl_broker.log.fileio import writev_all
from vdl_broker.log.index_file import IndexFile
from vdl_broker.raft.types import Entry

TIER = "component"  # real sockets, threads or sleeps in this process


def config(**overrides: object) -> LogConfig:
    values: dict[str, object] = dict(segment_bytes=1000, index_interval_bytes=150, tail_cache_bytes=1 << 20,
                                     fsync=False)
    values.update(overrides)
    return LogConfig(**values)  # type: ignore[arg-type]


def entries_after(log: StreamLog, count: int, body: int = 60) -> list[Entry]:
    out: list[Entry] = []
    offset = log.log_end_offset
    for k in range(count):
        index = log.last_index + 1 + k
        if index % 5 == 0:
            out.append(noop_entry(index, 1))
        else:
            out.append(data_entry(index, 1, offset, 2, 1000 + index, body))
            offset += 2
    return out


def snapshot(log: StreamLog) -> tuple[object, ...]:
    files = sorted((p.name, p.stat().st_size) for p in log.directory.glob("*.log"))
    return (log.last_index, log.last_term, log.log_end_offset, log.segment_count, files,
            [bytes(e.data) for e in log.entries(log.first_index, log.last_index + 1)])


class FailingWriter:
    """Writes the first `budget` bytes it is given in total, then raises `error` (ENOSPC)."""

    def __init__(self, budget: int, error: int = errno.ENOSPC) -> None:
        self.budget = budget
        self.error = error
        self.calls = 0

    def __call__(self, fd: int, parts: list[bytes | memoryview], total: int = -1) -> None:
        self.calls += 1
        data = b"".join(bytes(p) for p in parts)
        if len(data) <= self.budget:
            self.budget -= len(data)
            writev_all(fd, parts, total)
            return
        os.write(fd, data[: self.budget])
        self.budget = 0
        raise OSError(self.error, os.strerror(self.error))


@pytest.fixture
def log(tmp_path: Path) -> Iterator[StreamLog]:
    stream = StreamLog.open(tmp_path / "s", config())
    stream.append(entries_after(stream, 4))
    yield stream
    stream.close()


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EIO])
def test_short_write_then_error_leaves_nothing(log: StreamLog, monkeypatch: pytest.MonkeyPatch,
                                               code: int) -> None:
    before = snapshot(log)
    monkeypatch.setattr(segment_module, "writev_all", FailingWriter(50, code))
    batch = entries_after(log, 3)
    with pytest.raises(OSError) as caught:
        log.append(batch)
    assert caught.value.errno == code
    assert snapshot(log) == before
    monkeypatch.undo()
    log.append(batch)  # space is back: the same entries go in at the same place
    assert log.last_index == batch[-1].index
    after = snapshot(log)
    log.close()
    reopened = StreamLog.open(log.directory, config())
    assert snapshot(reopened) == after
    reopened.close()


def test_failure_after_a_roll_removes_the_new_segment(log: StreamLog, monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(log)
    batch = entries_after(log, 30)  # several segments' worth
    # The first chunk fills the active segment, the roll succeeds, the next chunk fails.
    writer = FailingWriter(1000 - log.size_bytes + 300)
    monkeypatch.setattr(segment_module, "writev_all", writer)
    with pytest.raises(OSError):
        log.append(batch)
    assert writer.calls >= 2
    assert snapshot(log) == before
    monkeypatch.undo()
    log.append(batch)
    after = snapshot(log)
    assert after[3] > before[3]  # rolled this time
    log.close()
    reopened = StreamLog.open(log.directory, config())
    assert snapshot(reopened) == after
    reopened.close()


def test_roll_that_cannot_write_indexes_is_undone(log: StreamLog, monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(log)
    batch = entries_after(log, 30)

    def no_space(self: IndexFile) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(IndexFile, "flush", no_space)
    with pytest.raises(OSError):
        log.append(batch)
    assert snapshot(log) == before
    monkeypatch.undo()
    log.append(batch)
    after = snapshot(log)
    log.close()
    reopened = StreamLog.open(log.directory, config())
    assert snapshot(reopened) == after
    reopened.close()


def test_real_full_tmpfs(tmp_path: Path) -> None:
    with small_disk(tmp_path / "small", "256k") as mount:
        log = StreamLog.open(mount / "s", config(segment_bytes=64 << 10))
        appended = 0
        failures = 0
        while failures < 3:
            batch = entries_after(log, 7, body=3000)
            before = snapshot(log)
            try:
                log.append(batch)
                appended += len(batch)
            except OSError as error:
                assert error.errno == errno.ENOSPC
                assert snapshot(log) == before
                failures += 1
        assert appended > 0
        full = snapshot(log)
        log.close()
        reopened = StreamLog.open(mount / "s", config(segment_bytes=64 << 10))
        assert snapshot(reopened) == full
        reopened.close()


def test_truncation_on_a_full_disk(tmp_path: Path) -> None:
    """Regression (chaos campaign: a follower's Raft group died when, its disk full, it dropped
    its unsynced entries): a segment that had ever been read was cut by copying its prefix to a
    new file, which a full disk refuses. With no reader holding its pages it is now cut in place
    (no space needed); while one does, the copy's failure leaves the log as it was, to retry."""
    with small_disk(tmp_path / "small", "512k"):
        log = StreamLog.open(tmp_path / "small" / "s", config(segment_bytes=1 << 20, tail_cache_bytes=0))
        log.append(entries_after(log, 40, body=3000))
        held = log.read(0, 1 << 30).buffers  # mapped pages of the active segment
        kept = [bytes(e.data) for e in log.entries(1, 21)]
        fill(tmp_path / "small" / "ballast")
        with pytest.raises(OSError) as raised:
            log.truncate_suffix(21)  # a reader holds the pages: the copy needs space
        assert raised.value.errno == errno.ENOSPC
        assert log.last_index == 40 and not list(log.directory.glob("*.tmp"))
        del held
        log.truncate_suffix(21)  # nobody holds them now: cut in place, on the full disk
        assert log.last_index == 20
        assert [bytes(e.data) for e in log.entries(1, 21)] == kept
        log.close()
        reopened = StreamLog.open(tmp_path / "small" / "s", config(segment_bytes=1 << 20))
        assert reopened.last_index == 20
        assert [bytes(e.data) for e in reopened.entries(1, 21)] == kept
        reopened.close()


def test_conflict_truncation_across_segments_on_a_full_disk(tmp_path: Path) -> None:
    """Regression (make chaos: a follower's Raft group died cutting conflicting entries on a full
    disk): the cut deleted the later segments, then failed copying the kept prefix of the one
    it cuts into (a reader held its pages), and the log still claimed the deleted segments'
    entries. It now ends with that segment, whole, and a retry once the reader let go finishes
    the cut."""
    with small_disk(tmp_path / "small", "512k"):
        directory = tmp_path / "small" / "s"
        log = StreamLog.open(directory, config(segment_bytes=32 << 10, tail_cache_bytes=0))
        log.append(entries_after(log, 40, body=3000))
        bases = sorted(int(p.name.removesuffix(".log")) for p in directory.glob("*.log"))
        assert len(bases) >= 3
        target_base, next_base = bases[-2], bases[-1]
        # Near the end of the last sealed segment: the prefix to copy is larger than the last
        # segment, whose deletion is all the space the cut frees.
        cut = next_base - 2
        original = [bytes(e.data) for e in log.entries(1, log.last_index + 1)]
        held = log.read(log.offset_for_index(target_base - 1), 1).buffers  # pages of the segment cut
        fill(tmp_path / "small" / "ballast")
        with pytest.raises(OSError) as raised:
            log.truncate_suffix(cut)
        assert raised.value.errno == errno.ENOSPC
        assert sorted(int(p.name.removesuffix(".log")) for p in directory.glob("*.log")) == bases[:-1]
        assert log.last_index == next_base - 1 and log.segment_count == len(bases) - 1
        assert [bytes(e.data) for e in log.entries(1, next_base)] == original[:next_base - 1]
        assert log.log_end_offset == log.offset_for_index(next_base - 1)
        del held
        log.truncate_suffix(cut)
        assert log.last_index == cut - 1
        assert [bytes(e.data) for e in log.entries(1, cut)] == original[:cut - 1]
        log.close()
        reopened = StreamLog.open(directory, config(segment_bytes=32 << 10))
        assert reopened.last_index == cut - 1
        assert [bytes(e.data) for e in reopened.entries(1, cut)] == original[:cut - 1]
        reopened.close()


def test_a_log_opens_when_its_recovery_point_cannot_be_written(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # A node restarted on a full disk: the recovery point's move at open exited it with ENOSPC.
    log = StreamLog.open(tmp_path, config())
    log.append(entries_after(log, 40))  # several segments
    log.sync_now()
    log.close()
    active_base = sorted(tmp_path.glob("*.log"))[-1].name
    (tmp_path / recovery.RECOVERY_POINT_FILE).unlink()  # as a crash before the first move left it

    def full(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(recovery, "save_recovery_point", full)
    log = StreamLog.open(tmp_path, config())
    assert recovery.load_recovery_point(tmp_path) is None
    monkeypatch.undo()
    # Space again: the next sync moves it (to the active segment, as the open would have).
    log.append(entries_after(log, 1))
    log.sync_now()
    assert recovery.load_recovery_point(tmp_path) == int(active_base.removesuffix(".log"))
    log.close()

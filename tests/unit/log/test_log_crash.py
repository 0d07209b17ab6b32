"""Crash tests: cut the last segment and each index file at every byte within the last entries, flip
bytes, reopen. Recovery keeps every entry before the damage and nothing after it, and the indexes
agree with the log again."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
from log_testing import data_entry, noop_entry

from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.raft.types import Entry, EntryType

SLOW = True  # a minute or more: left out of make test-unit, run by make test

CONFIG = dict(segment_bytes=1200, index_interval_bytes=120, tail_cache_bytes=0, fsync=False)
HEADER = 25


def build(directory: Path, count: int = 40) -> list[Entry]:
    log = StreamLog.open(directory, LogConfig(**CONFIG))
    entries: list[Entry] = []
    offset = 0
    for index in range(1, count + 1):
        if index % 5 == 0:
            entry = noop_entry(index, 1)
        else:
            entry = data_entry(index, 1, offset, 2, 5000 + 10 * index, body_size=index % 7 * 3)
            offset += 2
        entries.append(entry)
        log.append([entry])
    log.sync_now()
    log.close()
    return entries


def last_segment(directory: Path) -> Path:
    return sorted(directory.glob("*.log"))[-1]


def entry_ends(entries: list[Entry], segment: Path) -> tuple[int, list[tuple[int, int]]]:
    """(first index of the segment, [(entry index, end position)] for its entries)."""
    first = int(segment.name[:20])
    position = 0
    ends = []
    for entry in entries[first - 1:]:
        position += HEADER + len(entry.data)
        ends.append((entry.index, position))
    return first, ends


def check(directory: Path, expected: list[Entry]) -> None:
    """The log holds exactly `expected`, and every index agrees with it (also after a rebuild)."""
    log = StreamLog.open(directory, LogConfig(**CONFIG))
    try:
        verify(log, expected)
    finally:
        log.close()
    # indexes written by recovery equal indexes rebuilt from scratch
    files = {p.name: p.read_bytes() for p in directory.iterdir() if p.suffix in (".ridx", ".index", ".timeindex")}
    for path in directory.iterdir():
        if path.suffix in (".ridx", ".index", ".timeindex"):
            path.unlink()
    log = StreamLog.open(directory, LogConfig(**CONFIG))
    for i in range(log.segment_count):
        log._ensure_loaded(i)
    log.close()
    rebuilt = {p.name: p.read_bytes() for p in directory.iterdir() if p.suffix in (".ridx", ".index", ".timeindex")}
    assert files == rebuilt


def verify(log: StreamLog, expected: list[Entry]) -> None:
    assert log.last_index == len(expected)
    got = log.entries(1, len(expected) + 1)
    assert [(e.index, e.term, e.type, bytes(e.data)) for e in got] == \
        [(e.index, e.term, e.type, bytes(e.data)) for e in expected]
    data = [e for e in expected if e.type == EntryType.DATA]
    end = int.from_bytes(bytes(data[-1].data)[:8], "big") + 2 if data else 0
    assert log.log_end_offset == end
    for entry in data:
        base = int.from_bytes(bytes(entry.data)[:8], "big")
        result = log.read(base + 1, 1)
        assert bytes(result.buffers[0]) == bytes(entry.data)
        assert log.index_for_offset(base) == entry.index
        assert log.offset_for_timestamp(5000 + 10 * entry.index - 5) == (base, 5000 + 10 * entry.index)
    assert b"".join(log.read(0, 1 << 30).buffers) == b"".join(bytes(e.data) for e in data)


def crash(directory: Path) -> None:
    """Turn a cleanly closed log into one that stopped without closing."""
    (directory / ".clean-shutdown").unlink()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Entry]]:
    directory = tmp_path_factory.mktemp("pristine") / "s"
    return directory, build(directory)


def fresh(pristine: tuple[Path, list[Entry]], tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(pristine[0], target)
    return target


def test_cut_last_segment_at_every_byte(pristine: tuple[Path, list[Entry]], tmp_path: Path) -> None:
    source, entries = pristine
    first, ends = entry_ends(entries, last_segment(source))
    size = ends[-1][1]
    start = ends[-4][1] if len(ends) > 4 else 0
    for cut in range(start, size):
        directory = fresh(pristine, tmp_path, "cut")
        crash(directory)
        with open(last_segment(directory), "r+b") as f:
            f.truncate(cut)
        kept = first - 1 + sum(1 for _, end in ends if end <= cut)
        check(directory, entries[:kept])


@pytest.mark.parametrize("suffix", [".ridx", ".index", ".timeindex"])
@pytest.mark.parametrize("clean", [False, True])
def test_cut_index_files_at_every_byte(pristine: tuple[Path, list[Entry]], tmp_path: Path,
                                       suffix: str, clean: bool) -> None:
    source, entries = pristine
    for segment in sorted(source.glob("*.log"))[-2:]:
        index = segment.with_suffix(suffix)
        size = index.stat().st_size
        for cut in range(max(0, size - 64), size):
            directory = fresh(pristine, tmp_path, "cut")
            if not clean:
                crash(directory)
            with open(directory / index.name, "r+b") as f:
                f.truncate(cut)
            check(directory, entries)
        directory = fresh(pristine, tmp_path, "gone")
        (directory / index.name).unlink()
        check(directory, entries)


def test_flip_bytes_in_last_segment(pristine: tuple[Path, list[Entry]], tmp_path: Path) -> None:
    source, entries = pristine
    first, ends = entry_ends(entries, last_segment(source))
    rng = random.Random(7)
    start = ends[-5][1] if len(ends) > 5 else 0
    for _ in range(60):
        position = rng.randrange(start, ends[-1][1])
        directory = fresh(pristine, tmp_path, "flip")
        crash(directory)
        with open(last_segment(directory), "r+b") as f:
            f.seek(position)
            byte = f.read(1)[0]
            f.seek(position)
            f.write(bytes([byte ^ (1 << rng.randrange(8))]))
        kept = first - 1 + sum(1 for _, end in ends if end <= position)
        check(directory, entries[:kept])


def test_flip_bytes_in_index_files(pristine: tuple[Path, list[Entry]], tmp_path: Path) -> None:
    source, entries = pristine
    rng = random.Random(11)
    segment = last_segment(source)
    for _ in range(60):
        index = segment.with_suffix(rng.choice([".ridx", ".index", ".timeindex"]))
        size = index.stat().st_size
        if not size:
            continue
        directory = fresh(pristine, tmp_path, "flip")
        crash(directory)
        position = rng.randrange(size)
        with open(directory / index.name, "r+b") as f:
            f.seek(position)
            byte = f.read(1)[0]
            f.seek(position)
            f.write(bytes([byte ^ (1 << rng.randrange(8))]))
        check(directory, entries)


def test_unsynced_segments_are_recovered_from_the_recovery_point(tmp_path: Path) -> None:
    """No sync since several rolls: recovery re-validates every segment after the last synced one,
    and damage in an earlier segment drops everything after it."""
    directory = tmp_path / "s"
    log = StreamLog.open(directory, LogConfig(**CONFIG))
    entries: list[Entry] = []
    for index in range(1, 31):
        entries.append(data_entry(index, 1, 2 * (index - 1), 2, 5000 + 10 * index))
        log.append(entries[-1:])
    log.sync_now()
    segments_before = len(list(directory.glob("*.log")))
    for index in range(31, 61):
        entries.append(data_entry(index, 1, 2 * (index - 1), 2, 5000 + 10 * index))
        log.append(entries[-1:])
    log._release()  # crash
    segments = sorted(directory.glob("*.log"))
    assert len(segments) > segments_before + 1
    damaged = segments[segments_before]  # first segment written after the sync
    first = int(damaged.name[:20])
    with open(damaged, "r+b") as f:
        f.seek(30)
        f.write(b"\xff")
    check(directory, entries[:first - 1])

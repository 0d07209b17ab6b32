"""The Delta side of tiering with a real deltalake: resume point, the conflict two writers of one
app id meet, adoption rules, compaction and vacuum keeping every row once; retention's limit."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from tests.unit.tables.test_table_convert import stored
from vdl_broker.cluster.stream_configs import TableSettings
from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.raft.types import Entry, EntryType
from vdl_broker.tables import writer as writer_module
from vdl_broker.tables.convert import TieringError, table_schema
from vdl_broker.tables.delta import DeltaTarget, TransactionConflict
from vdl_broker.tables.service import retention_limit
from vdl_broker.tables.writer import StreamTable

SCHEMA = pa.schema([pa.field("offset", pa.int64(), nullable=False), pa.field("value", pa.binary())])


def rows(start: int, end: int) -> pa.Table:
    return pa.table({"offset": pa.array(range(start, end), pa.int64()),
                     "value": pa.array([b"v%d" % i for i in range(start, end)])}, schema=SCHEMA)


def offsets(path: Path) -> list[int]:
    return sorted(DeltaTable(str(path)).to_pyarrow_table().column("offset").to_pylist())


def test_resume_after_the_last_committed_offset(tmp_path: Path) -> None:
    target = DeltaTarget(str(tmp_path / "t"), SCHEMA, [])
    assert target.transaction_version("app") is None
    assert target.next_offset("app", 7) == 7  # a new table: created, starts where asked
    target.append(rows(7, 10), "app", 9)
    assert target.next_offset("app", 0) == 10
    assert DeltaTarget(str(tmp_path / "t"), SCHEMA, []).transaction_version("app") == 9


def test_two_writers_of_one_app_id_never_write_an_offset_twice(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    old, new = DeltaTarget(path, SCHEMA, []), DeltaTarget(path, SCHEMA, [])
    assert old.next_offset("app", 0) == 0
    old.append(rows(0, 5), "app", 4)
    # Both read the table at offset 5; the deposed leader commits first, the new one loses.
    assert old.next_offset("app", 0) == new.next_offset("app", 0) == 5
    old.append(rows(5, 8), "app", 7)
    with pytest.raises(TransactionConflict):
        new.append(rows(5, 12), "app", 11)
    assert new.next_offset("app", 0) == 8
    new.append(rows(8, 12), "app", 11)
    assert offsets(tmp_path / "t") == list(range(12))
    # The same race on a table that does not exist yet.
    first, second = DeltaTarget(str(tmp_path / "u"), SCHEMA, []), DeltaTarget(str(tmp_path / "u"), SCHEMA, [])
    assert first.next_offset("app", 0) == second.next_offset("app", 0) == 0
    first.append(rows(0, 3), "app", 2)
    with pytest.raises(TransactionConflict):
        second.append(rows(0, 4), "app", 3)
    assert offsets(tmp_path / "u") == [0, 1, 2]


def test_another_streams_table_is_not_adopted(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    other = DeltaTarget(path, SCHEMA, [])
    other.next_offset("other-stream", 0)
    other.append(rows(0, 3), "other-stream", 2)
    with pytest.raises(TieringError, match="already holds rows that this stream did not write"):
        DeltaTarget(path, SCHEMA, []).next_offset("app", 0)
    empty = DeltaTarget(str(tmp_path / "empty"), SCHEMA, [])
    empty.next_offset("someone", 0)  # created, never written: free to adopt
    assert DeltaTarget(str(tmp_path / "empty"), SCHEMA, []).next_offset("app", 4) == 4



def test_a_table_with_column_mapping_is_not_adopted(tmp_path: Path) -> None:
    """Its files name columns by physical names, which format("vdl") cannot read history from."""
    path = str(tmp_path / "t")
    DeltaTable.create(path, SCHEMA, configuration={"delta.columnMapping.mode": "name"})
    with pytest.raises(TieringError, match=r"uses column mapping \(delta.columnMapping.mode = name\)"):
        DeltaTarget(path, SCHEMA, []).next_offset("app", 0)
    assert offsets(tmp_path / "t") == []

def test_compaction_and_vacuum_keep_every_row_once(tmp_path: Path) -> None:
    target = DeltaTarget(str(tmp_path / "t"), SCHEMA, [])
    target.next_offset("app", 0)
    for start in range(0, 50, 5):
        target.next_offset("app", 0)
        target.append(rows(start, start + 5), "app", start + 4)
    before = target.stats()
    assert (before.files, before.rows, before.first_offset, before.end_offset) == (10, 50, 0, 50)
    metrics = target.compact(1 << 20)
    assert metrics["numFilesRemoved"] == 10 and metrics["numFilesAdded"] == 1
    assert target.stats().files == 1
    assert len(target.vacuum(0)) == 10
    assert offsets(tmp_path / "t") == list(range(50))
    assert target.next_offset("app", 0) == 50


def test_retention_limit_keeps_what_the_table_does_not_hold(tmp_path: Path) -> None:
    log = StreamLog.open(tmp_path / "s", LogConfig(fsync=False, segment_bytes=1024))
    log.append([Entry(i + 1, 1, EntryType.DATA, stored(i * 3, [b"x", b"y", b"z"])) for i in range(4)])
    assert (log.log_start_offset, log.log_end_offset, log.first_index, log.last_index) == (0, 12, 1, 4)
    assert retention_limit(log, 4, None) == 0  # the table's end unknown: nothing
    assert retention_limit(log, 4, 0) == 0
    assert retention_limit(log, 4, 4) == 1  # offsets 0-2 (entry 1) in the table; 3 not
    assert retention_limit(log, 4, 6) == 2
    assert retention_limit(log, 3, 12) == 3  # all in the table: as far as applied
    log.close()


def _row_groups(path: Path) -> list[list[int]]:
    """Rows per Parquet row group, per data file of the table's current version."""
    import pyarrow.parquet as pq

    files = DeltaTable(str(path)).file_uris()
    return sorted([pq.ParquetFile(f.removeprefix("file://")).metadata.row_group(g).num_rows
                   for g in range(pq.ParquetFile(f.removeprefix("file://")).metadata.num_row_groups)] for f in files)


def test_appends_and_compaction_write_row_groups_of_at_most_row_group_rows(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Readers of an offset range skip row groups by their statistics: the brokers' files must
    have more than one (delta-rs's default made a big append one row group)."""
    monkeypatch.setattr("vdl_broker.tables.delta.ROW_GROUP_ROWS", 100)
    target = DeltaTarget(str(tmp_path / "t"), SCHEMA, [])
    target.next_offset("app", 0)
    target.append(rows(0, 250), "app", 249)
    target.next_offset("app", 0)
    target.append(rows(250, 300), "app", 299)
    assert _row_groups(tmp_path / "t") == [[50], [100, 100, 50]]
    target.compact(1 << 20)
    assert _row_groups(tmp_path / "t") == [[100, 100, 100]]
    assert offsets(tmp_path / "t") == list(range(300))


def _file_offsets(path: Path) -> list[list[int]]:
    """The offset column of each data file of the table's current version, in the file's order."""
    import pyarrow.parquet as pq

    return sorted(pq.read_table(f.removeprefix("file://"), columns=["offset"]).column(0).to_pylist()
                  for f in DeltaTable(str(path)).file_uris())


def test_an_append_of_many_chunks_writes_its_rows_in_offset_order(tmp_path: Path) -> None:
    """Tiering hands the writer one chunk per stored batch; delta-rs spread chunks over its
    partitions and wrote them interleaved (0..9999, 20000.., 10000..): format("vdl") then read
    every row group whose statistics overlapped its range and sorted them by a copy before its
    first batch. Rows go out in offset order, row groups with disjoint offset ranges."""
    chunked = pa.concat_tables([rows(start, start + 100) for start in range(0, 4000, 100)])
    assert chunked.column("offset").num_chunks == 40
    target = DeltaTarget(str(tmp_path / "t"), SCHEMA, [])
    target.next_offset("app", 0)
    target.append(chunked, "app", 3999)
    assert _file_offsets(tmp_path / "t") == [list(range(4000))]


def test_the_oldest_small_file_is_what_compaction_would_rewrite(tmp_path: Path) -> None:
    target = DeltaTarget(str(tmp_path / "t"), SCHEMA, [])
    assert target.oldest_small_file_ms(1 << 20) is None  # no table
    target.next_offset("app", 0)
    assert target.oldest_small_file_ms(1 << 20) is None  # no file
    for start in (0, 5):
        target.next_offset("app", 0)
        target.append(rows(start, start + 5), "app", start + 4)
    actions = pa.table(DeltaTable(str(tmp_path / "t")).get_add_actions(flatten=True))
    written = actions.column("modification_time").cast(pa.timestamp("ms")).cast(pa.int64()).to_pylist()
    assert target.oldest_small_file_ms(1 << 20) == min(written)
    assert target.oldest_small_file_ms(10) is None  # every file at or above the target: nothing to compact


class _Inline(Executor):
    """Runs each call at once on the caller's thread (unit tests start no threads)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as error:
            future.set_exception(error)
        return future


class _LeaderOnce:
    """A stream's partition that leads for one pass of the writer's loop, all of it in the table."""

    name = "events"
    log_start_offset = 0

    def __init__(self, end: int) -> None:
        self.last_stable_offset = end
        self._checks = 0

    @property
    def is_leader(self) -> bool:
        self._checks += 1
        return self._checks <= 1  # one pass of the leader's loop

    def changed_future(self) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future


def test_a_new_leader_compacts_a_table_whose_small_files_waited_past_the_interval(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compaction is due an interval after the oldest small file was written, not after the
    writer started: a stream whose leadership moved more often than the interval never
    compacted (its files, and every writer's memory of them, grew with each commit)."""
    settings = TableSettings(str(tmp_path / "t"), "raw", None, 1000, "none", compact_interval_ms=600_000,
                             compact_target_bytes=1 << 20, vacuum_interval_ms=0, vacuum_retention_ms=0)
    earlier = DeltaTarget(settings.path, table_schema(settings), [])
    earlier.next_offset("app", 0)
    for offset in range(3):  # a writer before this one: three small commits
        earlier.next_offset("app", 0)
        earlier.append(pa.Table.from_pylist([{"offset": offset, "value": b"v"}], schema=table_schema(settings)),
                       "app", offset)
    clock = time.time
    # Those commits were made 20 minutes ago (as a previous leader's, before a restart).
    monkeypatch.setattr(writer_module, "time", SimpleNamespace(time=lambda: clock() + 1200, monotonic=time.monotonic))
    table = StreamTable(_LeaderOnce(3), settings, "app", _Inline())
    asyncio.run(table._lead())
    assert DeltaTarget(settings.path, table_schema(settings), []).stats().files == 1
    assert offsets(tmp_path / "t") == [0, 1, 2]

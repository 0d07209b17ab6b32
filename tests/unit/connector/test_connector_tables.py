"""Planning and reading the table side of one offset space, against real Delta tables (the client
that answers configs and log starts is a stand-in: this tests the connector layer alone)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from vdl_client.routes import ANY_NODE
from vdl_connector.planning import OffsetRange
from vdl_connector.tables import TableLookup, TableRange, TableReadError, plan_reads, read_table_range

TS = pa.timestamp("us", tz="UTC")
HEADERS = pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))
SCHEMA = pa.schema([("offset", pa.int64()), ("timestamp", TS), ("key", pa.binary()), ("value", pa.binary()),
                    ("headers", HEADERS)])


def rows(start: int, end: int) -> pa.Table:
    return pa.table({"offset": pa.array(range(start, end), pa.int64()),
                     "timestamp": pa.array([1_700_000_000_000_000 + i for i in range(start, end)], TS),
                     "key": pa.array([None] * (end - start), pa.binary()),
                     "value": pa.array([b"v%d" % i for i in range(start, end)]),
                     "headers": pa.array([[("h", b"%d" % i)] if i % 2 else None for i in range(start, end)], HEADERS)},
                    schema=SCHEMA)


def table(path: Path, *ranges: tuple[int, int]) -> str:
    for start, end in ranges:
        write_deltalake(str(path), rows(start, end), mode="append")
    return str(path)


class Configs:
    """What the driver asks the cluster: each stream's table config and log start."""

    def __init__(self, paths: dict[str, str | None], log_starts: dict[str, int]) -> None:
        self.paths, self.log_starts = paths, log_starts
        self.describes = 0

    def call(self, route, request, what):  # noqa: ANN001, ANN201
        assert route == ANY_NODE  # every node answers configs from the replicated metadata
        self.describes += 1
        from vdl_wire.messages import DescribeConfigsResponse as R

        return R(results=[R.DescribeConfigsResult(resource_name=r.resource_name, configs=[
            R.DescribeConfigsResourceResult(name="vdl.table.path", value=self.paths.get(r.resource_name)),
            R.DescribeConfigsResourceResult(name="vdl.table.format", value="raw")]) for r in request.resources])

    def list_offsets(self, streams, timestamp):  # noqa: ANN001, ANN201
        assert timestamp == -2
        return {s: self.log_starts[s] for s in streams}


def test_below_the_log_start_from_the_table_the_rest_from_the_log(tmp_path: Path) -> None:
    path = table(tmp_path / "t", (0, 40), (40, 70), (70, 100))
    client = Configs({"s": path, "plain": None}, {"s": 60, "plain": 5})
    gaps: list[tuple[str, int, int]] = []
    tasks = plan_reads(client, TableLookup(), {"s": 10, "plain": 0}, {"s": 120, "plain": 9}, None, None,
                       lambda *gap: gaps.append(gap))
    table_tasks = [t for t in tasks if isinstance(t, TableRange)]
    log_tasks = [t for t in tasks if isinstance(t, OffsetRange)]
    assert [(t.start, t.end) for t in table_tasks] == [(10, 60)]
    assert [len(t.files) for t in table_tasks] == [2]  # the file of 70..99 is not needed
    assert sorted((t.stream, t.start, t.end, t.table) for t in log_tasks) == [("plain", 0, 9, None),
                                                                              ("s", 60, 120, path)]
    assert gaps == [] and client.describes == 1
    # minPartitions counts the tasks of the whole read, shared by the table and log parts by size.
    split = plan_reads(client, TableLookup(), {"s": 10}, {"s": 120}, 6, None, lambda *gap: gaps.append(gap))
    pieces = [(t.start, t.end, len(t.files)) for t in split if isinstance(t, TableRange)]
    assert pieces == [(10, 26, 1), (26, 43, 2), (43, 60, 1)]
    assert [(t.start, t.end) for t in split if isinstance(t, OffsetRange)] == [(60, 80), (80, 100), (100, 120)]
    halves = plan_reads(client, TableLookup(), {"s": 10}, {"s": 120}, 2, None, lambda *gap: gaps.append(gap))
    assert [(type(t).__name__, t.start, t.end) for t in halves] == [("TableRange", 10, 60), ("OffsetRange", 60, 120)]
    got = [b for b in read_table_range(table_tasks[0], include_headers=True)]
    offsets = [o for b in got for o in b.column("offset").to_pylist()]
    assert offsets == list(range(10, 60))
    first = got[0].to_pylist()[0]
    assert (first["topic"], first["partition"], first["timestampType"], first["value"]) == ("s", 0, 0, b"v10")
    assert first["headers"] is None and got[0].to_pylist()[1]["headers"] == [{"key": "h", "value": b"11"}]


def test_offsets_in_neither_are_a_gap_unless_read_from_earliest(tmp_path: Path) -> None:
    path = table(tmp_path / "t", (30, 50))
    client = Configs({"s": path}, {"s": 50})
    gaps: list[tuple[str, int, int]] = []
    tasks = plan_reads(client, TableLookup(), {"s": 10}, {"s": 60}, None, None, lambda *gap: gaps.append(gap))
    assert gaps == [("s", 10, 30)]
    assert [(type(t).__name__, t.start, t.end) for t in tasks] == [("TableRange", 30, 50), ("OffsetRange", 50, 60)]
    gaps.clear()
    plan_reads(client, TableLookup(), {"s": 10}, {"s": 60}, None, None, lambda *gap: gaps.append(gap),
               frozenset({"s"}))
    assert gaps == []


def test_earliest_is_the_tables_first_offset_when_it_reaches_the_log(tmp_path: Path) -> None:
    path = table(tmp_path / "t", (0, 50))
    lookup = TableLookup()
    assert lookup.earliest(Configs({"s": path}, {}), ["s"], {"s": 40}) == {"s": 0}
    assert lookup.earliest(Configs({"s": path}, {}), ["s"], {"s": 0}) == {"s": 0}
    # A table that stops short of the log start does not make the gap readable.
    assert TableLookup().earliest(Configs({"s": path}, {}), ["s"], {"s": 70}) == {"s": 70}


def test_a_task_reads_the_newer_version_when_its_files_were_compacted_away(tmp_path: Path) -> None:
    path = table(tmp_path / "t", *[(i, i + 10) for i in range(0, 100, 10)])
    client = Configs({"s": path}, {"s": 100})
    [task] = plan_reads(client, TableLookup(), {"s": 5}, {"s": 95}, None, None, lambda *gap: None)
    assert isinstance(task, TableRange) and len(task.files) == 10
    delta = DeltaTable(path)
    delta.optimize.compact()
    delta.vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False)
    offsets = [o for b in read_table_range(task, False) for o in b.column("offset").to_pylist()]
    assert offsets == list(range(5, 95))


def test_missing_rows_fail_the_task(tmp_path: Path) -> None:
    path = table(tmp_path / "t", (0, 10), (20, 30))
    with pytest.raises(TableReadError, match=r"offsets \[10, 30\) are not in its Delta table"):
        list(read_table_range(TableRange("s", 0, 30, path), False))


def test_files_whose_offset_ranges_interleave_are_read_in_offset_order(tmp_path: Path) -> None:
    """Compaction bin-packs files by size, not by offset: one file may hold 0..9 and 20..29 while
    another holds 10..19. A task reads the rows of all its files in offset order."""
    path = str(tmp_path / "t")
    write_deltalake(path, pa.concat_tables([rows(0, 10), rows(20, 30)]), mode="append")
    write_deltalake(path, rows(10, 20), mode="append")
    write_deltalake(path, rows(30, 40), mode="append")
    client = Configs({"s": path}, {"s": 40})
    [task] = plan_reads(client, TableLookup(), {"s": 0}, {"s": 40}, None, None, lambda *gap: None)
    assert isinstance(task, TableRange) and len(task.files) == 3
    for part in (task, TableRange("s", 0, 40, path), TableRange("s", 5, 25, path)):
        offsets = [o for b in read_table_range(part, False) for o in b.column("offset").to_pylist()]
        values = [v for b in read_table_range(part, False) for v in b.column("value").to_pylist()]
        assert offsets == list(range(part.start, part.end))
        assert values == [b"v%d" % i for i in range(part.start, part.end)]


def test_a_table_of_committed_records_only_covers_its_markers_and_aborted_offsets(tmp_path: Path) -> None:
    """A stream with transactions: the table has no rows for offsets of markers and aborted
    records (the first two, 3-4 and the last two here); its properties say so and where it ends."""
    from deltalake import CommitProperties, Transaction

    path = str(tmp_path / "t")
    write_deltalake(path, rows(2, 3), mode="append", commit_properties=CommitProperties(
        app_transactions=[Transaction("writer", 4)]))
    DeltaTable(path).alter.set_table_properties({"vdl.table.writer": "writer", "vdl.table.start": "0"},
                                                raise_if_not_exists=False)
    write_deltalake(path, rows(5, 8), mode="append", commit_properties=CommitProperties(
        app_transactions=[Transaction("writer", 9)]))
    client = Configs({"s": path}, {"s": 10})
    gaps: list[tuple[str, int, int]] = []
    tasks = plan_reads(client, TableLookup(), {"s": 0}, {"s": 12}, None, None, lambda *gap: gaps.append(gap))
    assert gaps == []
    assert [(type(t).__name__, t.start, t.end) for t in tasks] == [("TableRange", 0, 10), ("OffsetRange", 10, 12)]
    assert TableLookup().earliest(client, ["s"], {"s": 10}) == {"s": 0}
    for part in (tasks[0], TableRange("s", 0, 10, path), TableRange("s", 3, 7, path)):
        offsets = [o for b in read_table_range(part, False) for o in b.column("offset").to_pylist()]  # type: ignore[arg-type]
        assert offsets == [o for o in (2, 5, 6, 7) if part.start <= o < part.end]  # type: ignore[attr-defined]


@pytest.mark.parametrize("include_headers", [True, False])
def test_ranges_across_row_groups_read_exactly_their_rows(tmp_path: Path, include_headers: bool) -> None:
    """One file of many row groups (as the brokers write them): a range starting and ending
    inside row groups, or on their edges, yields exactly its rows, in order."""
    from deltalake import WriterProperties

    path = str(tmp_path / "t")
    write_deltalake(path, rows(0, 1000), mode="append", writer_properties=WriterProperties(max_row_group_size=100))
    for start, end in ((0, 1000), (150, 655), (200, 300), (999, 1000), (450, 451)):
        task = TableRange("s", start, end, path)
        got = pa.Table.from_batches(list(read_table_range(task, include_headers=include_headers)))
        assert got.column("offset").to_pylist() == list(range(start, end))
        assert got.column("value").to_pylist() == [b"v%d" % i for i in range(start, end)]
        assert ("headers" in got.column_names) == include_headers
        if include_headers:
            assert got.column("headers").to_pylist()[:2] == rows(start, end).column("headers").to_pylist()[:2]


def test_a_range_goes_to_spark_a_row_group_at_a_time(tmp_path: Path) -> None:
    """The task hands Spark each row group's rows as soon as they are decoded (Spark converts
    them while the next are read), not all of its row groups at once."""
    from deltalake import WriterProperties

    path = str(tmp_path / "t")
    write_deltalake(path, rows(0, 1000), mode="append", writer_properties=WriterProperties(max_row_group_size=100))
    batches = list(read_table_range(TableRange("s", 150, 655, path), False))
    assert [b.num_rows for b in batches] == [50, 100, 100, 100, 100, 55]
    assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(150, 655))


def test_a_row_group_of_large_records_is_handed_to_spark_in_batches_under_2_mib(tmp_path: Path) -> None:
    """As log reads (vdl_connector.arrow.MAX_BYTES_PER_ARROW_BATCH): Spark's JVM maps every Arrow
    buffer over 4 MiB anew. 1,000 values of 10,000 bytes in one row group: 209 rows a batch."""
    path = str(tmp_path / "t")
    big = rows(0, 1000).set_column(3, "value", pa.array([bytes([i % 256]) * 10_000 for i in range(1000)]))
    write_deltalake(path, big, mode="append")
    batches = list(read_table_range(TableRange("s", 0, 1000, path), False))
    assert [b.num_rows for b in batches] == [209, 209, 209, 209, 164]
    assert [v for b in batches for v in b.column("value").to_pylist()] == big.column("value").to_pylist()
    assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(1000))


@pytest.mark.parametrize("include_headers", [True, False])
def test_a_file_holding_its_offsets_out_of_order_is_read_in_offset_order(tmp_path: Path,
                                                                         include_headers: bool) -> None:
    """Tables the brokers wrote before they kept an append's rows in order: delta-rs wrote an
    append's chunks interleaved, so row groups' offset ranges overlap. Every range of such a
    file yields exactly its rows, in offset order."""
    from deltalake import WriterProperties

    order = [block * 10 + i for block in (0, 2, 1, 3, 5, 4, 6, 9, 7, 8) for i in range(10)]
    shuffled = rows(0, 100).take(pa.array(order)).combine_chunks()
    path = str(tmp_path / "t")
    write_deltalake(path, shuffled, mode="append", writer_properties=WriterProperties(max_row_group_size=25))
    write_deltalake(path, rows(100, 130), mode="append", writer_properties=WriterProperties(max_row_group_size=25))
    for start, end in ((0, 130), (5, 95), (15, 25), (40, 60), (85, 110), (99, 100)):
        got = pa.Table.from_batches(list(read_table_range(TableRange("s", start, end, path), include_headers)))
        assert got.column("offset").to_pylist() == list(range(start, end))
        assert got.column("value").to_pylist() == [b"v%d" % i for i in range(start, end)]
        if include_headers:
            assert got.column("headers").to_pylist() == rows(start, end).column("headers").to_pylist()

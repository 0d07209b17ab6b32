"""One offset space: offsets below a stream's log start come from the stream's Delta table.

A stream with `vdl.table.path` in `raw` format (vdl_broker/tables) holds in its table every
record the log held, as columns offset, timestamp, key, value, headers. Once retention has
deleted the oldest segments, the source reads offsets below the log start from the table and the
rest from the log, with the same schema and nothing missing or twice at the seam:

- driver: DescribeConfigs gives the table's path; the Delta log gives its files with per-file
  `offset` statistics (min, max). A range below the log start becomes TableRanges, each with the
  files that hold its offsets (planned like log ranges: minPartitions, maxRecordsPerPartition).
- task: reads those files with pyarrow (row groups outside the range are skipped by their
  statistics), keeps exactly [start, end), in offset order, and checks every offset came once.
  A file gone meanwhile (compaction then vacuum) makes the task look at the table's current
  version for the rest: whatever version it reads, each offset is in exactly one file.
- a log task whose offsets retention deleted after planning reads them from the table too.

A `json` table holds parsed columns, not the records: it cannot stand in for the log, so offsets
below the log start of such a stream count as deleted (failOnDataLoss), as without a table.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from vdl_connector.arrow import (
    ARROW_HEADERS_TYPE,
    MAX_BYTES_PER_ARROW_BATCH,
    MAX_ROWS_PER_ARROW_BATCH,
    arrow_read_schema,
    constant_string,
)
from vdl_connector.planning import OffsetRange, split_ranges

TABLE_KEYS = ("vdl.table.path", "vdl.table.format")
# A table of committed records only says so with these properties (vdl_broker/tables/delta.py):
# its writer's app id, whose transaction version is the table's last offset, and its first offset.
WRITER_PROPERTY = "vdl.table.writer"
START_PROPERTY = "vdl.table.start"
PATHS_TTL_S = 30.0  # how long the driver trusts which streams have tables
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
COLUMNS = ["offset", "timestamp", "key", "value", "headers"]


class TableReadError(RuntimeError):
    """The table does not hold offsets it should (never papered over: the task fails)."""


@dataclass(frozen=True)
class TableFile:
    uri: str
    first: int  # lowest offset in the file
    last: int  # highest


@dataclass(frozen=True)
class TableSnapshot:
    """One version of a stream's table: its files, ordered by offset."""

    path: str
    files: tuple[TableFile, ...]
    # A table of committed records only (a stream with transactions): offsets [covers[0],
    # covers[1]) are the table's, markers' and aborted records' without a row. None: every offset
    # of [first_offset, end_offset) has its row.
    covers: tuple[int, int] | None = None

    @property
    def first_offset(self) -> int | None:
        if self.covers is not None:
            return self.covers[0]
        return self.files[0].first if self.files else None

    @property
    def end_offset(self) -> int | None:
        """One past the highest offset (the table holds [first_offset, end_offset): each commit
        appends the offsets right after the previous one)."""
        if self.covers is not None:
            return self.covers[1]
        return max(f.last for f in self.files) + 1 if self.files else None

    def files_for(self, start: int, end: int) -> tuple[TableFile, ...]:
        return tuple(f for f in self.files if f.last >= start and f.first < end)


def load_snapshot(path: str, cache: dict[str, Any] | None = None) -> TableSnapshot:
    """The table's current files and their offset statistics, from the Delta log (`cache`:
    DeltaTable objects by path, brought up to date instead of read again)."""
    from deltalake import DeltaTable

    table = cache.get(path) if cache is not None else None
    if table is None:
        table = DeltaTable(path)
        if cache is not None:
            cache[path] = table
    else:
        table.update_incremental()
    # Through the Arrow stream interface: pa.table() on delta-rs's arro3 table imports pandas
    # (0.2 s of CPU in each process that plans a tiered read).
    actions = pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all()
    base = table.table_uri.rstrip("/")
    files = []
    if actions.num_rows:
        paths = actions.column("path").to_pylist()
        lows, highs = actions.column("min.offset").to_pylist(), actions.column("max.offset").to_pylist()
        for relative, low, high in zip(paths, lows, highs, strict=True):
            if low is None or high is None:
                raise TableReadError(f"table {path}: file {relative} has no offset statistics")
            files.append(TableFile(f"{base}/{urllib.parse.unquote(relative)}", int(low), int(high)))
    covers = None
    configuration = table.metadata().configuration
    writer = configuration.get(WRITER_PROPERTY)
    if writer is not None:
        version = table.transaction_version(writer)
        start = int(configuration.get(START_PROPERTY, "0"))
        covers = (start, version + 1) if version is not None and version >= start else None
    return TableSnapshot(path, tuple(sorted(files, key=lambda f: f.first)), covers)


@dataclass
class TableLookup:
    """Driver side: which streams have readable (raw) tables, and their snapshots."""

    _paths: dict[str, str | None] = field(default_factory=dict)
    _checked: float = -1e9
    _tables: dict[str, Any] = field(default_factory=dict)  # path -> DeltaTable (not picklable)

    def __getstate__(self) -> dict[str, Any]:
        return {"_paths": {}, "_checked": -1e9, "_tables": {}}

    def paths(self, client: Any, streams: Sequence[str]) -> dict[str, str | None]:
        """stream -> its raw table's path (None: no table, or one the source cannot read)."""
        if time.monotonic() - self._checked > PATHS_TTL_S:
            self._paths.clear()
            self._checked = time.monotonic()
        unknown = [s for s in streams if s not in self._paths]
        if unknown:
            from vdl_client.configs import stream_config_values

            values = stream_config_values(client, unknown, TABLE_KEYS)
            for stream in unknown:
                configs = values.get(stream, {})
                path = configs.get("vdl.table.path")
                self._paths[stream] = path if path and configs.get("vdl.table.format", "raw") == "raw" else None
        return {s: self._paths.get(s) for s in streams}

    def snapshot(self, path: str) -> TableSnapshot:
        try:
            return load_snapshot(path, self._tables)
        except Exception as error:
            if type(error).__name__ == "TableNotFoundError":
                return TableSnapshot(path, ())  # not written yet
            raise

    def earliest(self, client: Any, streams: Sequence[str], log_starts: dict[str, int]) -> dict[str, int]:
        """The first offset each stream can be read from: its table's first when the table
        reaches down from the log start, else the log start."""
        result = dict(log_starts)
        for stream, path in self.paths(client, [s for s in streams if log_starts.get(s, 0) > 0]).items():
            if path is not None:
                snapshot = self.snapshot(path)
                first, end = snapshot.first_offset, snapshot.end_offset
                if first is not None and end is not None and first < log_starts[stream] <= end:
                    result[stream] = first
        return result


@dataclass(frozen=True)
class TableRange(InputPartition):
    """Records [start, end) of one stream, read from its Delta table by one Spark task."""

    stream: str
    start: int
    end: int
    path: str
    files: tuple[TableFile, ...] = ()  # empty: the task finds them in the table's current version
    committed_only: bool = False  # offsets without a row are markers' or aborted records' (TableSnapshot.covers)


GapHandler = Callable[[str, int, int], None]


def plan_reads(client: Any, lookup: TableLookup, start: dict[str, int], end: dict[str, int],
               min_partitions: int | None, max_records_per_partition: int | None, on_gap: GapHandler,
               from_earliest: frozenset[str] = frozenset()) -> list[InputPartition]:
    """Tasks for [start, end) of every stream in `end`: below the log start from the stream's
    table (when it has one), the rest from the log. `on_gap(stream, a, b)`: offsets [a, b) are in
    neither (deleted before the table had them); not called for streams in `from_earliest`."""
    from vdl_client import EARLIEST_TIMESTAMP

    begin = {stream: start.get(stream, stop) for stream, stop in end.items()}
    paths = lookup.paths(client, sorted(s for s in end if begin[s] < end[s]))
    tiered = [s for s, path in paths.items() if path is not None]
    log_starts = client.list_offsets(tiered, EARLIEST_TIMESTAMP) if tiered else {}
    # The table parts and the log parts share minPartitions as the ranges of one read: a stream
    # half in its table is read by as many tasks as one all in its log.
    table_parts: list[tuple[OffsetRange, TableSnapshot]] = []
    for stream in tiered:
        upto = min(end[stream], log_starts[stream])
        if begin[stream] >= upto:
            continue
        snapshot = lookup.snapshot(paths[stream] or "")
        first, table_end = snapshot.first_offset, snapshot.end_offset
        if first is None or table_end is None or first >= upto or table_end <= begin[stream]:
            continue  # the table has none of it: the log task reports what is gone
        if first > begin[stream] and stream not in from_earliest:
            on_gap(stream, begin[stream], first)
        table_stop = min(upto, table_end)
        table_parts.append((OffsetRange(stream, max(begin[stream], first), table_stop), snapshot))
        begin[stream] = table_stop  # still below the log start: the log task reports the gap
    log_parts = [OffsetRange(s, begin[s], e) for s, e in sorted(end.items()) if e > begin[s]]
    split = split_ranges([part for part, _ in table_parts] + log_parts, min_partitions, max_records_per_partition)
    tasks: list[InputPartition] = []
    for (_, snapshot), pieces in zip(table_parts, split, strict=False):
        tasks += [TableRange(p.stream, p.start, p.end, snapshot.path, snapshot.files_for(p.start, p.end),
                             snapshot.covers is not None) for p in pieces]
    for pieces in split[len(table_parts):]:
        tasks += [OffsetRange(p.stream, p.start, p.end, p.stream in from_earliest, paths.get(p.stream))
                  for p in pieces]
    return tasks


# ------------------------------------------------------------------------------------ tasks


def read_table_range(part: TableRange, include_headers: bool) -> Iterator[pa.RecordBatch]:
    """Yield exactly the records [part.start, part.end) from the table, in offset order, in
    Spark's Kafka schema (timestampType 0: the table keeps create times)."""
    position = part.start
    committed_only = part.committed_only
    if part.files:
        files = part.files
    else:
        snapshot = load_snapshot(part.path)
        files, committed_only = snapshot.files_for(part.start, part.end), snapshot.covers is not None
    replanned = not part.files
    while position < part.end:
        try:
            for table in _read_files(files, position, part.end, include_headers):
                offsets = table.column("offset").to_numpy()
                if len(offsets) == 0:
                    continue
                if committed_only:  # offsets without a row are markers' or aborted records'
                    if offsets[0] < position or (len(offsets) > 1 and not (np.diff(offsets) > 0).all()):
                        raise _Missing(position)
                elif offsets[0] != position or (len(offsets) > 1 and not (np.diff(offsets) == 1).all()):
                    raise _Missing(position)
                yield from _spark_batches(part.stream, table, include_headers)
                position = int(offsets[-1]) + 1
            if position < part.end and not committed_only:
                raise _Missing(position)
            position = part.end
        except (_Missing, FileNotFoundError, OSError) as problem:
            if replanned:
                raise TableReadError(f"stream {part.stream!r}: offsets [{position}, {part.end}) are not in its "
                                     f"Delta table {part.path} ({problem})") from None
            # A file compacted away and vacuumed since planning: the current version has the rest.
            snapshot = load_snapshot(part.path)
            files, replanned = snapshot.files_for(position, part.end), True
            committed_only = committed_only or snapshot.covers is not None


class _Missing(Exception):
    def __init__(self, offset: int) -> None:
        super().__init__(f"no row for offset {offset}")


def _read_files(files: Sequence[TableFile], start: int, end: int, include_headers: bool = True) -> Iterator[pa.Table]:
    """The rows in [start, end) of `files` (ordered by their lowest offset), in offset order, a
    row group at a time: Spark converts the first rows while the next are decoded. Files may
    interleave: compaction bin-packs by size, so one file can hold 0..9 and 20..29 and another
    10..19 (and tables written before the brokers kept an append's rows in order hold them out
    of order within a file too). Rows below the lowest offset any unread row group may hold
    (the next row groups' statistics, the next file's lowest offset) are final, so they go out
    sorted while the rest waits. The headers column is read only when asked for (decoding its
    lists costs as much as the keys and values)."""
    columns = COLUMNS if include_headers else [c for c in COLUMNS if c != "headers"]
    waiting: list[pa.Table] = []

    def release(bound: int) -> Iterator[pa.Table]:
        nonlocal waiting
        if not waiting:
            return
        rows = pa.concat_tables(waiting) if len(waiting) > 1 else waiting[0]
        offsets = rows.column("offset").to_numpy()
        if len(offsets) < 2 or (np.diff(offsets) > 0).all():
            # In order (the usual case: row group after row group, file after file): what is
            # below the bound goes out as a slice, no copy.
            final = int(np.searchsorted(offsets, bound))
            waiting = [rows.slice(final)] if final < len(offsets) else []
            if final:
                yield rows if final == len(offsets) else rows.slice(0, final)
            return
        # Out of order: only the rows where they overlap are sorted by a copy.
        order = np.argsort(offsets, kind="stable")
        final = int(np.searchsorted(offsets[order], bound))
        waiting = [rows.take(pa.array(order[final:]))] if final < len(order) else []
        if final:
            yield rows.take(pa.array(order[:final]))

    for number, file in enumerate(files):
        following = files[number + 1].first if number + 1 < len(files) else end
        for rows, unread in _read_file(file, start, end, columns):
            waiting.append(rows)
            yield from release(following if unread is None else min(following, unread))
        yield from release(following)


def _read_file(file: TableFile, start: int, end: int, columns: list[str]) -> Iterator[tuple[pa.Table, int | None]]:
    """The rows of [start, end) in one Parquet file, a row group at a time, each with the lowest
    offset the file's row groups still to come may hold (None: none to come). Only the row
    groups whose offset statistics overlap the range are read, and the rows are cut from them by
    offset (a slice, no copy, when they are in order, as the brokers write them)."""
    # pyarrow.parquet, not pyarrow.dataset: the dataset module takes half a second to import
    # (pandas with it), and its filter copies every row it keeps.
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    filesystem, path = pafs.FileSystem.from_uri(file.uri)
    with filesystem.open_input_file(path) as handle:
        parquet = pq.ParquetFile(handle)
        metadata = parquet.metadata
        column = parquet.schema_arrow.get_field_index("offset")  # a top-level int64: its leaf's index too
        groups: list[tuple[int, int | None]] = []  # (row group, its lowest offset when known)
        for number in range(metadata.num_row_groups):
            stats = metadata.row_group(number).column(column).statistics
            if stats is None or not stats.has_min_max:
                groups.append((number, None))
            elif stats.max >= start and stats.min < end:
                groups.append((number, int(stats.min)))
        if any(low is None for _, low in groups):  # no statistics to bound what comes: all at once
            yield _cut(parquet.read_row_groups([number for number, _ in groups], columns=columns), start, end), None
            return
        lows = [low for _, low in groups if low is not None]
        for index, (number, _) in enumerate(groups):
            unread = min(lows[index + 1:], default=None)
            yield _cut(parquet.read_row_group(number, columns=columns), start, end), unread


def _cut(table: pa.Table, start: int, end: int) -> pa.Table:
    """The rows of `table` in [start, end) (a slice when they are in order)."""
    offsets = table.column("offset").to_numpy()
    if len(offsets) < 2 or (np.diff(offsets) > 0).all():
        low, high = np.searchsorted(offsets, [start, end])
        return table.slice(int(low), int(high - low))
    return table.filter(pa.array((offsets >= start) & (offsets < end)))


def _spark_batches(stream: str, table: pa.Table, include_headers: bool) -> Iterator[pa.RecordBatch]:
    """The table's rows in Spark's Kafka schema, one batch per chunk (its Parquet row groups:
    no copy of the keys and values into one array), split to the read bounds (by the keys' and
    values' mean size)."""
    schema = arrow_read_schema(include_headers)
    names = ["key", "value", "offset", "timestamp", *(["headers"] if include_headers else [])]
    selected = table.select(names)
    row_bytes = (selected.column(0).nbytes + selected.column(1).nbytes) / max(selected.num_rows, 1)
    rows = max(1, min(MAX_ROWS_PER_ARROW_BATCH, int(MAX_BYTES_PER_ARROW_BATCH / max(row_bytes, 1))))
    for chunk in selected.to_batches(max_chunksize=rows):
        count = chunk.num_rows
        if not count:
            continue
        columns = [
            chunk.column(0).cast(pa.binary()),
            chunk.column(1).cast(pa.binary()),
            constant_string(stream, count),
            pa.array(np.zeros(count, dtype=np.int32)),
            chunk.column(2),
            chunk.column(3).cast(TIMESTAMP_TYPE),
            pa.array(np.zeros(count, dtype=np.int32)),
        ]
        if include_headers:
            columns.append(chunk.column(4).cast(ARROW_HEADERS_TYPE))
        yield pa.RecordBatch.from_arrays(columns, schema=schema)

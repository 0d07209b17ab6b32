"""One stream's Delta table through `deltalake` (delta-rs): blocking calls, run in a worker thread.

Exactly once rests on Delta's app transactions (`txn` actions). Every append commits, in the
same Delta commit as its files, the transaction (app id, version = the last offset it holds):

- where to resume is the table's transaction version for the app id, read from the snapshot
  the append then commits against (`next_offset`, then `append` with no refresh between);
- a second writer with the same app id (a new leader, or a deposed one that has not noticed)
  that committed after that snapshot makes the append fail with a concurrent-transaction
  conflict (Delta's conflict detection, checked in delta-rs): the loser re-reads the version
  and goes on from there, so no offset is written twice and none is skipped.

A table is adopted only when it is new, empty, or already holds this app id's transaction: a
path holding another stream's rows is refused rather than mixed into, and so is a table with
column mapping (its files name columns by physical names, which format("vdl") cannot read).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, WriterProperties, write_deltalake
from deltalake.exceptions import CommitFailedError, TableNotFoundError

from vdl_broker.tables.convert import TieringError


class TransactionConflict(RuntimeError):
    """Another writer committed this app id's transaction first: re-read where the table is."""


@dataclass(frozen=True)
class TableStats:
    files: int
    rows: int
    first_offset: int | None  # the lowest offset in the table (None: empty)
    end_offset: int | None  # one past the highest (None: empty)


# Table properties of a table that holds committed records only (some offsets without a row):
# the writer's app id (its transaction version is the last offset the table covers) and the
# first offset it covers. Read by vdl_connector/tables.py.
WRITER_PROPERTY = "vdl.table.writer"
START_PROPERTY = "vdl.table.start"
# Rows per Parquet row group, in appends and compaction (delta-rs's default is ~1M: a catching-up
# append or a compacted file was one row group). A reader of an offset range (format("vdl") splits
# a table's offsets over tasks) skips the row groups whose offset statistics lie outside it; with
# one big row group every task decoded all of it.
ROW_GROUP_ROWS = 131_072


# A kept DeltaTable grows by every commit it is brought up to (its own appends, update_incremental):
# delta-rs adds each new commit's actions to its snapshot as a piece of its own, ~30-60 KB of
# memory per commit here, and only a fresh load (from the last checkpoint, which delta-rs writes
# every 100 commits: delta.checkpointInterval) or a compaction's new snapshot consolidates them. A
# tier writer committing every few seconds grew by tens of MB between two compactions, and
# without compaction (vdl.table.compact.interval.ms = 0) without bound. So a table kept this many
# versions past its load is loaded afresh: its memory stays that of a checkpoint and fewer
# commits than this (the writer's, and a follower's that reads the table's end now and then).
RELOAD_AFTER_COMMITS = 100


def writer_properties() -> WriterProperties:
    return WriterProperties(max_row_group_size=ROW_GROUP_ROWS)


class DeltaTarget:
    """A Delta table at `path` holding rows of `schema`, partitioned by `partition_by`."""

    def __init__(self, path: str, schema: pa.Schema, partition_by: list[str],
                 storage_options: dict[str, str] | None = None, stats_columns: list[str] | None = None) -> None:
        self.path = path
        self.schema = schema
        self.partition_by = partition_by
        self.storage_options = storage_options
        # Per-file statistics only for these columns (a new table's property): min/max of raw
        # key and value bytes serve no reader, and cost every commit time and log space.
        self.configuration = {"delta.dataSkippingStatsColumns": ",".join(stats_columns)} if stats_columns else None
        self._table: DeltaTable | None = None
        self._loaded_version = 0  # _table's version when it was loaded (RELOAD_AFTER_COMMITS)

    def _load(self, create: bool) -> DeltaTable | None:
        if self._table is not None and self._table.version() - self._loaded_version >= RELOAD_AFTER_COMMITS:
            self._table = None  # a fresh load from the last checkpoint, below
        if self._table is not None:
            self._table.update_incremental()
            return self._table
        try:
            self._table = DeltaTable(self.path, storage_options=self.storage_options)
        except TableNotFoundError:
            if not create:
                return None
            self._table = DeltaTable.create(self.path, self.schema, mode="ignore", partition_by=self.partition_by,
                                            configuration=self.configuration, storage_options=self.storage_options)
        self._loaded_version = self._table.version()
        return self._table

    def transaction_version(self, app_id: str) -> int | None:
        """The last offset this app id committed (None: none, or no table yet); a fresh read."""
        table = self._load(create=False)
        return None if table is None else table.transaction_version(app_id)

    def next_offset(self, app_id: str, default: int) -> int:
        """Where this app id's next append starts: after its last committed offset, or `default`
        for a new or empty table (the table is created if missing). Refreshes the snapshot the
        next `append` commits against."""
        table = self._load(create=True)
        assert table is not None
        mapping = table.metadata().configuration.get("delta.columnMapping.mode", "none")
        if mapping != "none":
            # delta-rs would append, but the files' columns then have physical names, not
            # offset/key/value: format("vdl") could not read the stream's history from them.
            raise TieringError(f"the Delta table at {self.path} uses column mapping (delta.columnMapping.mode = "
                               f"{mapping}), a table feature stream tables cannot have: give the stream a table "
                               f"without it")
        version = table.transaction_version(app_id)
        if version is not None:
            return version + 1
        if len(table.file_uris()) > 0:
            raise TieringError(f"the Delta table at {self.path} already holds rows that this stream did not write "
                               f"(no transaction {app_id!r} in it): give the stream another vdl.table.path")
        return default

    def mark_committed_only(self, app_id: str, start: int) -> None:
        """Record in the table (once) that it holds committed records only, so offsets of
        transaction markers and aborted records have no row: readers then accept gaps between
        offsets and take the table's end from `app_id`'s transaction (format("vdl"),
        vdl_connector/tables.py). `start`: where the commit about to be made begins; the table
        covers offsets from its first row, or from there when it has none yet. Refreshes the
        snapshot the next `append` commits against."""
        table = self._load(create=True)
        assert table is not None
        if table.metadata().configuration.get(WRITER_PROPERTY) is not None:
            return
        actions = pa.table(table.get_add_actions(flatten=True))
        lows = actions.column("min.offset").to_pylist() if actions.num_rows else []
        first = min((low for low in lows if low is not None), default=start)
        table.alter.set_table_properties({WRITER_PROPERTY: app_id, START_PROPERTY: str(first)},
                                         raise_if_not_exists=False)
        table.update_incremental()

    def append(self, rows: pa.Table, app_id: str, last_offset: int) -> int:
        """Append `rows` with the transaction (app_id, last_offset) against the snapshot loaded by
        the last `next_offset`; returns the new table version. TransactionConflict when another
        writer committed the app id meanwhile."""
        table = self._table
        assert table is not None, "next_offset() first"
        properties = CommitProperties(app_transactions=[Transaction(app_id, last_offset)], max_commit_retries=8)
        # One chunk: delta-rs spreads a table's chunks (one per stored batch) over its partitions
        # and writes them interleaved, so the files' offsets were out of order and a reader of an
        # offset range read and sorted every row group its statistics could not rule out. The
        # copy costs a few ms per 1M rows (a memcpy; delta-rs encodes from it anyway).
        rows = rows.combine_chunks()
        try:
            write_deltalake(table, rows, mode="append", partition_by=self.partition_by or None,
                            commit_properties=properties, writer_properties=writer_properties())
        except CommitFailedError as error:
            if "concurrent transaction" in str(error).lower():
                raise TransactionConflict(str(error)) from None
            raise
        return table.version()

    def compact(self, target_bytes: int) -> dict[str, Any]:
        """Rewrite small files into larger ones (optimize.compact): same rows, fewer files."""
        table = self._load(create=False)
        return {} if table is None else table.optimize.compact(target_size=target_bytes,
                                                              writer_properties=writer_properties())

    def oldest_small_file_ms(self, target_bytes: int) -> int | None:
        """When the oldest file smaller than `target_bytes` (what compaction rewrites) was
        written, in ms since the epoch (None: no such file, or no table yet)."""
        table = self._load(create=False)
        if table is None:
            return None
        actions = pa.table(table.get_add_actions(flatten=True))
        if actions.num_rows == 0:
            return None
        written = actions.column("modification_time")
        if pa.types.is_timestamp(written.type):
            written = written.cast(pa.timestamp("ms")).cast(pa.int64())
        small = [when for size, when in zip(actions.column("size_bytes").to_pylist(), written.to_pylist(), strict=True)
                 if size is not None and when is not None and size < target_bytes]
        return min(small, default=None)

    def vacuum(self, retention_ms: int) -> list[str]:
        """Delete files the table no longer references and removed more than `retention_ms` ago
        (rounded up to whole hours, delta-rs's unit: never earlier than asked)."""
        table = self._load(create=False)
        if table is None:
            return []
        hours = math.ceil(retention_ms / 3_600_000)
        return table.vacuum(retention_hours=hours, dry_run=False, enforce_retention_duration=False)

    def stats(self) -> TableStats:
        """Files, rows and offset range of the current snapshot (from the Delta log's statistics)."""
        table = self._load(create=False)
        if table is None:
            return TableStats(0, 0, None, None)
        actions = pa.table(table.get_add_actions(flatten=True))
        if actions.num_rows == 0:
            return TableStats(0, 0, None, None)
        rows = sum(v for v in actions.column("num_records").to_pylist() if v is not None)
        lows = [v for v in actions.column("min.offset").to_pylist() if v is not None]
        highs = [v for v in actions.column("max.offset").to_pylist() if v is not None]
        return TableStats(actions.num_rows, rows, min(lows) if lows else None, max(highs) + 1 if highs else None)

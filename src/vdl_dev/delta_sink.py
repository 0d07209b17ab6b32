"""The main job's Delta sink: MERGE each micro-batch into a Delta table, exactly once.

Delta is written with the `deltalake` package (delta-rs) from foreachBatch: delta-spark has no
release for Spark 4.3 and its JARs cannot be fetched here. Each batch's MERGE commits together
with the Delta app transaction (app id = the streaming query's id, version = the batch id), so a
micro-batch Spark replays after a failure finds its version already committed and is skipped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger("vdl_demo")

QUERY_ID_PROPERTY = "sql.streaming.queryId"  # Spark's StreamExecution.QUERY_ID_KEY
BATCH_ID_METADATA = "vdl.batch_id"
NEWEST_PRODUCED_METADATA = "vdl.newest_produced_ms"  # freshness: the newest event's produce time


def query_id_from_checkpoint(checkpoint: str | Path) -> str:
    """The streaming query's id: Spark writes it to <checkpoint>/metadata when the query first
    starts and keeps it across restarts from that checkpoint (unlike the run id)."""
    text = (Path(checkpoint) / "metadata").read_text()
    return str(json.loads(text.splitlines()[0])["id"])


def running_query_id(batch: DataFrame) -> str | None:
    """The id of the query running this foreachBatch call: Spark sets it as a local property of
    the thread that calls the function (StreamExecution.QUERY_ID_KEY). None where the
    SparkContext is not reachable (Spark Connect); then the checkpoint's metadata file is used."""
    try:
        return batch.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        return None


def last_committed_batch(table_path: str | Path, app_id: str) -> int | None:
    """The latest batch id this app committed to the table (Delta's `txn` action), if any."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(str(table_path)).transaction_version(app_id)
    except TableNotFoundError:
        return None


@dataclass
class DeltaMergeSink:
    """foreachBatch function: MERGE each micro-batch into a Delta table, exactly once.

    The merge and the app transaction (app_id, batch_id) commit atomically; a batch whose id is
    at or below the table's recorded version for app_id was committed before (Spark replays the
    last batch after a crash) and is skipped. app_id defaults to the streaming query's id, which
    Spark keeps across restarts from the same checkpoint, so a restarted query keeps its identity
    and a new query (new checkpoint) starts its own sequence. The id comes from the running query
    (a local property Spark sets for the foreachBatch call) or else from <checkpoint>/metadata.

    combine: how a matched row takes the batch's values, column -> SQL over t (table) and s
    (batch), e.g. {"orders": "t.orders + s.orders"} to accumulate per-batch partial aggregates;
    None replaces the row (upsert). The target is scanned only where the batch's keys can match
    (delta-rs prunes files by the source's key ranges), so a MERGE touches the windows it changes.
    """

    table_path: str
    key_columns: tuple[str, ...] = ("window_start", "category")
    checkpoint: str | None = None
    app_id: str | None = None
    combine: Mapping[str, str] | None = None
    committed: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    rows_written: int = 0

    def resolve_app_id(self) -> str:
        if self.app_id is None:
            if self.checkpoint is None:
                raise ValueError("DeltaMergeSink needs app_id or the query's checkpoint location")
            self.app_id = f"vdl-demo/{query_id_from_checkpoint(self.checkpoint)}"
        return self.app_id

    def adopt_running_query(self, batch: DataFrame) -> None:
        if self.app_id is None:
            query_id = running_query_id(batch)
            if query_id is not None:
                self.app_id = f"vdl-demo/{query_id}"

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        self.adopt_running_query(batch)
        self.write_arrow(batch.toArrow(), batch_id)

    def already_committed(self, batch_id: int) -> bool:
        """True when batch_id is at or below the version the table recorded for this app."""
        done = last_committed_batch(self.table_path, self.resolve_app_id())
        return done is not None and batch_id <= done

    def write_arrow(self, data: Any, batch_id: int, metadata: Mapping[str, str] | None = None) -> bool:
        """Merge one batch (a pyarrow Table); False when it was already committed (skipped)."""
        from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

        if data.num_rows == 0:
            return False  # nothing to merge
        app_id = self.resolve_app_id()
        if self.already_committed(batch_id):
            log.info("batch %d already in %s (app %s): skipped", batch_id, self.table_path, app_id)
            self.skipped.append(batch_id)
            return False
        commit = CommitProperties(app_transactions=[Transaction(app_id, batch_id)],
                                  custom_metadata={BATCH_ID_METADATA: str(batch_id), **(metadata or {})})
        if not DeltaTable.is_deltatable(self.table_path):
            write_deltalake(self.table_path, data, mode="append", commit_properties=commit)
        else:
            predicate = " AND ".join(f"t.{c} = s.{c}" for c in self.key_columns)
            # streamed_exec=False: the (small) batch is planned with its statistics, which lets
            # delta-rs skip every file whose key range the batch cannot match.
            merger = DeltaTable(self.table_path).merge(data, predicate, source_alias="s", target_alias="t",
                                                       commit_properties=commit, streamed_exec=False)
            merger = (merger.when_matched_update_all() if self.combine is None
                      else merger.when_matched_update(dict(self.combine)))
            merger.when_not_matched_insert_all().execute()
        self.committed.append(batch_id)
        self.rows_written += data.num_rows
        return True


def read_delta_table(table_path: str | Path) -> Any:
    """The Delta table as a pyarrow Table sorted by window and category."""
    from deltalake import DeltaTable

    return DeltaTable(str(table_path)).to_pyarrow_table().sort_by([("window_start", "ascending"),
                                                                   ("category", "ascending")])


def newest_produced_ms(table_path: str | Path) -> int | None:
    """The produce time of the newest event the table holds, from the latest commit that says."""
    from deltalake import DeltaTable

    for entry in DeltaTable(str(table_path)).history(10):
        value = entry.get(NEWEST_PRODUCED_METADATA)
        if value is not None:
            return int(value)
    return None

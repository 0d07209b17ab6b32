"""The main job's Delta sink: MERGE each micro-batch into a Delta table, exactly once.

Two engines, one table format and one idempotence:

- `merge` takes a DataFrame and runs delta-spark's MERGE: what a Databricks user writes in
  foreachBatch, `DeltaTable.forPath(spark, path).merge(...)`, for a batch of any size;
- `merge_arrow` takes a batch the driver holds already (an Arrow table of a few hundred rows, as
  the main job's window aggregates are) and runs the same MERGE with delta-rs (`deltalake`, the
  library the broker's stream tables use) in the driver's process: no Spark job. delta-spark
  spends ~0.9 s on any commit of a few rows on this machine (planning, its log replay, two Spark
  jobs, the commit; an append of 16 rows 0.58 s), delta-rs ~0.02-0.04 s
  (benchmarks/bench_delta_merge.py), and the main job commits once per micro-batch.

Delta's idempotent writes take an app id and a version, written as a `txn` action in the same
commit as the data: with delta-spark, the DataFrameWriter options `txnAppId` / `txnVersion` for
an append (the table's first batch), and for MERGE (and the other DML commands) the session
settings `spark.databricks.delta.write.txnAppId` / `spark.databricks.delta.write.txnVersion`
(delta-io/delta#1555, Delta >= 2.3); with delta-rs, the commit's `Transaction`. Either way the
commit carries the app transaction (app id = the streaming query's id, version = the batch id),
and a write whose version is at or below the one the table recorded for that app id is skipped: a
micro-batch Spark replays after a failure changes nothing. Either engine reads the other's
transactions, so a table may be written by both.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import deltalake
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("vdl_demo")

QUERY_ID_PROPERTY = "sql.streaming.queryId"  # Spark's StreamExecution.QUERY_ID_KEY
# Delta's idempotent DML settings and the commit's user metadata (DeltaSQLConf).
TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
APP_ID_METADATA = "vdl.app_id"
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


def is_delta_table(spark: SparkSession, table_path: str | Path) -> bool:
    from delta.tables import DeltaTable

    return bool(DeltaTable.isDeltaTable(spark, str(table_path)))


def commit_metadata(spark: SparkSession, table_path: str | Path, newest: int = 10) -> Iterator[dict[str, Any]]:
    """The vdl entries of the table's newest commits (their userMetadata JSON), newest first,
    each with the commit's `version`; from DESCRIBE HISTORY."""
    from delta.tables import DeltaTable

    for row in DeltaTable.forPath(spark, str(table_path)).history(newest).select("version", "userMetadata").collect():
        try:
            entry = json.loads(row.userMetadata) if row.userMetadata else {}
        except ValueError:  # someone else's free-text metadata
            entry = {}
        if isinstance(entry, dict):
            yield {**entry, "version": int(row.version)}


def last_committed_batch(spark: SparkSession, table_path: str | Path, app_id: str, newest: int = 100) -> int | None:
    """The latest batch id this app committed to the table (among its `newest` commits), as its
    commits' metadata says; None when there is no table or no such commit. Delta keeps the same
    number as the app transaction's version and skips by that, not by this."""
    if not is_delta_table(spark, table_path):
        return None
    for entry in commit_metadata(spark, table_path, newest):
        if entry.get(APP_ID_METADATA) == app_id and BATCH_ID_METADATA in entry:
            return int(entry[BATCH_ID_METADATA])
    return None


# DESCRIBE HISTORY's operationMetrics of the rows a commit changed: delta-spark names them in
# camelCase, delta-rs in snake_case (and a WRITE's rows num_added_rows).
HISTORY_ROW_METRICS = {"updated": ("numTargetRowsUpdated", "num_target_rows_updated"),
                       "inserted": ("numTargetRowsInserted", "num_target_rows_inserted"),
                       "written": ("numOutputRows", "num_output_rows", "num_added_rows")}


def history(spark: SparkSession, table_path: str | Path) -> DataFrame:
    """DESCRIBE HISTORY: version, timestamp, operation, the rows each commit updated, inserted and
    wrote (whichever engine made it: HISTORY_ROW_METRICS) and its userMetadata."""
    from pyspark.sql import functions as F

    rows = [F.coalesce(*(F.col("operationMetrics")[name] for name in names)).alias(column)
            for column, names in HISTORY_ROW_METRICS.items()]
    return spark.sql(f"DESCRIBE HISTORY delta.`{table_path}`").select("version", "timestamp", "operation", *rows,
                                                                       "userMetadata")


def query_delta(table: deltalake.DeltaTable, sql: str) -> pa.Table:
    """`sql` over `table` (named t in it), run by delta-rs's own engine (DataFusion) in this
    process: no Spark job. Not DeltaTable.to_pyarrow_table, which reads through a Python file
    system on Arrow's threads: measured, 5-8 of 10 processes whose last step it was aborted as
    they exited (C++'s terminate, exit code 134)."""
    import pyarrow as pa
    from deltalake import QueryBuilder

    return pa.table(QueryBuilder().register("t", table).execute(sql).read_all())


def query_delta_value(table_path: str | Path, sql: str) -> Any:
    """The first value of `sql` over the table at `table_path` (query_delta), None when there is
    no table there."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(str(table_path))
    except TableNotFoundError:
        return None
    return query_delta(table, sql).column(0)[0].as_py()


def history_frame(table: deltalake.DeltaTable) -> pd.DataFrame:
    """`history`'s columns, newest commit first, read by delta-rs from the table's log: no Spark
    job. The rows each commit changed are strings, as in DESCRIBE HISTORY's operationMetrics."""
    import pandas as pd

    commits = table.history()

    def rows(commit: dict[str, Any], names: tuple[str, ...]) -> str | None:
        metrics = commit.get("operationMetrics") or {}
        return next((str(metrics[name]) for name in names if metrics.get(name) is not None), None)

    return pd.DataFrame({
        "version": [commit["version"] for commit in commits],
        "timestamp": pd.to_datetime([commit["timestamp"] for commit in commits], unit="ms"),
        "operation": [commit.get("operation") for commit in commits],
        **{column: pd.Series([rows(commit, names) for commit in commits], dtype=object)
           for column, names in HISTORY_ROW_METRICS.items()},
        "userMetadata": [commit.get("userMetadata") for commit in commits]})


def table_version(spark: SparkSession, table_path: str | Path) -> int:
    """The table's current version (its newest commit), -1 when there is no table."""
    from delta.tables import DeltaTable

    if not is_delta_table(spark, table_path):
        return -1
    newest = DeltaTable.forPath(spark, str(table_path)).history(1).first()
    return int(newest.version) if newest is not None else -1


@contextmanager
def session_settings(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Set Spark SQL settings for the block only: Delta reads its idempotent-DML settings from
    the session, and a stale txnVersion left behind would make the session's next write to any
    table with that app id a silent no-op."""
    previous: dict[str, str | None] = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in previous.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


@dataclass
class DeltaMergeSink:
    """foreachBatch function: MERGE each micro-batch into a Delta table, exactly once.

    The merge and the app transaction (app_id, batch_id) commit atomically; Delta skips a batch
    whose id is at or below the table's recorded version for app_id (Spark replays the last batch
    after a crash): the MERGE then returns no metrics row, which is how a skip is told from a
    commit. app_id defaults to the streaming query's id, which Spark keeps across restarts from
    the same checkpoint, so a restarted query keeps its identity and a new query (new checkpoint)
    starts its own sequence. The id comes from the running query (a local property Spark sets for
    the foreachBatch call) or else from <checkpoint>/metadata. The table's first batch is an
    append; every later one a MERGE. As a foreachBatch function it merges the DataFrame with
    delta-spark; `merge_arrow` merges a batch collected into the driver with delta-rs.

    combine: how a matched row takes the batch's values, column -> SQL over t (table) and s
    (batch), e.g. {"orders": "t.orders + s.orders"} to accumulate per-batch partial aggregates;
    None replaces the row (upsert).

    table_properties: Delta table properties the first batch creates the table with (e.g.
    delta.checkpointInterval); a table that exists keeps its own.
    """

    table_path: str
    key_columns: tuple[str, ...] = ("window_start", "category")
    checkpoint: str | None = None
    app_id: str | None = None
    combine: Mapping[str, str] | None = None
    table_properties: Mapping[str, str] = field(default_factory=dict)
    committed: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    _exists: bool = False  # the table was seen (it never goes away under the job)

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
        if not batch.isEmpty():
            self.merge(batch, batch_id)

    def merge(self, data: DataFrame, batch_id: int, metadata: Mapping[str, str] | None = None,
              key_bounds: Mapping[str, tuple[Any, Any]] | None = None) -> bool:
        """Merge one batch; False when Delta found it committed before (skipped).

        key_bounds: key column -> (lowest, highest) value in `data`, when the caller knows them.
        They go into the MERGE condition as literals on the table's column, which Delta compares
        with each file's min/max statistics: the files that cannot hold a matching row are
        neither read to find the matches nor rewritten (without them every MERGE scans the whole
        table, which grows by a file or two per batch)."""
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        spark = data.sparkSession
        app_id = self.resolve_app_id()
        user_metadata = self._user_metadata(app_id, batch_id, metadata)
        if not self._exists and not is_delta_table(spark, self.table_path):
            # The first batch creates the table: an append whose idempotence Delta takes from the
            # writer's options (a replay of it finds the table, and merges, and is skipped there).
            (data.write.format("delta").mode("append").options(**self.table_properties).option("txnAppId", app_id)
             .option("txnVersion", str(batch_id)).option("userMetadata", user_metadata).save(self.table_path))
            self._exists = True
            return self._count(batch_id, True)
        self._exists = True
        condition = F.expr(" AND ".join(f"t.{c} = s.{c}" for c in self.key_columns))
        for column, (low, high) in (key_bounds or {}).items():
            condition = condition & F.col(f"t.{column}").between(F.lit(low), F.lit(high))
        merger = DeltaTable.forPath(spark, self.table_path).alias("t").merge(data.alias("s"), condition)
        merger = (merger.whenMatchedUpdateAll() if self.combine is None
                  else merger.whenMatchedUpdate(set=dict(self.combine)))
        with session_settings(spark, {TXN_APP_ID_CONF: app_id, TXN_VERSION_CONF: str(batch_id),
                                      USER_METADATA_CONF: user_metadata}):
            # The metrics row of the MERGE; none when Delta skipped it (hasBeenExecuted).
            metrics = merger.whenNotMatchedInsertAll().execute().collect()
        return self._count(batch_id, bool(metrics))

    def merge_arrow(self, rows: pa.Table, batch_id: int, metadata: Mapping[str, str] | None = None) -> bool:
        """Merge one batch the driver holds (with delta-rs); False when the table has it already.

        The same MERGE as `merge` (condition, `combine`, insert of new keys, the first batch
        an append with `table_properties`), the same app transaction and commit metadata. The
        condition bounds each key column to the batch's lowest and highest value, which delta-rs
        compares with each file's statistics to leave the other files unread (key_bounds in
        `merge`). The skip is decided on the snapshot the MERGE commits against: a writer with
        the same app id committing in between makes the commit fail (Delta's conflict check on
        app transactions), not the batch count twice."""
        import pyarrow.compute as pc
        from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
        from deltalake.exceptions import TableNotFoundError

        app_id = self.resolve_app_id()
        # delta-rs writes custom metadata into the commit's commitInfo; Delta's field for a
        # writer's free text (DESCRIBE HISTORY's userMetadata) is `userMetadata` (PROTOCOL.md,
        # Commit Provenance Information).
        commit = CommitProperties(custom_metadata={"userMetadata": self._user_metadata(app_id, batch_id, metadata)},
                                  app_transactions=[Transaction(app_id, batch_id)])
        try:
            table = DeltaTable(self.table_path)
        except TableNotFoundError:
            write_deltalake(self.table_path, rows, mode="append", configuration=dict(self.table_properties),
                            commit_properties=commit)
            self._exists = True
            return self._count(batch_id, True)
        self._exists = True
        recorded = table.transaction_version(app_id)
        if recorded is not None and recorded >= batch_id:
            return self._count(batch_id, False)
        conditions = [f"t.{c} = s.{c}" for c in self.key_columns]
        for column in self.key_columns:
            bounds = pc.min_max(rows[column])
            low, high = (sql_literal(bounds["min"].as_py()), sql_literal(bounds["max"].as_py()))
            if low is not None and high is not None:
                conditions.append(f"t.{column} BETWEEN {low} AND {high}")
        merger = table.merge(rows, " AND ".join(conditions), source_alias="s", target_alias="t",
                             commit_properties=commit)
        merger = (merger.when_matched_update_all() if self.combine is None
                  else merger.when_matched_update(updates=dict(self.combine)))
        merger.when_not_matched_insert_all().execute()
        return self._count(batch_id, True)

    @staticmethod
    def _user_metadata(app_id: str, batch_id: int, metadata: Mapping[str, str] | None) -> str:
        return json.dumps({APP_ID_METADATA: app_id, BATCH_ID_METADATA: str(batch_id), **(metadata or {})})

    def _count(self, batch_id: int, committed: bool) -> bool:
        if committed:
            self.committed.append(batch_id)
        else:
            log.info("batch %d already in %s (app %s): skipped", batch_id, self.table_path, self.app_id)
            self.skipped.append(batch_id)
        return committed


def sql_literal(value: object) -> str | None:
    """`value` as a SQL literal that delta-rs (DataFusion) coerces to its column's type; None for
    a null or a type without one here (the caller then leaves that bound out)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, int | float | Decimal):
        return str(value)
    if isinstance(value, datetime | date):
        # ISO 8601 with the offset: a timestamp column's comparison parses it to the instant.
        return f"'{value.isoformat()}'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return None


def read_delta_table(spark: SparkSession, table_path: str | Path) -> DataFrame:
    """The Delta table (spark.read.format("delta")) ordered by window and category."""
    return spark.read.format("delta").load(str(table_path)).orderBy("window_start", "category")


def newest_produced_ms(spark: SparkSession, table_path: str | Path) -> int | None:
    """The produce time of the newest event the table holds, from the latest commit that says."""
    for entry in commit_metadata(spark, table_path):
        value = entry.get(NEWEST_PRODUCED_METADATA)
        if value is not None:
            return int(value)
    return None

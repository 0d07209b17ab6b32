"""The main job's Delta sink: MERGE each micro-batch into a Delta table with delta-spark, exactly once.

What a Databricks user writes in foreachBatch: `DeltaTable.forPath(spark, path).merge(...)`, made
idempotent by Delta itself. Delta's idempotent writes take an app id and a version: the
DataFrameWriter options `txnAppId` / `txnVersion` for an append (the table's first batch), and
for MERGE (and the other DML commands) the session settings `spark.databricks.delta.write.txnAppId`
/ `spark.databricks.delta.write.txnVersion` (delta-io/delta#1555, Delta >= 2.3). Either way the
commit carries the app transaction (app id = the streaming query's id, version = the batch id),
and a write whose version is at or below the one the table recorded for that app id is skipped
by Delta: a micro-batch Spark replays after a failure changes nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    """foreachBatch function: MERGE each micro-batch into a Delta table, exactly once (delta-spark).

    The merge and the app transaction (app_id, batch_id) commit atomically; Delta skips a batch
    whose id is at or below the table's recorded version for app_id (Spark replays the last batch
    after a crash): the MERGE then returns no metrics row, which is how a skip is told from a
    commit. app_id defaults to the streaming query's id, which Spark keeps across restarts from
    the same checkpoint, so a restarted query keeps its identity and a new query (new checkpoint)
    starts its own sequence. The id comes from the running query (a local property Spark sets for
    the foreachBatch call) or else from <checkpoint>/metadata. The table's first batch is an
    append (the txnAppId/txnVersion write options); every later one a MERGE.

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
        user_metadata = json.dumps({APP_ID_METADATA: app_id, BATCH_ID_METADATA: str(batch_id), **(metadata or {})})
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

    def _count(self, batch_id: int, committed: bool) -> bool:
        if committed:
            self.committed.append(batch_id)
        else:
            log.info("batch %d already in %s (app %s): skipped", batch_id, self.table_path, self.app_id)
            self.skipped.append(batch_id)
        return committed


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

"""DeltaMergeSink on both its engines, delta-spark (a DataFrame, the shared SparkSession) and
delta-rs (an Arrow table in the driver): MERGE upserts or accumulates by key, Delta's idempotent
writes skip a replayed batch id (delta-spark: the append's txnAppId/txnVersion options, the
MERGE's session settings, unset again after it; delta-rs: the commit's app transaction), either
engine honours the other's, and the main job replaying a micro-batch after a crash between its
Delta commit and Spark's batch commit counts nothing twice."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import deltalake
import pytest

from tests.dev.delta_frames import delta_frame, oracle_frame
from tests.support.cluster import BrokerProcess
from vdl_client import ClientSettings, VdlClient
from vdl_dev.delta_sink import (
    TXN_APP_ID_CONF,
    TXN_VERSION_CONF,
    USER_METADATA_CONF,
    commit_metadata,
    history,
    history_frame,
    newest_produced_ms,
    table_version,
)
from vdl_dev.pipeline import (
    ACCUMULATE,
    AGGREGATE_TABLE_PROPERTIES,
    DeltaMergeSink,
    MainJobBatch,
    last_committed_batch,
    parse_orders,
    query_id_from_checkpoint,
    read_delta_table,
    read_orders,
)
from vdl_dev.workload import WorkloadConfig, events, produce_workload

SCHEMA = "window_start timestamp, category string, orders long, revenue decimal(20,2)"


def _batch(spark: Any, rows: list[tuple[int, str, int, str]]) -> Any:
    return spark.createDataFrame([(datetime.fromtimestamp(minute * 60, UTC), category, orders, Decimal(revenue))
                                  for minute, category, orders, revenue in rows], SCHEMA)


ENGINES = ("delta-spark", "delta-rs")


def _merge(engine: str, sink: DeltaMergeSink, spark: Any, rows: list[tuple[int, str, int, str]], batch_id: int,
           metadata: dict[str, str] | None = None) -> bool:
    """sink.merge of the rows as a DataFrame (delta-spark), or sink.merge_arrow of them (delta-rs)."""
    batch = _batch(spark, rows)
    if engine == "delta-spark":
        return sink.merge(batch, batch_id, metadata)
    return sink.merge_arrow(batch.toArrow(), batch_id, metadata)


def _rows(spark: Any, path: Path) -> list[tuple]:
    return [(int(r.window_start.timestamp()) // 60, r.category, r.orders, str(r.revenue))
            for r in read_delta_table(spark, path).collect()]


@pytest.mark.parametrize("engine", ENGINES)
def test_merge_upserts_and_a_replayed_batch_is_skipped(spark: Any, tmp_path: Path, engine: str) -> None:
    table = tmp_path / "agg"
    sink = DeltaMergeSink(str(table), app_id="query-1")
    assert _merge(engine, sink, spark, [(0, "books", 2, "10.00"), (0, "toys", 1, "3.50")], 0)  # append: creates it
    assert _merge(engine, sink, spark, [(0, "books", 5, "25.00"), (1, "books", 1, "1.00")], 1)  # MERGE
    expected = [(0, "books", 5, "25.00"), (0, "toys", 1, "3.50"), (1, "books", 1, "1.00")]
    assert _rows(spark, table) == expected
    assert last_committed_batch(spark, table, "query-1") == 1 and table_version(spark, table) == 1

    # Spark replays batch 1 after a crash (even with different contents), or batch 0: Delta skips both.
    again = DeltaMergeSink(str(table), app_id="query-1")
    assert not _merge(engine, again, spark, [(0, "books", 99, "99.00")], 1)
    assert not _merge(engine, again, spark, [(0, "books", 98, "98.00")], 0)
    assert again.skipped == [1, 0] and again.committed == []
    assert _rows(spark, table) == expected and table_version(spark, table) == 1
    # The idempotence settings were the MERGE's only: the session is as before.
    assert [spark.conf.get(key, None) for key in (TXN_APP_ID_CONF, TXN_VERSION_CONF, USER_METADATA_CONF)] \
        == [None, None, None]

    # Another query (another app id) has its own sequence of versions.
    other = DeltaMergeSink(str(table), app_id="query-2")
    assert _merge(engine, other, spark, [(2, "home", 1, "2.00")], 0)
    assert last_committed_batch(spark, table, "query-2") == 0 and last_committed_batch(spark, table, "query-1") == 1
    assert _rows(spark, table)[-1] == (2, "home", 1, "2.00")
    operations = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").orderBy("version").select("operation").collect()
    assert [r.operation for r in operations] == ["WRITE", "MERGE", "MERGE"]


@pytest.mark.parametrize("engine", ENGINES)
def test_the_first_batch_creates_the_table_with_the_sinks_properties(spark: Any, tmp_path: Path, engine: str) -> None:
    """table_properties go on the table the first batch creates (the main job's: a checkpoint
    every 100 commits); a sink with other properties leaves an existing table's as they are."""
    table = tmp_path / "agg"
    assert _merge(engine, DeltaMergeSink(str(table), app_id="q", table_properties=AGGREGATE_TABLE_PROPERTIES),
                  spark, [(0, "books", 1, "1.00")], 0)
    assert _merge(engine, DeltaMergeSink(str(table), app_id="q", table_properties={"delta.checkpointInterval": "7"}),
                  spark, [(0, "books", 3, "3.00")], 1)
    assert spark.sql(f"DESCRIBE DETAIL delta.`{table}`").first().properties == {"delta.checkpointInterval": "100"}
    assert _rows(spark, table) == [(0, "books", 3, "3.00")]


def test_no_table_means_no_committed_batch(spark: Any, tmp_path: Path) -> None:
    assert last_committed_batch(spark, tmp_path / "missing", "q") is None
    assert table_version(spark, tmp_path / "missing") == -1


def test_app_id_is_the_query_id_from_the_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "metadata").write_text(json.dumps({"id": "1b2c-query"}) + "\n")
    assert query_id_from_checkpoint(tmp_path) == "1b2c-query"
    sink = DeltaMergeSink(str(tmp_path / "t"), checkpoint=str(tmp_path))
    assert sink.resolve_app_id() == "vdl-demo/1b2c-query"
    with pytest.raises(ValueError, match="app_id"):
        DeltaMergeSink(str(tmp_path / "t")).resolve_app_id()


@pytest.mark.parametrize("engine", ENGINES)
def test_accumulating_merge_adds_partial_aggregates_and_a_replay_counts_nothing_twice(spark: Any, tmp_path: Path,
                                                                                      engine: str) -> None:
    """With `combine`, a batch's rows add to the table's rows (the table holds the aggregation
    state); the replay of a committed batch changes nothing (without Delta's skip it would add
    its partial sums a second time)."""
    table = tmp_path / "agg"
    combine = {"orders": "t.orders + s.orders", "revenue": "t.revenue + s.revenue"}
    sink = DeltaMergeSink(str(table), app_id="query-1", combine=combine)
    assert _merge(engine, sink, spark, [(0, "books", 2, "10.00"), (0, "toys", 1, "3.50")], 0)
    assert _merge(engine, sink, spark, [(0, "books", 5, "25.25"), (1, "books", 1, "1.00")], 1,
                  {"vdl.newest_produced_ms": "1767225600123"})
    expected = [(0, "books", 7, "35.25"), (0, "toys", 1, "3.50"), (1, "books", 1, "1.00")]
    assert _rows(spark, table) == expected
    assert not _merge(engine, sink, spark, [(0, "books", 5, "25.25")], 1)
    assert _rows(spark, table) == expected and sink.skipped == [1] and sink.committed == [0, 1]
    assert newest_produced_ms(spark, table) == 1767225600123
    newest = next(commit_metadata(spark, table))
    assert newest == {"vdl.app_id": "query-1", "vdl.batch_id": "1", "vdl.newest_produced_ms": "1767225600123",
                      "version": 1}

    # The same rows under another app id are merged again and add up: what the skip prevents.
    _merge(engine, DeltaMergeSink(str(table), app_id="query-3", combine=combine), spark, [(0, "books", 5, "25.25")], 1)
    assert _rows(spark, table)[0] == (0, "books", 12, "60.50")


def test_either_engine_skips_what_the_other_committed(spark: Any, tmp_path: Path) -> None:
    """One table written by both engines: each reads the other's app transactions (a replay
    through the other engine is skipped) and merges onto the other's rows."""
    table = tmp_path / "agg"
    combine = {"orders": "t.orders + s.orders", "revenue": "t.revenue + s.revenue"}
    sink = DeltaMergeSink(str(table), app_id="query-1", combine=combine)
    assert _merge("delta-spark", sink, spark, [(0, "books", 2, "10.00")], 0)  # creates it
    assert not _merge("delta-rs", sink, spark, [(0, "books", 2, "10.00")], 0)
    assert _merge("delta-rs", sink, spark, [(0, "books", 1, "0.50"), (1, "toys", 1, "1.00")], 1)
    assert not _merge("delta-spark", sink, spark, [(0, "books", 1, "0.50")], 1)
    assert _merge("delta-spark", sink, spark, [(1, "toys", 2, "2.00")], 2)
    assert not _merge("delta-rs", sink, spark, [(1, "toys", 2, "2.00")], 2)
    assert sink.committed == [0, 1, 2] and sink.skipped == [0, 1, 2]
    assert _rows(spark, table) == [(0, "books", 3, "10.50"), (1, "toys", 3, "3.00")]
    assert last_committed_batch(spark, table, "query-1") == 2
    # The rows each commit changed, whichever engine's names for them (the demo prints these).
    changes = [(r.version, r.operation, r.updated, r.inserted, r.written)
               for r in history(spark, table).orderBy("version").collect()]
    assert changes == [(0, "WRITE", None, None, "1"), (1, "MERGE", "1", "1", "2"), (2, "MERGE", "1", "0", "2")]
    # delta-rs reads the same history from the log (the demo prints it so), newest first, with
    # each commit's metadata as DESCRIBE HISTORY has it.
    described = [(r.version, r.userMetadata) for r in history(spark, table).collect()]
    read = history_frame(deltalake.DeltaTable(str(table)))
    assert [(r.version, r.operation, r.updated, r.inserted, r.written) for r in read.itertuples()] == changes[::-1]
    assert [(r.version, r.userMetadata) for r in read.itertuples()] == described


def _added_file(table: Path, version: int) -> Path:
    """The data file commit `version` added (the table's first commits add one each)."""
    log = (table / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    [path] = [json.loads(line)["add"]["path"] for line in log if '"add"' in line]
    return table / path


def test_key_bounds_let_delta_skip_the_files_a_batch_cannot_match(spark: Any, tmp_path: Path) -> None:
    """With the batch's key bounds in the condition, a MERGE reads only the files whose
    statistics overlap them: a file of other windows, made unreadable, fails the MERGE without
    the bounds and is not touched with them; the result is the accumulated rows."""
    table = tmp_path / "agg"
    combine = {"orders": "t.orders + s.orders", "revenue": "t.revenue + s.revenue"}
    sink = DeltaMergeSink(str(table), app_id="query-1", combine=combine)
    sink.merge(_batch(spark, [(0, "books", 1, "1.00")]), 0)
    sink.merge(_batch(spark, [(10, "books", 1, "1.00")]), 1)  # a second file, minutes apart
    other = _added_file(table, 0)
    kept = other.read_bytes()
    other.write_bytes(b"not parquet")
    batch = [(10, "books", 2, "2.00"), (11, "toys", 1, "1.00")]
    with pytest.raises(Exception, match="(?i)parquet|corrupt|footer|magic"):
        sink.merge(_batch(spark, batch), 2)
    bounds = {"window_start": (datetime.fromtimestamp(600, UTC), datetime.fromtimestamp(660, UTC))}
    assert sink.merge(_batch(spark, batch), 2, key_bounds=bounds)
    other.write_bytes(kept)
    assert _rows(spark, table) == [(0, "books", 1, "1.00"), (10, "books", 3, "3.00"), (11, "toys", 1, "1.00")]


def test_delta_rs_merges_read_only_the_files_the_batch_s_key_bounds_overlap(spark: Any, tmp_path: Path) -> None:
    """merge_arrow bounds each key column to the batch's lowest and highest value itself: a file
    of other windows (and other categories), made unreadable, is not read; the rows of the
    windows at both bounds are matched (the bounds are inclusive, exact to the microsecond)."""
    table = tmp_path / "agg"
    combine = {"orders": "t.orders + s.orders", "revenue": "t.revenue + s.revenue"}
    sink = DeltaMergeSink(str(table), app_id="query-1", combine=combine)
    assert _merge("delta-rs", sink, spark, [(0, "books", 1, "1.00")], 0)
    assert _merge("delta-rs", sink, spark, [(10, "books", 1, "1.00"), (11, "toys", 1, "1.00")], 1)
    other = _added_file(table, 0)
    kept = other.read_bytes()
    other.write_bytes(b"not parquet")
    assert _merge("delta-rs", sink, spark, [(10, "books", 2, "2.00"), (11, "toys", 1, "1.00")], 2)
    other.write_bytes(kept)
    assert _rows(spark, table) == [(0, "books", 1, "1.00"), (10, "books", 3, "3.00"), (11, "toys", 2, "2.00")]
    # Not read is not skipped by luck: a batch whose bounds take in the first window reads it.
    other.write_bytes(b"not parquet")
    with pytest.raises(Exception, match="(?i)parquet|corrupt|footer|magic"):
        _merge("delta-rs", sink, spark, [(0, "books", 1, "1.00"), (10, "books", 1, "1.00")], 3)


RECORDS = 3_000
PER_BATCH = 1_000


def test_main_job_replaying_a_committed_batch_counts_it_once(spark: Any, broker: BrokerProcess,
                                                             tmp_path: Path) -> None:
    """The driver dies after batch 1's Delta MERGE committed and before Spark committed the batch
    (its offsets are in the checkpoint's offset log, not its commit log): the query restarted from
    the checkpoint runs batch 1 again with the same id and offsets. The enriched records are sent
    again with the same producer ids (stored once), the MERGE is skipped by Delta, and the table
    equals the aggregates of every event counted once."""
    from chispa import assert_df_equality

    bootstrap = broker.bootstrap
    with VdlClient(ClientSettings.from_bootstrap(bootstrap)) as client:
        client.create_streams(["replay-orders", "replay-enriched"])
    config = WorkloadConfig(records=RECORDS, seed=9)
    produce_workload(bootstrap, "replay-orders", config, progress=False)
    table, checkpoint = tmp_path / "orders_per_minute", str(tmp_path / "checkpoint")

    class DriverDied(RuntimeError):
        pass

    def run(crash_after: int | None) -> MainJobBatch:
        job = MainJobBatch(DeltaMergeSink(str(table), checkpoint=checkpoint, combine=ACCUMULATE), bootstrap,
                           "replay-enriched")

        def batch(orders: Any, batch_id: int) -> None:
            job(orders, batch_id)
            if batch_id == crash_after:
                raise DriverDied(f"after batch {batch_id}'s Delta commit")

        query = (parse_orders(read_orders(spark, bootstrap, "replay-orders", PER_BATCH)).writeStream
                 .option("checkpointLocation", checkpoint).foreachBatch(batch).trigger(availableNow=True).start())
        try:
            query.awaitTermination()
        except Exception as error:  # noqa: BLE001 - the injected crash, checked below
            assert crash_after is not None and "DriverDied" in str(error), error
        return job

    first = run(crash_after=1)
    assert first.sink.committed == [0, 1] and first.sink.skipped == []
    second = run(crash_after=None)
    assert second.sink.skipped == [1] and second.sink.committed == [2]
    assert [b.batch_id for b in second.times] == [1, 2]

    values = [v for _, v in events(config)]
    assert_df_equality(delta_frame(spark, table), oracle_frame(spark, values), ignore_nullable=True)
    with VdlClient(ClientSettings.from_bootstrap(bootstrap)) as client:
        assert client.list_offsets(["replay-enriched"], -1)["replay-enriched"] == RECORDS
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").orderBy("version").select("operation").collect()
    assert [r.operation for r in history] == ["WRITE", "MERGE", "MERGE"]



def test_enriched_orders_carry_their_dimensions_as_a_left_join_with_them_would(spark: Any) -> None:
    """The dimension lookups (map literals in the plan) give what a left join with the dimension
    tables gives: the department and region of known keys, nothing for an unknown or null key."""
    from pyspark.sql import functions as F

    from vdl_dev.pipeline import ORDER_COLUMNS, enrich_orders, order_schema
    from vdl_dev.workload import DEPARTMENTS, REGIONS

    at = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [("o1", "c1", at, "books", "p1", 1, Decimal("600.00"), Decimal("600.00"), "DE", "card"),
            ("o2", "c2", at, "toys", "p2", 2, Decimal("30.00"), Decimal("60.00"), "US", "card"),
            ("o3", "c3", at, "unknown", "p3", 1, Decimal("5.00"), Decimal("5.00"), "ZZ", "cash"),
            ("o4", "c4", at, None, "p4", 1, Decimal("5.00"), Decimal("5.00"), None, "cash")]
    orders = spark.createDataFrame(rows, order_schema()).withColumn("source_offset", F.lit(7).cast("long"))
    enriched = {row.key: json.loads(row.value) for row in enrich_orders(orders).collect()}
    assert {key: (v.get("department"), v.get("region"), v["amount_tier"]) for key, v in enriched.items()} == {
        "c1": (DEPARTMENTS["books"], REGIONS["DE"], "large"), "c2": (DEPARTMENTS["toys"], REGIONS["US"], "medium"),
        "c3": (None, None, "small"), "c4": (None, None, "small")}
    # The same JSON, field for field, as joining the dimension tables.
    departments = spark.createDataFrame(sorted(DEPARTMENTS.items()), "category string, department string")
    regions = spark.createDataFrame(sorted(REGIONS.items()), "country string, region string")
    tier = F.when(F.col("amount") >= 500, "large").when(F.col("amount") >= 50, "medium").otherwise("small")
    joined = (orders.join(departments, "category", "left").join(regions, "country", "left")
              .withColumn("amount_tier", tier)
              .select(F.col("customer_id").alias("key"),
                      F.to_json(F.struct(*ORDER_COLUMNS, "department", "region", "amount_tier", "source_offset"))
                      .alias("value")))
    assert sorted((r.key, r.value) for r in enrich_orders(orders).collect()) == \
        sorted((r.key, r.value) for r in joined.collect())


def test_key_bounds_become_sql_literals_delta_rs_coerces_or_none() -> None:
    from vdl_dev.delta_sink import sql_literal

    assert sql_literal(datetime(2026, 1, 1, 0, 1, tzinfo=UTC)) == "'2026-01-01T00:01:00+00:00'"
    assert sql_literal("o'brien") == "'o''brien'"
    assert [sql_literal(v) for v in (7, Decimal("12.50"), 1.5)] == ["7", "12.50", "1.5"]
    assert [sql_literal(v) for v in (None, True, float("nan"), b"raw")] == [None, None, None, None]

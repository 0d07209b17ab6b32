"""The shared SparkSession has Delta as a Databricks cluster does: delta-spark's SQL (MERGE,
DESCRIBE HISTORY, delta.`path`), its catalog (tables by name) and the Python DeltaTable API; and
its JVM maps the class archive `make jars` built."""

from __future__ import annotations

from pathlib import Path

from chispa import assert_df_equality


def test_delta_sql_catalog_and_python_api(spark, tmp_path: Path) -> None:  # noqa: ANN001
    from delta.tables import DeltaTable

    path = str(tmp_path / "t")
    spark.createDataFrame([(1, "a"), (2, "b")], "id long, v string").write.format("delta").save(path)
    updates = spark.createDataFrame([(2, "B"), (3, "c")], "id long, v string")
    (DeltaTable.forPath(spark, path).alias("t").merge(updates.alias("s"), "t.id = s.id")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    spark.sql(f"UPDATE delta.`{path}` SET v = 'A' WHERE id = 1")
    assert_df_equality(spark.read.format("delta").load(path).orderBy("id"),
                       spark.createDataFrame([(1, "A"), (2, "B"), (3, "c")], "id long, v string"))
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").select("version", "operation")
    assert [tuple(r) for r in history.collect()] == [(0, "WRITE"), (1, "MERGE"), (2, "UPDATE")]
    assert [r.id for r in spark.read.format("delta").option("versionAsOf", 0).load(path).orderBy("id").collect()] \
        == [1, 2]

    spark.sql(f"CREATE TABLE delta_session_t USING DELTA LOCATION '{path}'")  # the catalog is Delta's
    try:
        assert spark.table("delta_session_t").count() == 3
        assert spark.sql("DESCRIBE DETAIL delta_session_t").first().format == "delta"
    finally:
        spark.sql("DROP TABLE delta_session_t")


def test_the_sessions_jvm_maps_the_class_archive(spark) -> None:  # noqa: ANN001
    from pyspark import SparkContext

    from tests.support.processes import mapped_files
    from vdl_dev.jvm import class_archive

    mapped = mapped_files(SparkContext._gateway.proc.pid)  # noqa: SLF001 - pyspark keeps the JVM's process there
    assert str(class_archive()) in mapped, sorted(p for p in mapped if p.endswith(".jsa"))

"""Retention deletes offsets a query still needs: failOnDataLoss=true fails clearly, false continues."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from chispa import assert_df_equality

from tests.spark.kafka_helpers import admin, create_streams, expected_df, produce_kafka_python, query_failure
from tests.support.cluster import BrokerProcess, start_broker


@pytest.fixture(scope="module")
def tiny_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """Tiny segments and byte retention, checked often, so a few KiB of records delete old ones."""
    directory = tmp_path_factory.mktemp("tiny")
    config = directory / "broker.toml"
    config.write_text("segment_bytes = 1024\nretention_bytes = 3072\nretention_check_ms = 100\n")
    process = start_broker(directory, fsync=False, config=str(config))
    yield process
    process.kill()


def run(spark, bootstrap: str, checkpoint: str, fail_on_data_loss: bool, name: str = "lossy"):  # noqa: ANN001, ANN201
    stream = (spark.readStream.format("vdl").option("bootstrap.servers", bootstrap).option("subscribe", name)
              .option("startingOffsets", "earliest").option("failOnDataLoss", str(fail_on_data_loss).lower()).load())
    rows: list = []
    query = (stream.writeStream.foreachBatch(lambda df, _: rows.extend(df.collect()))
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    try:
        query.awaitTermination(120)
    except Exception:  # noqa: BLE001 - the failure is inspected through query.exception()
        pass
    return query, spark.createDataFrame(rows, stream.schema)


def test_retention_data_loss(spark, tiny_broker, tmp_path: Path) -> None:  # noqa: ANN001
    bootstrap = tiny_broker.bootstrap
    create_streams(bootstrap, "lossy")
    first = produce_kafka_python(bootstrap, "lossy", 10, "none", "a", with_headers=False)
    checkpoint = str(tmp_path / "checkpoint")
    query, got = run(spark, bootstrap, checkpoint, True)
    assert query_failure(query) is None
    assert_df_equality(got.orderBy("offset"), expected_df(spark, first, include_headers=False))

    more = produce_kafka_python(bootstrap, "lossy", 150, "none", "b" * 40, with_headers=False)
    with admin(bootstrap) as client:
        # wait until retention deleted the first records and then settled (stopped moving)
        deadline = time.monotonic() + 30
        previous, earliest = -1, client.list_offsets(["lossy"], -2)["lossy"]
        while earliest <= 10 or earliest != previous:
            assert time.monotonic() < deadline, "retention never deleted the first segments"
            time.sleep(0.5)
            previous, earliest = earliest, client.list_offsets(["lossy"], -2)["lossy"]

    query, _ = run(spark, bootstrap, checkpoint, True)
    assert query.exception() is not None
    message = str(query.exception())
    assert "stream 'lossy'" in message and f"offsets [10, {earliest})" in message and "failOnDataLoss" in message

    query, got = run(spark, bootstrap, checkpoint, False)
    assert query_failure(query) is None
    kept = [p for p in more if p.offset >= earliest]
    assert_df_equality(got.orderBy("offset"), expected_df(spark, kept, include_headers=False))


def test_deleted_stream_is_data_loss_at_an_available_now_restart(spark, tiny_broker, tmp_path: Path) -> None:  # noqa: ANN001
    """The stream went between two availableNow runs: the restart fails (failOnDataLoss=true) rather
    than finishing as if nothing were missing, and goes on with failOnDataLoss=false."""
    bootstrap = tiny_broker.bootstrap
    create_streams(bootstrap, "dropped")
    first = produce_kafka_python(bootstrap, "dropped", 10, "none", "d", with_headers=False)
    checkpoint = str(tmp_path / "checkpoint")
    query, got = run(spark, bootstrap, checkpoint, True, "dropped")
    assert query_failure(query) is None
    assert_df_equality(got.orderBy("offset"), expected_df(spark, first, include_headers=False))
    with admin(bootstrap) as client:
        client.delete_streams(["dropped"])
    query, _ = run(spark, bootstrap, checkpoint, True, "dropped")
    assert query.exception() is not None
    message = str(query.exception())
    assert "stream 'dropped' no longer exists; offsets from 10 on cannot be read" in message, message
    query, got = run(spark, bootstrap, checkpoint, False, "dropped")
    assert query_failure(query) is None and got.count() == 0

"""DeltaMergeSink with deltalake directly (no Spark): a replayed batch id is skipped, MERGE
upserts by key, and the app transaction is recorded in the same commit as the data."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from vdl_dev.delta_sink import newest_produced_ms
from vdl_dev.pipeline import (
    DeltaMergeSink,
    last_committed_batch,
    query_id_from_checkpoint,
    read_delta_table,
)

SCHEMA = pa.schema([("window_start", pa.timestamp("us", tz="UTC")), ("category", pa.string()),
                    ("orders", pa.int64()), ("revenue", pa.decimal128(20, 2))])


def _batch(rows: list[tuple[int, str, int, str]]) -> pa.Table:
    columns = list(zip(*rows, strict=True))
    starts = [datetime.fromtimestamp(minute * 60, UTC) for minute in columns[0]]
    return pa.table([pa.array(starts, SCHEMA.field(0).type), pa.array(columns[1]), pa.array(columns[2], pa.int64()),
                     pa.array([Decimal(v) for v in columns[3]], pa.decimal128(20, 2))], schema=SCHEMA)


def _rows(path: Path) -> list[tuple]:
    table = read_delta_table(path)
    return [(int(r["window_start"].timestamp()) // 60, r["category"], r["orders"], str(r["revenue"]))
            for r in table.to_pylist()]


def test_merge_upserts_and_a_replayed_batch_is_skipped(tmp_path: Path) -> None:
    table = tmp_path / "agg"
    sink = DeltaMergeSink(str(table), app_id="query-1")
    assert sink.write_arrow(_batch([(0, "books", 2, "10.00"), (0, "toys", 1, "3.50")]), 0)
    assert sink.write_arrow(_batch([(0, "books", 5, "25.00"), (1, "books", 1, "1.00")]), 1)
    expected = [(0, "books", 5, "25.00"), (0, "toys", 1, "3.50"), (1, "books", 1, "1.00")]
    assert _rows(table) == expected
    assert last_committed_batch(table, "query-1") == 1

    # Spark replays batch 1 after a crash (even with different contents): nothing changes.
    again = DeltaMergeSink(str(table), app_id="query-1")
    assert not again.write_arrow(_batch([(0, "books", 99, "99.00")]), 1)
    assert not again.write_arrow(_batch([(0, "books", 98, "98.00")]), 0)
    assert again.skipped == [1, 0] and _rows(table) == expected

    # Another query (another app id) has its own sequence of versions.
    other = DeltaMergeSink(str(table), app_id="query-2")
    assert other.write_arrow(_batch([(2, "home", 1, "2.00")]), 0)
    assert last_committed_batch(table, "query-2") == 0 and last_committed_batch(table, "query-1") == 1
    assert _rows(table)[-1] == (2, "home", 1, "2.00")


def test_no_table_means_no_committed_batch(tmp_path: Path) -> None:
    assert last_committed_batch(tmp_path / "missing", "q") is None


def test_app_id_is_the_query_id_from_the_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "metadata").write_text(json.dumps({"id": "1b2c-query"}) + "\n")
    assert query_id_from_checkpoint(tmp_path) == "1b2c-query"
    sink = DeltaMergeSink(str(tmp_path / "t"), checkpoint=str(tmp_path))
    assert sink.resolve_app_id() == "vdl-demo/1b2c-query"
    with pytest.raises(ValueError, match="app_id"):
        DeltaMergeSink(str(tmp_path / "t")).resolve_app_id()


def test_accumulating_merge_adds_partial_aggregates_and_skips_a_replay(tmp_path: Path) -> None:
    """With `combine`, a batch's rows add to the table's rows (the table holds the aggregation
    state); the replay of a committed batch still changes nothing."""
    table = tmp_path / "agg"
    combine = {"orders": "t.orders + s.orders", "revenue": "t.revenue + s.revenue"}
    sink = DeltaMergeSink(str(table), app_id="query-1", combine=combine)
    assert sink.write_arrow(_batch([(0, "books", 2, "10.00"), (0, "toys", 1, "3.50")]), 0)
    assert sink.write_arrow(_batch([(0, "books", 5, "25.25"), (1, "books", 1, "1.00")]), 1,
                            {"vdl.newest_produced_ms": "1767225600123"})
    expected = [(0, "books", 7, "35.25"), (0, "toys", 1, "3.50"), (1, "books", 1, "1.00")]
    assert _rows(table) == expected
    assert not sink.write_arrow(_batch([(0, "books", 5, "25.25")]), 1)
    assert _rows(table) == expected and sink.skipped == [1]
    assert newest_produced_ms(table) == 1767225600123
    history = DeltaTable(str(table)).history(1)[0]
    assert (history["vdl.batch_id"], history["vdl.newest_produced_ms"]) == ("1", "1767225600123")

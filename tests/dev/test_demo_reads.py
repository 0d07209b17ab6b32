"""How `vdl demo` reads its Delta tables at its end (vdl_dev.run.show_table,
vdl_dev.raw_table.raw_table_rows, and --follow's vdl_dev.follow.delta_orders): with delta-rs, in the demo's own process, the table written as
the main job writes it (DeltaMergeSink.merge_arrow: an append, then MERGEs)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from vdl_dev.delta_sink import DeltaMergeSink
from vdl_dev.follow import delta_orders
from vdl_dev.raw_table import raw_table_rows
from vdl_dev.run import show_table

SCHEMA = pa.schema([("window_start", pa.timestamp("us", "UTC")), ("window_end", pa.timestamp("us", "UTC")),
                    ("category", pa.string()), ("orders", pa.int64()), ("revenue", pa.decimal128(20, 2))])


def _rows(*rows: tuple[int, str, int, str]) -> pa.Table:
    """(minute, category, orders, revenue) rows of one-minute windows on 2026-01-01."""
    return pa.Table.from_pylist([{"window_start": datetime(2026, 1, 1, 0, minute, tzinfo=UTC),
                                  "window_end": datetime(2026, 1, 1, 0, minute + 1, tzinfo=UTC),
                                  "category": category, "orders": orders, "revenue": Decimal(revenue)}
                                 for minute, category, orders, revenue in rows], SCHEMA)


@pytest.fixture
def aggregates(tmp_path: Path) -> Path:
    path = tmp_path / "orders_per_minute"
    sink = DeltaMergeSink(str(path), app_id="vdl-demo/q", combine={"orders": "t.orders + s.orders",
                                                                   "revenue": "t.revenue + s.revenue"})
    sink.merge_arrow(_rows((0, "books", 2, "20.00"), (1, "toys", 1, "5.50")), 0)
    sink.merge_arrow(_rows((1, "toys", 3, "40.25"), (2, "books", 1, "9.99")), 1)
    return path


def test_show_table_prints_the_top_windows_and_the_history(aggregates: Path) -> None:
    lines: list[str] = []
    assert show_table(str(aggregates), lines.append, top=2) == (3, 1, 7)
    [header, table, described, history] = lines
    assert header == f"\ntop 2 of 3 rows of {aggregates} (Delta version 1), by revenue:"
    # Timestamps as Spark shows them in its session's zone (UTC), without the zone.
    assert table.splitlines() == [
        "       window_start          window_end category  orders revenue",
        "2026-01-01 00:01:00 2026-01-01 00:02:00     toys       4   45.75",
        "2026-01-01 00:00:00 2026-01-01 00:01:00    books       2   20.00"]
    assert described == f"\nDESCRIBE HISTORY delta.`{aggregates}`:"
    [columns, merge, write] = history.splitlines()
    assert columns.split() == ["version", "timestamp", "operation", "updated", "inserted", "written", "userMetadata"]
    assert merge.split()[:1] + merge.split()[3:8] == ["1", "MERGE", "1", "1", "3", '{"vdl.app_id":'], merge
    assert write.split()[:1] + write.split()[3:8] == ["0", "WRITE", "None", "None", "2", '{"vdl.app_id":'], write


def test_the_raw_table_is_counted_once_it_holds_the_rows(aggregates: Path, tmp_path: Path) -> None:
    assert raw_table_rows(str(aggregates), 3) == 3
    assert raw_table_rows(str(aggregates), 4, timeout_s=0.5) == 3  # what it holds at the deadline
    assert raw_table_rows(str(tmp_path / "none"), 1, timeout_s=0.5) == 0


def test_follow_totals_the_orders_the_table_counts(aggregates: Path, tmp_path: Path) -> None:
    assert delta_orders(aggregates) == 7  # 2 + (1 + 3) merged + 1
    assert delta_orders(tmp_path / "none") == 0

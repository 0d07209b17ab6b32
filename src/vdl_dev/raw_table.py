"""The demo's `orders` stream is also a Delta table (a stream with vdl.table.path): the brokers
land every raw record in it, and the demo checks its row count against the records produced."""

from __future__ import annotations

import time
from pathlib import Path

RAW_TABLE_LAG_MS = 1000  # the demo waits for the table at its end: keep that short


def raw_table_path(base: str | Path) -> str:
    return str(Path(base) / "delta" / "orders_raw")


def raw_table_config(base: str | Path) -> dict[str, str]:
    return {"vdl.table.path": raw_table_path(base), "vdl.table.format": "raw",
            "vdl.table.lag.ms": str(RAW_TABLE_LAG_MS)}


def raw_table_rows(path: str, expected: int, timeout_s: float = 60.0) -> int:
    """The table's row count (delta-rs, from its files' statistics: no Spark job) once it reached
    `expected` (or whatever it holds at the deadline)."""
    from vdl_dev.delta_sink import query_delta_value

    deadline = time.monotonic() + timeout_s
    while True:
        rows = query_delta_value(path, "SELECT count(*) FROM t") or 0
        if rows >= expected or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)

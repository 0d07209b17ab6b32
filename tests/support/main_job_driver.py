"""The main job's process (vdl_dev.job) with a test-only pause: with VDL_TEST_PAUSE_AT="BATCH:MARKER",
micro-batch BATCH stops between its enriched write into VDL and its window aggregates (their Delta
MERGE), writes MARKER and waits there for ever -- for a test to kill the driver at exactly that
point. Without the variable it is vdl_dev.job unchanged."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

PAUSE_VARIABLE = "VDL_TEST_PAUSE_AT"


def install_pause(spec: str) -> None:
    from vdl_dev import pipeline

    batch_text, marker = spec.split(":", 1)
    target = int(batch_text)
    running = threading.local()
    call, aggregate = pipeline.MainJobBatch.__call__, pipeline.aggregate_orders

    def batch_call(self: Any, orders: Any, batch_id: int) -> None:
        running.batch_id = batch_id
        call(self, orders, batch_id)

    def paused_aggregate(orders: Any, *args: Any, **kwargs: Any) -> Any:
        # MainJobBatch aggregates right after its enriched write returned.
        if getattr(running, "batch_id", None) == target:
            Path(marker).write_text(f"{os.getpid()}\n")
            threading.Event().wait()  # until SIGKILL
        return aggregate(orders, *args, **kwargs)

    pipeline.MainJobBatch.__call__ = batch_call  # type: ignore[method-assign]
    pipeline.aggregate_orders = paused_aggregate


if __name__ == "__main__":
    spec = os.environ.pop(PAUSE_VARIABLE, None)  # not for Spark's JVM and workers
    if spec:
        install_pause(spec)
    from vdl_dev.job import main

    sys.exit(main(sys.argv[1:]))

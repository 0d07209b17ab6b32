"""vdl_client against a real broker: pipelined idempotent produce through a restart."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa

from tests.support.cluster import start_broker
from vdl_client import ClientSettings, VdlClient
from vdl_connector.arrow import RecordColumns, build_batch
from vdl_wire.records.record_batch import iter_batches, read_records


def batch(producer: tuple[int, int], sequence: int, values: list[bytes]) -> bytes:
    columns = RecordColumns(None, pa.array(values, pa.binary()))
    return build_batch(columns.encode(0, len(values)), len(values), 1, producer[0], producer[1], sequence)


def read_all(client: VdlClient, stream: str) -> list[bytes]:
    end = client.list_offsets([stream], -1)[stream]
    values, position = [], 0
    while position < end:
        result = client.fetch(stream, position, 1 << 20, 1 << 20, 100, time.monotonic() + 10)
        for header, data in iter_batches(result.records):
            values += [r.value for r in read_records(data) if r.offset >= position]
            position = header.next_offset
    return values


def test_pipeline_resends_in_order_through_a_restart(tmp_path: Path) -> None:
    broker = start_broker(tmp_path, fsync=False)
    try:
        with VdlClient(ClientSettings((broker.bootstrap,), deadline_ms=30_000, retry_backoff_ms=50)) as client:
            client.create_streams(["pipe"])
            producer = client.init_producer_id()
            pipeline = client.pipeline("pipe", 5_000, 30_000, 3)
            expected: list[bytes] = []
            for i in range(30):
                values = [f"{i}-{j}".encode() for j in range(100)]
                pipeline.submit(batch(producer, i * 100, values))
                expected += values
                if i == 14:
                    broker.restart()  # clean stop: in-flight answers may be lost, data is kept
            pipeline.finish()
            # the same batch again (a retried task attempt) is acknowledged, not stored twice
            client.produce("pipe", batch(producer, 2900, [f"29-{j}".encode() for j in range(100)]), 5_000,
                           time.monotonic() + 10)
            assert read_all(client, "pipe") == expected
    finally:
        broker.kill()

"""The single-node StreamPartition seam over a real StreamLog: offsets, HW, waiting, idempotence."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.kafka import numbered_batch as batch
from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.protocol.errors import ErrorCode
from vdl_broker.server.partition import PartitionError, StreamPartition


def open_partition(tmp_path: Path) -> StreamPartition:
    return StreamPartition("s", StreamLog.open(tmp_path / "s", LogConfig(fsync=False)), node_id=1)


def test_offsets_and_high_watermark(tmp_path: Path) -> None:
    async def run() -> None:
        partition = open_partition(tmp_path)
        assert await partition.append(batch(3), acks=1) == 0
        assert partition.high_watermark == 3
        assert await partition.append(batch(2), acks=-1) == 3
        result = partition.append_nowait(batch(1))  # appended, not yet synced: invisible
        assert result.base_offset == 5 and partition.high_watermark == 5
        await partition.sync()
        assert partition.high_watermark == 6
        partition.close()
    asyncio.run(run())


def test_wait_for_data_wakes_on_append_and_times_out(tmp_path: Path) -> None:
    async def run() -> None:
        partition = open_partition(tmp_path)
        loop = asyncio.get_running_loop()
        waiter = asyncio.create_task(partition.wait_for_data(0, 1, loop.time() + 5))
        await asyncio.sleep(0.01)
        assert not waiter.done()
        await partition.append(batch(1), acks=0)  # acks=0 still schedules the sync
        await asyncio.wait_for(waiter, 2)
        started = loop.time()
        await partition.wait_for_data(1, 1, started + 0.05)
        assert loop.time() - started >= 0.04
        partition.close()
    asyncio.run(run())


def test_idempotent_duplicates_and_rebuild(tmp_path: Path) -> None:
    async def run() -> None:
        partition = open_partition(tmp_path)
        first = batch(2, producer_id=9, seq=0)
        assert await partition.append(first, acks=1) == 0
        assert await partition.append(first, acks=1) == 0
        with pytest.raises(PartitionError) as error:
            await partition.append(batch(1, producer_id=9, seq=5), acks=1)
        assert error.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        partition.close()
        reopened = open_partition(tmp_path)
        assert reopened.rebuild_producer_state() == 1
        assert (await reopened.append_batch(first, acks=1)).duplicate
        assert await reopened.append(batch(1, producer_id=9, seq=2), acks=1) == 2
        reopened.close()
    asyncio.run(run())

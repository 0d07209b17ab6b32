"""DescribeProducers' LastTimestamp comes from the producer table, not from a read of the log per
producer (a stream's exactly-once writers leave thousands of producers, each answered in the
event loop); a batch booked from a snapshot written before the table kept timestamps is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from vdl_broker.log import LogConfig, StreamLog
from vdl_broker.raft.types import Entry, EntryType
from vdl_broker.server.handlers.describe_producers import _last_timestamp
from vdl_broker.server.partition import Partition
from vdl_broker.server.producer_state import BatchMetadata
from vdl_wire.records.batch_header import with_base_offset
from vdl_wire.records.record_batch import RecordBatchBuilder

pytestmark = pytest.mark.unit

# producer id -> its batches' record timestamps (the max of a batch is not its last record's)
BATCHES = [(7, [1_000, 5_000, 3_000]), (8, [2_000]), (7, [9_000, 4_000]), (9, [6_000, 6_500])]


def applied(directory: Path) -> Partition:
    partition = Partition("s", StreamLog.open(directory, LogConfig(fsync=False)), node_id=1)
    sequences: dict[int, int] = {}
    for producer_id, timestamps in BATCHES:
        builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0,
                                     base_sequence=sequences.get(producer_id, 0))
        for i, timestamp in enumerate(timestamps):
            builder.append(timestamp, None, b"v%d" % i)
        sequences[producer_id] = sequences.get(producer_id, 0) + len(timestamps)
        log = partition.log
        data = bytes(with_base_offset(builder.build(), log.log_end_offset))
        entry = Entry(log.last_index + 1, 1, EntryType.DATA, data)
        log.append([entry])
        partition.on_apply([entry])
    return partition


def test_last_timestamp_is_the_tables_without_reading_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    partition = applied(tmp_path)

    def no_read(*_args: object) -> None:
        raise AssertionError("DescribeProducers read the log")

    monkeypatch.setattr(partition.log, "read", no_read)
    last = {producer_id: _last_timestamp(partition, partition.producers.last_batches(producer_id)[-1])
            for producer_id in (7, 8, 9)}
    assert last == {7: 9_000, 8: 2_000, 9: 6_500}
    monkeypatch.undo()
    partition.log.close()


def test_a_batch_booked_without_its_timestamp_is_read_from_the_log(tmp_path: Path) -> None:
    partition = applied(tmp_path)
    # As booked from a snapshot of the format before the table kept timestamps.
    assert [_last_timestamp(partition, BatchMetadata(0, 1, base_offset)) for base_offset in (0, 3, 4, 6)] == [
        5_000, 2_000, 9_000, 6_500]
    assert _last_timestamp(partition, BatchMetadata(0, 1, 2)) == -1  # not a batch's first offset
    partition.log.close()

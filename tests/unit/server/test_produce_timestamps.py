"""KIP-937's timestamp bounds in Produce (handlers/produce.check_timestamps), as Kafka 4's
LogValidator applies them: per record, bounds inclusive, the refused records named by index."""

from __future__ import annotations

import pytest

from vdl_broker.server.handlers.produce import Rejected, check_timestamps
from vdl_wire.errors import ErrorCode
from vdl_wire.records.record_batch import RecordBatchBuilder, validate_batch

NOW = 1_800_000_000_000
LONG_MAX = (1 << 63) - 1
HOUR = 3_600_000


def _batches(*timestamps: int) -> list:
    builder = RecordBatchBuilder()
    for timestamp in timestamps:
        builder.append(timestamp, None, b"v")
    batch = builder.build()
    return [(validate_batch(batch), batch)]


def test_bounds_are_inclusive_and_the_defaults_refuse_only_the_far_future() -> None:
    check_timestamps(_batches(NOW + HOUR, 0, -1, NOW), (LONG_MAX, HOUR), NOW)
    check_timestamps(_batches(NOW - 60_000), (60_000, HOUR), NOW)
    with pytest.raises(Rejected) as refused:
        check_timestamps(_batches(NOW, NOW + HOUR + 1, NOW - 60_001, NOW + 2 * HOUR), (60_000, HOUR), NOW)
    assert (refused.value.code, refused.value.message) == (
        ErrorCode.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp")
    bounds = f"The timestamp should be within [{NOW - 60_000}, {NOW + HOUR}]"
    assert [(e.batch_index, e.batch_index_error_message) for e in refused.value.record_errors] == [
        (1, f"Timestamp {NOW + HOUR + 1} of message with offset 1 is out of range. {bounds}"),
        (2, f"Timestamp {NOW - 60_001} of message with offset 2 is out of range. {bounds}"),
        (3, f"Timestamp {NOW + 2 * HOUR} of message with offset 3 is out of range. {bounds}")]


def test_bounds_near_long_max() -> None:
    with pytest.raises(Rejected) as refused:
        check_timestamps(_batches(LONG_MAX - 1), (LONG_MAX, LONG_MAX - NOW - 5), NOW)
    # NOW - Long.MAX_VALUE does not overflow; NOW + (Long.MAX_VALUE - NOW - 5) is just below it
    assert refused.value.record_errors[0].batch_index_error_message == (
        f"Timestamp {LONG_MAX - 1} of message with offset 0 is out of range. The timestamp should be within "
        f"[{NOW - LONG_MAX}, {LONG_MAX - 5}]")

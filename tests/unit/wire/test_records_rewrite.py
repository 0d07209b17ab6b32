"""rewrite_batch: what a leader stores of a produced batch on a stream with compression.type
other than producer (recompressed) or message.timestamp.type=LogAppendTime (stamped), as Kafka's
LogValidator: the records and every header field but the codec, max timestamp, timestamp type,
length and CRC kept as produced."""

from __future__ import annotations

import pytest

from vdl_wire.errors import DecodeError
from vdl_wire.records.batch_header import BATCH_HEADER_SIZE, CRC_OFFSET, parse_batch_header
from vdl_wire.records.compression import Compression
from vdl_wire.records.control import end_txn_marker
from vdl_wire.records.record_batch import RecordBatchBuilder, read_records, rewrite_batch, validate_batch

ROWS = [(1_700_000_000_000 + 5 * i, b"k%d" % i, b"value-%d-" % i + b"x" * 200, [("h", b"%d" % i), ("n", None)])
        for i in range(50)]


def batch(codec: Compression, *, transactional: bool = False) -> bytes:
    builder = RecordBatchBuilder(codec, base_offset=0, producer_id=4242, producer_epoch=7, base_sequence=300,
                                 is_transactional=transactional, partition_leader_epoch=-1)
    for timestamp, key, value, headers in ROWS:
        builder.append(timestamp, key, value, headers)
    return builder.build()


def rows(data: bytes | bytearray | memoryview) -> list[tuple[int, int, bytes | None, bytes | None, list]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in read_records(data)]


@pytest.mark.parametrize("source", list(Compression))
@pytest.mark.parametrize("target", list(Compression))
def test_recompressed_batch_keeps_records_and_producer_fields(source: Compression, target: Compression) -> None:
    original = batch(source, transactional=True)
    header = validate_batch(original)
    out = rewrite_batch(original, header, target)
    if source == target:
        assert out is original  # nothing to do: the produced bytes themselves
        return
    stored = validate_batch(out)  # CRC32C computed anew
    assert stored.compression == target
    assert (stored.base_offset, stored.last_offset_delta, stored.base_timestamp, stored.max_timestamp,
            stored.producer_id, stored.producer_epoch, stored.base_sequence, stored.record_count,
            stored.is_transactional, stored.timestamp_type, stored.partition_leader_epoch) == (
        0, 49, 1_700_000_000_000, 1_700_000_000_245, 4242, 7, 300, 50, True, 0, -1)
    assert rows(out) == [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(ROWS)]


def test_level_changes_the_bytes_not_the_records() -> None:
    original = batch(Compression.NONE)
    header = validate_batch(original)
    fast = rewrite_batch(original, header, Compression.GZIP, level=1)
    best = rewrite_batch(original, header, Compression.GZIP, level=9)
    assert rows(fast) == rows(best) == rows(original)
    assert validate_batch(fast).compression == validate_batch(best).compression == Compression.GZIP
    for codec, level in ((Compression.LZ4, 1), (Compression.LZ4, 17), (Compression.ZSTD, -5), (Compression.ZSTD, 22)):
        assert rows(rewrite_batch(original, header, codec, level=level)) == rows(original)


@pytest.mark.parametrize("target", [None, Compression.ZSTD])
def test_log_append_time_stamps_the_batch_and_every_record(target: Compression | None) -> None:
    original = batch(Compression.LZ4)
    out = rewrite_batch(original, validate_batch(original), target, log_append_time=1_800_000_000_123)
    stored = validate_batch(out)
    assert stored.timestamp_type == 1
    assert stored.max_timestamp == 1_800_000_000_123
    assert stored.base_timestamp == 1_700_000_000_000  # as Kafka's LogValidator leaves it
    assert stored.compression == (Compression.LZ4 if target is None else target)
    assert rows(out) == [(i, 1_800_000_000_123, k, v, h) for i, (_, k, v, h) in enumerate(ROWS)]
    # The records' bytes are the produced ones: only the header changed.
    if target is None:
        assert out[BATCH_HEADER_SIZE:] == original[BATCH_HEADER_SIZE:]
        assert out[:CRC_OFFSET] == original[:CRC_OFFSET]


@pytest.mark.parametrize("target", [None, Compression.ZSTD])
def test_a_create_time_stream_unmarks_a_batch_marked_log_append_time(target: Compression | None) -> None:
    builder = RecordBatchBuilder(Compression.LZ4, log_append_time=True)
    for timestamp, key, value, headers in ROWS:
        builder.append(timestamp, key, value, headers)
    original = builder.build()
    header = validate_batch(original)
    if target is None:  # without create_time (a LogAppendTime stream stamps it): nothing to do
        assert rewrite_batch(original, header) is original
    out = rewrite_batch(original, header, target, create_time=True)
    stored = validate_batch(out)
    assert (stored.timestamp_type, stored.base_timestamp, stored.max_timestamp) == (
        0, 1_700_000_000_000, 1_700_000_000_245)  # Kafka's in-place validation keeps the max timestamp
    assert rows(out) == [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(ROWS)]
    unmarked = batch(Compression.LZ4)
    assert rewrite_batch(unmarked, validate_batch(unmarked), None, create_time=True) is unmarked


def test_control_batches_are_never_rewritten() -> None:
    marker = end_txn_marker(4242, 7, True, 3, 1_700_000_000_000)
    header = validate_batch(marker)
    assert rewrite_batch(marker, header, Compression.GZIP, log_append_time=1_800_000_000_000) is marker


def test_records_that_do_not_decompress_are_a_decode_error() -> None:
    original = bytearray(batch(Compression.GZIP))
    original[BATCH_HEADER_SIZE + 20] ^= 0xFF  # inside the deflate stream (the CRC is not checked here)
    with pytest.raises(DecodeError):
        rewrite_batch(original, parse_batch_header(original), Compression.ZSTD)

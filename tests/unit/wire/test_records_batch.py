"""RecordBatch v2 API and compression codecs against peers' encoders."""

from __future__ import annotations

import struct

import aiokafka.codec as aio_codec
import kafka.codec as kp_codec
import lz4.frame
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vdl_connector.arrow import decode_columns_arrow
from vdl_wire.errors import DecodeError
from vdl_wire.records import (
    BATCH_HEADER_SIZE,
    Compression,
    RecordBatchBuilder,
    compress,
    decode_columns,
    decompress,
    is_record_batch_v2,
    iter_batches,
    parse_batch_header,
    read_records,
    validate_batch,
    with_base_offset,
)
from vdl_wire.records.compression import _xxh32
from vdl_wire.records.message_set import _lz4_broken_header_checksum

BASE_TS = 1_700_000_000_000


def build(base_offset: int = 0, count: int = 3, codec: Compression = Compression.NONE, **options: object) -> bytes:
    builder = RecordBatchBuilder(codec, base_offset=base_offset, **options)
    for i in range(count):
        builder.append(BASE_TS + i, b"k", b"value-%d" % i)
    return builder.build()


def test_header_fields_and_properties() -> None:
    batch = build(100, 5, Compression.LZ4, producer_id=7, producer_epoch=1, base_sequence=3, is_transactional=True)
    header = validate_batch(batch)
    assert header.base_offset == 100 and header.last_offset == 104 and header.next_offset == 105
    assert header.batch_length == len(batch) - 12 and header.magic == 2
    assert header.compression == Compression.LZ4 and header.is_transactional and not header.is_control
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 1, 3)
    assert (header.base_timestamp, header.max_timestamp, header.record_count) == (BASE_TS, BASE_TS + 4, 5)
    assert header.timestamp_type == 0 and is_record_batch_v2(batch)
    assert parse_batch_header(batch) == header


def test_control_and_log_append_time() -> None:
    batch = build(0, 2, is_control=True, log_append_time=True)
    header = validate_batch(batch)
    assert header.is_control and header.timestamp_type == 1
    assert [r.timestamp for r in read_records(batch)] == [BASE_TS + 1, BASE_TS + 1]
    assert decode_columns(batch).timestamps == [BASE_TS + 1, BASE_TS + 1]


def test_with_base_offset_keeps_crc_valid() -> None:
    batch = build(0, 4, Compression.ZSTD)
    moved = with_base_offset(batch, 12345)
    assert isinstance(moved, bytearray)
    header = validate_batch(moved)
    assert header.base_offset == 12345 and moved[8:] == batch[8:]
    assert [r.offset for r in read_records(moved)] == [12345, 12346, 12347, 12348]


def test_iter_batches_stops_at_partial_tail() -> None:
    buffers = [build(0, 2), build(2, 3, Compression.GZIP), build(5, 1)]
    joined = b"".join(buffers)
    found = list(iter_batches(joined))
    assert [h.base_offset for h, _ in found] == [0, 2, 5]
    assert [bytes(view) for _, view in found] == buffers
    assert [h.base_offset for h, _ in iter_batches(joined[:-1])] == [0, 2]
    assert [h.base_offset for h, _ in iter_batches(joined[: len(buffers[0]) + 20])] == [0]
    assert list(iter_batches(b"")) == []


def test_builder_sizes_and_offsets() -> None:
    builder = RecordBatchBuilder()
    assert builder.record_count == 0 and builder.estimated_size == BATCH_HEADER_SIZE
    builder.append(BASE_TS, None, b"x" * 10)
    builder.append(BASE_TS, None, b"y", offset=5)
    assert builder.record_count == 2 and builder.estimated_size > BATCH_HEADER_SIZE + 11
    with pytest.raises(ValueError):
        builder.append(BASE_TS, None, b"z", offset=5)
    batch = builder.build()
    assert [r.offset for r in read_records(batch)] == [0, 5]
    assert validate_batch(batch).last_offset_delta == 5
    with pytest.raises(ValueError):
        RecordBatchBuilder().build()


def test_headers_round_trip_and_unicode() -> None:
    builder = RecordBatchBuilder(Compression.SNAPPY)
    builder.append(BASE_TS, None, None, [("ключ", b"\x00\xff"), ("empty", b""), ("null", None)])
    (record,) = read_records(builder.build())
    assert record.key is None and record.value is None
    assert record.headers == [("ключ", b"\x00\xff"), ("empty", b""), ("null", None)]


PAYLOAD = bytes(range(256)) * 300 + b"z" * 70000


@pytest.mark.parametrize("codec", list(Compression))
def test_compression_round_trip(codec: Compression) -> None:
    assert decompress(codec, compress(codec, PAYLOAD)) == PAYLOAD
    assert decompress(codec, compress(codec, b"")) == b""


def test_peer_codecs_decoded() -> None:
    assert decompress(Compression.SNAPPY, kp_codec.snappy_encode(PAYLOAD)) == PAYLOAD  # xerial
    assert decompress(Compression.SNAPPY, kp_codec.snappy_encode(PAYLOAD, xerial_compatible=False)) == PAYLOAD
    assert decompress(Compression.SNAPPY, aio_codec.snappy_encode(PAYLOAD)) == PAYLOAD
    assert decompress(Compression.LZ4, kp_codec.lz4_encode(PAYLOAD)) == PAYLOAD
    assert decompress(Compression.LZ4, aio_codec.lz4_encode(PAYLOAD)) == PAYLOAD
    assert decompress(Compression.GZIP, kp_codec.gzip_encode(PAYLOAD)) == PAYLOAD
    assert decompress(Compression.ZSTD, kp_codec.zstd_encode(PAYLOAD)) == PAYLOAD
    assert decompress(Compression.ZSTD, aio_codec.zstd_encode(PAYLOAD)) == PAYLOAD
    two_frames = aio_codec.zstd_encode(b"ab") + aio_codec.zstd_encode(b"cd")
    assert decompress(Compression.ZSTD, two_frames) == b"abcd"


def test_our_codecs_decoded_by_peers() -> None:
    assert kp_codec.snappy_decode(compress(Compression.SNAPPY, PAYLOAD)) == PAYLOAD
    assert aio_codec.snappy_decode(compress(Compression.SNAPPY, PAYLOAD)) == PAYLOAD
    assert kp_codec.lz4_decode(compress(Compression.LZ4, PAYLOAD)) == PAYLOAD
    assert aio_codec.lz4_decode(compress(Compression.LZ4, PAYLOAD)) == PAYLOAD
    assert kp_codec.gzip_decode(compress(Compression.GZIP, PAYLOAD)) == PAYLOAD
    assert aio_codec.zstd_decode(compress(Compression.ZSTD, PAYLOAD)) == PAYLOAD


def test_lz4_old_kafka_header_checksum_accepted() -> None:
    frame = compress(Compression.LZ4, PAYLOAD)
    broken = _lz4_broken_header_checksum(frame)
    assert broken != frame
    assert decompress(Compression.LZ4, broken) == PAYLOAD
    garbled = bytearray(frame)
    garbled[6] ^= 0x55  # neither checksum
    with pytest.raises(DecodeError):
        decompress(Compression.LZ4, bytes(garbled))


def test_xerial_little_endian_version_ignored() -> None:
    stream = bytearray(kp_codec.snappy_encode(PAYLOAD))
    struct.pack_into("<ii", stream, 8, 1, 1)
    assert decompress(Compression.SNAPPY, bytes(stream)) == PAYLOAD


_bytes_or_none = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=60, max_size=200))
_record = st.tuples(st.integers(-1, 2**40), _bytes_or_none, _bytes_or_none,
                    st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))), max_size=2))


@settings(max_examples=60, deadline=None)
@given(records=st.lists(_record, min_size=1, max_size=40), repeat=st.integers(1, 30),
       codec=st.sampled_from([Compression.NONE, Compression.LZ4]), with_headers=st.booleans())
def test_builder_reader_columns_agree(records: list, repeat: int, codec: Compression, with_headers: bool) -> None:
    # Repeating records makes equal-size runs (the vectorized path); random ones the walk path.
    builder = RecordBatchBuilder(codec, base_offset=3)
    expected = []
    for timestamp, key, value, headers in records * repeat:
        headers = headers if with_headers else []
        builder.append(timestamp, key, value, headers)
        expected.append((timestamp, key, value, headers))
    batch = builder.build()
    got = [(r.timestamp, r.key, r.value, r.headers) for r in read_records(batch)]
    assert got == expected
    columns = decode_columns(batch)
    assert columns.offsets == list(range(3, 3 + len(expected)))
    assert list(zip(columns.timestamps, columns.keys, columns.values, [list(h) for h in columns.headers],
                    strict=True)) == expected
    arrow = decode_columns_arrow(batch)
    assert arrow.keys.to_pylist() == columns.keys and arrow.values.to_pylist() == columns.values
    assert arrow.timestamps.to_pylist() == columns.timestamps


def test_lz4_limits_and_forged_content_size() -> None:
    frame = compress(Compression.LZ4, PAYLOAD)
    assert decompress(Compression.LZ4, frame, len(PAYLOAD)) == PAYLOAD
    with pytest.raises(DecodeError, match="exceeds"):
        decompress(Compression.LZ4, frame, len(PAYLOAD) - 1)
    forged = bytearray(lz4.frame.compress(b"abc" * 1000, block_linked=False, store_size=True))
    struct.pack_into("<Q", forged, 6, 1 << 40)  # declared content size: 1 TiB
    forged[14] = (_xxh32(bytes(forged[4:14])) >> 8) & 0xFF
    with pytest.raises(DecodeError):
        decompress(Compression.LZ4, bytes(forged), 1 << 20)

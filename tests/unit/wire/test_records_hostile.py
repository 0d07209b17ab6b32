"""Hostile record input: always DecodeError, never another exception, a hang or a big allocation."""

from __future__ import annotations

import random
import struct
import zlib

import crc32c
import pytest

from vdl_connector.arrow import decode_columns_arrow
from vdl_wire.errors import DecodeError
from vdl_wire.records import (
    Compression,
    RecordBatchBuilder,
    compress,
    decode_columns,
    decompress,
    iter_batches,
    message_set_to_batches,
    parse_batch_header,
    read_message_set,
    read_records,
    validate_batch,
)
from vdl_wire.records.message_set import build_message_set, encode_message

BASE_TS = 1_700_000_000_000


def small_batch(codec: Compression, headers: bool = False) -> bytes:
    builder = RecordBatchBuilder(codec, base_offset=10)
    for i in range(6):
        builder.append(BASE_TS + i, None if i == 2 else b"k%d" % i, b"v" * (i * 30),
                       [("h", b"x")] if headers and i == 1 else ())
    return builder.build()


def recrc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def decode_all(buf: bytes, verify_crc: bool = True) -> None:
    """Every reader (records, columns, the connector's vectorized Arrow decoder); the results of
    the readers that succeed must agree."""
    outcomes = []
    for reader in (lambda: [(r.offset, r.timestamp, r.key, r.value) for r in read_records(buf, verify_crc=verify_crc)],
                   lambda: _columns(decode_columns(buf, verify_crc=verify_crc)),
                   lambda: _arrow_columns(decode_columns_arrow(buf, verify_crc=verify_crc))):
        try:
            outcomes.append(reader())
        except DecodeError:
            outcomes.append(DecodeError)
    decoded = [outcome for outcome in outcomes if outcome is not DecodeError]
    assert all(outcome == decoded[0] for outcome in decoded), outcomes


def _columns(columns: object) -> list[tuple]:
    return list(zip(columns.offsets, columns.timestamps, columns.keys, columns.values, strict=True))


def _arrow_columns(columns: object) -> list[tuple]:
    return list(zip(columns.offsets.to_pylist(), columns.timestamps.to_pylist(), columns.keys.to_pylist(),
                    columns.values.to_pylist(), strict=True))


@pytest.mark.parametrize("codec", list(Compression))
def test_truncation_at_every_byte(codec: Compression) -> None:
    batch = small_batch(codec, headers=codec == Compression.GZIP)
    for cut in range(len(batch)):
        with pytest.raises(DecodeError):
            validate_batch(batch[:cut])
        with pytest.raises(DecodeError):
            list(read_records(batch[:cut]))
        with pytest.raises(DecodeError):
            decode_columns(batch[:cut])
        assert list(iter_batches(batch[:cut])) == []  # a partial trailing batch ends iteration


@pytest.mark.parametrize("codec", list(Compression))
def test_flipped_bytes_fail_crc_or_decode(codec: Compression) -> None:
    batch = small_batch(codec)
    for position in range(len(batch)):
        flipped = bytearray(batch)
        flipped[position] ^= 0x5A
        if position < 12 or 12 <= position < 16:  # base offset, length, leader epoch: outside the CRC
            try:
                validate_batch(bytes(flipped))
            except DecodeError:
                pass
            continue
        with pytest.raises(DecodeError):
            validate_batch(bytes(flipped))
        with pytest.raises(DecodeError):
            list(read_records(bytes(flipped)))


def test_vectorized_path_fuzz() -> None:
    # Equal-size records take the run-verified vectorized path; corrupt them and compare paths.
    rng = random.Random(3)
    builder = RecordBatchBuilder(Compression.NONE)
    for _ in range(40):
        builder.append(BASE_TS, b"kk", b"v" * 20)
    batch = builder.build()
    for _ in range(400):
        corrupt = bytearray(batch)
        for _ in range(rng.randint(1, 2)):
            corrupt[rng.randrange(61, len(corrupt))] = rng.choice([0x00, 0x02, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        decode_all(bytes(corrupt), verify_crc=False)


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.LZ4])
def test_parser_fuzz_with_valid_crc(codec: Compression) -> None:
    # Corrupt the records section but fix the CRC, so the record parsers themselves are attacked.
    rng = random.Random(int(codec))
    batch = small_batch(codec, headers=True)
    plain = small_batch(Compression.NONE)
    for trial in range(400):
        corrupt = bytearray(plain if codec == Compression.NONE else batch)
        for _ in range(rng.randint(1, 3)):
            position = rng.randrange(61, len(corrupt))
            corrupt[position] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        decode_all(recrc(corrupt))
        decode_all(bytes(corrupt), verify_crc=False)
        if trial % 50 == 0:
            decode_all(recrc(bytearray(plain[:61]) + bytes(rng.randrange(256) for _ in range(200))))


def test_random_garbage_everywhere() -> None:
    rng = random.Random(7)
    for _ in range(300):
        garbage = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))
        for function in (validate_batch, parse_batch_header, lambda b: list(iter_batches(b)),
                         lambda b: list(read_records(b, verify_crc=False)),
                         lambda b: decode_columns(b, verify_crc=False),
                         read_message_set, message_set_to_batches):
            try:
                function(garbage)
            except DecodeError:
                pass
        for codec in list(Compression)[1:]:
            try:
                decompress(codec, garbage, 1 << 20)
            except DecodeError:
                pass


def test_bad_lengths_and_counts() -> None:
    batch = bytearray(small_batch(Compression.NONE))
    huge_count = bytearray(batch)
    struct.pack_into(">i", huge_count, 57, 2**31 - 1)
    with pytest.raises(DecodeError, match="record count"):
        decode_columns(recrc(huge_count))
    with pytest.raises(DecodeError):
        validate_batch(recrc(huge_count))
    negative = bytearray(batch)
    struct.pack_into(">i", negative, 57, -1)
    with pytest.raises(DecodeError, match="negative"):
        validate_batch(recrc(negative))
    short = bytearray(batch)
    struct.pack_into(">i", short, 8, 10)
    with pytest.raises(DecodeError):
        list(iter_batches(bytes(short)))
    longer = bytearray(batch)
    struct.pack_into(">i", longer, 8, len(batch))
    with pytest.raises(DecodeError):
        validate_batch(bytes(longer))
    fewer = bytearray(batch)
    struct.pack_into(">i", fewer, 57, 5)
    with pytest.raises(DecodeError, match="left after"):
        list(read_records(recrc(fewer)))
    with pytest.raises(DecodeError):
        decode_columns(recrc(fewer))
    magic = bytearray(batch)
    magic[16] = 3
    with pytest.raises(DecodeError, match="magic"):
        validate_batch(bytes(magic))


def test_unknown_codec() -> None:
    batch = bytearray(small_batch(Compression.NONE))
    struct.pack_into(">h", batch, 21, 5)
    with pytest.raises(DecodeError, match="codec"):
        validate_batch(recrc(batch))
    with pytest.raises(DecodeError, match="codec"):
        decompress(6, b"abc")
    legacy = encode_message(0, 1, 6, BASE_TS, None, b"junk")
    with pytest.raises(DecodeError, match="codec"):
        read_message_set(legacy)


def test_nested_compression_legacy() -> None:
    inner_wrapper = build_message_set([(0, BASE_TS, None, b"a"), (1, BASE_TS, None, b"b")], 1, Compression.GZIP)
    outer = encode_message(0, 1, int(Compression.GZIP), BASE_TS, None, compress(Compression.GZIP, inner_wrapper))
    with pytest.raises(DecodeError, match="nested"):
        read_message_set(outer)
    with pytest.raises(DecodeError, match="nested"):
        message_set_to_batches(outer)


def test_legacy_crc_and_truncation() -> None:
    message_set = build_message_set([(i, BASE_TS, b"k", b"v" * i) for i in range(5)], 1, Compression.NONE)
    boundaries = {0}
    position = 0
    while position < len(message_set):
        position += 12 + struct.unpack_from(">i", message_set, position + 8)[0]
        boundaries.add(position)
    for cut in range(len(message_set)):
        records = read_message_set(message_set[:cut])  # fetch semantics: a partial tail ends it
        assert [r.offset for r in records] == list(range(len(records)))
        if cut in boundaries:
            assert len(message_set_to_batches(message_set[:cut])) == (1 if cut else 0)
            continue
        with pytest.raises(DecodeError):  # produce semantics: a partial entry is corrupt
            message_set_to_batches(message_set[:cut])
    offset_fields = {start + i for start in boundaries for i in range(8)}
    for position in range(len(message_set)):
        if position in offset_fields:
            continue  # entry offsets are outside the CRC (and replaced by the broker anyway)
        flipped = bytearray(message_set)
        flipped[position] ^= 0xFF
        try:
            message_set_to_batches(bytes(flipped))
        except DecodeError:
            continue
        raise AssertionError(f"flip at {position} not detected")


@pytest.mark.parametrize("codec", list(Compression)[1:])
def test_decompression_bomb(codec: Compression) -> None:
    payload = b"\x00" * (8 << 20)
    compressed = compress(codec, payload)
    assert len(compressed) < (1 << 20)
    with pytest.raises(DecodeError, match="exceeds"):
        decompress(codec, compressed, 1 << 20)
    # A batch whose records section is the bomb, read with a limit.
    header = bytearray(61)
    struct.pack_into(">qiibIhiqqqhii", header, 0, 0, 49 + len(compressed), -1, 2, 0, int(codec), 0,
                     BASE_TS, BASE_TS, -1, -1, -1, 1)
    with pytest.raises(DecodeError, match="exceeds"):
        decode_columns(recrc(header + compressed), max_output_bytes=1 << 20)
    legacy = encode_message(0, 1, int(codec), BASE_TS, None, compressed)
    if codec != Compression.ZSTD:
        with pytest.raises(DecodeError, match="exceeds"):
            read_message_set(legacy, max_output_bytes=1 << 20)


def test_snappy_declared_length_checked_before_allocation() -> None:
    with pytest.raises(DecodeError, match="exceeds"):
        decompress(Compression.SNAPPY, b"\xff\xff\xff\xff\x0f" + b"\x00" * 10, 1 << 20)
    xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", 2**31 - 1) + b"abc"
    with pytest.raises(DecodeError, match="exceeds the input"):
        decompress(Compression.SNAPPY, xerial)


def test_gzip_crc_corruption_detected() -> None:
    data = compress(Compression.GZIP, b"hello" * 100)
    broken = bytearray(data)
    broken[-6] ^= 0xFF  # gzip trailer CRC32
    with pytest.raises(DecodeError):
        decompress(Compression.GZIP, bytes(broken))
    assert zlib.crc32(b"") == 0

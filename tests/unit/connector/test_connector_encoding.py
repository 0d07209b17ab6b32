"""The writers' vectorized record encoding decodes back exactly (with the broker's reader)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from vdl_connector.arrow import (
    ARROW_HEADERS_TYPE,
    RecordColumns,
    build_batch,
    cut_points,
    encode_headers,
    encode_headers_column,
)
from vdl_wire.records.compression import Compression
from vdl_wire.records.record_batch import read_records, validate_batch

KEYS = pa.array([None if i % 3 == 0 else b"k%d" % i for i in range(300)], pa.binary())
VALUES = pa.array([b"v" * (i % 150) if i % 7 else None for i in range(300)], pa.binary())
HEADERS = pa.array([encode_headers([("a", b"1"), ("n", None)] if i % 5 == 0 else None) for i in range(300)],
                   pa.binary())


@pytest.mark.parametrize("with_headers", [False, True])
@pytest.mark.parametrize("rows", [slice(0, 300), slice(17, 250)])
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.ZSTD])
def test_encode_roundtrip(with_headers: bool, rows: slice, codec: int) -> None:
    keys, values = KEYS[rows], VALUES[rows]
    headers = HEADERS[rows] if with_headers else None
    columns = RecordColumns(keys, values, headers)
    batch = build_batch(columns.encode(0, columns.count), columns.count, 1234, 5, 0, 10, codec)
    header = validate_batch(batch)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (5, 0, 10)
    records = list(read_records(batch))
    assert [r.key for r in records] == keys.to_pylist()
    assert [r.value for r in records] == values.to_pylist()
    assert [r.offset for r in records] == list(range(columns.count))
    assert {r.timestamp for r in records} == {1234}
    if with_headers:
        assert [r.headers for r in records] == [[("a", b"1"), ("n", None)] if i % 5 == 0 else []
                                                for i in range(300)[rows]]


def test_cut_points_respect_batch_size() -> None:
    columns = RecordColumns(KEYS, VALUES, HEADERS)
    cuts = cut_points(columns.size_bounds(), 2000)
    start = 0
    for stop in [*cuts, columns.count]:
        batch = build_batch(columns.encode(start, stop), stop - start, 1, -1, -1, -1)
        assert len(batch) <= 2000
        assert len(list(read_records(batch))) == stop - start
        start = stop


@pytest.mark.parametrize("with_keys", [False, True])
def test_uniform_fast_path(with_keys: bool) -> None:
    count = 20_000
    values = pa.array([bytes([i % 256]) * 100 for i in range(count)], pa.binary())
    keys = pa.array([b"%05d" % i for i in range(count)], pa.binary()) if with_keys else None
    columns = RecordColumns(keys, values)
    for start, stop in ((0, count), (5, 9000)):
        batch = build_batch(columns.encode(start, stop), stop - start, 7, -1, -1, -1)
        records = list(read_records(batch))
        assert [r.value for r in records] == values.to_pylist()[start:stop]
        assert [r.key for r in records] == (keys.to_pylist()[start:stop] if with_keys else [None] * (stop - start))
        assert [r.offset for r in records] == list(range(stop - start))


@pytest.mark.parametrize("keys_kind", ["all null", "one length", "mixed"])
def test_rows_of_one_length_in_a_slice_of_an_arrow_array(keys_kind: str) -> None:
    """Fixed-width rows are found from the array's own offsets (a slice starts past byte 0), and
    keys all null count as one length (-1); keys of several lengths take the general path."""
    count = 3_000
    values = pa.array([b"%09d" % i + b"v" * 41 for i in range(count + 7)], pa.binary()).slice(7)
    keys = {"all null": pa.array([None] * (count + 7), pa.binary()),
            "one length": pa.array([b"%06d" % i for i in range(count + 7)], pa.binary()),
            "mixed": pa.array([b"k" * (i % 3) for i in range(count + 7)], pa.binary())}[keys_kind].slice(7)
    columns = RecordColumns(keys, values)
    assert columns.uniform == {"all null": (-1, 50), "one length": (6, 50), "mixed": None}[keys_kind]
    batch = build_batch(columns.encode(100, count), count - 100, 7, -1, -1, -1)
    records = list(read_records(batch))
    assert [r.value for r in records] == values.to_pylist()[100:]
    assert [r.key for r in records] == keys.to_pylist()[100:]


def test_an_empty_array_without_offsets() -> None:
    """Arrow lets an empty binary array carry no offsets at all (IPC writers may send it so)."""
    empty = pa.Array.from_buffers(pa.binary(), 0, [None, pa.py_buffer(b""), pa.py_buffer(b"")])
    columns = RecordColumns(empty, empty)
    assert (columns.count, columns.uniform, list(columns.size_bounds())) == (0, None, [])


def test_null_and_empty_header_sections_encode_as_no_headers() -> None:
    """A headers column may hold null or empty sections (rows written without headers next to
    rows with them): both encode as a count of 0, and the other fields stay in place."""
    sections = [encode_headers([("h", b"x" * i)]) if i % 3 == 0 else (None if i % 3 == 1 else b"")
                for i in range(200)]
    values = pa.array([b"%d" % i * (i % 90) for i in range(200)], pa.binary())
    columns = RecordColumns(None, values, pa.array(sections, pa.binary()))
    batch = build_batch(columns.encode(3, 200), 197, 9, -1, -1, -1)
    records = list(read_records(batch))
    assert [r.value for r in records] == values.to_pylist()[3:]
    assert [r.key for r in records] == [None] * 197
    assert [r.headers for r in records] == [[("h", b"x" * i)] if i % 3 == 0 else [] for i in range(3, 200)]
    assert [r.offset for r in records] == list(range(197))


@pytest.mark.parametrize("count", [2, 63, 64, 65, 9_000])
def test_equal_size_values_decode_exactly_across_record_size_changes(count: int) -> None:
    """Equal-size values are copied as strided runs: a run ends where an offset delta's varint
    grows (64, 8192), so records change size there; keys of varying size break the stride."""
    from vdl_wire.records.arrow import decode_columns_arrow

    values = pa.array([bytes([i % 251]) * 37 for i in range(count)], pa.binary())
    for keys in (None, pa.array([b"k" * (i % 3) for i in range(count)], pa.binary())):
        batch = build_batch(RecordColumns(keys, values).encode(0, count), count, 5, -1, -1, -1)
        decoded = decode_columns_arrow(batch)
        assert decoded.values.equals(values)
        assert decoded.offsets.to_pylist() == list(range(count))
        assert decoded.keys.to_pylist() == (keys.to_pylist() if keys is not None else [None] * count)


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD])
def test_encode_batch_in_place_equals_build_batch(codec: int) -> None:
    """encode_batch writes the records into the batch's own buffer (the uniform layout's template
    kept from batch to batch, grown when a longer one comes): the same bytes as build_batch."""
    uniform = pa.array([bytes([i % 256]) * 100 for i in range(9_000)], pa.binary())
    other_values = pa.array([b"%04d" % i + b"w" * 96 for i in range(9_000)], pa.binary())  # same layout
    cases = [(None, uniform, None, 0, 70), (None, uniform, None, 0, 9_000), (None, other_values, None, 100, 8_300),
             (KEYS, VALUES, None, 0, 300), (KEYS, VALUES, HEADERS, 17, 250)]
    for keys, values, headers, start, stop in cases:
        columns = RecordColumns(keys, values, headers)
        expected = build_batch(columns.encode(start, stop), stop - start, 1234, 5, 0, 10, codec)
        batch = columns.encode_batch(start, stop, 1234, 5, 0, 10, codec)
        assert bytes(batch) == expected
        validate_batch(bytes(batch))
        assert [r.value for r in read_records(bytes(batch))] == values.to_pylist()[start:stop]


def test_headers_column_encodes_as_each_row_alone() -> None:
    """Spark's headers column (array<struct<key, value>>) is encoded for all rows at once: the same
    sections as encode_headers row by row, null and empty lists included, on a slice too."""
    rows = [None if i % 11 == 0 else [] if i % 7 == 0 else
            [{"key": "k" * (i % 4) + str(j), "value": None if (i + j) % 5 == 0 else bytes([i % 256]) * ((i * j) % 140)}
             for j in range(i % 4 + 1)] for i in range(400)]
    column = pa.array(rows, ARROW_HEADERS_TYPE)
    for part in (column, column[13:321]):
        expected = [encode_headers([(h["key"], h["value"]) for h in row] if row else None) for row in part.to_pylist()]
        assert encode_headers_column(part).to_pylist() == expected
    text_values = pa.array([[{"key": "a", "value": "\u00e9"}], None],
                           pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())])))
    assert encode_headers_column(text_values).to_pylist() == [encode_headers([("a", "\u00e9".encode())]), b"\x00"]


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD])
def test_a_transactional_batch_carries_the_attribute_and_the_same_records(codec: int) -> None:
    from vdl_wire.records.batch_header import parse_batch_header

    columns = RecordColumns(KEYS, VALUES, HEADERS)
    plain = columns.encode_batch(0, 40, 1234, 5, 2, 10, codec)
    batch = bytes(columns.encode_batch(0, 40, 1234, 5, 2, 10, codec, transactional=True))
    validate_batch(batch)  # the CRC covers the attributes
    header = parse_batch_header(batch)
    assert (header.is_transactional, header.compression, header.producer_id, header.producer_epoch) == (True, codec, 5, 2)
    assert not parse_batch_header(bytes(plain)).is_transactional
    assert [r.value for r in read_records(batch)] == [r.value for r in read_records(bytes(plain))]


def _greedy(bounds: list[int], batch_size: int) -> list[int]:
    """cut_points record by record: a record goes into the open batch if it fits (or the batch is empty)."""
    ends, used = [], 0
    for row, bound in enumerate(bounds):
        if used and used + bound > batch_size - 61:
            ends.append(row)
            used = 0
        used += bound
    return ends


@pytest.mark.parametrize("seed", range(6))
def test_batch_cutter_across_chunks_cuts_as_record_by_record(seed: int) -> None:
    """BatchCutter over rows arriving in chunks (of one record size or of many, records larger than
    a batch included) ends batches where a record-by-record greedy cut over all of them does."""
    import random

    from vdl_connector.arrow import BatchCutter

    rng = random.Random(seed)
    chunks = []
    for _ in range(30):
        count = rng.randint(1, 400)
        if rng.random() < 0.5:
            size = rng.choice([1, 50, 100, 3000])
            values = pa.array([b"u" * size] * count, pa.binary())
        else:
            values = pa.array([b"w" * rng.choice([0, 5, 90, 700, 2500]) for _ in range(count)], pa.binary())
        chunks.append(RecordColumns(None, values))
    bounds = [int(b) for columns in chunks for b in columns.size_bounds()]
    cutter = BatchCutter(2000)
    ends, offset = [], 0
    for columns in chunks:
        ends += [offset + end for end in cutter.ends(columns)]
        offset += columns.count
    assert ends == _greedy(bounds, 2000) == cut_points(pa.array(bounds).to_numpy(), 2000)


def _joined(pieces: list, arrays: list[pa.Array | None], fill: bytes | None) -> pa.Array:
    """The pieces' rows of `arrays` (one per piece; None: `fill` in every row) as one array."""
    return pa.concat_arrays([(pa.array([fill] * columns.count, pa.binary()) if array is None else array)
                             .slice(start, stop - start)
                             for array, (columns, start, stop) in zip(arrays, pieces, strict=True)])


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD])
def test_a_batch_of_pieces_equals_its_rows_encoded_as_one_array(codec: int) -> None:
    """encode_batch of pieces of several columns (all of one layout, or mixed layouts, keys,
    nulls and headers) gives the bytes of the same rows joined into one array first."""
    from vdl_connector.arrow import encode_batch

    same = [pa.array([bytes([i % 256]) * 100 for i in range(n)], pa.binary()) for n in (70, 9_000, 300)]
    mixed_values = [same[0], VALUES, same[2]]
    mixed_keys = [None, KEYS, pa.array([b"key"] * 300, pa.binary())]
    for keys, values, headers in ((None, same, None), (mixed_keys, mixed_values, None),
                                  (mixed_keys, mixed_values, [None, HEADERS, None])):
        pieces = []
        for i, array in enumerate(values):
            columns = RecordColumns(keys[i] if keys else None, array, headers[i] if headers else None)
            pieces.append((columns, 3 if i else 0, columns.count - (5 if i == 1 else 0)))
        joined_keys = _joined(pieces, keys or [None] * 3, None)
        joined_values = _joined(pieces, values, None)
        joined_headers = _joined(pieces, headers, b"\x00") if headers else None
        whole = RecordColumns(joined_keys, joined_values, joined_headers)
        expected = whole.encode_batch(0, whole.count, 1234, 5, 0, 10, codec)
        assert bytes(encode_batch(pieces, 1234, 5, 0, 10, codec)) == bytes(expected)
        assert [r.value for r in read_records(bytes(expected))] == joined_values.to_pylist()


def test_reused_buffers_encode_the_same_bytes_and_never_a_batch_in_flight() -> None:
    """BatchBuffers: a batch encoded into the buffer of an acknowledged one (more rows, fewer rows,
    other values, keys of another size, records of several sizes) has the bytes of one encoded
    afresh; a buffer not handed back is never written again, so a batch still in flight keeps its
    bytes."""
    from vdl_connector.arrow import BatchBuffers, encode_batch

    def columns(count: int, fill: int, key: bytes | None = None) -> RecordColumns:
        if fill < 0:  # records of several sizes, headers: no template
            return RecordColumns(KEYS[:count], pa.array([b"%d" % -fill * (i % 150) for i in range(count)], pa.binary()),
                                 HEADERS[:count])
        keys = pa.array([key] * count, pa.binary()) if key is not None else None
        return RecordColumns(keys, pa.array([b"%05d" % i + bytes([fill]) * 95 for i in range(count)], pa.binary()))

    buffers = BatchBuffers(keep_bytes=64 << 20)
    previous: list[tuple[bytes, memoryview | bytearray]] = []  # in flight: (its bytes when encoded, the batch)
    for step, (count, fill, key) in enumerate([(9_000, 1, None), (9_000, 2, None), (70, 3, None), (9_000, 4, None),
                                               (12_000, 5, None), (9_000, 6, b"key"), (100, 7, None),
                                               (300, -1, None), (250, -2, None), (300, -3, None), (290, -4, None),
                                               (300, 8, None)]):
        cols = columns(count, fill, key)
        fresh = bytes(encode_batch([(cols, 0, count)], 1234, 5, 0, step, Compression.NONE))
        batch = encode_batch([(cols, 0, count)], 1234, 5, 0, step, Compression.NONE, buffers=buffers)
        assert bytes(batch) == fresh
        assert [r.value for r in read_records(bytes(batch))] == cols.values.filled.to_pylist()
        for encoded, in_flight in previous:  # not acknowledged yet: untouched
            assert bytes(in_flight) == encoded
        previous.append((fresh, batch))
        if len(previous) == 2:  # a window of two: the oldest is acknowledged
            buffers.release(previous.pop(0)[1])


def test_buffers_keep_at_most_their_bound_and_only_their_own() -> None:
    from vdl_connector.arrow import BatchBuffers, encode_batch

    values = pa.array([b"x" * 100] * 500, pa.binary())
    cols = RecordColumns(None, values)
    size = len(encode_batch([(cols, 0, 500)], 1, 5, 0, 0))
    buffers = BatchBuffers(keep_bytes=size)
    first = encode_batch([(cols, 0, 500)], 1, 5, 0, 0, buffers=buffers)
    second = encode_batch([(cols, 0, 500)], 1, 5, 0, 1, buffers=buffers)
    assert isinstance(first, memoryview) and isinstance(second, memoryview) and first.obj is not second.obj
    buffers.release(first)
    buffers.release(second)  # beyond the bound: dropped
    buffers.release(bytes(first))  # not one of its buffers: ignored
    third = encode_batch([(cols, 0, 500)], 1, 5, 0, 2, buffers=buffers)
    fourth = encode_batch([(cols, 0, 500)], 1, 5, 0, 3, buffers=buffers)
    assert isinstance(third, memoryview) and isinstance(fourth, memoryview)
    assert third.obj is first.obj and fourth.obj is not second.obj

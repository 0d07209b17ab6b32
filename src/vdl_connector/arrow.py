"""Arrow <-> Kafka records for the connector: the one place that converts between them.

Decoding (the read path) lives in vdl_wire/records/arrow.py, shared with the broker's tiering
writer; it is re-exported here. Encoding (the write path): `build_batch(columns, ...)` turns
Arrow columns into RecordBatch v2 bytes. Per-record Python work would cap a writer at a few hundred thousand records/s here;
instead every record's field sizes, positions and varints are computed for the whole batch at
once and the key/value bytes are copied with one gather. Only headers are encoded per record in
Python, and only for records that have them.

The broker never imports this module: vdl_wire needs neither numpy nor pyarrow.

# Kafka protocol guide: "Record" (length, attributes, timestampDelta, offsetDelta, keyLength,
# key, valueLength, value, headers; signed varints are zigzag-encoded) and "RecordBatch".
"""

from __future__ import annotations

import functools
import struct

import crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from vdl_wire.records.arrow import ArrowColumns, RawColumns, decode_columns_arrow, parse_records
from vdl_wire.records.compression import Compression, compress
from vdl_wire.records.varint import write_varint

__all__ = ["ArrowColumns", "BinaryColumn", "RawColumns", "RecordColumns", "build_batch", "cut_points",
           "decode_columns_arrow", "encode_headers", "parse_records"]

# ============================================================================== encoding

BATCH_HEADER_SIZE = 61
_HEADER = struct.Struct(">qiibIhiqqqhii")  # base offset .. record count
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21  # CRC32C covers from here to the end
_OFFSET_DELTA_BOUND = 3  # varint bytes of any offset delta < 2^20: used to size batches up front
_NO_HEADERS = b"\x00"


def _zigzag(values: np.ndarray) -> np.ndarray:
    values = values.astype(np.int64)
    return ((values << 1) ^ (values >> 63)).astype(np.uint64)


def _varint_sizes(unsigned: np.ndarray) -> np.ndarray:
    sizes = np.ones(len(unsigned), dtype=np.int64)
    for k in range(1, 10):
        sizes += unsigned >= np.uint64(1 << (7 * k))
    return sizes


def _varint_array(unsigned: np.ndarray) -> pa.Array:
    """One varint per row as a binary array (built from a row-major byte matrix, no Python loop)."""
    count = len(unsigned)
    sizes = _varint_sizes(unsigned)
    width = int(sizes.max()) if count else 1
    matrix = np.zeros((count, width), dtype=np.uint8)
    for k in range(width):
        chunk = (unsigned >> np.uint64(7 * k)) & np.uint64(0x7F)
        more = np.where(sizes > k + 1, np.uint64(0x80), np.uint64(0))
        matrix[:, k] = (chunk | more).astype(np.uint8)
    data = matrix[np.arange(width)[None, :] < sizes[:, None]]  # row-major: each row's bytes in order
    offsets = np.zeros(count + 1, dtype=np.int32)
    np.cumsum(sizes, out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


@functools.cache
def _binary_scalar(value: bytes) -> pa.Scalar:
    """A binary scalar built from buffers, when first needed: pa.scalar() would import pandas (a
    quarter second in every Python process Spark starts that merely imports the connector)."""
    offsets = np.array([0, len(value)], dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), 1, [None, pa.py_buffer(offsets), pa.py_buffer(value)])[0]


_EMPTY = b""
_ATTRIBUTES_AND_TIMESTAMP_DELTA = b"\x00\x00"  # attributes 0, timestamp delta 0


class BinaryColumn:
    """A binary Arrow array as numpy views: data bytes, per-row start and length (-1 = null),
    and the array itself with nulls as empty values (`filled`, for the element-wise join)."""

    def __init__(self, array: pa.Array | None, count: int, null_fill: bytes = _EMPTY) -> None:
        if array is None:
            self.data = np.zeros(1, dtype=np.uint8)
            self.starts = np.zeros(count, dtype=np.int64)
            self.lengths = np.full(count, -1, dtype=np.int64)
            self.filled = None
            return
        if not pa.types.is_binary(array.type):
            array = array.cast(pa.binary())
        self.filled = pc.fill_null(array, _binary_scalar(null_fill)) if array.null_count else array
        _, offsets_buffer, data_buffer = array.buffers()
        offsets = np.frombuffer(offsets_buffer, dtype=np.int32)[array.offset:array.offset + count + 1].astype(np.int64)
        self.data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(1, np.uint8)
        self.starts = offsets[:-1]
        self.lengths = offsets[1:] - offsets[:-1]
        if array.null_count:
            self.lengths = np.where(array.is_null().to_numpy(zero_copy_only=False), -1, self.lengths)


def _varint_bytes(unsigned: int) -> bytes:
    out = bytearray()
    while True:
        byte = unsigned & 0x7F
        unsigned >>= 7
        if unsigned:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_headers(headers: list | None) -> bytes:
    """One record's headers section: count, then (key, value) with varint lengths (-1 = null)."""
    if not headers:
        return _NO_HEADERS
    out = bytearray()
    write_varint(out, len(headers))
    for name, value in headers:
        key = name.encode("utf-8")
        write_varint(out, len(key))
        out += key
        if value is None:
            write_varint(out, -1)
        else:
            write_varint(out, len(value))
            out += value
    return bytes(out)


class RecordColumns:
    """Records to encode: keys, values and pre-encoded headers sections as binary columns."""

    def __init__(self, keys: pa.Array | None, values: pa.Array, headers: pa.Array | None = None) -> None:
        self.count = len(values)
        self.keys = BinaryColumn(keys, self.count)
        self.values = BinaryColumn(values, self.count)
        # A record without headers (null or empty section) is encoded as a count of 0.
        self.headers = BinaryColumn(headers, self.count, _NO_HEADERS) if headers is not None else None
        if self.headers is not None and self.headers.filled is not None and (self.headers.lengths == 0).any():
            filled = self.headers.filled
            self.headers.filled = pc.if_else(pc.equal(pc.binary_length(filled), 0), _binary_scalar(_NO_HEADERS),
                                             filled)
        key_part = _varint_sizes(_zigzag(self.keys.lengths)) + np.maximum(self.keys.lengths, 0)
        value_part = _varint_sizes(_zigzag(self.values.lengths)) + np.maximum(self.values.lengths, 0)
        header_part = 1 if self.headers is None else np.maximum(self.headers.lengths, 1)
        # attributes + timestamp delta (always 0: one timestamp per batch) + the rest, offset delta aside
        self.fixed = 2 + key_part + value_part + header_part
        self._uniform = self._uniform_lengths()

    def _uniform_lengths(self) -> tuple[int, int] | None:
        """(key length or -1, value length) when every record has the same sizes, no headers and
        contiguous bytes: then records are fixed-width rows and encode by slicing (no gathers)."""
        if self.headers is None and self.count:
            uniform = []
            for column in (self.keys, self.values):
                first = int(column.lengths[0])
                if not (column.lengths == first).all():
                    return None
                if first > 0 and not (column.starts == column.starts[0] + first * np.arange(self.count)).all():
                    return None
                uniform.append(first)
            return uniform[0], uniform[1]
        return None

    def size_bounds(self) -> np.ndarray:
        """Upper bound of each encoded record's size, whatever its offset delta."""
        body = self.fixed + _OFFSET_DELTA_BOUND
        return body + _varint_sizes(_zigzag(body))

    def encode(self, start: int, stop: int) -> bytes:
        """The records section for rows [start, stop), offset deltas 0.., timestamp deltas 0."""
        count = stop - start
        if self._uniform is not None:
            return self._encode_uniform(start, stop)
        # Each part of a record as a binary column; Arrow joins them row by row in one C pass,
        # and the joined array's data buffer is the records section.
        deltas = _zigzag(np.arange(count, dtype=np.int64))
        body = self.fixed[start:stop] + _varint_sizes(deltas)
        parts: list[pa.Array | pa.Scalar] = [_varint_array(_zigzag(body)), _binary_scalar(_ATTRIBUTES_AND_TIMESTAMP_DELTA),
                                             _varint_array(deltas)]
        for column in (self.keys, self.values):
            parts.append(_varint_array(_zigzag(column.lengths[start:stop])))
            if column.filled is not None:
                parts.append(column.filled.slice(start, count))
        if self.headers is None or self.headers.filled is None:
            parts.append(_binary_scalar(_NO_HEADERS))
        else:
            parts.append(self.headers.filled.slice(start, count))
        joined = pc.binary_join_element_wise(*parts, _binary_scalar(_EMPTY))
        _, offsets, data = joined.buffers()
        total = int(np.frombuffer(offsets, dtype=np.int32)[joined.offset + count])
        return data.to_pybytes()[:total] if data is not None else b""

    def _encode_uniform(self, start: int, stop: int) -> bytes:
        """Fixed-width records, grouped by the byte width of their offset delta."""
        assert self._uniform is not None
        key_length, value_length = self._uniform
        key_varint = _varint_bytes(int(_zigzag(np.array([key_length]))[0]))
        value_varint = _varint_bytes(int(_zigzag(np.array([value_length]))[0]))
        parts = []
        low = 0
        count = stop - start
        for width, limit in ((1, 64), (2, 8192), (3, 1 << 20), (4, 1 << 27), (5, 1 << 31)):
            high = min(count, limit)
            if high <= low:
                continue
            rows = high - low
            body = 2 + width + len(key_varint) + max(key_length, 0) + len(value_varint) + max(value_length, 0) + 1
            length_varint = _varint_bytes(int(_zigzag(np.array([body]))[0]))
            out = np.zeros((rows, len(length_varint) + body), dtype=np.uint8)
            column = 0
            for chunk in (length_varint, b"\x00\x00"):
                out[:, column:column + len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
                column += len(chunk)
            deltas = _zigzag(np.arange(low, high, dtype=np.int64))
            for k in range(width):
                more = np.uint64(0x80) if k < width - 1 else np.uint64(0)
                out[:, column + k] = (((deltas >> np.uint64(7 * k)) & np.uint64(0x7F)) | more).astype(np.uint8)
            column += width
            for varint, length, source in ((key_varint, key_length, self.keys), (value_varint, value_length, self.values)):
                out[:, column:column + len(varint)] = np.frombuffer(varint, dtype=np.uint8)
                column += len(varint)
                if length > 0:
                    first = int(source.starts[0]) + (start + low) * length
                    out[:, column:column + length] = source.data[first:first + rows * length].reshape(rows, length)
                    column += length
            parts.append(out.tobytes())  # the last byte of each row stays 0: no headers
            low = high
        return b"".join(parts)


def build_batch(records: bytes, count: int, timestamp_ms: int, producer_id: int, producer_epoch: int,
                base_sequence: int, compression: int = Compression.NONE) -> bytes:
    """A RecordBatch v2 around an encoded records section (base offset 0: the broker assigns)."""
    if compression:
        records = compress(compression, records)
    out = bytearray(BATCH_HEADER_SIZE)
    _HEADER.pack_into(out, 0, 0, BATCH_HEADER_SIZE - 12 + len(records), -1, 2, 0, int(compression) & 0x07,
                      count - 1, timestamp_ms, timestamp_ms, producer_id, producer_epoch, base_sequence, count)
    out += records
    struct.pack_into(">I", out, _CRC_OFFSET, crc32c.crc32c(memoryview(out)[_ATTRIBUTES_OFFSET:]))
    return bytes(out)


def cut_points(bounds: np.ndarray, batch_size: int) -> list[int]:
    """Deterministic batch boundaries by size only: each batch holds as many records as fit in
    batch_size bytes (at least one). Returns the end index of every full batch."""
    cuts = []
    start = 0
    cumulative = np.cumsum(bounds)
    count = len(bounds)
    while start < count:
        base = cumulative[start - 1] if start else 0
        stop = int(np.searchsorted(cumulative, base + batch_size - BATCH_HEADER_SIZE, side="right"))
        stop = max(stop, start + 1)
        if stop >= count:
            break
        cuts.append(stop)
        start = stop
    return cuts

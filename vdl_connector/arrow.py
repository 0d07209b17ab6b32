"""Arrow <-> Kafka records for the connector: the one place that converts between them.

Decoding (the read path) lives in vdl_client/record_columns.py, shared with the broker's tiering
writer; it is re-exported here. Encoding (the write path): `build_batch(columns, ...)` turns
Arrow columns into RecordBatch v2 bytes. Per-record Python work would cap a writer at a few hundred thousand records/s here;
instead every record's field sizes, positions and varints are computed for the whole batch at
once and the key/value bytes are copied with one gather. Only headers are encoded per record in
Python, and only for records that have them.

The broker never imports this module: vdl_broker.protocol needs neither numpy nor pyarrow.

# Kafka protocol guide: "Record" (length, attributes, timestampDelta, offsetDelta, keyLength,
# key, valueLength, value, headers; signed varints are zigzag-encoded) and "RecordBatch".
"""

from __future__ import annotations

import struct

import crc32c
import numpy as np
import pyarrow as pa

from vdl_broker.protocol.records.compression import Compression, compress
from vdl_broker.protocol.records.varint import write_varint
from vdl_client.record_columns import ArrowColumns, RawColumns, decode_columns_arrow, parse_records

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


def _put_varints(out: np.ndarray, positions: np.ndarray, unsigned: np.ndarray, sizes: np.ndarray) -> None:
    if len(sizes) == 0:
        return
    if int(sizes.max()) == 1:
        out[positions] = unsigned.astype(np.uint8)
        return
    for k in range(int(sizes.max())):
        mask = sizes > k
        chunk = (unsigned[mask] >> np.uint64(7 * k)) & np.uint64(0x7F)
        more = np.where(sizes[mask] > k + 1, np.uint64(0x80), np.uint64(0))
        out[positions[mask] + k] = (chunk | more).astype(np.uint8)


def _put_bytes(out: np.ndarray, destinations: np.ndarray, data: np.ndarray, sources: np.ndarray,
               lengths: np.ndarray) -> None:
    """out[destinations[i] : +lengths[i]] = data[sources[i] : +lengths[i]] for every i."""
    lengths = np.maximum(lengths, 0)
    total = int(lengths.sum())
    if total == 0:
        return
    first = int(lengths[0])
    if first and (lengths == first).all():
        span = np.arange(first, dtype=np.int64)
        out[destinations[:, None] + span] = data[sources[:, None] + span]
        return
    starts = np.cumsum(lengths) - lengths
    relative = np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)
    out[np.repeat(destinations, lengths) + relative] = data[np.repeat(sources, lengths) + relative]


class BinaryColumn:
    """A binary Arrow array as numpy views: data bytes, per-row start and length (-1 = null)."""

    def __init__(self, array: pa.Array | None, count: int) -> None:
        if array is None:
            self.data = np.zeros(1, dtype=np.uint8)
            self.starts = np.zeros(count, dtype=np.int64)
            self.lengths = np.full(count, -1, dtype=np.int64)
            return
        if not pa.types.is_binary(array.type):
            array = array.cast(pa.binary())
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
        self.headers = BinaryColumn(headers, self.count) if headers is not None else None
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
        deltas = _zigzag(np.arange(count, dtype=np.int64))
        delta_sizes = _varint_sizes(deltas)
        body = self.fixed[start:stop] + delta_sizes
        body_unsigned = _zigzag(body)
        body_sizes = _varint_sizes(body_unsigned)
        record_starts = np.cumsum(body_sizes + body) - (body_sizes + body)
        total = int((body_sizes + body).sum())
        out = np.zeros(total, dtype=np.uint8)  # attributes and timestamp delta stay 0
        _put_varints(out, record_starts, body_unsigned, body_sizes)
        position = record_starts + body_sizes + 2
        _put_varints(out, position, deltas, delta_sizes)
        position = position + delta_sizes
        position = self._put_field(out, position, self.keys, start, stop)
        position = self._put_field(out, position, self.values, start, stop)
        if self.headers is None:
            pass  # the zero already written is "0 headers"
        else:
            lengths = self.headers.lengths[start:stop]
            _put_bytes(out, position, self.headers.data, self.headers.starts[start:stop], lengths)
        return out.tobytes()

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

    @staticmethod
    def _put_field(out: np.ndarray, position: np.ndarray, column: BinaryColumn, start: int, stop: int) -> np.ndarray:
        lengths = column.lengths[start:stop]
        unsigned = _zigzag(lengths)
        sizes = _varint_sizes(unsigned)
        _put_varints(out, position, unsigned, sizes)
        position = position + sizes
        _put_bytes(out, position, column.data, column.starts[start:stop], lengths)
        return position + np.maximum(lengths, 0)


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

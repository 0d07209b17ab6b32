"""Arrow <-> Kafka records for the connector: the one place that converts between them, and
the read schema's Arrow form (`arrow_read_schema`), what read tasks hand Spark.

Decoding (the read path) lives in vdl_wire/records/arrow.py, shared with the broker's tiering
writer; it is re-exported here. Encoding (the write path): `build_batch(columns, ...)` turns
Arrow columns into RecordBatch v2 bytes. Per-record Python work would cap a writer at a few hundred thousand records/s here;
instead every record's field sizes, positions and varints are computed for the whole batch at
once and the key/value bytes are copied with one gather. Only headers are encoded per record in
Python by `encode_headers`; a whole column of them (Spark's array<struct<key, value>>) is
encoded at once by `encode_headers_column`. `encode_batch` writes the records straight into the
batch's buffer after room for its header, from pieces of the Arrow columns they came in (a batch
spans Spark's Arrow batches; they are not joined first): the bytes are copied once from the Arrow
columns and not again on the way to the socket. `BatchCutter` decides where batches end.

The broker never imports this module: vdl_wire needs neither numpy nor pyarrow.

# Kafka protocol guide: "Record" (length, attributes, timestampDelta, offsetDelta, keyLength,
# key, valueLength, value, headers; signed varints are zigzag-encoded) and "RecordBatch".
"""

from __future__ import annotations

import functools
import struct
import threading
from collections.abc import Sequence

import crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from vdl_connector.schema import VALUE_JSON_COLUMN
from vdl_wire.records.arrow import ArrowColumns, RawColumns, decode_columns_arrow, parse_records
from vdl_wire.records.batch_header import TRANSACTIONAL_MASK
from vdl_wire.records.compression import Compression, compress
from vdl_wire.records.varint import varint_size, write_varint

__all__ = ["ARROW_HEADERS_TYPE", "ArrowColumns", "BatchBuffers", "BatchCutter", "BinaryColumn", "Piece", "RawColumns",
           "RecordColumns", "arrow_read_schema", "build_batch", "constant_string", "cut_points", "decode_columns_arrow",
           "encode_batch", "encode_headers", "encode_headers_column", "encode_records", "parse_records"]

# ============================================================================== the read schema

# The Arrow form of vdl_connector.schema.read_schema: it must equal what Spark derives from it
# (pyspark.sql.pandas.types.to_arrow_schema(schema, timezone="UTC")), which rejects any
# difference (binary vs large_binary, timestamp unit/zone, list item name).
ARROW_HEADER_STRUCT = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
ARROW_HEADERS_TYPE = pa.list_(pa.field("element", ARROW_HEADER_STRUCT))


# The rows a read task hands Spark at a time: an Arrow batch of the log is cut after the Kafka batch
# that takes it past either bound, a table's row groups are split to them. Spark's JVM reads each
# into buffers of its Arrow allocator, which pools those up to a chunk (Netty's, 4 MiB) and maps
# each larger one anew, page by page, and unmaps it after the batch: 262,144-row batches of
# ~200-byte JSON values cost the JVM ~46,000 page faults per 500,000 rows read (89 MB buffers),
# batches cut at 2 MiB of keys and values ~3,000. Bounded rows keep tiny records' batches small.
MAX_ROWS_PER_ARROW_BATCH = 65_536
MAX_BYTES_PER_ARROW_BATCH = 2 << 20


def arrow_read_schema(include_headers: bool, value_type: pa.DataType | None = None) -> pa.Schema:
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", ARROW_HEADERS_TYPE))
    if value_type is not None:
        fields.append(pa.field(VALUE_JSON_COLUMN, value_type))
    return pa.schema(fields)


def constant_string(text: str, count: int) -> pa.Array:
    """A string column holding `text` `count` times (the topic column), built from buffers."""
    data = text.encode("utf-8")
    offsets = np.arange(count + 1, dtype=np.int32) * len(data)
    return pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data * count)])


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


_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)  # a varint grows a byte at each


def _varint_sizes(unsigned: np.ndarray) -> np.ndarray:
    return np.searchsorted(_VARINT_LIMITS, unsigned, side="right").astype(np.int64) + 1


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
    """A binary Arrow array as numpy views: its data bytes and the byte offset of its first row
    (`first`), the one length all its rows share (`uniform_length`, -1 when all are null; None
    when they differ), each row's length (-1 = null; `lengths`, computed when first asked: rows of
    one length encode without them), and the array with nulls as empty values (`filled`, for the
    element-wise join)."""

    def __init__(self, array: pa.Array | None, count: int, null_fill: bytes = _EMPTY) -> None:
        self.count = count
        self.first = 0
        self._offsets: np.ndarray | None = None
        self._nulls: np.ndarray | None = None  # which rows are null, when some are
        if array is None:
            self.data = np.zeros(1, dtype=np.uint8)
            self.filled = None
            self.uniform_length: int | None = -1
            return
        if not pa.types.is_binary(array.type):
            array = array.cast(pa.binary())
        nulls = array.null_count
        self.filled = pc.fill_null(array, _binary_scalar(null_fill)) if nulls else array
        _, offsets_buffer, data_buffer = array.buffers()
        self._offsets = np.frombuffer(offsets_buffer, dtype=np.int32)[array.offset:array.offset + count + 1]
        self.first = int(self._offsets[0]) if len(self._offsets) else 0  # an empty array may have no offsets
        self.data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(1, np.uint8)
        if nulls:
            self._nulls = array.is_null().to_numpy(zero_copy_only=False)
        if nulls == count:  # all null, or no rows
            self.uniform_length = -1
        elif nulls:
            self.uniform_length = None
        else:
            sizes = np.diff(self._offsets)
            shortest = int(sizes.min())
            self.uniform_length = shortest if shortest == int(sizes.max()) else None

    @functools.cached_property
    def lengths(self) -> np.ndarray:
        if self._offsets is None:
            return np.full(self.count, -1, dtype=np.int64)
        lengths = np.diff(self._offsets).astype(np.int64)
        return lengths if self._nulls is None else np.where(self._nulls, -1, lengths)


def _varint_bytes(value: int) -> bytes:
    """The zigzag varint of a signed value, as bytes."""
    out = bytearray()
    write_varint(out, value)
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


def encode_headers_column(column: pa.Array) -> pa.Array:
    """encode_headers of every row of a list<struct<key: string, value: binary or string>> column
    (null or empty: no headers), without a step per row: each header's bytes are joined element-wise,
    then each row's headers (a list join), after the row's header count."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    counts = pc.fill_null(pc.list_value_length(column), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    # flatten() takes the column's slice and leaves out null rows; the struct's flatten() its fields'
    key_field, value_field = column.flatten().flatten()
    keys = pc.fill_null(key_field.cast(pa.binary()), _binary_scalar(_EMPTY))
    values = value_field if pa.types.is_binary(value_field.type) else value_field.cast(pa.binary())
    value_lengths = pc.binary_length(values).to_numpy(zero_copy_only=False)
    if values.null_count:
        value_lengths = np.where(values.is_null().to_numpy(zero_copy_only=False), -1, value_lengths)
        values = pc.fill_null(values, _binary_scalar(_EMPTY))
    entries = pc.binary_join_element_wise(
        _varint_array(_zigzag(pc.binary_length(keys).to_numpy(zero_copy_only=False))), keys,
        _varint_array(_zigzag(value_lengths)), values, _binary_scalar(_EMPTY))
    offsets = np.zeros(len(counts) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    rows = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), entries), _binary_scalar(_EMPTY))
    return pc.binary_join_element_wise(_varint_array(_zigzag(counts)), rows, _binary_scalar(_EMPTY))


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
        # Records all of one key length and one value length, without headers, are fixed-width
        # rows and encode by slicing, no gathers (equal lengths, none null, are contiguous bytes:
        # an Arrow binary array's offsets only grow).
        key_length, value_length = self.keys.uniform_length, self.values.uniform_length
        self.uniform = ((key_length, value_length) if self.headers is None and self.count
                        and key_length is not None and value_length is not None else None)
        # Per record: attributes + timestamp delta (always 0: one timestamp per batch) + the rest,
        # offset delta aside; for records all of one size, computed once.
        key_lengths, value_lengths = ((np.array([key_length]), np.array([value_length]))
                                      if self.uniform is not None else (self.keys.lengths, self.values.lengths))
        key_part = _varint_sizes(_zigzag(key_lengths)) + np.maximum(key_lengths, 0)
        value_part = _varint_sizes(_zigzag(value_lengths)) + np.maximum(value_lengths, 0)
        header_part = 1 if self.headers is None else np.maximum(self.headers.lengths, 1)
        self.fixed = 2 + key_part + value_part + header_part

    @functools.cached_property
    def uniform_bound(self) -> int | None:
        """The one size bound of every record (see size_bounds) when they are all of one size."""
        return int(self.size_bounds_of(self.fixed)[0]) if self.uniform is not None else None

    @staticmethod
    def size_bounds_of(fixed: np.ndarray) -> np.ndarray:
        body = fixed + _OFFSET_DELTA_BOUND
        return body + _varint_sizes(_zigzag(body))

    def size_bounds(self) -> np.ndarray:
        """Upper bound of each encoded record's size, whatever its offset delta."""
        bounds = self.size_bounds_of(self.fixed)
        return np.full(self.count, bounds[0], dtype=np.int64) if self.uniform is not None else bounds

    def encode(self, start: int, stop: int) -> bytes:
        """The records section for rows [start, stop), offset deltas 0.., timestamp deltas 0."""
        return encode_records([(self, start, stop)])

    def encode_batch(self, start: int, stop: int, timestamp_ms: int, producer_id: int, producer_epoch: int,
                     base_sequence: int, compression: int = Compression.NONE,
                     transactional: bool = False) -> bytearray | memoryview:
        """The RecordBatch v2 of rows [start, stop) (as build_batch(encode(start, stop), ...)),
        encoded in place in the one buffer it is sent from; `transactional` sets the batch's
        transactional attribute (its records count only once their transaction commits)."""
        return encode_batch([(self, start, stop)], timestamp_ms, producer_id, producer_epoch, base_sequence,
                            compression, transactional)

    def joined(self, start: int, stop: int, first_delta: int = 0) -> memoryview:
        """Rows [start, stop) as records of offset deltas first_delta.. (a part of a records
        section), a view of an Arrow buffer."""
        count = stop - start
        # Each part of a record as a binary column; Arrow joins them row by row in one C pass,
        # and the joined array's data buffer is the records section.
        deltas = _zigzag(np.arange(first_delta, first_delta + count, dtype=np.int64))
        fixed = self.fixed if self.uniform is not None else self.fixed[start:stop]  # one size: broadcast
        body = fixed + _varint_sizes(deltas)
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
        return memoryview(data if data is not None else b"").cast("B")[:total]  # unsigned bytes, as a bytearray's


# Offset deltas below each limit take `width` varint bytes (zigzag: a delta d is 2d on the wire).
_DELTA_WIDTHS = ((1, 64), (2, 8192), (3, 1 << 20), (4, 1 << 27), (5, 1 << 31))
_GROUPS_KEPT = 64  # batch record counts a layout keeps the groups of


class _UniformLayout:
    """Records of one key length and one value length, without headers: a record's bytes other
    than its key and value depend on its offset delta only, so the same rows of every batch are
    the same template (kept, grown as batches get longer)."""

    def __init__(self, key_length: int, value_length: int) -> None:
        self.key_length, self.value_length = key_length, value_length
        self._key_varint = _varint_bytes(key_length)
        self._value_varint = _varint_bytes(value_length)
        self._template = np.zeros(0, dtype=np.uint8)
        self._rows = 0
        self._groups: dict[int, list[tuple[int, int, int, int, int, int]]] = {}

    def groups(self, count: int) -> list[tuple[int, int, int, int, int, int]]:
        """(first row, end row, byte offset, row width, key column, value column) per delta width,
        kept per count: a writer's batches mostly hold one number of records."""
        groups = self._groups.get(count)
        if groups is not None:
            return groups
        groups = []
        low = offset = 0
        for width, limit in _DELTA_WIDTHS:
            high = min(count, limit)
            if high <= low:
                continue
            body = (2 + width + len(self._key_varint) + max(self.key_length, 0) + len(self._value_varint)
                    + max(self.value_length, 0) + 1)
            prefix = varint_size(body) + 2 + width
            key_column = prefix + len(self._key_varint)
            value_column = key_column + max(self.key_length, 0) + len(self._value_varint)
            row_width = prefix + body - 2 - width
            groups.append((low, high, offset, row_width, key_column, value_column))
            offset += (high - low) * row_width
            low = high
        if len(self._groups) >= _GROUPS_KEPT:
            self._groups.clear()
        self._groups[count] = groups
        return groups

    def size(self, count: int) -> int:
        return sum((high - low) * width for low, high, _, width, _, _ in self.groups(count))

    def template(self, count: int) -> np.ndarray:
        """The first `count` records with zero bytes where keys and values go."""
        if count > self._rows:
            rows = max(count, 2 * self._rows)
            template = np.zeros(self.size(rows), dtype=np.uint8)
            for low, high, offset, width, key_column, value_column in self.groups(rows):
                matrix = template[offset:offset + (high - low) * width].reshape(high - low, width)
                delta_width = next(w for w, limit in _DELTA_WIDTHS if high <= limit)
                body = width - (key_column - len(self._key_varint) - delta_width - 2)
                length_varint = _varint_bytes(body)
                column = len(length_varint)
                matrix[:, :column] = np.frombuffer(length_varint, dtype=np.uint8)
                column += 2  # attributes 0, timestamp delta 0
                deltas = _zigzag(np.arange(low, high, dtype=np.int64))
                for k in range(delta_width):
                    more = np.uint64(0x80) if k < delta_width - 1 else np.uint64(0)
                    matrix[:, column + k] = (((deltas >> np.uint64(7 * k)) & np.uint64(0x7F)) | more).astype(np.uint8)
                matrix[:, key_column - len(self._key_varint):key_column] = np.frombuffer(self._key_varint, np.uint8)
                matrix[:, value_column - len(self._value_varint):value_column] = np.frombuffer(self._value_varint,
                                                                                                 np.uint8)
                # the last byte of each row stays 0: no headers
            self._template, self._rows = template, rows
        return self._template


@functools.lru_cache(maxsize=8)
def _uniform_layout(key_length: int, value_length: int) -> _UniformLayout:
    return _UniformLayout(key_length, value_length)


Piece = tuple[RecordColumns, int, int]  # rows [start, stop) of some columns


def encode_records(pieces: Sequence[Piece]) -> bytes:
    """The records section of the pieces' rows, in order (offset deltas 0.., timestamp deltas 0)."""
    return bytes(_encode_into(pieces, 0))


def encode_batch(pieces: Sequence[Piece], timestamp_ms: int, producer_id: int, producer_epoch: int,
                 base_sequence: int, compression: int = Compression.NONE, transactional: bool = False,
                 buffers: BatchBuffers | None = None) -> bytearray | memoryview:
    """The RecordBatch v2 of the pieces' rows, in order: rows Spark handed over in several Arrow
    batches are encoded from where they are, not joined into one array first. The records are
    written straight into the one buffer the batch is sent from, after room for its header: with
    `buffers`, the buffer of an acknowledged batch when one fits."""
    count = sum(stop - start for _, start, stop in pieces)
    out: bytearray | memoryview
    if compression:
        out = bytearray(BATCH_HEADER_SIZE)
        out += compress(compression, encode_records(pieces))
    else:
        out = _encode_into(pieces, BATCH_HEADER_SIZE, buffers)
    _seal(out, count, timestamp_ms, producer_id, producer_epoch, base_sequence, compression, transactional)
    return out


class _BatchBuffer(bytearray):
    """A batch's buffer, kept for a later batch once acknowledged (BatchBuffers). `kind`: the
    (header room, key length, value length) of the uniform layout whose template it holds for
    `rows` records after the header's room (see _UniformLayout.template), or None: no template."""

    __slots__ = ("kind", "rows")

    def __init__(self, size: int, kind: tuple[int, int, int] | None = None, rows: int = 0) -> None:
        super().__init__(size)
        self.kind, self.rows = kind, rows


class BatchBuffers:
    """Buffers of batches the broker acknowledged, kept for the next batches: a batch encoded into
    one writes pages the process has touched before, where a new batch-sized buffer is fresh memory,
    faulted in page by page (each fault a reclaim of page cache on a machine whose memory the
    broker's log fills); one holding the template of records of the batch's sizes has all but
    their keys and values in place already. The producer hands each batch back once acknowledged
    (`release`); at most `keep_bytes` of them are kept. Producers of several threads may share
    one."""

    def __init__(self, keep_bytes: int) -> None:
        self._keep_bytes = keep_bytes
        self._free: list[_BatchBuffer] = []
        self._lock = threading.Lock()

    def _find(self, kind: tuple[int, int, int] | None, rows: int, size: int) -> _BatchBuffer | None:
        with self._lock:
            for index, buffer in enumerate(self._free):
                if buffer.kind == kind and buffer.rows >= rows and len(buffer) >= size:
                    return self._free.pop(index)
        return None

    def with_template(self, layout: _UniformLayout, count: int, header_room: int) -> memoryview:
        """`header_room` bytes, then the first `count` records of `layout`'s template."""
        kind = (header_room, layout.key_length, layout.value_length)
        records = layout.size(count)
        buffer = self._find(kind, count, 0)
        if buffer is None:
            buffer = _BatchBuffer(header_room, kind, count)
            buffer += layout.template(count)[:records].data
        # A record's template bytes depend on its row only: a buffer of more rows holds this
        # batch's as its prefix; the rows after it are not sent.
        return memoryview(buffer)[:header_room + records]

    def plain(self, size: int) -> memoryview:
        """`size` bytes of whatever they held before (batches of records of several sizes differ
        a little in size: a new buffer has room for one an eighth larger)."""
        buffer = self._find(None, 0, size)
        if buffer is None:
            buffer = _BatchBuffer(size + size // 8)
        return memoryview(buffer)[:size]

    def release(self, batch: bytes | bytearray | memoryview) -> None:
        """`batch` is acknowledged: nothing reads it any more."""
        owner = batch.obj if isinstance(batch, memoryview) else batch
        if isinstance(owner, _BatchBuffer):
            with self._lock:
                if sum(len(kept) for kept in self._free) + len(owner) <= self._keep_bytes:
                    self._free.append(owner)


def _encode_into(pieces: Sequence[Piece], header_room: int,
                 buffers: BatchBuffers | None = None) -> bytearray | memoryview:
    uniform = pieces[0][0].uniform if pieces else None
    if uniform is not None and all(columns.uniform == uniform for columns, _, _ in pieces):
        return _encode_uniform_into(pieces, uniform, header_room, buffers)
    parts = []
    first_delta = 0
    for columns, start, stop in pieces:
        parts.append(columns.joined(start, stop, first_delta))
        first_delta += stop - start
    size = header_room + sum(len(part) for part in parts)
    out = bytearray(size) if buffers is None else buffers.plain(size)
    position = header_room
    for part in parts:
        out[position:position + len(part)] = part
        position += len(part)
    return out


def _encode_uniform_into(pieces: Sequence[Piece], uniform: tuple[int, int], header_room: int,
                         buffers: BatchBuffers | None = None) -> bytearray | memoryview:
    """Fixed-width records after `header_room` bytes: the layout's template (everything but the
    key and value bytes) copied in one piece, or found in place in a buffer of `buffers`, then
    each piece's keys and values into their columns, a strided copy per run of one record width."""
    key_length, value_length = uniform
    count = sum(stop - start for _, start, stop in pieces)
    layout = _uniform_layout(key_length, value_length)
    size = layout.size(count)
    out: bytearray | memoryview
    if buffers is None:
        out = bytearray(header_room)
        out += layout.template(count)[:size].data  # no zero-fill of a buffer about to be overwritten
    else:
        out = buffers.with_template(layout, count, header_room)
    target = np.frombuffer(out, dtype=np.uint8)
    groups = layout.groups(count)
    row = 0  # the piece's first row in the batch
    for columns, start, stop in pieces:
        end = row + stop - start
        for low, high, offset, width, key_column, value_column in groups:
            first, last = max(low, row), min(high, end)
            if first >= last:
                continue
            rows = last - first
            base = header_room + offset + (first - low) * width
            matrix = target[base:base + rows * width].reshape(rows, width)
            source_row = start + first - row
            for column, length, source in ((key_column, key_length, columns.keys),
                                           (value_column, value_length, columns.values)):
                if length > 0:
                    at = source.first + source_row * length
                    matrix[:, column:column + length] = source.data[at:at + rows * length].reshape(rows, length)
        row = end
    return out


class BatchCutter:
    """Where batches end, by size only: each batch holds as many records as fit in batch_size
    bytes (at least one), so only the sequence of records decides, not the chunks they come in
    (an exactly-once replay cuts the same batches whatever Arrow batches Spark hands over).
    Records of one size are counted by division, others by a search in their sizes' running
    sum: no step per record."""

    def __init__(self, batch_size: int) -> None:
        self.capacity = batch_size - BATCH_HEADER_SIZE
        self.used = 0  # size bound of the records of the open batch

    def ends(self, columns: RecordColumns) -> list[int]:
        """The rows of `columns` the open batch ends before (each starts the next batch)."""
        bound = columns.uniform_bound
        if bound is not None:
            return self._ends_uniform(bound, columns.count)
        return self.ends_of(columns.size_bounds())

    def _ends_uniform(self, bound: int, count: int) -> list[int]:
        ends = []
        row = 0
        while row < count:
            if self.used and self.used + bound > self.capacity:
                ends.append(row)
                self.used = 0
            fits = (self.capacity - self.used) // bound if self.used else max(1, self.capacity // bound)
            take = min(fits, count - row)
            self.used += take * bound
            row += take
        return ends

    def ends_of(self, bounds: np.ndarray) -> list[int]:
        """ends() of records of these size bounds."""
        ends = []
        cumulative = np.cumsum(bounds)
        count = len(bounds)
        row = 0
        while row < count:
            before = int(cumulative[row - 1]) if row else 0
            if self.used and self.used + int(bounds[row]) > self.capacity:
                ends.append(row)
                self.used = 0
            stop = int(np.searchsorted(cumulative, before + self.capacity - self.used, side="right"))
            stop = min(max(stop, row + 1), count)  # the first record of a batch goes in, whatever its size
            self.used += int(cumulative[stop - 1]) - before
            row = stop
        return ends


def _seal(out: bytearray | memoryview, count: int, timestamp_ms: int, producer_id: int, producer_epoch: int,
          base_sequence: int, compression: int, transactional: bool = False) -> None:
    """Write the batch header into the first BATCH_HEADER_SIZE bytes of `out`, CRC last."""
    attributes = (int(compression) & 0x07) | (TRANSACTIONAL_MASK if transactional else 0)
    _HEADER.pack_into(out, 0, 0, len(out) - 12, -1, 2, 0, attributes, count - 1, timestamp_ms,
                      timestamp_ms, producer_id, producer_epoch, base_sequence, count)
    struct.pack_into(">I", out, _CRC_OFFSET, crc32c.crc32c(memoryview(out)[_ATTRIBUTES_OFFSET:]))


def build_batch(records: bytes, count: int, timestamp_ms: int, producer_id: int, producer_epoch: int,
                base_sequence: int, compression: int = Compression.NONE) -> bytes:
    """A RecordBatch v2 around an encoded records section (base offset 0: the broker assigns)."""
    if compression:
        records = compress(compression, records)
    out = bytearray(BATCH_HEADER_SIZE)
    out += records
    _seal(out, count, timestamp_ms, producer_id, producer_epoch, base_sequence, compression)
    return bytes(out)


def cut_points(bounds: np.ndarray, batch_size: int) -> list[int]:
    """Deterministic batch boundaries by size only (see BatchCutter) of records of these size
    bounds: the end index of every full batch."""
    return BatchCutter(batch_size).ends_of(bounds)

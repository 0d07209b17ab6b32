"""RecordBatch v2 (magic 2): header, CRC32C, lazy reader, column decoder, builder (no numpy, no Arrow).

The header layout lives in batch_header (re-exported here for existing callers).
# KIP-98: producer id/epoch/sequence, transactional and control batches.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import crc32c

from vdl_wire.errors import DecodeError
from vdl_wire.records.batch_header import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    BATCH_LENGTH_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC,
    CRC_OFFSET,
    HEADER,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    RECORD_COUNT_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    batch_length,
    parse_batch_header,
)
from vdl_wire.records.batch_header import is_record_batch_v2 as is_record_batch_v2
from vdl_wire.records.batch_header import with_base_offset as with_base_offset
from vdl_wire.records.compression import (
    DEFAULT_MAX_OUTPUT_BYTES,
    Compression,
    compress,
    decompress,
)
from vdl_wire.records.varint import read_varint, read_varlong, varint_size, write_varint

Buffer = bytes | bytearray | memoryview
Header = tuple[str, bytes | None]

_MIN_RECORD_BYTES = 7
_EMPTY_HEADERS: tuple[Header, ...] = ()


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)


@dataclass(slots=True)
class RecordColumns:
    """One batch as columns. Records without headers share one empty tuple (no allocation)."""

    offsets: list[int]
    timestamps: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[Sequence[Header]]
    timestamp_type: int = 0


def validate_batch(buf: Buffer) -> BatchHeader:
    """Check that `buf` is exactly one well-formed batch with a correct CRC32C; no decompression."""
    header = parse_batch_header(buf)
    if header.size != len(buf):
        raise DecodeError(f"record batch length {header.batch_length} does not match the {len(buf)} bytes given", BATCH_LENGTH_OFFSET)
    _check_crc(buf, header, 0)
    if header.compression == Compression.NONE and \
            header.record_count * _MIN_RECORD_BYTES > len(buf) - BATCH_HEADER_SIZE:
        raise DecodeError(f"record count {header.record_count} exceeds the bytes left", RECORD_COUNT_OFFSET)
    return header


def crc_matches(batch: Buffer) -> bool:
    """`batch` is at least a batch header and its CRC32C covers the rest of it: the check of a
    batch whose layout another check already answers for (a replicated copy of one the leader
    validated), without parsing the header."""
    if len(batch) < BATCH_HEADER_SIZE:
        return False
    with memoryview(batch)[ATTRIBUTES_OFFSET:] as covered:
        return bool(CRC.unpack_from(batch, CRC_OFFSET)[0] == crc32c.crc32c(covered))


def _check_crc(buf: Buffer, header: BatchHeader, position: int) -> None:
    view = memoryview(buf)[position + ATTRIBUTES_OFFSET:position + header.size]
    if crc32c.crc32c(view) != header.crc:
        raise DecodeError("record batch CRC32C mismatch", position + CRC_OFFSET)


def iter_batches(buf: Buffer) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Split a records buffer into batches; a trailing partial batch (fetch responses) ends it."""
    view = memoryview(buf)
    position = 0
    end = len(view)
    while end - position >= LOG_OVERHEAD:
        length = batch_length(view, position)
        if length < MIN_BATCH_LENGTH:
            raise DecodeError(f"record batch length {length} too small", position + BATCH_LENGTH_OFFSET)
        if LOG_OVERHEAD + length > end - position:
            return  # partial batch at the end of a fetch response
        header = parse_batch_header(view, position)
        yield header, view[position:position + header.size]
        position += header.size


def records_section(batch: Buffer, verify_crc: bool, max_output_bytes: int) -> tuple[BatchHeader, bytes]:
    header = parse_batch_header(batch)
    if header.size > len(batch):
        raise DecodeError(f"record batch of {header.size} bytes truncated to {len(batch)}", len(batch))
    if verify_crc:
        _check_crc(batch, header, 0)
    section = memoryview(batch)[BATCH_HEADER_SIZE:header.size]
    if header.compression == Compression.NONE:
        data = bytes(section)
    else:
        if header.is_control:
            raise DecodeError("control batch must not be compressed", ATTRIBUTES_OFFSET)
        data = decompress(header.compression, section, max_output_bytes)
    if header.record_count * _MIN_RECORD_BYTES > len(data):
        raise DecodeError(f"record count {header.record_count} exceeds the record bytes", RECORD_COUNT_OFFSET)
    return header, data


def read_records(batch: Buffer, *, verify_crc: bool = True,
                 max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> Iterator[Record]:
    """Validate (and decompress) eagerly, then yield records lazily."""
    header, data = records_section(batch, verify_crc, max_output_bytes)
    return _iter_records(header, data)


def _iter_records(header: BatchHeader, data: bytes) -> Iterator[Record]:
    position = 0
    end = len(data)
    log_append = header.timestamp_type == 1
    for _ in range(header.record_count):
        length, position = read_varint(data, position, end)
        if length <= 0 or length > end - position:
            raise DecodeError(f"record length {length} out of range", position)
        record_end = position + length
        position += 1  # attributes: unused
        timestamp_delta, position = read_varlong(data, position, record_end)
        offset_delta, position = read_varint(data, position, record_end)
        key, position = _read_bytes(data, position, record_end)
        value, position = _read_bytes(data, position, record_end)
        headers, position = _read_headers(data, position, record_end)
        if position != record_end:
            raise DecodeError("record length does not match its fields", position)
        timestamp = header.max_timestamp if log_append else header.base_timestamp + timestamp_delta
        yield Record(header.base_offset + offset_delta, timestamp, key, value, headers)
    if position != end:
        raise DecodeError("bytes left after the last record", position)


def _read_bytes(data: bytes, position: int, end: int) -> tuple[bytes | None, int]:
    length, position = read_varint(data, position, end)
    if length == -1:
        return None, position
    if length < -1 or length > end - position:
        raise DecodeError(f"field length {length} out of range", position)
    return data[position:position + length], position + length


def _read_headers(data: bytes, position: int, end: int) -> tuple[list[Header], int]:
    count, position = read_varint(data, position, end)
    if count < 0 or count * 2 > end - position:
        raise DecodeError(f"header count {count} out of range", position)
    headers: list[Header] = []
    for _ in range(count):
        key_position = position
        key, position = _read_bytes(data, position, end)
        if key is None:
            raise DecodeError("null header key", key_position)
        try:
            name = key.decode("utf-8")
        except UnicodeDecodeError:
            raise DecodeError("header key is not UTF-8", key_position) from None
        value, position = _read_bytes(data, position, end)
        headers.append((name, value))
    return headers, position


def decode_columns(batch: Buffer, *, verify_crc: bool = True,
                   max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> RecordColumns:
    """All records of one batch as columns (pure Python; the connector's Arrow decoder in
    vdl_connector/arrow.py is the fast path)."""
    header, data = records_section(batch, verify_crc, max_output_bytes)
    return columns_from_records(header, data)


def columns_from_records(header: BatchHeader, data: bytes) -> RecordColumns:
    """Columns of a decompressed records section, record by record."""
    offsets: list[int] = []
    timestamps: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[Sequence[Header]] = []
    for record in _iter_records(header, data):
        offsets.append(record.offset)
        timestamps.append(record.timestamp)
        keys.append(record.key)
        values.append(record.value)
        headers.append(record.headers or _EMPTY_HEADERS)
    return RecordColumns(offsets, timestamps, keys, values, headers, header.timestamp_type)


class RecordBatchBuilder:
    """Build one RecordBatch v2; offsets are consecutive from base_offset."""

    def __init__(self, compression: Compression | int = Compression.NONE, base_offset: int = 0,
                 producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                 is_transactional: bool = False, *, is_control: bool = False,
                 partition_leader_epoch: int = -1, log_append_time: bool = False) -> None:
        self._compression = Compression(compression)
        self._base_offset = base_offset
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._partition_leader_epoch = partition_leader_epoch
        self._attributes = (int(self._compression) | (TRANSACTIONAL_MASK if is_transactional else 0)
                            | (CONTROL_MASK if is_control else 0)
                            | (TIMESTAMP_TYPE_MASK if log_append_time else 0))
        self._records = bytearray()
        self._count = 0
        self._last_delta = -1
        self._base_timestamp = 0
        self._max_timestamp = -1

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def estimated_size(self) -> int:
        """Uncompressed size of the batch so far (an upper bound for compressed ones)."""
        return BATCH_HEADER_SIZE + len(self._records)

    def append(self, timestamp_ms: int, key: bytes | None, value: bytes | None,
               headers: Sequence[Header] = (), *, offset: int | None = None) -> int:
        """Append one record; returns its offset delta.

        `offset` (absolute) keeps gaps when converting existing records; by default offsets
        are consecutive. Offsets must increase.
        """
        delta = self._last_delta + 1 if offset is None else offset - self._base_offset
        if delta <= self._last_delta:
            raise ValueError(f"offset delta {delta} does not increase")
        if self._count == 0:
            self._base_timestamp = timestamp_ms
        self._max_timestamp = max(self._max_timestamp, timestamp_ms)
        body = bytearray(b"\x00")  # attributes
        write_varint(body, timestamp_ms - self._base_timestamp)
        write_varint(body, delta)
        _write_bytes(body, key)
        _write_bytes(body, value)
        write_varint(body, len(headers))
        for name, header_value in headers:
            _write_bytes(body, name.encode("utf-8"))
            _write_bytes(body, header_value)
        write_varint(self._records, len(body))
        self._records += body
        self._count += 1
        self._last_delta = delta
        return delta

    def build(self) -> bytes:
        if self._count == 0:
            raise ValueError("a record batch needs at least one record")
        records = compress(self._compression, self._records) if self._compression else bytes(self._records)
        out = bytearray(BATCH_HEADER_SIZE)
        HEADER.pack_into(out, 0, self._base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(records),
                          self._partition_leader_epoch, MAGIC, 0, self._attributes, self._last_delta,
                          self._base_timestamp, self._max_timestamp, self._producer_id,
                          self._producer_epoch, self._base_sequence, self._count)
        out += records
        CRC.pack_into(out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
        return bytes(out)


def rewrite_batch(batch: Buffer, header: BatchHeader, compression: Compression | int | None = None, *,
                  level: int | None = None, log_append_time: int | None = None, create_time: bool = False,
                  max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> Buffer:
    """What a leader stores of a produced batch on a stream whose compression.type or
    message.timestamp.type asks for it (# Kafka: LogValidator): the records recompressed with
    `compression` at `level` (None: left as they are) and, given `log_append_time`, the batch
    stamped LogAppendTime (the timestamp-type bit, max timestamp = the append time; every record
    then reads that time); with `create_time` (a CreateTime stream), a batch its producer marked
    LogAppendTime is marked CreateTime, its max timestamp kept (as Kafka's in-place validation).
    The records' bytes are kept as produced (timestamps, offset deltas, keys, values, headers)
    and so is every other header field (base offset and timestamp, producer id, epoch and base
    sequence, the transactional bit), so idempotent retries and transactions see the same batch;
    the CRC is computed anew. Control batches are never
    rewritten. Returns `batch` itself when nothing changes; raises DecodeError when the records
    do not decompress."""
    if header.is_control:
        return batch
    recompress = compression is not None and int(compression) != header.compression
    stamp = log_append_time is not None and (header.timestamp_type != 1 or header.max_timestamp != log_append_time)
    unmark = create_time and log_append_time is None and header.timestamp_type == 1
    if not recompress and not stamp and not unmark:
        return batch
    codec = Compression(compression) if recompress and compression is not None else Compression(header.compression)
    if recompress:
        _, data = records_section(batch, False, max_output_bytes)
        records: Buffer = compress(codec, data, level) if codec else data
    else:
        records = memoryview(batch)[BATCH_HEADER_SIZE:header.size]
    attributes = (header.attributes & ~COMPRESSION_MASK) | int(codec)
    max_timestamp = header.max_timestamp
    if log_append_time is not None:
        attributes |= TIMESTAMP_TYPE_MASK
        max_timestamp = log_append_time
    elif unmark:
        attributes &= ~TIMESTAMP_TYPE_MASK
    out = bytearray(BATCH_HEADER_SIZE + len(records))
    HEADER.pack_into(out, 0, header.base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(records),
                     header.partition_leader_epoch, MAGIC, 0, attributes, header.last_offset_delta,
                     header.base_timestamp, max_timestamp, header.producer_id, header.producer_epoch,
                     header.base_sequence, header.record_count)
    out[BATCH_HEADER_SIZE:] = records
    CRC.pack_into(out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return out


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(data))
        out += data


def record_size(key: bytes | None, value: bytes | None, headers: Sequence[Header] = ()) -> int:
    """Upper bound of one record's encoded size (timestamp/offset deltas counted at max width)."""
    body = 1 + 10 + 5 + varint_size(-1 if key is None else len(key)) + (len(key) if key else 0)
    body += varint_size(-1 if value is None else len(value)) + (len(value) if value else 0)
    body += varint_size(len(headers)) + sum(10 + len(k.encode()) + (len(v) if v else 0) for k, v in headers)
    return varint_size(body) + body

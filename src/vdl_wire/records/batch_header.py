"""The RecordBatch v2 header: the one place that knows its layout (sizes, positions, struct).

# Kafka protocol guide, "Record Batch": https://kafka.apache.org/documentation/#recordbatch
Big-endian: baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8, crc uint32,
attributes int16, lastOffsetDelta int32, baseTimestamp int64, maxTimestamp int64, producerId int64,
producerEpoch int16, baseSequence int32, recordCount int32, then the records. batchLength counts
the bytes after itself; the CRC32C covers attributes..end, so a broker may rewrite the base offset
(and batch length, leader epoch) without recomputing it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple

from vdl_wire.errors import DecodeError
from vdl_wire.records.compression import Compression

Buffer = bytes | bytearray | memoryview

HEADER = struct.Struct(">qiibIhiqqqhii")  # every header field, base offset .. record count
BATCH_HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base offset + batch length: the part batchLength does not count
MAGIC = 2

BASE_OFFSET_OFFSET = 0
BATCH_LENGTH_OFFSET = 8
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # CRC32C covers from here to the end of the batch
RECORD_COUNT_OFFSET = 57
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD

BASE_OFFSET = struct.Struct(">q")
BATCH_LENGTH = struct.Struct(">i")
CRC = struct.Struct(">I")
# The leading fields up to maxTimestamp: all the log indexes, unpacked without the rest.
_PREFIX = struct.Struct(">qiibIhiqq")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08  # 1 = LogAppendTime
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20


@dataclass(slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        """Whole batch size in bytes including the 12-byte log overhead."""
        return LOG_OVERHEAD + self.batch_length


def is_record_batch_v2(buf: Buffer, position: int = 0) -> bool:
    """Magic sniff: byte 16 of a batch / message-set entry is the magic."""
    return len(buf) > position + MAGIC_OFFSET and buf[position + MAGIC_OFFSET] == MAGIC


def batch_length(buf: Buffer, position: int = 0) -> int:
    """The batchLength field of the batch at `position` (no checks)."""
    length: int = BATCH_LENGTH.unpack_from(buf, position + BATCH_LENGTH_OFFSET)[0]
    return length


def parse_batch_header(buf: Buffer, position: int = 0) -> BatchHeader:
    """Parse the header at `position` (no CRC check, no size check against `buf`)."""
    if position < 0 or len(buf) - position < BATCH_HEADER_SIZE:
        raise DecodeError("truncated record batch header", max(position, 0))
    header = BatchHeader(*HEADER.unpack_from(buf, position))
    if header.magic != MAGIC:
        raise DecodeError(f"record batch magic {header.magic} is not 2", position + MAGIC_OFFSET)
    if header.batch_length < MIN_BATCH_LENGTH:
        raise DecodeError(f"record batch length {header.batch_length} too small", position + BATCH_LENGTH_OFFSET)
    if header.record_count < 0:
        raise DecodeError(f"negative record count {header.record_count}", position + RECORD_COUNT_OFFSET)
    if header.compression > Compression.ZSTD:
        raise DecodeError(f"unknown compression codec {header.compression}", position + ATTRIBUTES_OFFSET)
    return header


def set_base_offset(batch: bytearray | memoryview, base_offset: int, position: int = 0) -> None:
    """Rewrite the base offset in place (outside the CRC, so no recomputation)."""
    BASE_OFFSET.pack_into(batch, position + BASE_OFFSET_OFFSET, base_offset)


PARTITION_LEADER_EPOCH_OFFSET = 12  # after base offset (int64) and batch length (int32)
PARTITION_LEADER_EPOCH = struct.Struct(">i")


def stamp(batch: bytearray | memoryview, base_offset: int, leader_epoch: int | None = None) -> None:
    """Rewrite the base offset and, if given, the partition leader epoch the leader stamps, in
    place (both outside the CRC, so no recomputation)."""
    set_base_offset(batch, base_offset)
    if leader_epoch is not None:
        PARTITION_LEADER_EPOCH.pack_into(batch, PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)


def with_base_offset(batch: Buffer, base_offset: int, leader_epoch: int | None = None,
                     into: type[bytearray] = bytearray) -> bytearray:
    """A copy of the batch (a new `into`, a bytearray or a subclass), stamped (see stamp)."""
    out = into(batch)
    stamp(out, base_offset, leader_epoch)
    return out


class BatchFields(NamedTuple):
    """The header fields the log indexes."""

    base_offset: int
    last_offset: int
    max_timestamp: int


def batch_fields(buf: Buffer, position: int = 0) -> BatchFields:
    """Base offset, last offset and max timestamp of the batch at `position` (no checks: for
    batches the log has already accepted)."""
    base, _, _, _, _, _, delta, _, max_ts = _PREFIX.unpack_from(buf, position)
    return BatchFields(base, base + delta, max_ts)


def check_batch(payload: Buffer) -> BatchFields:
    """Sanity checks (ValueError) that `payload` is exactly one RecordBatch v2, as the log stores it."""
    size = len(payload)
    if size < BATCH_HEADER_SIZE:
        raise ValueError(f"data payload of {size} bytes is shorter than a RecordBatch v2 header")
    base, length, _, magic, _, _, delta, _, max_ts = _PREFIX.unpack_from(payload, 0)
    if length + LOG_OVERHEAD != size:
        raise ValueError(f"batch length {length} + {LOG_OVERHEAD} does not match payload size {size}")
    if magic != MAGIC:
        raise ValueError(f"data payload has magic {magic}, expected {MAGIC}")
    if delta < 0:
        raise ValueError("negative last offset delta")
    return BatchFields(base, base + delta, max_ts)

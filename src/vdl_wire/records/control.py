"""Transaction markers: control batches ending a transaction in a partition (KIP-98).

A marker is a RecordBatch v2 with the transactional and control attribute bits, the producer's
id and epoch, and one record: key = version (int16, 0) + type (int16: 0 abort, 1 commit),
value = version (int16, 0) + coordinator epoch (int32). # message defs: ControlRecordType,
EndTransactionMarker in Apache Kafka's clients/.../record.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from vdl_wire.errors import DecodeError

from .batch_header import BATCH_HEADER_SIZE, BatchHeader
from .compression import Compression
from .record_batch import RecordBatchBuilder, read_records
from .varint import read_varint

ABORT, COMMIT = 0, 1
# The coordinator epochs a marker may carry that name a decision: 1 .. MARKER_EPOCHS (an int32;
# 0: none). VDL numbers each transactional id's decisions and wraps them into this range.
MARKER_EPOCHS = 2**31 - 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


def end_txn_marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                   timestamp_ms: int) -> bytes:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch, is_transactional=True,
                                 is_control=True)
    builder.append(timestamp_ms, _KEY.pack(0, COMMIT if commit else ABORT), _VALUE.pack(0, coordinator_epoch))
    return builder.build()


@dataclass(frozen=True, slots=True)
class Marker:
    commit: bool
    coordinator_epoch: int


def marker_commits(batch: bytes | bytearray | memoryview, header: BatchHeader) -> bool | None:
    """For a control batch: True for a commit marker, False for an abort; None for anything else
    (not a control batch, or a control record of another type)."""
    marker = read_marker(batch, header)
    return None if marker is None else marker.commit


def read_marker(batch: bytes | bytearray | memoryview, header: BatchHeader) -> Marker | None:
    """A control batch's commit/abort marker and the coordinator epoch it carries (0 when its
    value is missing or short); None for anything else (not a control batch, or a control record
    of another type)."""
    if not header.is_control:
        return None
    if header.compression == Compression.NONE:
        # The usual case (markers are written uncompressed): the first record's key and value read
        # in place, not a whole record decoded — a replica's recovery reads every marker of its
        # log. Record: length, attributes (int8), timestamp delta, offset delta, key length, key,
        # value length, value.
        try:
            end = len(batch)
            _, position = read_varint(batch, BATCH_HEADER_SIZE, end)
            _, position = read_varint(batch, position + 1, end, 10)
            _, position = read_varint(batch, position, end)
            length, position = read_varint(batch, position, end)
        except DecodeError:
            return None
        if length < _KEY.size or position + _KEY.size > end:
            return None
        _, kind = _KEY.unpack_from(batch, position)
        commit = True if kind == COMMIT else False if kind == ABORT else None
        if commit is None:
            return None
        position += length
        try:
            value_length, position = read_varint(batch, position, end)
        except DecodeError:
            return Marker(commit, 0)
        if value_length < _VALUE.size or position + _VALUE.size > end:
            return Marker(commit, 0)
        return Marker(commit, _VALUE.unpack_from(batch, position)[1])
    for record in read_records(batch, verify_crc=False):
        if record.key is None or len(record.key) < _KEY.size:
            return None
        _, kind = _KEY.unpack_from(record.key, 0)
        commit = True if kind == COMMIT else False if kind == ABORT else None
        if commit is None:
            return None
        value = record.value
        epoch = _VALUE.unpack_from(value, 0)[1] if value is not None and len(value) >= _VALUE.size else 0
        return Marker(commit, epoch)
    return None

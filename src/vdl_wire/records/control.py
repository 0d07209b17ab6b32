"""Transaction markers: control batches ending a transaction in a partition (KIP-98).

A marker is a RecordBatch v2 with the transactional and control attribute bits, the producer's
id and epoch, and one record: key = version (int16, 0) + type (int16: 0 abort, 1 commit),
value = version (int16, 0) + coordinator epoch (int32). # message defs: ControlRecordType,
EndTransactionMarker in Apache Kafka's clients/.../record.
"""

from __future__ import annotations

import struct

from vdl_wire.errors import DecodeError

from .batch_header import BATCH_HEADER_SIZE, BatchHeader
from .compression import Compression
from .record_batch import RecordBatchBuilder, read_records
from .varint import read_varint

ABORT, COMMIT = 0, 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


def end_txn_marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                   timestamp_ms: int) -> bytes:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch, is_transactional=True,
                                 is_control=True)
    builder.append(timestamp_ms, _KEY.pack(0, COMMIT if commit else ABORT), _VALUE.pack(0, coordinator_epoch))
    return builder.build()


def marker_commits(batch: bytes | bytearray | memoryview, header: BatchHeader) -> bool | None:
    """For a control batch: True for a commit marker, False for an abort; None for anything else
    (not a control batch, or a control record of another type)."""
    if not header.is_control:
        return None
    if header.compression == Compression.NONE:
        # The usual case (markers are written uncompressed): the first record's key read in
        # place, not a whole record decoded — a replica's recovery reads every marker of its log.
        # Record: length, attributes (int8), timestamp delta, offset delta, key length, key.
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
        return True if kind == COMMIT else False if kind == ABORT else None
    for record in read_records(batch, verify_crc=False):
        if record.key is None or len(record.key) < _KEY.size:
            return None
        _, kind = _KEY.unpack_from(record.key, 0)
        return True if kind == COMMIT else False if kind == ABORT else None
    return None

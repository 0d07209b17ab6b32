"""Conversion between MessageSet v0/v1 and RecordBatch v2 (storage keeps only v2).

Up (Produce v0-2): offsets and timestamps preserved (magic 0 has none: -1); each compressed
wrapper becomes one batch with the same codec, consecutive plain messages share one batch.
Down (Fetch v0-3): each batch becomes plain messages, or one wrapper of the same codec when it
was compressed; headers are dropped and control batches skipped (magic 0/1 cannot express them).
"""

from __future__ import annotations

from collections.abc import Iterable

from vdl_wire.errors import DecodeError
from vdl_wire.records.compression import DEFAULT_MAX_OUTPUT_BYTES, Compression
from vdl_wire.records.message_set import LegacyRecord, build_message_set, iter_message_set
from vdl_wire.records.record_batch import RecordBatchBuilder, iter_batches, read_records

Buffer = bytes | bytearray | memoryview


def message_set_to_batches(buf: Buffer, *, max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> list[bytes]:
    """Magic 0/1 message set (a whole one, as in a produce request) -> RecordBatch v2 buffers."""
    batches: list[bytes] = []
    plain: list[LegacyRecord] = []
    for entry in iter_message_set(buf, allow_partial=False, max_output_bytes=max_output_bytes):
        if entry.compression == Compression.NONE:
            plain.extend(entry.records)
            continue
        if plain:
            batches.append(_batch(plain, Compression.NONE))
            plain = []
        batches.append(_batch(entry.records, Compression(entry.compression)))
    if plain:
        batches.append(_batch(plain, Compression.NONE))
    return batches


def _batch(records: list[LegacyRecord], codec: Compression) -> bytes:
    # A plain group can mix timestamp types; the batch flag follows the first record, and since
    # LogAppendTime records carry the stamped time in their own timestamp nothing is lost.
    offsets = [record.offset for record in records]
    if not _preservable(offsets):
        # Producer-side offsets are placeholders the broker replaces; only keep them when a v2
        # batch can express them (increasing, deltas within int32).
        first = max(offsets[0], 0)
        offsets = list(range(first, first + len(records)))
    builder = RecordBatchBuilder(codec, base_offset=offsets[0],
                                 log_append_time=records[0].timestamp_type == 1)
    for record, offset in zip(records, offsets, strict=True):
        if record.timestamp < -1:
            raise DecodeError(f"invalid message timestamp {record.timestamp}", 0)  # Kafka: INVALID_TIMESTAMP
        builder.append(record.timestamp, record.key, record.value, offset=offset)
    return builder.build()


def _preservable(offsets: list[int]) -> bool:
    return offsets[0] >= 0 and offsets[-1] - offsets[0] < 2**31 and \
        all(later > earlier for earlier, later in zip(offsets, offsets[1:], strict=False))


def batches_to_message_set(batches: Iterable[Buffer], magic: int, *,
                           max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> bytes:
    """RecordBatch v2 buffers (each may hold several batches) -> one magic 0/1 message set."""
    if magic not in (0, 1):
        raise ValueError(f"magic {magic} is not 0 or 1")
    parts: list[bytes] = []
    for buffer in batches:
        for header, batch in iter_batches(buffer):
            if header.is_control or header.record_count == 0:
                continue
            items = [(record.offset, record.timestamp if magic == 1 else -1, record.key, record.value)
                     for record in read_records(batch, max_output_bytes=max_output_bytes)]
            if not items:
                continue
            parts.append(build_message_set(items, magic, header.compression,
                                           log_append_time=header.timestamp_type == 1))
    return b"".join(parts)

"""Kafka record formats: RecordBatch v2, MessageSet v0/v1, compression, conversion."""

from vdl_wire.records.batch_header import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    is_record_batch_v2,
    parse_batch_header,
    with_base_offset,
)
from vdl_wire.records.compression import Compression, compress, decompress
from vdl_wire.records.conversion import batches_to_message_set, message_set_to_batches
from vdl_wire.records.message_set import (
    LegacyRecord,
    MessageSetEntry,
    build_message_set,
    iter_message_set,
    read_message_set,
)
from vdl_wire.records.record_batch import (
    Record,
    RecordBatchBuilder,
    RecordColumns,
    decode_columns,
    iter_batches,
    read_records,
    validate_batch,
)

__all__ = [
    "BATCH_HEADER_SIZE", "BatchHeader", "Compression", "Record", "RecordBatchBuilder",
    "RecordColumns", "compress", "decode_columns", "decompress",
    "is_record_batch_v2", "iter_batches", "parse_batch_header", "read_records", "validate_batch",
    "with_base_offset", "LegacyRecord", "MessageSetEntry", "build_message_set", "iter_message_set",
    "read_message_set", "batches_to_message_set", "message_set_to_batches",
]

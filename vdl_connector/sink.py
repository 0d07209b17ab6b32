"""df.write / df.writeStream .format("vdl"): Arrow writers producing to streams' leaders.

Every task opens its own client and produces with acks=-1 as an idempotent producer: batches
are cut by size only (never by time), each carries (producer id, epoch, base sequence), and a
batch re-sent after a leader change or a lost answer keeps its sequence so the broker stores it
once.

Exactly-once streaming writes (issue 7, option exactlyOnce, default true): the task's producer id
comes from InitProducerId with the transactional id "vdl-spark/<query id>/<batch id>/<partition>"
which the broker maps deterministically to a producer id (epoch 0). A replayed micro-batch (same
batch id, same rows in the same task partitions, as Spark guarantees for a deterministic plan over
a replayable source) or a retried task attempt therefore re-sends the very same batches with the
very same sequences, and the broker acknowledges them without storing them again. Costs: one
InitProducerId per task and micro-batch, and the broker keeps producer state per (query, batch,
task). Where Spark cannot replay identically (non-deterministic plans, a non-replayable source),
the guarantee degrades to at-least-once. Batch writes (df.write) are at-least-once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from vdl_broker.protocol.records.compression import Compression
from vdl_broker.protocol.records.record_batch import RecordBatchBuilder, record_size
from vdl_connector.options import SinkOptions, VdlOptionError
from vdl_connector.schema import WriteColumns

log = logging.getLogger("vdl_connector")

QUERY_ID_PROPERTY = "sql.streaming.queryId"  # Spark's StreamExecution.QUERY_ID_KEY
BATCH_ID_PROPERTY = "streaming.sql.batchId"  # Spark's MicroBatchExecution.BATCH_ID_KEY
_SEQUENCE_WRAP = 1 << 31  # Kafka sequences are int32 and wrap to 0 (KIP-98)
_CODECS = {"none": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
           "lz4": Compression.LZ4, "zstd": Compression.ZSTD}


class VdlWriteError(RuntimeError):
    """A write cannot proceed (missing stream, bad partition or topic value)."""


@dataclass
class VdlCommitMessage(WriterCommitMessage):
    """What one task wrote: records per stream."""

    counts: dict[str, int] = field(default_factory=dict)
    partition_id: int = -1
    transactional_id: str | None = None


def total_counts(messages: list[WriterCommitMessage | None]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for message in messages:
        if isinstance(message, VdlCommitMessage):
            for stream, count in message.counts.items():
                totals[stream] = totals.get(stream, 0) + count
    return totals


def producer_identity(exactly_once: bool) -> tuple[str | None, int]:
    """(transactional id or None, task partition id) from the running Spark task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return None, -1
    partition = context.partitionId()
    if not exactly_once:
        return None, partition
    query = context.getLocalProperty(QUERY_ID_PROPERTY)
    batch = context.getLocalProperty(BATCH_ID_PROPERTY)
    if query is None or batch is None:
        log.warning("exactlyOnce: no query/batch id in the task context; writing at-least-once")
        return None, partition
    return transactional_id(query, int(batch), partition), partition


def transactional_id(query_id: str, batch_id: int, partition: int) -> str:
    return f"vdl-spark/{query_id}/{batch_id}/{partition}"


@dataclass
class _StreamState:
    builder: RecordBatchBuilder | None = None
    next_sequence: int = 0
    records: int = 0


class StreamProducer:
    """Batches records per stream by size and produces each batch to the stream's leader."""

    def __init__(self, client, options: SinkOptions, txn_id: str | None) -> None:  # noqa: ANN001
        self._client = client
        self._options = options
        self._txn_id = txn_id
        self._producer_id, self._epoch = client.init_producer_id(txn_id)
        self._streams: dict[str, _StreamState] = {}
        self._codec = _CODECS[options.compression]

    def _state(self, stream: str) -> _StreamState:
        state = self._streams.get(stream)
        if state is None:
            ensure_stream(self._client, stream, self._options.create_streams)
            state = self._streams[stream] = _StreamState()
        return state

    def _new_builder(self, state: _StreamState) -> RecordBatchBuilder:
        return RecordBatchBuilder(self._codec, 0, self._producer_id, self._epoch, state.next_sequence)

    def append(self, stream: str, timestamp_ms: int, key: bytes | None, value: bytes | None,
               headers: list[tuple[str, bytes | None]]) -> None:
        state = self._state(stream)
        builder = state.builder
        if builder is None:
            builder = state.builder = self._new_builder(state)
        elif builder.estimated_size + record_size(key, value, headers) > self._options.batch_size:
            self._send(stream, state)
            builder = state.builder = self._new_builder(state)
        builder.append(timestamp_ms, key, value, headers)

    def _send(self, stream: str, state: _StreamState) -> None:
        builder = state.builder
        if builder is None or builder.record_count == 0:
            return
        batch = builder.build()
        deadline = time.monotonic() + self._options.delivery_timeout_ms / 1000
        self._client.produce(stream, batch, self._options.client.request_timeout_ms, deadline)
        state.next_sequence = (state.next_sequence + builder.record_count) % _SEQUENCE_WRAP
        state.records += builder.record_count
        state.builder = None

    def flush(self) -> dict[str, int]:
        for stream, state in self._streams.items():
            self._send(stream, state)
        return {stream: state.records for stream, state in self._streams.items()}


def ensure_stream(client, stream: str, create: bool) -> None:  # noqa: ANN001
    if client.stream_exists(stream):
        return
    if not create:
        raise VdlWriteError(f"stream {stream!r} does not exist: create it first, or set the option "
                            "'createStreams' to 'true' to create missing streams")
    client.create_streams([stream])


def _binary(column: pa.Array) -> pa.Array:
    return column if pa.types.is_binary(column.type) else pc.cast(column, pa.binary())


def _rows(batch: pa.RecordBatch, columns: WriteColumns, topic_option: str | None) -> Iterator[tuple]:
    """(stream, key, value, headers) per row, checked like Spark's Kafka sink."""
    count = batch.num_rows
    values = _binary(batch.column(columns.value)).to_pylist()
    keys = _binary(batch.column(columns.key)).to_pylist() if columns.key is not None else [None] * count
    if topic_option is not None:
        topics = None
    else:
        assert columns.topic is not None
        topics = batch.column(columns.topic).to_pylist()
    if columns.partition is not None:
        partitions = batch.column(columns.partition)
        bad = pc.sum(pc.cast(pc.not_equal(partitions, 0), pa.int64())).as_py()
        if bad:
            raise VdlWriteError("column 'partition' must be null or 0: a stream has exactly one partition")
    headers = batch.column(columns.headers).to_pylist() if columns.headers is not None else None
    for i in range(count):
        stream = topic_option if topics is None else topics[i]
        if stream is None:
            raise VdlWriteError("null topic present in the data: set the option 'topic' or fill the "
                                "'topic' column")
        row_headers = []
        if headers is not None and headers[i]:
            row_headers = [(h["key"], h["value"].encode() if isinstance(h["value"], str) else h["value"])
                           for h in headers[i]]
        yield stream, keys[i], values[i], row_headers


def write_batches(options: SinkOptions, columns: WriteColumns, iterator: Iterator[pa.RecordBatch],
                  exactly_once: bool) -> VdlCommitMessage:
    from vdl_connector.client import VdlClient

    txn_id, partition = producer_identity(exactly_once)
    with VdlClient(options.client) as client:
        producer = StreamProducer(client, options, txn_id)
        for batch in iterator:
            now_ms = int(time.time() * 1000)
            for stream, key, value, headers in _rows(batch, columns, options.topic):
                producer.append(stream, now_ms, key, value, headers)
        counts = producer.flush()
    return VdlCommitMessage(counts, partition, txn_id)


def _check_topic_on_driver(options: SinkOptions) -> None:
    """With the topic option set, a missing stream fails on the driver before any task runs."""
    if options.topic is None:
        return
    from vdl_connector.client import VdlClient

    with VdlClient(options.client) as client:
        try:
            ensure_stream(client, options.topic, options.create_streams)
        except VdlWriteError as exc:
            raise VdlOptionError(f"option 'topic': {exc}") from None


class VdlBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, columns: WriteColumns) -> None:
        self.options = options
        self.columns = columns
        _check_topic_on_driver(options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> VdlCommitMessage:
        return write_batches(self.options, self.columns, iterator, exactly_once=False)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("vdl write committed: %s", total_counts(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Records already acknowledged stay in their streams: a log cannot un-append.
        log.warning("vdl write aborted after writing %s", total_counts(messages))


class VdlStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, columns: WriteColumns) -> None:
        self.options = options
        self.columns = columns
        _check_topic_on_driver(options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> VdlCommitMessage:
        return write_batches(self.options, self.columns, iterator, self.options.exactly_once)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        log.info("vdl micro-batch %d committed: %s", batchId, total_counts(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        log.warning("vdl micro-batch %d aborted after writing %s", batchId, total_counts(messages))

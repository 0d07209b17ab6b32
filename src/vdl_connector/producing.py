"""A write task's rows into produce requests: the task side of format("vdl")'s writers
(sink.py: the writers Spark calls, their commit and abort on the driver, and what exactly once
means for each; imported by a task's write(), not by Spark's planner processes, which never
encode a record).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from vdl_connector.arrow import (
    BatchBuffers,
    BatchCutter,
    Piece,
    RecordColumns,
    encode_batch,
    encode_headers,
    encode_headers_column,
)
from vdl_connector.options import SinkOptions
from vdl_connector.schema import WriteColumns
from vdl_connector.sink import (
    BATCH_MARKER,
    VdlCommitMessage,
    VdlWriteError,
    ensure_stream,
    producer_identity,
    transactional_identity,
)
from vdl_wire.records.compression import Compression

if TYPE_CHECKING:
    from vdl_client.pipeline import ProducePipeline
    from vdl_client.transactions import TxnProducer

log = logging.getLogger("vdl_connector")

_SEQUENCE_WRAP = 1 << 31  # Kafka sequences are int32 and wrap to 0 (KIP-98)
MAX_IN_FLIGHT = 5  # produce requests in flight per stream: KIP-98's most for an idempotent producer
# Bytes in flight per stream the window aims at: 5 batches of 1 MiB, 2 of the default 4 MiB (as
# fast as 5 of them: two keep the broker busy while the next is encoded); never fewer than 2.
IN_FLIGHT_BYTES = 8 * 1024 * 1024
MAX_MESSAGE_BYTES = "max.message.bytes"  # Kafka's topic config: the largest batch the stream takes
# Acknowledged batches' buffers, for the next batches of any stream and of the tasks after this
# one in the same Python worker (Spark reuses its workers): room for a few windows of default-size
# (4 MiB) batches, held for the worker's life.
_BUFFERS = BatchBuffers(32 << 20)
_CODECS = {"none": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
           "lz4": Compression.LZ4, "zstd": Compression.ZSTD}


@dataclass
class _StreamState:
    """The batch being filled for one stream: pieces of the Arrow columns its rows came in (not
    yet encoded: a record's encoding depends on its position in its Kafka batch)."""

    cutter: BatchCutter
    window: int  # produce requests in flight (in_flight_window)
    open: list[Piece] = field(default_factory=list)
    next_sequence: int = 0
    records: int = 0
    stored: int = 0  # rows a replayed writer skips: its first attempt stored them (StreamProducer._resume)
    pipeline: ProducePipeline | None = None  # opened at the first batch


class StreamProducer:
    """Batches rows per stream by size (deterministically: only the sequence of rows decides where
    a batch ends, see BatchCutter) and produces each batch to the stream's leader, acks=-1,
    idempotent, several in flight (ProducePipeline): the next batch is encoded while the broker
    appends and syncs the last ones."""

    def __init__(self, client, options: SinkOptions, txn_id: str | None,  # noqa: ANN001
                 transaction: TxnProducer | None = None) -> None:
        """transaction: write every batch in this open transaction (each stream is added to it
        before its first batch); else produce under the writer key `txn_id`'s producer id, or a
        fresh idempotent one."""
        self._client = client
        self._options = options
        self._txn_id = txn_id
        self._transaction = transaction
        if transaction is not None:
            self._producer_id, self._epoch = transaction.producer_id, transaction.epoch
        else:
            self._producer_id, self._epoch = client.writer_id(txn_id) if txn_id else client.init_producer_id()
        self._streams: dict[str, _StreamState] = {}
        self._codec = _CODECS[options.compression]

    def _state(self, stream: str) -> _StreamState:
        state = self._streams.get(stream)
        if state is None:
            ensure_stream(self._client, stream, self._options.create_streams)
            if self._transaction is not None:
                from vdl_client.transactions import add_streams

                add_streams(self._client, self._transaction, [stream])
            batch_size = self._batch_size(stream)
            state = self._streams[stream] = _StreamState(BatchCutter(batch_size), in_flight_window(batch_size))
            if self._txn_id is not None and self._transaction is None:
                self._resume(stream, state)
        return state

    def _resume(self, stream: str, state: _StreamState) -> None:
        """A writer key's replay starts after the rows an earlier attempt stored: the task's i-th
        row for a stream has sequence i, so the rows up to the producer id's last stored sequence
        are the stored ones, whatever batches carried them (a replay cut differently -- another
        kafka.batch.size or max.message.bytes, another release -- was refused with
        OUT_OF_ORDER_SEQUENCE_NUMBER from its first batch on). Without READ on the stream it
        re-sends everything, which the broker recognises only in batches cut as before."""
        last = self._client.last_sequence(stream, self._producer_id)
        if last is not None and last >= 0:
            state.stored, state.next_sequence = last + 1, (last + 1) % _SEQUENCE_WRAP
            log.info("%s: replaying into %s after the %d records stored before", self._txn_id, stream, last + 1)

    def _batch_size(self, stream: str) -> int:
        """The batch size option, at most the stream's max.message.bytes: a larger batch would be
        refused (MESSAGE_TOO_LARGE), where Kafka's producer would split it and send it again. Without
        DESCRIBE_CONFIGS on the stream (ACLs) the option alone."""
        from vdl_client.configs import stream_config_values

        limit = stream_config_values(self._client, [stream], [MAX_MESSAGE_BYTES]).get(stream, {}).get(MAX_MESSAGE_BYTES)
        return min(self._options.batch_size, int(limit)) if limit else self._options.batch_size

    def add(self, stream: str, keys: pa.Array | None, values: pa.Array, headers: pa.Array | None) -> None:
        """Queue rows (binary columns; headers pre-encoded sections) and send every full batch."""
        if len(values) == 0:
            return
        state = self._state(stream)
        if state.stored:
            skipped = min(state.stored, len(values))
            state.stored -= skipped
            state.records += skipped
            if skipped == len(values):
                return
            keys, values = None if keys is None else keys.slice(skipped), values.slice(skipped)
            headers = None if headers is None else headers.slice(skipped)
        columns = RecordColumns(keys, values, headers)
        start = 0
        for end in state.cutter.ends(columns):
            if end > start:
                state.open.append((columns, start, end))
            self._send(stream, state)
            start = end
        state.open.append((columns, start, columns.count))

    def append(self, stream: str, timestamp_ms: int, key: bytes | None, value: bytes | None,
               headers: list[tuple[str, bytes | None]]) -> None:
        """One record (convenience for small writes and tests)."""
        self.add(stream, pa.array([key], pa.binary()), pa.array([value], pa.binary()),
                 pa.array([encode_headers(headers)], pa.binary()) if headers else None)

    def _send(self, stream: str, state: _StreamState) -> None:
        """The open batch, sent while the batches before it are still in flight."""
        pieces, state.open = state.open, []
        count = sum(stop - start for _, start, stop in pieces)
        batch = encode_batch(pieces, int(time.time() * 1000), self._producer_id, self._epoch, state.next_sequence,
                             self._codec, self._transaction is not None, _BUFFERS)
        if state.pipeline is None:
            txn = self._transaction.transactional_id if self._transaction is not None else None
            state.pipeline = self._client.pipeline(stream, self._options.client.request_timeout_ms,
                                                   self._options.delivery_timeout_ms, state.window, txn,
                                                   _BUFFERS.release)
        state.pipeline.submit(batch)
        state.next_sequence = (state.next_sequence + count) % _SEQUENCE_WRAP
        state.records += count

    def flush(self) -> dict[str, int]:
        for stream, state in self._streams.items():
            if state.stored:
                log.warning("%s: the replay brought %d rows fewer for %s than its first attempt stored: the "
                            "micro-batch was not replayed identically", self._txn_id, state.stored, stream)
            if state.open:
                self._send(stream, state)
            if state.pipeline is not None:
                state.pipeline.finish()
        return {stream: state.records for stream, state in self._streams.items()}


def in_flight_window(batch_size: int) -> int:
    """Produce requests in flight per stream for batches of this size."""
    return max(2, min(MAX_IN_FLIGHT, IN_FLIGHT_BYTES // batch_size))


def _binary(column: pa.Array) -> pa.Array | None:
    if pa.types.is_null(column.type) or column.null_count == len(column):
        return None
    return column if pa.types.is_binary(column.type) else pc.cast(column, pa.binary())


def _headers(column: pa.Array) -> pa.Array | None:
    """Pre-encoded headers sections, one per record."""
    if pa.types.is_null(column.type) or column.null_count == len(column):
        return None
    return encode_headers_column(column)


def split_by_stream(batch: pa.RecordBatch, columns: WriteColumns,
                    topic_option: str | None) -> list[tuple[str, pa.Array | None, pa.Array, pa.Array | None]]:
    """(stream, keys, values, headers) groups of one Arrow batch, checked like Spark's Kafka sink."""
    if columns.partition is not None:
        partitions = batch.column(columns.partition)
        if not pa.types.is_null(partitions.type) and pc.any(pc.not_equal(partitions, 0)).as_py():
            raise VdlWriteError("column 'partition' must be null or 0: a stream has exactly one partition")
    values = _binary(batch.column(columns.value))
    if values is None:
        values = pa.nulls(batch.num_rows, pa.binary())
    keys = _binary(batch.column(columns.key)) if columns.key is not None else None
    headers = _headers(batch.column(columns.headers)) if columns.headers is not None else None
    if topic_option is not None:
        return [(topic_option, keys, values, headers)]
    assert columns.topic is not None
    topics = batch.column(columns.topic)
    if pa.types.is_null(topics.type) or topics.null_count:
        raise VdlWriteError("null topic present in the data: set the option 'topic' or fill the 'topic' column")
    names = pc.unique(topics).to_pylist()
    if len(names) == 1:
        return [(names[0], keys, values, headers)]
    groups = []
    for name in names:
        mask = pc.equal(topics, name)
        groups.append((name, None if keys is None else keys.filter(mask), values.filter(mask),
                       None if headers is None else headers.filter(mask)))
    return groups


def write_batches(options: SinkOptions, columns: WriteColumns, iterator: Iterator[pa.RecordBatch],
                  exactly_once: bool, in_batch: bool = False) -> VdlCommitMessage:
    from vdl_client import VdlClient

    txn_id, partition = producer_identity(exactly_once, (options.topic or "*") if in_batch else None)
    with VdlClient(options.client) as client:
        producer = StreamProducer(client, options, txn_id)
        for batch in iterator:
            for stream, keys, values, headers in split_by_stream(batch, columns, options.topic):
                producer.add(stream, keys, values, headers)
        counts = producer.flush()
    return VdlCommitMessage(counts, partition, txn_id)


def write_transactional(options: SinkOptions, columns: WriteColumns, iterator: Iterator[pa.RecordBatch],
                        write_id: str, in_batch_of: str | None = None) -> VdlCommitMessage:
    """The task's rows in one open transaction (see the module docstring), or nothing when the
    replay marker says this task's micro-batch is committed already."""
    from vdl_client import VdlClient
    from vdl_client.groups import committed_offsets
    from vdl_client.transactions import commit_offsets_in_transaction, end_transaction, init_transactions

    identity = transactional_identity(write_id, in_batch_of)
    txn_id = identity.transactional_id
    with VdlClient(options.client) as client:
        # First: it fences an older attempt and aborts what that one left open, so the marker
        # read next is final (a transaction of this id is never pending behind it).
        transaction = init_transactions(client, txn_id, options.transaction_timeout_ms)
        if identity.batch_id is not None:
            done = committed_offsets(client, txn_id)
            if done and max(done.values()) >= identity.batch_id:
                log.info("%s: micro-batch %d committed already; writing nothing", txn_id, identity.batch_id)
                return VdlCommitMessage({}, identity.partition, txn_id, replayed=True)
        try:
            producer = StreamProducer(client, options, None, transaction)
            for batch in iterator:
                for stream, keys, values, headers in split_by_stream(batch, columns, options.topic):
                    producer.add(stream, keys, values, headers)
            counts = {stream: n for stream, n in producer.flush().items() if n}
            if not counts:  # nothing added: no transaction to end
                return VdlCommitMessage({}, identity.partition, txn_id)
            if identity.batch_id is not None:
                commit_offsets_in_transaction(client, transaction, txn_id, dict.fromkeys(counts, identity.batch_id),
                                              BATCH_MARKER)
        except BaseException:
            try:
                end_transaction(client, transaction, commit=False, deadline=time.monotonic() + 5)
            except Exception as exc:  # noqa: BLE001 - the next attempt's InitProducerId aborts it anyway
                log.warning("%s: abort after a failed write: %s", txn_id, exc)
            raise
    return VdlCommitMessage(counts, identity.partition, txn_id, transaction.producer_id, transaction.epoch)

"""df.write / df.writeStream .format("vdl"): Arrow writers producing to streams' leaders.

Every task opens its own client and produces with acks=-1 as an idempotent producer: batches
are cut by size only (never by time), each carries (producer id, epoch, base sequence), and a
batch re-sent after a leader change or a lost answer keeps its sequence so the broker stores it
once.

Exactly-once streaming writes (option exactlyOnce, default true): the task's producer id
comes from VdlWriterId (VDL's own API, not a Kafka transaction) with the writer key
"vdl-spark/<query id>/<batch id>/<partition>", which the broker maps deterministically to a
producer id (epoch 0), and the task's i-th row for a stream has sequence i. A replayed
micro-batch (same batch id, same rows in the same task partitions, as Spark guarantees for a
deterministic plan over a replayable source) or a retried task attempt therefore gives every row
the sequence it had: it starts after the last sequence the broker stored for that producer id
(StreamProducer._resume) and the broker stores nothing twice. Costs: one VdlWriterId per task and
micro-batch, one DescribeProducers per task and stream, and the broker keeps producer state per
(query, batch, task). Where Spark cannot replay identically (non-deterministic plans, a
non-replayable source), the guarantee degrades to at-least-once.

Batch writes (df.write) are at-least-once, unless the option exactlyOnce is set to true
explicitly: then the write must run inside foreachBatch of a streaming query, and its tasks take
the writer key "vdl-spark/<query id>/<batch id>/<partition>/<topic>" from the running
micro-batch, so a replayed micro-batch re-sends the same batches as above. One such write per
stream and micro-batch: a second exactly-once write of the same micro-batch to the same stream
would be taken for a replay of the first.

Transactional writes (exactlyOnce=transactional): every task of a streaming micro-batch writes
all its rows, to every stream they target, in one Kafka transaction (KIP-98) under the
transactional id "vdl-spark/txn/<query id>/<partition>", and leaves it open; its commit message
carries the transactional id, producer id and epoch, and the driver's commit(batch id) ends every
task's transaction with EndTxn once all tasks succeeded (abort() aborts them, and fences the ids
of tasks that failed or were killed), so read_committed readers see a micro-batch only once Spark
commits it, and nothing of a failed one. The same id for every micro-batch and attempt of a task:
a retried attempt's InitProducerId bumps the epoch, which fences a zombie attempt and aborts what
it left open. Replays: each task's transaction also commits the batch id as the offset of the
consumer group named like the transactional id (TxnOffsetCommit: it becomes visible exactly when
the transaction commits); a task that finds its group at the micro-batch's id already writes
nothing, so a micro-batch replayed after the driver committed it (and died before Spark's commit
log said so) is stored once, whatever rows the replay brings.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from vdl_connector.arrow import (
    BatchCutter,
    Piece,
    RecordColumns,
    encode_batch,
    encode_headers,
    encode_headers_column,
)
from vdl_connector.options import SinkOptions, VdlOptionError
from vdl_connector.schema import WriteColumns
from vdl_wire.records.compression import Compression

if TYPE_CHECKING:
    from vdl_client.pipeline import ProducePipeline
    from vdl_client.transactions import TxnProducer

log = logging.getLogger("vdl_connector")

QUERY_ID_PROPERTY = "sql.streaming.queryId"  # Spark's StreamExecution.QUERY_ID_KEY
BATCH_ID_PROPERTY = "streaming.sql.batchId"  # Spark's MicroBatchExecution.BATCH_ID_KEY
_SEQUENCE_WRAP = 1 << 31  # Kafka sequences are int32 and wrap to 0 (KIP-98)
MAX_IN_FLIGHT = 5  # produce requests in flight per stream: KIP-98's most for an idempotent producer
# Bytes in flight per stream the window aims at: 5 batches of 1 MiB, 2 of the default 4 MiB (as
# fast as 5 of them: two keep the broker busy while the next is encoded); never fewer than 2.
IN_FLIGHT_BYTES = 8 * 1024 * 1024
MAX_MESSAGE_BYTES = "max.message.bytes"  # Kafka's topic config: the largest batch the stream takes
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
    # exactlyOnce=transactional: the task's open transaction, for the driver to end (-1: none,
    # the task wrote nothing); replayed: the task found its micro-batch committed already.
    producer_id: int = -1
    epoch: int = -1
    replayed: bool = False

    def open_transaction(self) -> TxnProducer | None:
        from vdl_client.transactions import TxnProducer

        if self.transactional_id is None or self.producer_id < 0:
            return None
        return TxnProducer(self.transactional_id, self.producer_id, self.epoch)


def total_counts(messages: list[WriterCommitMessage | None]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for message in messages:
        if isinstance(message, VdlCommitMessage):
            for stream, count in message.counts.items():
                totals[stream] = totals.get(stream, 0) + count
    return totals


def producer_identity(exactly_once: bool, in_batch_of: str | None = None) -> tuple[str | None, int]:
    """(transactional id or None, task partition id) from the running Spark task.

    in_batch_of: None for a streaming write; the target (topic option or "*") for an
    exactly-once df.write, which must run inside a micro-batch (foreachBatch)."""
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
        if in_batch_of is not None:
            raise VdlWriteError("option 'exactlyOnce' is true on df.write, which is exactly-once only inside "
                                "foreachBatch of a streaming query (it takes the query and batch id from the "
                                "running micro-batch); drop the option for an at-least-once write")
        log.warning("exactlyOnce: no query/batch id in the task context; writing at-least-once")
        return None, partition
    txn_id = transactional_id(query, int(batch), partition)
    return (txn_id if in_batch_of is None else f"{txn_id}/{in_batch_of}"), partition


def transactional_id(query_id: str, batch_id: int, partition: int) -> str:
    return f"vdl-spark/{query_id}/{batch_id}/{partition}"


TXN_PREFIX = "vdl-spark/txn/"  # under the exactly-once sink's ACL prefix vdl-spark/, never a writer key
BATCH_MARKER = "vdl-spark micro-batch id"  # metadata of the replay marker's offsets


@dataclass(frozen=True)
class TxnIdentity:
    """A transactional task: its transactional id (also the name of its replay-marker group),
    its Spark partition, and the micro-batch it writes (None outside a micro-batch: no replays)."""

    transactional_id: str
    partition: int
    batch_id: int | None


def transactional_identity(write_id: str, in_batch_of: str | None = None) -> TxnIdentity:
    """The running task's transactional id: "vdl-spark/txn/<query id>/<partition>" in a streaming
    micro-batch (with "/<topic or *>" for a df.write inside foreachBatch); outside a micro-batch
    "vdl-spark/txn/<write_id>/<partition>", write_id made once per df.write on the driver."""
    from pyspark import TaskContext

    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    query = context.getLocalProperty(QUERY_ID_PROPERTY) if context is not None else None
    batch = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
    if query is None or batch is None:
        return TxnIdentity(_txn_id(write_id, partition, None), partition, None)
    return TxnIdentity(_txn_id(query, partition, in_batch_of), partition, int(batch))


def _txn_id(scope: str, partition: int, in_batch_of: str | None) -> str:
    """scope: the query id, or a df.write's write_id outside a micro-batch."""
    txn_id = f"{TXN_PREFIX}{scope}/{partition}"
    return txn_id if in_batch_of is None else f"{txn_id}/{in_batch_of}"


def unfinished_transactional_ids(messages: list[WriterCommitMessage | None], query_id: str | None) -> list[str]:
    """The transactional ids of the tasks that sent the driver no commit message: they failed, or
    were killed when another task failed (Spark kills a cancelled task's Python worker, SIGKILL,
    which leaves its transaction open). A task's id differs from another's only by its partition:
    it is read from any message, else built from `query_id` (a streaming write's), else unknown."""
    known = next((m.transactional_id for m in messages
                  if isinstance(m, VdlCommitMessage) and m.transactional_id is not None), None)
    if known is not None:
        scope, _, rest = known.removeprefix(TXN_PREFIX).partition("/")
        in_batch_of = rest.partition("/")[2] or None  # (topic names hold no "/")
    elif query_id is not None:
        scope, in_batch_of = query_id, None
    else:
        return []
    return [_txn_id(scope, partition, in_batch_of) for partition, m in enumerate(messages) if m is None]


def query_id_in_checkpoint(location: str | None) -> str | None:
    """The query id Spark keeps in <checkpointLocation>/metadata (one JSON line, {"id": ...}),
    when the checkpoint is on the local file system: the driver's commit worker has no Hadoop
    file system to read others with."""
    if location is None:
        return None
    parsed = urllib.parse.urlparse(location)
    if parsed.scheme not in ("", "file"):
        return None
    try:
        with open(Path(parsed.path if parsed.scheme else location) / "metadata", encoding="utf-8") as file:
            query_id = json.loads(file.readline()).get("id")
    except (OSError, ValueError, AttributeError):
        return None
    return query_id if isinstance(query_id, str) else None


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
                             self._codec, self._transaction is not None)
        if state.pipeline is None:
            txn = self._transaction.transactional_id if self._transaction is not None else None
            state.pipeline = self._client.pipeline(stream, self._options.client.request_timeout_ms,
                                                   self._options.delivery_timeout_ms, state.window, txn)
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


def ensure_stream(client, stream: str, create: bool) -> None:  # noqa: ANN001
    if client.stream_exists(stream):
        return
    if not create:
        raise VdlWriteError(f"stream {stream!r} does not exist: create it first, or set the option "
                            "'createStreams' to 'true' to create missing streams")
    client.create_streams([stream])


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


def end_transactions(options: SinkOptions, messages: list[WriterCommitMessage | None], commit: bool,
                     query_id: str | None = None) -> None:
    """On the driver: commit (or abort) the transaction each task left open. A commit that fails
    fails the micro-batch: Spark runs it again, and the tasks whose transaction did commit find
    their replay marker and write nothing. An abort also fences the ids of the tasks that sent no
    message (InitProducerId aborts what such a task left open), so that no read_committed reader
    waits for the transaction timeout behind a failed micro-batch."""
    open_ones = [m.open_transaction() for m in messages if isinstance(m, VdlCommitMessage)]
    transactions = [t for t in open_ones if t is not None]
    unfinished = [] if commit or not options.transactional else unfinished_transactional_ids(messages, query_id)
    if not transactions and not unfinished:
        return  # (an exactly-once or plain write: the commit worker need not load the client)
    from vdl_client import VdlClient
    from vdl_client.transactions import end_transaction, init_transactions

    with VdlClient(options.client) as client:
        for transaction in transactions:
            if commit:
                end_transaction(client, transaction, commit=True)
                continue
            try:
                end_transaction(client, transaction, commit=False)
            except Exception as exc:  # noqa: BLE001 - aborted by its timeout or the next InitProducerId
                log.warning("abort of %s: %s", transaction.transactional_id, exc)
        for txn_id in unfinished:
            try:
                init_transactions(client, txn_id, options.transaction_timeout_ms)
            except Exception as exc:  # noqa: BLE001 - the next start's InitProducerId aborts it anyway
                log.warning("fencing %s after a failed task: %s", txn_id, exc)


def _check_topic_on_driver(options: SinkOptions) -> None:
    """With the topic option set, a missing stream fails on the driver before any task runs."""
    if options.topic is None:
        return
    from vdl_client import VdlClient

    with VdlClient(options.client) as client:
        try:
            ensure_stream(client, options.topic, options.create_streams)
        except VdlWriteError as exc:
            raise VdlOptionError(f"option 'topic': {exc}") from None


class VdlBatchWriter(DataSourceArrowWriter):
    """df.write: at-least-once; exactly once inside foreachBatch when exactlyOnce=true is set."""

    def __init__(self, options: SinkOptions, columns: WriteColumns, exactly_once: bool = False) -> None:
        self.options = options
        self.columns = columns
        self.exactly_once = exactly_once
        self.write_id = uuid.uuid4().hex  # names this write's transactions outside a micro-batch
        _check_topic_on_driver(options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> VdlCommitMessage:
        if self.options.transactional:
            return write_transactional(self.options, self.columns, iterator, self.write_id,
                                       self.options.topic or "*")
        return write_batches(self.options, self.columns, iterator, self.exactly_once, in_batch=True)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        end_transactions(self.options, messages, commit=True)
        log.info("vdl write committed: %s", total_counts(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        end_transactions(self.options, messages, commit=False)
        # Records already acknowledged stay in their streams: a log cannot un-append.
        log.warning("vdl write aborted after writing %s", total_counts(messages))


class VdlStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, columns: WriteColumns) -> None:
        self.options = options
        self.columns = columns
        _check_topic_on_driver(options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> VdlCommitMessage:
        if self.options.transactional:
            return write_transactional(self.options, self.columns, iterator, "")
        return write_batches(self.options, self.columns, iterator, self.options.exactly_once)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        end_transactions(self.options, messages, commit=True)
        log.info("vdl micro-batch %d committed: %s", batchId, total_counts(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        query_id = query_id_in_checkpoint(self.options.checkpoint_location) if self.options.transactional else None
        end_transactions(self.options, messages, commit=False, query_id=query_id)
        log.warning("vdl micro-batch %d aborted after writing %s", batchId, total_counts(messages))

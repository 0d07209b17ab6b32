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
(StreamProducer._resume, in producing.py: a task's side of the writers) and the broker stores
nothing twice. Costs: one VdlWriterId per task and micro-batch, one DescribeProducers per task
and stream, and the broker keeps producer state per (query, batch, task). Where Spark cannot
replay identically (non-deterministic plans, a non-replayable source), the guarantee degrades to
at-least-once.

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
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from vdl_connector.options import SinkOptions, VdlOptionError
from vdl_connector.schema import WriteColumns

if TYPE_CHECKING:
    import pyarrow as pa

    from vdl_client.transactions import TxnProducer

log = logging.getLogger("vdl_connector")

QUERY_ID_PROPERTY = "sql.streaming.queryId"  # Spark's StreamExecution.QUERY_ID_KEY
BATCH_ID_PROPERTY = "streaming.sql.batchId"  # Spark's MicroBatchExecution.BATCH_ID_KEY


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


def ensure_stream(client, stream: str, create: bool) -> None:  # noqa: ANN001
    if client.stream_exists(stream):
        return
    if not create:
        raise VdlWriteError(f"stream {stream!r} does not exist: create it first, or set the option "
                            "'createStreams' to 'true' to create missing streams")
    client.create_streams([stream])


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
        from vdl_connector.producing import write_batches, write_transactional

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
        from vdl_connector.producing import write_batches, write_transactional

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

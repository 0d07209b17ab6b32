"""Executor side of the source: fetch exactly [start, end) of one stream as Arrow batches."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from vdl_connector.arrow import (
    ARROW_HEADERS_TYPE,
    MAX_BYTES_PER_ARROW_BATCH,
    MAX_ROWS_PER_ARROW_BATCH,
    arrow_read_schema,
    constant_string,
    decode_columns_arrow,
)
from vdl_connector.options import EARLIEST, SourceOptions
from vdl_connector.planning import OffsetRange
from vdl_connector.tables import TableRange, read_table_range
from vdl_wire.errors import ErrorCode
from vdl_wire.records.batch_header import BatchHeader
from vdl_wire.records.control import marker_commits
from vdl_wire.records.record_batch import iter_batches

log = logging.getLogger("vdl_connector")

TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")


@dataclass
class _Chunks:
    """Decoded Kafka batches waiting to become one Arrow RecordBatch."""

    offsets: list[pa.Array] = field(default_factory=list)
    timestamps: list[pa.Array] = field(default_factory=list)
    timestamp_types: list[pa.Array] = field(default_factory=list)
    keys: list[pa.Array] = field(default_factory=list)
    values: list[pa.Array] = field(default_factory=list)
    headers: list[pa.Array] = field(default_factory=list)
    rows: int = 0
    bytes: int = 0  # of keys and values

    @property
    def full(self) -> bool:
        return self.rows >= MAX_ROWS_PER_ARROW_BATCH or self.bytes >= MAX_BYTES_PER_ARROW_BATCH


def _headers_column(headers: pa.Array | None, count: int) -> pa.Array:
    """Spark's Kafka source gives null (not an empty array) for a record without headers."""
    if headers is None:
        return pa.nulls(count, ARROW_HEADERS_TYPE)
    lengths = pc.list_value_length(headers)
    values = headers.flatten().cast(ARROW_HEADERS_TYPE.value_type)
    offsets = headers.offsets if headers.offset == 0 else pc.subtract(headers.offsets, headers.offsets[0])
    return pa.ListArray.from_arrays(offsets, values, type=ARROW_HEADERS_TYPE, mask=pc.equal(lengths, 0))


def _to_record_batch(stream: str, chunks: _Chunks, include_headers: bool) -> pa.RecordBatch:
    count = chunks.rows
    millis = pa.concat_arrays(chunks.timestamps).to_numpy(zero_copy_only=False)
    columns = [
        pa.concat_arrays(chunks.keys),
        pa.concat_arrays(chunks.values),
        constant_string(stream, count),
        pa.array(np.zeros(count, dtype=np.int32)),
        pa.concat_arrays(chunks.offsets),
        pa.array(millis * 1000, TIMESTAMP_TYPE),
        pa.concat_arrays(chunks.timestamp_types),
    ]
    if include_headers:
        columns.append(pa.concat_arrays(chunks.headers))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_read_schema(include_headers))


def _add_batch(chunks: _Chunks, batch: memoryview, start: int, end: int, include_headers: bool) -> None:
    decoded = decode_columns_arrow(batch)
    offsets = decoded.offsets
    count = len(offsets)
    if count == 0:
        return
    offset_values = offsets.to_numpy()
    lo = int(np.searchsorted(offset_values, start, side="left"))
    hi = int(np.searchsorted(offset_values, end, side="left"))
    if hi <= lo:
        return
    take = (lambda a: a) if (lo == 0 and hi == count) else (lambda a: a.slice(lo, hi - lo))
    chunks.offsets.append(take(offsets))
    chunks.timestamps.append(take(decoded.timestamps))
    keys, values = take(decoded.keys), take(decoded.values)
    chunks.keys.append(keys)
    chunks.values.append(values)
    chunks.bytes += keys.nbytes + values.nbytes
    chunks.timestamp_types.append(pa.array(np.full(hi - lo, decoded.timestamp_type, dtype=np.int32)))
    if include_headers:
        headers = None if decoded.headers is None else take(decoded.headers)
        chunks.headers.append(_headers_column(headers, hi - lo))
    chunks.rows += hi - lo


class AbortedFilter:
    """Which batches of one Fetch response become no rows: control batches (transaction markers)
    always, and under READ_COMMITTED the batches of the aborted transactions the response lists.

    As Kafka's consumer (CompletedFetch, KIP-98): going through the batches in offset order, a
    producer joins the aborted set once a batch at or past its aborted transaction's first offset
    comes, its transactional batches are skipped while it is in the set, and its abort marker
    takes it out again (its later transactions may commit).
    """

    def __init__(self, aborted: Iterable[tuple[int, int]]) -> None:
        self._pending = sorted(aborted, key=lambda entry: entry[1])  # (producer id, first offset)
        self._next = 0
        self._aborting: set[int] = set()

    def skips(self, header: BatchHeader, batch: memoryview) -> bool:
        """Feed every batch of the response in order; True: the batch gives no rows."""
        if header.producer_id >= 0:
            while self._next < len(self._pending) and self._pending[self._next][1] <= header.last_offset:
                self._aborting.add(self._pending[self._next][0])
                self._next += 1
            if header.is_control and marker_commits(batch, header) is False:
                self._aborting.discard(header.producer_id)
        if header.is_control:
            return True
        return header.is_transactional and header.producer_id in self._aborting


DataLossHandler = Callable[[SourceOptions, str], None]


def read_range(client, rng: OffsetRange, options: SourceOptions,  # noqa: ANN001
               on_data_loss: DataLossHandler) -> Iterator[pa.RecordBatch]:
    """Yield the records [rng.start, rng.end) of rng.stream as RecordBatches in Spark's schema.

    Whole stored batches come back from Fetch: records below `position` (a batch that starts
    before it) and at or above `end` are sliced off; a partial trailing batch is fetched again.
    Leader changes and connection errors are retried by the client until the poll timeout.
    With follower reads the range's replicas are read first (replica_reads.ReplicaFetcher).
    """
    stream, position, end = rng.stream, rng.start, rng.end
    include_headers = options.include_headers
    # Follower reads: the range's replicas first, the leader last (preferReplicas).
    if rng.replicas:
        # Imported here: it loads the whole client (vdl_client), which a Spark worker that only
        # plans or looks the source up need not load.
        from vdl_connector.replica_reads import ReplicaFetcher
    source = ReplicaFetcher(client, rng.replicas, 2 * options.fetch_max_wait_ms / 1000) if rng.replicas else client
    deadline = time.monotonic() + options.poll_timeout_ms / 1000
    pending = None
    while position < end:
        if pending is not None:
            result = source.fetch_finish(pending, deadline)
            pending = None
        else:
            result = source.fetch(stream, position, options.max_partition_fetch_bytes, options.fetch_max_bytes,
                                  options.fetch_max_wait_ms, deadline)
        if result.error == ErrorCode.OFFSET_OUT_OF_RANGE and rng.table is not None:
            # Retention deleted offsets planned for the log: they are in the stream's table.
            earliest = client.list_offsets([stream], EARLIEST)[stream]
            if earliest > position:
                upto = min(earliest, end)
                yield from read_table_range(TableRange(stream, position, upto, rng.table), include_headers)
                position = upto
                continue
        if result.error in (ErrorCode.OFFSET_OUT_OF_RANGE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
            moved = _skip_lost(client, rng, position, result.error, options, on_data_loss)
            if moved == position:  # transient (a new leader catching up): back off, retry
                if time.monotonic() > deadline:
                    raise TimeoutError(f"stream {stream!r}: offset {position} stayed out of range for "
                                       f"kafkaConsumer.pollTimeoutMs={options.poll_timeout_ms}")
                time.sleep(options.client.retry_backoff_ms / 1000)
            position = moved
            continue
        # First the batch headers only: they give the next position, so the next Fetch can be
        # on its way while this response is decoded and handed to Spark.
        wanted = []
        next_position = position
        aborted = AbortedFilter(result.aborted)
        for header, batch in iter_batches(result.records or b""):
            skip = aborted.skips(header, batch)  # every batch, in order: it tracks abort markers
            if header.next_offset <= next_position:
                continue  # a batch entirely below the position (fetch returns whole batches)
            if header.base_offset >= end:
                break
            wanted.append((header, batch, next_position, skip))
            next_position = min(header.next_offset, end)
        if position < next_position < end:
            pending = source.fetch_start(stream, next_position, options.max_partition_fetch_bytes,
                                         options.fetch_max_bytes, options.fetch_max_wait_ms)
        chunks = _Chunks()
        for header, batch, expected, skip in wanted:
            if header.base_offset > expected and not rng.from_earliest:
                on_data_loss(options, f"stream {stream!r}: offsets [{expected}, {header.base_offset}) "
                                      "are missing from the log")
            if not skip:  # markers, and records of aborted transactions under READ_COMMITTED
                _add_batch(chunks, batch, expected, end, include_headers)
            if chunks.full:
                yield _to_record_batch(stream, chunks, include_headers)
                chunks = _Chunks()
        if chunks.rows:
            yield _to_record_batch(stream, chunks, include_headers)
        if next_position > position:
            position = next_position
            deadline = time.monotonic() + options.poll_timeout_ms / 1000
        elif time.monotonic() > deadline:
            raise TimeoutError(
                f"stream {stream!r}: no records at offset {position} (reading [{rng.start}, {end})) within "
                f"kafkaConsumer.pollTimeoutMs={options.poll_timeout_ms}; high watermark "
                f"{result.high_watermark}")


def _skip_lost(client, rng: OffsetRange, position: int, error: ErrorCode,  # noqa: ANN001
               options: SourceOptions, on_data_loss: DataLossHandler) -> int:
    """The offsets at `position` are gone: fail or jump to what still exists."""
    if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        on_data_loss(options, f"stream {rng.stream!r} no longer exists; offsets [{position}, {rng.end}) "
                              "cannot be read")
        return rng.end
    earliest = client.list_offsets([rng.stream], EARLIEST)[rng.stream]
    if earliest <= position:
        return position  # a transient answer (leader change): fetch again
    if not rng.from_earliest:
        on_data_loss(options, f"stream {rng.stream!r}: offsets [{position}, {min(earliest, rng.end)}) were "
                              f"deleted before they were read (the log now starts at {earliest})")
    return min(earliest, rng.end)

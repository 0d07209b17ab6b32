"""format("vdl") data source: batch and streaming readers (writers live in sink.py).

Driver side (DataSource.__init__/schema, reader.partitions, stream reader latestOffset/partitions)
validates options and plans offset ranges; executor side (read) opens its own connection, fetches
exactly [start, end) of one stream and yields pyarrow.RecordBatches in Spark's Kafka schema.

Spark's planner processes (the lookup, data source creation, read and write planning, a write's
commit) each import this module anew, and some never read a record: what only planning or read
tasks need (pyarrow, numpy, Delta tables, the client) is imported where it is used, not here. A
lookup or data source creation imported the connector in 166 ms with them, 15 ms without.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from vdl_connector.options import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    SourceOptions,
    VdlOptionError,
    check_batch_source,
    check_known_options,
    check_streaming_source,
    parse_sink_options,
    parse_source_options,
)
from vdl_connector.planning import OffsetRange, TriggerDelay, backlog, rate_limit, spread_over_replicas
from vdl_connector.progress import GroupCommitter, with_offsets_behind_latest
from vdl_connector.schema import read_schema, validate_write_schema

if TYPE_CHECKING:
    import pyarrow as pa

    from vdl_connector.tables import TableLookup

log = logging.getLogger("vdl_connector")

_SUBSCRIPTION_KEYS = ("subscribe", "subscribepattern", "assign")


class VdlDataLossError(RuntimeError):
    """Offsets a query needs are gone (retention, a deleted stream) and failOnDataLoss=true."""


def data_loss(options: SourceOptions, message: str) -> None:
    """Fail (failOnDataLoss=true) or log and continue, as Spark's Kafka source does."""
    if options.fail_on_data_loss:
        raise VdlDataLossError(
            f"{message}. Some data may have been lost because it is no longer available (retention "
            "deleted it or the stream was deleted). If you want the query to continue instead, set "
            "the option 'failOnDataLoss' to 'false'.")
    log.warning("%s; continuing because failOnDataLoss=false", message)


def _open_client(options: SourceOptions):  # noqa: ANN202 - imported late: keeps import light
    from vdl_client import VdlClient

    return VdlClient(options.client)



class VdlDataSource(DataSource):
    """spark.read/readStream/write/writeStream .format("vdl")."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self._raw = {str(k).lower(): str(v) for k, v in dict(options).items()}
        check_known_options(dict(options))
        # A read names its streams; validate now so mistakes surface at load(), on the driver.
        # Writes have no subscription and are validated in writer()/streamWriter().
        self._source: SourceOptions | None = None
        if any(key in self._raw for key in _SUBSCRIPTION_KEYS):
            self._source = parse_source_options(self._raw)

    @classmethod
    def name(cls) -> str:
        return "vdl"

    def source_options(self) -> SourceOptions:
        if self._source is None:
            self._source = parse_source_options(self._raw)
        return self._source

    def schema(self) -> StructType:
        options = self.source_options()
        return read_schema(options.include_headers, _value_schema(options))

    def reader(self, schema: StructType) -> DataSourceReader:
        options = self.source_options()
        check_batch_source(options)
        return VdlBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = self.source_options()
        check_streaming_source(options)
        return VdlStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from vdl_connector.sink import VdlBatchWriter

        if overwrite:
            # A stream is append-only: writing the rows after what it holds is not an overwrite
            # (Spark's Kafka sink refuses SaveMode.Overwrite too).
            raise VdlOptionError("save mode 'overwrite' is not supported: a stream is append-only; "
                                 "use mode('append')")
        options = parse_sink_options(self._raw)
        # For df.write exactly-once is opt-in (inside foreachBatch): only an explicit exactlyOnce=true
        # (or transactional, which needs no micro-batch: a write outside one is one transaction per task).
        exactly_once = "exactlyonce" in self._raw and options.exactly_once
        return VdlBatchWriter(options, validate_write_schema(schema, options.topic), exactly_once)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from vdl_connector.sink import VdlStreamWriter

        options = parse_sink_options(self._raw)
        return VdlStreamWriter(options, validate_write_schema(schema, options.topic))


# ---------------------------------------------------------------------------------------------
# Offset resolution (driver, I/O through the client)


def _streams(client, options: SourceOptions) -> list[str]:  # noqa: ANN001
    """Streams the subscription selects that exist now (pattern: listed by Metadata)."""
    existing = client.list_streams()
    if options.subscription.kind == "subscribePattern":
        return options.subscription.select(existing)
    present = set(existing)
    return [s for s in options.subscription.streams if s in present]


def _check_named(spec: OffsetSpec, streams: Sequence[str], options: SourceOptions) -> None:
    if options.subscription.kind == "subscribePattern":
        return
    unknown = sorted(set(spec.per_stream) - set(options.subscription.streams))
    if unknown:
        raise VdlOptionError(f"option '{spec.option}' names streams that are not subscribed: {unknown}")


def resolve_positions(client, options: SourceOptions, spec: OffsetSpec, streams: Sequence[str],  # noqa: ANN001
                      default: str, starting: bool, tables: TableLookup | None = None) -> dict[str, int]:
    """Turn an OffsetSpec into concrete offsets for `streams` (ListOffsets earliest/latest/time;
    earliest is the first offset of the stream's table when it reaches below the log start)."""
    if not streams:
        return {}
    earliest = client.list_offsets(streams, EARLIEST)
    if tables is not None:
        earliest = tables.earliest(client, streams, earliest)
    latest = client.list_offsets(streams, LATEST)
    words = {"earliest": earliest, "latest": latest}
    if spec.kind in words:
        return {s: words[spec.kind][s] for s in streams}
    if spec.kind == "offsets":
        _check_named(spec, streams, options)
        result = {}
        for stream in streams:
            wanted = spec.per_stream.get(stream, EARLIEST if default == "earliest" else LATEST)
            result[stream] = {EARLIEST: earliest[stream], LATEST: latest[stream]}.get(wanted, wanted)
        return result
    if spec.kind == "timestamps":
        _check_named(spec, streams, options)
    stamps = {s: spec.timestamp if spec.kind == "timestamp" else spec.per_stream.get(s) for s in streams}
    by_time = client.list_offsets([s for s, t in stamps.items() if t is not None],
                                  None, timestamps={s: t for s, t in stamps.items() if t is not None})
    result = {}
    for stream in streams:
        if stamps[stream] is None:
            result[stream] = words[default][stream]
            continue
        found = by_time.get(stream, -1)
        if found is None or found < 0:
            if starting and options.timestamp_strategy == "error":
                raise VdlOptionError(
                    f"option '{spec.option}': no record in stream {stream!r} has a timestamp >= "
                    f"{stamps[stream]} (set 'startingOffsetsByTimestampStrategy' to 'latest' to start at the end)")
            found = latest[stream]
        result[stream] = found
    return result


def _spread(client, tasks: Sequence[InputPartition], options: SourceOptions) -> list[InputPartition]:  # noqa: ANN001
    """preferReplicas: each log range's replicas, from its stream's in-sync replicas now."""
    streams = sorted({task.stream for task in tasks if isinstance(task, OffsetRange)})
    if options.prefer_replicas.kind == "leader" or not streams:
        return list(tasks)
    from vdl_client.replicas import replica_sets  # imported late, as the client itself

    return spread_over_replicas(tasks, replica_sets(client, streams), options.prefer_replicas)


# ---------------------------------------------------------------------------------------------
# Batch reader


class VdlBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        from vdl_connector.tables import TableLookup, plan_reads

        options = self.options
        tables = TableLookup()
        with _open_client(options) as client:
            streams = _streams(client, options)
            _check_batch_streams_exist(options, streams)
            start = resolve_positions(client, options, options.starting or OffsetSpec("earliest"),
                                      streams, "earliest", starting=True, tables=tables)
            end = resolve_positions(client, options, options.ending or OffsetSpec("latest"),
                                    streams, "latest", starting=False)
            _check_batch_end_reachable(client, options, streams, end)
            for stream in streams:
                if end[stream] < start[stream]:
                    raise VdlOptionError(
                        f"stream {stream!r}: the ending offset {end[stream]} is before the starting offset "
                        f"{start[stream]} (options 'startingOffsets' / 'endingOffsets')")
            tasks = plan_reads(client, tables, start, end, options.min_partitions,
                               options.max_records_per_partition, lambda *gap: _table_gap(options, *gap))
            return _spread(client, tasks, options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read(self.options, partition)


def _check_batch_streams_exist(options: SourceOptions, streams: Sequence[str]) -> None:
    """A batch read of a stream that does not exist fails on the driver, as Spark's Kafka source
    fails (UnknownTopicOrPartition); a pattern that matches nothing reads no rows."""
    if options.subscription.kind == "subscribePattern":
        return
    missing = [s for s in options.subscription.streams if s not in set(streams)]
    if missing:
        raise VdlOptionError(f"option '{options.subscription.kind}': stream(s) {missing} do not exist")


def _check_batch_end_reachable(client, options: SourceOptions, streams: Sequence[str],  # noqa: ANN001
                               end: Mapping[str, int]) -> None:
    """An endingOffsets past a stream's latest offset would leave a task waiting for records that
    may never come (kafkaConsumer.pollTimeoutMs); fail on the driver instead (Spark's Kafka
    source fails its task with OffsetOutOfRange)."""
    ending = options.ending
    if ending is None or ending.kind != "offsets" or not streams:
        return
    latest = client.list_offsets(streams, LATEST)
    for stream in streams:
        if end[stream] > latest[stream]:
            raise VdlOptionError(
                f"option 'endingOffsets': offset {end[stream]} for stream {stream!r} is past its latest "
                f"offset {latest[stream]}; it accepts offsets up to the latest, or -1 (latest)")


def _table_gap(options: SourceOptions, stream: str, begin: int, first: int) -> None:
    data_loss(options, f"stream {stream!r}: offsets [{begin}, {first}) were deleted before they reached the "
                       f"stream's table")


def _value_schema(options: SourceOptions) -> StructType | None:
    if options.value_json_schema is None:
        return None
    from vdl_connector.json_values import parse_value_schema

    return parse_value_schema(options.value_json_schema)


def _read(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """One task's batches; with valueJsonSchema, their values parsed (vdl_connector/json_values.py)."""
    value_schema = _value_schema(options)
    if value_schema is None:
        yield from _read_records(options, partition)
        return
    from vdl_connector.arrow import arrow_read_schema
    from vdl_connector.json_values import JsonValueParser, arrow_struct, with_parsed_values

    parser = JsonValueParser(arrow_struct(value_schema))
    schema = arrow_read_schema(options.include_headers, parser.value_type)
    for batch in _read_records(options, partition):
        yield with_parsed_values(batch, parser, schema)


def _read_records(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """One task: a range of the log, or of the stream's table (vdl_connector/tables.py)."""
    from vdl_connector.reading import read_range
    from vdl_connector.tables import TableRange, read_table_range

    if isinstance(partition, TableRange):
        yield from read_table_range(partition, options.include_headers)
        return
    if not isinstance(partition, OffsetRange):
        # PySpark hands a batch read that planned no ranges one placeholder InputPartition(None)
        # (plan_data_source_read.py): an empty stream, or a pattern matching none, reads no rows.
        return
    with _open_client(options) as client:
        yield from read_range(client, partition, options, data_loss)


# ---------------------------------------------------------------------------------------------
# Streaming reader


class VdlStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are {"<stream>": next_offset}; the driver process keeps this object alive."""

    def __init__(self, options: SourceOptions) -> None:
        from vdl_connector.tables import TableLookup

        self.options = options
        self._available_now: dict[str, int] | None = None
        self._latest: dict[str, int] | None = None
        self._delay = (TriggerDelay(options.min_offsets_per_trigger, options.max_trigger_delay_ms, 0.0)
                       if options.min_offsets_per_trigger else None)
        self._client = None  # driver-only connection, opened lazily, never pickled
        self._tables = TableLookup()
        self._committer: GroupCommitter | None = None  # commitOffsetsToGroup, driver only

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_client"] = None
        state["_committer"] = None
        return state

    def _commit_to_group(self, offsets: Mapping[str, int]) -> None:
        """commitOffsetsToGroup: report finished offsets (vdl_connector/progress.py)."""
        if self.options.commit_group is None:
            return
        if self._committer is None:
            self._committer = GroupCommitter(self.options.client, self.options.commit_group)
        self._committer.commit(offsets)

    def _driver_client(self):  # noqa: ANN202
        if self._client is None:
            self._client = _open_client(self.options)
        return self._client

    def initialOffset(self) -> dict:
        client = self._driver_client()
        streams = _streams(client, self.options)
        return resolve_positions(client, self.options, self.options.starting or OffsetSpec("latest"),
                                 streams, "latest", starting=True, tables=self._tables)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        client = self._driver_client()
        streams = _streams(client, self.options)
        self._available_now = client.list_offsets(streams, LATEST) if streams else {}

    def _current_latest(self, start: Mapping[str, int]) -> tuple[dict[str, int], dict[str, int]]:
        """(effective start, latest) for every stream to read now; handles new and lost streams."""
        client = self._driver_client()
        existing = _streams(client, self.options)
        # availableNow reads the streams that existed at its start (a later one waits for the next run)
        streams = existing if self._available_now is None else [s for s in existing if s in self._available_now]
        effective = {}
        for stream in start:
            # Gone, whenever it went: an availableNow restart after the delete reports it too.
            if stream not in existing:
                data_loss(self.options, f"stream {stream!r} no longer exists; offsets from "
                                        f"{start[stream]} on cannot be read")
        latest = client.list_offsets(streams, LATEST) if streams else {}
        earliest = client.list_offsets(streams, EARLIEST) if streams else {}
        # Offsets below the log start that are in the stream's table are not lost.
        below = [s for s in streams if start.get(s, -1) < earliest[s]]
        if below:
            earliest.update(self._tables.earliest(client, below, {s: earliest[s] for s in below}))
        for stream in streams:
            if self._available_now is not None:
                latest[stream] = min(latest[stream], self._available_now[stream])
            begin = start.get(stream)
            if begin is None:  # a stream created after the query started: read it from earliest
                effective[stream] = earliest[stream]
                continue
            if begin < earliest[stream]:
                data_loss(self.options, f"stream {stream!r}: offsets [{begin}, {earliest[stream]}) were "
                                        f"deleted before they were read (the stream now starts at "
                                        f"{earliest[stream]})")
                begin = earliest[stream]
            if latest[stream] < begin:
                data_loss(self.options, f"stream {stream!r}: the stream's end {latest[stream]} is before the "
                                        f"query's position {begin} (was it deleted and recreated?)")
                begin = latest[stream]
            effective[stream] = begin
        return effective, latest

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        # `start` is where the last completed micro-batch ended: finished, as far as Spark is concerned.
        self._commit_to_group(start)
        begin, latest = self._current_latest(start)
        if isinstance(limit, ReadAllAvailable):
            end = latest
        else:
            # Spark passes back our default limit; apply both bounds the options define.
            if self._delay is not None and self._available_now is None:
                if self._delay.should_delay(backlog(begin, latest), time.time() * 1000):
                    self._latest = with_offsets_behind_latest(latest, start)
                    return dict(start)
            maximum = self.options.max_offsets_per_trigger
            end = rate_limit(maximum, begin, latest) if maximum else latest
        result = dict(start)
        for stream, offset in end.items():
            # A stream whose start moved (data loss skipped, new stream) keeps its range readable.
            result[stream] = max(offset, begin.get(stream, offset)) if stream in start else offset
        self._latest = with_offsets_behind_latest(latest, result)
        return result

    def reportLatestOffset(self) -> dict | None:
        return self._latest

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        # A stream missing from `start` appeared after the last batch: read it from its beginning
        # (offset 0; read() moves up to the log start without calling it data loss). Offsets
        # below a stream's log start come from its table (the same records whenever planned).
        # Which replica reads a range of the log is chosen now.
        from vdl_connector.tables import plan_reads

        begin = {stream: int(start.get(stream, 0)) for stream in end}
        stop = {s: int(o) for s, o in end.items()}
        tasks = plan_reads(self._driver_client(), self._tables, begin, stop, self.options.min_partitions,
                           self.options.max_records_per_partition, lambda *gap: _table_gap(self.options, *gap),
                           frozenset(s for s in end if s not in start))
        return _spread(self._driver_client(), tasks, self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read(self.options, partition)

    def commit(self, end: dict) -> None:
        """Offsets live in Spark's checkpoint; with commitOffsetsToGroup the end of the committed
        micro-batch is also stored as the group's offsets (a report: a failure is only logged)."""
        self._commit_to_group(end)

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._committer is not None:
            self._committer.close()
            self._committer = None

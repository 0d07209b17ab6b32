"""Stored record batches -> the rows of a stream's Delta table (pure: no I/O; numpy and pyarrow).

`raw` tables hold every record as it is: offset, timestamp, key, value, headers (null when the
record has none, as Spark's Kafka source shows it). `json` tables hold offset and timestamp and
the value parsed with the Spark DDL schema of `vdl.table.schema`; a record whose value does not
parse (not a JSON object, a value of the wrong type, null in a NOT NULL column, a null value)
becomes a dead letter instead: offset, timestamp, key, value, headers and the error, for the
`<path>_dlq` table. With `vdl.table.partition.by = day` both get a `day` column (the UTC date of
the record timestamp) to partition by.

Records are decoded per stored batch with the project's column decoder (vdl_wire/records/arrow):
no per-record Python work for raw tables. JSON is parsed by pyarrow's reader a whole range of
records at a time; a range that fails is split in halves until the failing records stand alone,
so a few bad records cost a few extra parses, not one parse per record.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from vdl_broker.cluster.stream_configs import RESERVED_COLUMNS, TableSettings
from vdl_broker.tables.ddl import DdlType, parse_schema
from vdl_wire.records.arrow import decode_columns_arrow
from vdl_wire.records.record_batch import iter_batches

TIMESTAMP = pa.timestamp("us", tz="UTC")
HEADER_STRUCT = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS = pa.list_(pa.field("element", HEADER_STRUCT))
DAY_MS = 86_400_000
RAW_FIELDS = [pa.field("offset", pa.int64(), nullable=False), pa.field("timestamp", TIMESTAMP),
              pa.field("key", pa.binary()), pa.field("value", pa.binary()), pa.field("headers", HEADERS)]
DEAD_LETTER_SCHEMA = pa.schema([*RAW_FIELDS, pa.field("error", pa.string())])
DAY_FIELD = pa.field("day", pa.date32())


class TieringError(RuntimeError):
    """The records cannot become table rows (a broken invariant, not a bad record)."""


# ------------------------------------------------------------------------------------ schemas

_SIMPLE_TYPES = {
    "boolean": pa.bool_(), "byte": pa.int8(), "short": pa.int16(), "int": pa.int32(), "long": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "string": pa.string(), "binary": pa.binary(),
    "date": pa.date32(), "timestamp": TIMESTAMP, "timestamp_ntz": pa.timestamp("us"),
}


def arrow_type(ddl_type: DdlType, reading: bool = False) -> pa.DataType:
    """The Arrow type of a DDL type; `reading`: what pyarrow's JSON reader is asked for (it reads
    dates as strings, cast afterwards)."""
    kind = ddl_type[0]
    if kind == "date" and reading:
        return pa.string()
    if kind in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[kind]
    if kind == "decimal":
        return pa.decimal128(ddl_type[1], ddl_type[2])
    if kind == "array":
        return pa.list_(pa.field("element", arrow_type(ddl_type[1], reading)))
    if kind == "struct":
        return pa.struct([pa.field(c.name, arrow_type(c.type, reading), c.nullable) for c in ddl_type[1]])
    raise TieringError(f"vdl.table.schema: {kind.upper()} columns are not supported in json tables (use STRUCT)")


@dataclass(frozen=True)
class JsonSchema:
    read: pa.Schema  # asked of the JSON reader
    target: pa.Schema  # the user's columns as stored
    required: tuple[str, ...]  # NOT NULL columns


@lru_cache(maxsize=64)
def json_schema(text: str) -> JsonSchema:
    columns = parse_schema(text)
    for column in columns:
        if column.name.lower() in RESERVED_COLUMNS:
            raise TieringError(f"vdl.table.schema: column {column.name!r} is reserved (the table's own "
                               f"{', '.join(RESERVED_COLUMNS)} columns)")
    read = pa.schema([pa.field(c.name, arrow_type(c.type, reading=True)) for c in columns])
    target = pa.schema([pa.field(c.name, arrow_type(c.type)) for c in columns])
    return JsonSchema(read, target, tuple(c.name for c in columns if not c.nullable))


def table_schema(settings: TableSettings) -> pa.Schema:
    """The Delta table's columns: offset first (its per-file statistics choose files to read)."""
    if settings.format == "json":
        fields = [RAW_FIELDS[0], RAW_FIELDS[1], *json_schema(settings.schema or "").target]
    else:
        fields = list(RAW_FIELDS)
    if settings.partition_by == "day":
        fields.append(DAY_FIELD)
    return pa.schema(fields)


def partition_columns(settings: TableSettings) -> list[str]:
    return ["day"] if settings.partition_by == "day" else []


# ------------------------------------------------------------------------------------ records


@dataclass
class Records:
    """Records [first, first + count) as columns, one chunk per stored batch (timestamps in ms)."""

    offsets: pa.ChunkedArray
    timestamps_ms: pa.ChunkedArray
    keys: pa.ChunkedArray
    values: pa.ChunkedArray
    headers: pa.ChunkedArray
    skipped: int = 0  # offsets of the range holding no committed record (markers, aborted transactions)

    @property
    def count(self) -> int:
        return len(self.offsets)


def _headers_or_null(headers: pa.Array | None, count: int) -> pa.Array:
    """null (not an empty list) for a record without headers, as Spark's Kafka source."""
    if headers is None:
        return pa.nulls(count, HEADERS)
    lengths = pc.list_value_length(headers)
    values = headers.flatten().cast(HEADER_STRUCT)
    offsets = headers.offsets if headers.offset == 0 else pc.subtract(headers.offsets, headers.offsets[0])
    return pa.ListArray.from_arrays(offsets, values, type=HEADERS, mask=pc.equal(lengths, 0))


Buffers = bytes | bytearray | memoryview | Sequence[bytes | bytearray | memoryview]


def _batches(data: Buffers) -> Iterator[tuple[Any, memoryview]]:
    for part in [data] if isinstance(data, bytes | bytearray | memoryview) else data:
        yield from iter_batches(part)


def decode_records(data: Buffers, start: int, end: int, aborted: Sequence[tuple[int, int, int]] = ()) -> Records:
    """The records [start, end) of consecutive stored batches (one buffer, or a list of them as
    the log hands them out); every offset exactly once. Committed records only: control batches
    (transaction markers) and the batches of `aborted` transactions — (producer id, first offset,
    abort marker offset), as the stream's aborted index holds them — take offsets but no rows."""
    parts: list[tuple[pa.Array, pa.Array, pa.Array, pa.Array, pa.Array]] = []
    covered = skipped = 0
    last = -1
    for header, batch in _batches(data):
        if header.next_offset <= start or header.base_offset >= end:
            continue
        if header.base_offset <= last:
            raise TieringError(f"records [{start}, {end}) are not contiguous: a batch at {header.base_offset} "
                               f"after offset {last}")
        overlap = min(header.next_offset, end) - max(header.base_offset, start)
        covered += overlap
        last = header.next_offset - 1
        if header.is_control or (header.is_transactional and any(
                producer == header.producer_id and first <= header.base_offset <= marker
                for producer, first, marker in aborted)):
            skipped += overlap
            continue
        decoded = decode_columns_arrow(batch)
        offsets = decoded.offsets.to_numpy()
        lo = int(np.searchsorted(offsets, start, side="left"))
        hi = int(np.searchsorted(offsets, end, side="left"))
        if hi > lo:
            count = hi - lo
            headers = None if decoded.headers is None else decoded.headers.slice(lo, count)
            parts.append((decoded.offsets.slice(lo, count), decoded.timestamps.slice(lo, count),
                          decoded.keys.slice(lo, count), decoded.values.slice(lo, count),
                          _headers_or_null(headers, count)))
    if not covered:
        raise TieringError(f"no records in [{start}, {end})")
    if not parts:  # markers and aborted records only
        empty = [pa.array([], pa.int64()), pa.array([], pa.int64()), pa.array([], pa.binary()),
                 pa.array([], pa.binary()), pa.nulls(0, HEADERS)]
        parts.append((empty[0], empty[1], empty[2], empty[3], empty[4]))
    # Chunked, not concatenated: a copy of every column would cost more than decoding them.
    columns = [pa.chunked_array([p[i] for p in parts]) for i in range(5)]
    records = Records(columns[0], columns[1], columns[2], columns[3], columns[4], skipped)
    if covered != end - start or records.count + skipped != end - start:
        raise TieringError(f"records [{start}, {end}) are not contiguous: got {records.count} records and "
                           f"{skipped} offsets of markers or aborted transactions")
    return records


def _timestamps(millis: pa.Array | pa.ChunkedArray) -> pa.Array:
    return pa.array(millis.to_numpy() * 1000, TIMESTAMP)


def _days(millis: pa.Array | pa.ChunkedArray) -> pa.Array:
    return pa.array((millis.to_numpy() // DAY_MS).astype(np.int32), pa.date32())


def raw_rows(records: Records, settings: TableSettings, take: np.ndarray | None = None,
             errors: list[str] | None = None) -> pa.Table:
    """Records as raw-table rows (or, with `errors`, as dead letters) — all or those at `take`."""
    columns = [records.offsets, _timestamps(records.timestamps_ms), records.keys, records.values, records.headers]
    if take is not None:
        indices = pa.array(take, pa.int64())
        columns = [column.take(indices) for column in columns]
    if errors is not None:
        return pa.Table.from_arrays([*columns, pa.array(errors, pa.string())], schema=DEAD_LETTER_SCHEMA)
    table = pa.Table.from_arrays(columns, schema=pa.schema(RAW_FIELDS))
    return _with_day(table, records.timestamps_ms, settings)


def _with_day(table: pa.Table, millis: pa.Array | pa.ChunkedArray, settings: TableSettings) -> pa.Table:
    if settings.partition_by == "day":
        table = table.append_column(DAY_FIELD, _days(millis))
    return table


@dataclass
class Converted:
    rows: pa.Table  # the table's rows, in offset order
    dead_letters: pa.Table  # DEAD_LETTER_SCHEMA, in offset order
    skipped: int = 0  # offsets without a committed record: no row (Records.skipped)


def convert(data: Buffers, start: int, end: int, settings: TableSettings,
            aborted: Sequence[tuple[int, int, int]] = ()) -> Converted:
    """The table rows (and dead letters) for the committed records [start, end) stored in
    `data` (`aborted`: the transactions aborted in the range, see decode_records)."""
    records = decode_records(data, start, end, aborted)
    if settings.format != "json":
        return Converted(raw_rows(records, settings), DEAD_LETTER_SCHEMA.empty_table(), records.skipped)
    schema = json_schema(settings.schema or "")
    good, bad = parse_json(records.values.combine_chunks(), schema)
    parsed = good[1] if good[1] is not None else schema.target.empty_table()
    indices = pa.array(good[0], pa.int64())
    columns = [records.offsets.take(indices), _timestamps(records.timestamps_ms.take(indices)), *parsed.columns]
    rows = pa.Table.from_arrays(columns, schema=pa.schema([RAW_FIELDS[0], RAW_FIELDS[1], *schema.target]))
    rows = _with_day(rows, records.timestamps_ms.take(indices), settings)
    dead = raw_rows(records, settings, np.array([i for i, _ in bad], dtype=np.int64), [e for _, e in bad])
    return Converted(rows, dead, records.skipped)


# ------------------------------------------------------------------------------------ JSON


def parse_json(values: pa.Array, schema: JsonSchema) -> tuple[tuple[np.ndarray, pa.Table | None], list[tuple[int, str]]]:
    """((indices of the records that parsed, their rows), [(index, error) of those that did not]),
    both in record order."""
    count = len(values)
    # Parsed alone: null values, blank ones (a blank line yields no row, which would let a line
    # holding two objects pass the row count), and values with a line break inside.
    special = values.is_null().to_numpy(zero_copy_only=False).copy()
    data, offsets = _buffers(values)
    blank = (data == 32) | (data == 9) | (data == 10) | (data == 13)
    visible = np.concatenate([[0], np.cumsum(~blank)])
    special |= visible[offsets[1:]] == visible[offsets[:-1]]
    breaks = np.flatnonzero((data == 10) | (data == 13))
    if len(breaks):
        special[np.unique(np.searchsorted(offsets, breaks, side="right") - 1)] = True
    good: list[tuple[int, int, pa.Table]] = []  # (lo, hi, rows) of ranges that parsed
    bad: list[tuple[int, str]] = []
    lo = 0
    for index in [*np.flatnonzero(special).tolist(), count]:
        if index > lo:
            _parse_range(values, data, offsets, lo, index, schema, good, bad)
        if index < count:
            if values[index].is_valid:
                _parse_range(values, data, offsets, index, index + 1, schema, good, bad, multiline=True)
            else:
                bad.append((index, "null value"))
        lo = index + 1
    good.sort(key=lambda item: item[0])
    bad.sort()
    indices = np.concatenate([np.arange(a, b, dtype=np.int64) for a, b, _ in good]) if good else np.empty(0, np.int64)
    rows = pa.concat_tables([t for _, _, t in good]) if good else None
    if rows is not None and schema.required:
        missing = np.zeros(rows.num_rows, dtype=bool)
        for name in schema.required:
            missing |= rows.column(name).is_null().to_numpy(zero_copy_only=False)
        if missing.any():
            for position in np.flatnonzero(missing).tolist():
                names = [n for n in schema.required if not rows.column(n)[position].is_valid]
                bad.append((int(indices[position]), f"NOT NULL column(s) {', '.join(names)} missing or null"))
            bad.sort()
            keep = pa.array(np.flatnonzero(~missing), pa.int64())
            rows, indices = rows.take(keep), indices[~missing]
    return (indices, rows), bad


def _buffers(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The data bytes and the count + 1 offsets into them (relative to the first value)."""
    values = values.cast(pa.binary())
    _, offsets_buffer, data_buffer = values.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32)[values.offset:values.offset + len(values) + 1]
    offsets = offsets.astype(np.int64)
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    data = data[offsets[0]:offsets[-1]]
    return data, offsets - offsets[0]


def _parse_range(values: pa.Array, data: np.ndarray, offsets: np.ndarray, lo: int, hi: int, schema: JsonSchema,
                 good: list[tuple[int, int, pa.Table]], bad: list[tuple[int, str]], multiline: bool = False) -> None:
    """Parse records [lo, hi) at once; on failure split in halves down to single records."""
    stack = [(lo, hi)]
    while stack:
        a, b = stack.pop()
        error = None
        try:
            rows = _read(_lines(data, offsets, a, b), schema, multiline)
            if rows.num_rows != b - a:
                error = f"{rows.num_rows} JSON objects in one record" if b - a == 1 else "count"
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as caught:
            error = str(caught)
        if error is None:
            good.append((a, b, rows))
        elif b - a == 1:
            bad.append((a, _record_error(error, data, offsets, a)))
        else:
            middle = (a + b) // 2
            stack += [(middle, b), (a, middle)]


def _record_error(error: str, data: np.ndarray, offsets: np.ndarray, index: int) -> str:
    if offsets[index + 1] == offsets[index] or not data[offsets[index]:offsets[index + 1]].tobytes().strip():
        return "empty value: not a JSON object"
    if error.startswith("0 JSON objects"):
        return "not a JSON object"
    return error.removesuffix(" in row 0")


def _lines(data: np.ndarray, offsets: np.ndarray, lo: int, hi: int) -> pa.Buffer:
    """Records [lo, hi) joined by line breaks, built with one numpy insert."""
    chunk = data[offsets[lo]:offsets[hi]]
    ends = offsets[lo + 1:hi + 1] - offsets[lo]
    return pa.py_buffer(np.insert(chunk, ends, 10).tobytes())


def _read(buffer: pa.Buffer, schema: JsonSchema, multiline: bool) -> pa.Table:
    options = pj.ParseOptions(explicit_schema=schema.read, unexpected_field_behavior="ignore",
                              newlines_in_values=multiline)
    table = pj.read_json(pa.BufferReader(buffer), parse_options=options,
                         read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, buffer.size + 1)))
    table = table.select(schema.read.names)
    return table.cast(schema.target) if schema.read != schema.target else table

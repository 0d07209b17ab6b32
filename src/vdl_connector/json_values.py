"""valueJsonSchema: the reader parses each record's JSON value into the struct column `valueJson`.

What `from_json(value, schema)` gives in the query, computed where the records are decoded: one
pyarrow JSON read (C++) per Arrow batch instead of a JSON parser per record in Spark's JVM. The
reader fills `valueJson` only where its answer is from_json's for certain, and leaves it null
elsewhere (a null value, a malformed one, a field of another type, a decimal that needs
rounding, a timestamp without a zone or in another format, duplicate keys...), so
`coalesce(valueJson, from_json(value, schema))` is from_json's answer for every record and costs
the JVM a parse only for the records the reader left to it.

The values of a batch become one newline-delimited buffer; a value that cannot be one line of it
(it holds a line break, or is not `{...}`) or a read that fails sends its half of the batch down
to smaller reads, to single values at worst, each parsed alone then. Timestamps are read as text
and taken only in ISO 8601 with a zone (`2025-01-01T10:00:00.123Z`, `...+02:00`): the instant
then does not depend on the session's time zone. One known difference: a decimal given as a JSON
string in exponent notation ("1e1") is read as its number, where from_json gives null.
"""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DecimalType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from vdl_connector.options import VdlOptionError

OPTION = "valueJsonSchema"
# Field types whose JSON conversion in pyarrow's reader is from_json's wherever it succeeds
# (not float/double: two parsers of a decimal text may round its last bit differently).
FIELD_TYPES = (StringType, BooleanType, ByteType, ShortType, IntegerType, LongType, DecimalType, TimestampType)
FIELD_TYPES_TEXT = "string, boolean, tinyint, smallint, int, bigint, decimal, timestamp"
_NEWLINES = (ord("\n"), ord("\r"))
# A timestamp every parser reads as the same instant (from_json too, whatever the session zone).
_ISO_WITH_ZONE = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$"


def parse_value_schema(text: str) -> StructType:
    """The option's value: a struct schema as JSON (what StructType.json() gives) of flat fields."""
    try:
        schema = StructType.fromJson(json.loads(text))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise VdlOptionError(f"option '{OPTION}' must be a struct schema as JSON (StructType.json()), "
                             f"got {text[:200]!r} ({error})") from None
    for field in schema.fields:
        if not isinstance(field.dataType, FIELD_TYPES):
            raise VdlOptionError(f"option '{OPTION}': field '{field.name}' has type "
                                 f"{field.dataType.simpleString()}; the accepted field types are {FIELD_TYPES_TEXT}")
    return schema


def arrow_struct(schema: StructType) -> pa.StructType:
    """The Arrow type Spark expects for a column of this struct type."""
    arrow = to_arrow_schema(StructType([StructField("value", schema)]), timezone="UTC")
    value_type = arrow.field("value").type
    assert isinstance(value_type, pa.StructType)
    return value_type


class JsonValueParser:
    """Binary JSON values -> `valueJson`: a struct array of `value_type`, one per value, null
    where from_json's answer is left to Spark."""

    def __init__(self, value_type: pa.StructType) -> None:
        self.value_type = value_type
        # Timestamps come in as text: only the unambiguous ones are converted (_timestamps).
        self._read_types = pa.schema([pa.field(f.name, pa.string()) if pa.types.is_timestamp(f.type) else f
                                      for f in value_type])
        self._whole = pj.ParseOptions(explicit_schema=self._read_types, unexpected_field_behavior="ignore")
        self._single = pj.ParseOptions(explicit_schema=self._read_types, unexpected_field_behavior="ignore",
                                       newlines_in_values=True)

    def parse(self, values: pa.Array) -> pa.StructArray:
        count = len(values)
        if count == 0:
            return pa.array([], type=self.value_type)
        filled = values.fill_null(b"{}") if values.null_count else values
        if not isinstance(filled, pa.BinaryArray):
            filled = filled.cast(pa.binary())
        parts: list[tuple[pa.Table, bool]] = []
        self._parse_part(filled, self._one_line_each(filled), parts)
        table = pa.concat_tables([part for part, _ in parts]) if len(parts) > 1 else parts[0][0]
        exact = np.concatenate([np.full(part.num_rows, good) for part, good in parts])
        if values.null_count:
            exact &= values.is_valid().to_numpy(zero_copy_only=False)
        columns = []
        for field in self.value_type:
            column = table.column(field.name).combine_chunks()
            if pa.types.is_timestamp(field.type):
                column, taken = _timestamps(column, field.type)
                exact &= taken
            columns.append(column)
        mask = None if exact.all() else pa.array(~exact)
        return pa.StructArray.from_arrays(columns, fields=list(self.value_type), mask=mask)

    @staticmethod
    def _one_line_each(values: pa.BinaryArray) -> np.ndarray | None:
        """Per value: whether it can be one line of a newline-delimited read (a `{...}` without
        line breaks, so every line gives exactly one row); None when all can."""
        offsets, data = _offsets_and_data(values)
        region = data[offsets[0]:offsets[-1]]
        starts, ends = offsets[:-1], offsets[1:]
        nonempty = ends > starts
        ok = nonempty.copy()
        ok[nonempty] = (data[starts[nonempty]] == ord("{")) & (data[ends[nonempty] - 1] == ord("}"))
        if ok.all() and not any((region == byte).any() for byte in _NEWLINES):
            return None
        breaks = pc.match_substring(values, "\n").to_numpy(zero_copy_only=False) | \
            pc.match_substring(values, "\r").to_numpy(zero_copy_only=False)
        return ok & ~breaks

    def _parse_part(self, values: pa.BinaryArray, one_line: np.ndarray | None,
                    parts: list[tuple[pa.Table, bool]]) -> None:
        """Append (rows, parsed) for `values` in order; halves until a read succeeds."""
        count = len(values)
        if one_line is None or one_line.all():
            table = self._read_lines(values)
            if table is not None and table.num_rows == count:
                parts.append((table, True))
                return
        if count == 1:
            parts.append(self._read_single(values[0].as_py()))
            return
        half = count // 2
        self._parse_part(values.slice(0, half), None if one_line is None else one_line[:half], parts)
        self._parse_part(values.slice(half), None if one_line is None else one_line[half:], parts)

    def _read_lines(self, values: pa.BinaryArray) -> pa.Table | None:
        lines = pc.binary_join_element_wise(values, pa.scalar(b"", pa.binary()), pa.scalar(b"\n", pa.binary()))
        offsets, _ = _offsets_and_data(lines)
        start, end = int(offsets[0]), int(offsets[-1])
        text = lines.buffers()[2].slice(start, end - start)
        try:
            return pj.read_json(pa.BufferReader(text), parse_options=self._whole,
                                read_options=pj.ReadOptions(use_threads=False, block_size=max(end - start, 1 << 20)))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None

    def _read_single(self, value: bytes) -> tuple[pa.Table, bool]:
        try:
            table = pj.read_json(pa.BufferReader(value), parse_options=self._single,
                                 read_options=pj.ReadOptions(use_threads=False,
                                                             block_size=max(len(value) + 1, 1 << 16)))
            if table.num_rows == 1:
                return table, True
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
        # Not one JSON object of these fields: left to from_json (a row of nulls here).
        return pa.table([pa.nulls(1, f.type) for f in self._read_types], schema=self._read_types), False


def _timestamps(text: pa.Array, target: pa.DataType) -> tuple[pa.Array, np.ndarray]:
    """ISO 8601 timestamps with a zone -> `target`; and per row whether its value was taken (a
    null, or such a timestamp): the others are left to from_json."""
    valid = pc.match_substring_regex(text, _ISO_WITH_ZONE)
    taken = pc.or_kleene(pc.is_null(text), valid).to_numpy(zero_copy_only=False).copy()
    clean = pc.if_else(valid, text, pa.scalar(None, pa.string()))
    try:
        return pc.cast(clean, target), taken
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # a month 13, a second 60...: one by one
        converted = []
        for index, stamp in enumerate(clean.to_pylist()):
            try:
                converted.append(pa.scalar(stamp, pa.string()).cast(target))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                converted.append(pa.scalar(None, target))
                taken[index] = False
        return pa.array([value.as_py() for value in converted], type=target), taken


def _offsets_and_data(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A binary array's len + 1 offsets (its slice) and its whole data buffer, as numpy views."""
    _, offsets, data = values.buffers()
    starts = np.frombuffer(offsets, dtype=np.int32)[values.offset:values.offset + len(values) + 1]
    return starts, (np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8))


def with_parsed_values(batch: pa.RecordBatch, parser: JsonValueParser, schema: pa.Schema) -> pa.RecordBatch:
    """The batch and its `valueJson` column (schema: the read schema with it, last)."""
    return pa.RecordBatch.from_arrays([*batch.columns, parser.parse(batch.column("value"))], schema=schema)

"""valueJsonSchema: the reader's parsed value is from_json's answer where it gives one, null where
it leaves the record to from_json (the expected structs below are what Spark 4's from_json gives
for the same values, PERMISSIVE mode, session time zone UTC)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pyarrow as pa
import pytest

from vdl_connector.arrow import arrow_read_schema
from vdl_connector.json_values import JsonValueParser, arrow_struct, parse_value_schema
from vdl_connector.options import VdlOptionError, parse_source_options
from vdl_connector.schema import read_schema

SCHEMA = ('{"type":"struct","fields":['
          '{"name":"id","type":"string","nullable":true,"metadata":{}},'
          '{"name":"at","type":"timestamp","nullable":true,"metadata":{}},'
          '{"name":"n","type":"integer","nullable":true,"metadata":{}},'
          '{"name":"price","type":"decimal(10,2)","nullable":true,"metadata":{}},'
          '{"name":"ok","type":"boolean","nullable":true,"metadata":{}}]}')
NULLS = {"id": None, "at": None, "n": None, "price": None, "ok": None}


def parser() -> JsonValueParser:
    return JsonValueParser(arrow_struct(parse_value_schema(SCHEMA)))


def row(**fields: object) -> dict[str, object]:
    return NULLS | fields


def test_well_formed_values_are_parsed_in_one_read_as_from_json_parses_them() -> None:
    values = pa.array([
        b'{"id":"a","at":"2025-12-31T23:59:59.554Z","n":3,"price":32.27,"ok":true}',
        b'{"n":-7,"price":5.5,"extra":{"x":[1,2]}}',  # fewer decimals; an unknown field
        b'{"id":"\\u00e9\\"q\\"","at":"2025-01-01T10:00:00+02:00"}',
        b'{"price":1e1,"ok":false,"id":null}',
        b'{}',
    ], pa.binary())
    assert parser().parse(values).to_pylist() == [
        row(id="a", at=datetime(2025, 12, 31, 23, 59, 59, 554000, tzinfo=UTC), n=3, price=Decimal("32.27"), ok=True),
        row(n=-7, price=Decimal("5.50")),
        row(id='\u00e9"q"', at=datetime(2025, 1, 1, 8, 0, tzinfo=UTC)),
        row(price=Decimal("10.00"), ok=False),
        row(),
    ]


def test_what_the_reader_cannot_answer_for_certain_is_left_null_for_from_json() -> None:
    """Each of these is null (from_json decides), and the well-formed values around them are
    still parsed: a failed read splits its batch until the failing value is alone."""
    left = [
        None,  # a null value: from_json(null) is null
        b"{bad",  # malformed
        b"",  # empty
        b'{"id":"a","n":"x"}',  # a field of another type (from_json keeps id)
        b'{"id":"x","id":"y"}',  # duplicate keys (from_json takes the last)
        b'{"id":"d"}{"id":"e"}',  # two objects (from_json takes the first)
        b'{"price":5.555}',  # rounding (from_json rounds half up)
        b'{"n":2147483648}',  # out of range
        b'{"at":"2025-01-01 10:00:00"}',  # no zone: the session's time zone decides
        b'{"at":"2025-13-01T10:00:00Z"}',  # no such month
        b'{"at":1700000000}',  # epoch seconds
        b'{"id":12}',  # from_json gives the text "12"
        b'[{"id":"z"}]',
    ]
    good = b'{"id":"g","n":1}'
    values = pa.array([v for bad in left for v in (good, bad)] + [good], pa.binary())
    assert parser().parse(values).to_pylist() == [r for _ in left for r in (row(id="g", n=1), None)] + \
        [row(id="g", n=1)]


def test_values_with_line_breaks_or_space_around_are_parsed_alone() -> None:
    values = pa.array([b'{"id":"a",\n"n":2}', b' {"id":"b"} ', b'{"id":"c"}', b'\r\n{"n":4}'], pa.binary())
    assert parser().parse(values).to_pylist() == [row(id="a", n=2), row(id="b"), row(id="c"), row(n=4)]


def test_a_slice_of_a_batch_parses_as_the_batch_does() -> None:
    values = pa.array([f'{{"id":"r{i}","n":{i}}}'.encode() for i in range(100)], pa.binary())
    assert parser().parse(values.slice(30, 40)).to_pylist() == [row(id=f"r{i}", n=i) for i in range(30, 70)]
    assert parser().parse(values.slice(0, 0)).to_pylist() == []


def test_the_option_adds_the_valuejson_column_with_the_schema() -> None:
    options = parse_source_options({"bootstrap.servers": "h:1", "subscribe": "s", "valuejsonschema": SCHEMA})
    assert options.value_json_schema == SCHEMA
    schema = parse_value_schema(SCHEMA)
    assert read_schema(False, schema).fieldNames() == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "valueJson"]
    assert read_schema(False, schema)["valueJson"].dataType == schema
    assert arrow_read_schema(True, arrow_struct(schema)).names[-2:] == ["headers", "valueJson"]


@pytest.mark.parametrize(("text", "message"), [
    ("id STRING", "option 'valueJsonSchema' must be a struct schema as JSON"),
    ('{"type":"struct","fields":[{"name":"x","type":"double","nullable":true,"metadata":{}}]}',
     "field 'x' has type double; the accepted field types are string, boolean, tinyint, smallint, int, "
     "bigint, decimal, timestamp"),
])
def test_a_schema_it_cannot_take_is_refused_naming_what_it_accepts(text: str, message: str) -> None:
    with pytest.raises(VdlOptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_source_options({"bootstrap.servers": "h:1", "subscribe": "s", "valuejsonschema": text})

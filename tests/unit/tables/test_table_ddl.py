"""Spark DDL schemas parsed without Spark (vdl.table.schema)."""

from __future__ import annotations

import pytest

from vdl_broker.tables.ddl import Column, DdlError, parse_schema, type_name


def test_column_lists_and_struct_form() -> None:
    columns = parse_schema("id BIGINT NOT NULL, `order id` STRING COMMENT 'the id', amount DECIMAL(10, 2), "
                           "tags ARRAY<STRING>, attrs MAP<STRING, INT>, at TIMESTAMP, day DATE, "
                           "address STRUCT<city: STRING, zip INT>, ok BOOLEAN, score DOUBLE, raw BINARY")
    assert [(c.name, type_name(c.type), c.nullable) for c in columns] == [
        ("id", "BIGINT", False), ("order id", "STRING", True), ("amount", "DECIMAL(10,2)", True),
        ("tags", "ARRAY<STRING>", True), ("attrs", "MAP<STRING,INT>", True), ("at", "TIMESTAMP", True),
        ("day", "DATE", True), ("address", "STRUCT<city:STRING,zip:INT>", True), ("ok", "BOOLEAN", True),
        ("score", "DOUBLE", True), ("raw", "BINARY", True)]
    assert parse_schema("struct<a:int,b:varchar(10)>") == (Column("a", ("int",)), Column("b", ("string",)))
    assert parse_schema("a dec") == (Column("a", ("decimal", 10, 0)),)


@pytest.mark.parametrize(("text", "message"), [
    ("", "the schema is empty"),
    ("id", "expected a type, found the end of the schema"),
    ("id BIGNUM", "unknown type (accepted: array, bigint,"),
    ("a INT,", "expected a column name, found the end of the schema"),
    ("a INT b INT", "expected the end of the schema, found 'b' at position 6"),
    ("a ARRAY<INT", "expected '>', found the end of the schema"),
    ("a DECIMAL(40, 2)", "DECIMAL(40,2): precision must be 1..38 and scale 0..precision"),
    ("a INT, A STRING", "column 'a' is named twice"),
    ("a INT NOT", "expected NULL after NOT"),
])
def test_errors_say_where(text: str, message: str) -> None:
    with pytest.raises(DdlError) as caught:
        parse_schema(text)
    assert str(caught.value).startswith(message)

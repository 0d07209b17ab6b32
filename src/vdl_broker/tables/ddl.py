"""Spark DDL schemas (`vdl.table.schema`), parsed without Spark or Arrow (pure).

The accepted text is what `DataFrameReader.schema("...")` and `from_json(col, "...")` accept for
the usual types: a column list `name TYPE [NOT NULL] [COMMENT '...'], ...` or one
`STRUCT<name: TYPE, ...>`; names may be back-quoted. Types: BOOLEAN, TINYINT/BYTE,
SMALLINT/SHORT, INT/INTEGER, BIGINT/LONG, FLOAT/REAL, DOUBLE, DECIMAL/DEC/NUMERIC[(p[, s])],
STRING, VARCHAR(n), CHAR(n), BINARY, DATE, TIMESTAMP, TIMESTAMP_NTZ, ARRAY<T>, MAP<K, V>,
STRUCT<...>. # Spark SQL reference: "Data Types" and the DDL column syntax.

A type is a tuple: ("int",), ("decimal", precision, scale), ("array", element),
("map", key, value) or ("struct", (Column, ...)).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

DdlType = tuple[Any, ...]

_SIMPLE = {
    "boolean": "boolean", "tinyint": "byte", "byte": "byte", "smallint": "short", "short": "short",
    "int": "int", "integer": "int", "bigint": "long", "long": "long", "float": "float", "real": "float",
    "double": "double", "string": "string", "binary": "binary", "date": "date",
    "timestamp": "timestamp", "timestamp_ltz": "timestamp", "timestamp_ntz": "timestamp_ntz",
}
_SQL_NAMES = {"byte": "TINYINT", "short": "SMALLINT", "long": "BIGINT"}
_TOKEN = re.compile(r"\s*(?:(`(?:[^`]|``)*`)|([A-Za-z_][A-Za-z0-9_]*)|(\d+)|('(?:[^'\\]|\\.)*')|(.))")


class DdlError(ValueError):
    """The schema text is not a Spark DDL schema this parser knows; the message says where."""


@dataclass(frozen=True)
class Column:
    name: str
    type: DdlType
    nullable: bool = True


def parse_schema(text: str) -> tuple[Column, ...]:
    """The columns of a DDL schema; raises DdlError."""
    if not isinstance(text, str) or not text.strip():
        raise DdlError("the schema is empty")
    parser = _Parser(text)
    if parser.peek_word() == "struct" and parser.peek(1) == "<":
        parser.next()
        columns = parser.struct_body()
    else:
        columns = parser.columns(end=None)
    parser.expect_end()
    names = [c.name.lower() for c in columns]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate is not None:
        raise DdlError(f"column {duplicate!r} is named twice")
    return columns


def type_name(ddl_type: DdlType) -> str:
    """The type as Spark writes it (for messages and describe)."""
    kind = ddl_type[0]
    if kind == "decimal":
        return f"DECIMAL({ddl_type[1]},{ddl_type[2]})"
    if kind == "array":
        return f"ARRAY<{type_name(ddl_type[1])}>"
    if kind == "map":
        return f"MAP<{type_name(ddl_type[1])},{type_name(ddl_type[2])}>"
    if kind == "struct":
        return "STRUCT<" + ",".join(f"{c.name}:{type_name(c.type)}" for c in ddl_type[1]) + ">"
    return _SQL_NAMES.get(kind, kind.upper())


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []  # (kind, text, position)
        for match in _TOKEN.finditer(text):
            if match.lastindex is None:
                break  # only blanks were left
            kind = ("quoted", "word", "number", "string", "symbol")[match.lastindex - 1]
            self.tokens.append((kind, match.group(match.lastindex), match.start(match.lastindex)))
        self.index = 0

    def peek(self, ahead: int = 0) -> str | None:
        i = self.index + ahead
        return self.tokens[i][1] if i < len(self.tokens) else None

    def peek_word(self) -> str | None:
        token = self.tokens[self.index] if self.index < len(self.tokens) else None
        return token[1].lower() if token is not None and token[0] == "word" else None

    def next(self) -> tuple[str, str, int]:
        if self.index >= len(self.tokens):
            raise DdlError("the schema ends too early")
        token = self.tokens[self.index]
        self.index += 1
        return token

    def fail(self, what: str) -> DdlError:
        if self.index < len(self.tokens):
            kind, token, position = self.tokens[self.index]
            return DdlError(f"{what}, found {token!r} at position {position}")
        return DdlError(f"{what}, found the end of the schema")

    def expect(self, symbol: str) -> None:
        if self.peek() != symbol:
            raise self.fail(f"expected {symbol!r}")
        self.index += 1

    def expect_end(self) -> None:
        if self.index != len(self.tokens):
            raise self.fail("expected the end of the schema")

    def name(self) -> str:
        if self.index >= len(self.tokens):
            raise self.fail("expected a column name")
        kind, token, _ = self.tokens[self.index]
        if kind == "quoted":
            self.index += 1
            return token[1:-1].replace("``", "`")
        if kind == "word":
            self.index += 1
            return token
        raise self.fail("expected a column name")

    def columns(self, end: str | None) -> tuple[Column, ...]:
        columns = [self.column(colon=False)]
        while self.peek() == ",":
            self.index += 1
            columns.append(self.column(colon=False))
        if end is not None:
            self.expect(end)
        return tuple(columns)

    def struct_body(self) -> tuple[Column, ...]:
        self.expect("<")
        if self.peek() == ">":
            self.index += 1
            return ()
        columns = [self.column(colon=True)]
        while self.peek() == ",":
            self.index += 1
            columns.append(self.column(colon=True))
        self.expect(">")
        return tuple(columns)

    def column(self, colon: bool) -> Column:
        name = self.name()
        if colon and self.peek() == ":":
            self.index += 1
        ddl_type = self.type()
        nullable = True
        if self.peek_word() == "not":
            self.index += 1
            if self.peek_word() != "null":
                raise self.fail("expected NULL after NOT")
            self.index += 1
            nullable = False
        if self.peek_word() == "comment":
            self.index += 1
            if self.index >= len(self.tokens) or self.tokens[self.index][0] != "string":
                raise self.fail("expected a quoted comment")
            self.index += 1
        return Column(name, ddl_type, nullable)

    def type(self) -> DdlType:
        word = self.peek_word()
        if word is None:
            raise self.fail("expected a type")
        self.index += 1
        if word in ("decimal", "dec", "numeric"):
            precision, scale = 10, 0
            if self.peek() == "(":
                self.index += 1
                precision = self.number()
                if self.peek() == ",":
                    self.index += 1
                    scale = self.number()
                self.expect(")")
            if not 1 <= precision <= 38 or not 0 <= scale <= precision:
                raise DdlError(f"DECIMAL({precision},{scale}): precision must be 1..38 and scale 0..precision")
            return ("decimal", precision, scale)
        if word in ("varchar", "char"):
            self.expect("(")
            self.number()
            self.expect(")")
            return ("string",)
        if word == "array":
            self.expect("<")
            element = self.type()
            self.expect(">")
            return ("array", element)
        if word == "map":
            self.expect("<")
            key = self.type()
            self.expect(",")
            value = self.type()
            self.expect(">")
            return ("map", key, value)
        if word == "struct":
            return ("struct", self.struct_body())
        if word in _SIMPLE:
            return (_SIMPLE[word],)
        self.index -= 1
        raise self.fail("unknown type (accepted: " + ", ".join(sorted({*_SIMPLE, "decimal", "varchar", "char",
                                                                      "array", "map", "struct"})) + ")")

    def number(self) -> int:
        kind, token, _ = self.next()
        if kind != "number":
            self.index -= 1
            raise self.fail("expected a number")
        return int(token)

"""Stored batches -> table rows: raw columns, JSON parsing with exact dead letters, day partitions."""

from __future__ import annotations

import datetime
import struct

import pytest

from vdl_broker.cluster.stream_configs import TableSettings
from vdl_broker.tables.convert import TieringError, convert, table_schema
from vdl_wire.records.control import end_txn_marker
from vdl_wire.records.record_batch import RecordBatchBuilder

T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z


def stored(base_offset: int, values: list[bytes | None], headers: list[tuple[str, bytes]] | None = None,
           keys: bool = True) -> bytes:
    builder = RecordBatchBuilder()
    for i, value in enumerate(values):
        builder.append(T0 + base_offset + i, b"k%d" % (base_offset + i) if keys else None, value, headers or [])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)  # the offset the leader gave the batch
    return bytes(data)


def settings(fmt: str = "raw", schema: str | None = None, partition_by: str = "none") -> TableSettings:
    return TableSettings("/t", fmt, schema, 5000, partition_by, 0, 1 << 20, 0, 0)


def ts(offset: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp((T0 + offset) / 1000, datetime.UTC)


def test_raw_rows_hold_every_record_of_the_range_once() -> None:
    data = stored(0, [b"a", b"b", b"c"]) + stored(3, [b"d", None], headers=[("h", b"1")]) + stored(5, [b"f"], keys=False)
    converted = convert(data, 1, 6, settings())
    assert converted.rows.schema == table_schema(settings())
    assert converted.rows.to_pylist() == [
        {"offset": 1, "timestamp": ts(1), "key": b"k1", "value": b"b", "headers": None},
        {"offset": 2, "timestamp": ts(2), "key": b"k2", "value": b"c", "headers": None},
        {"offset": 3, "timestamp": ts(3), "key": b"k3", "value": b"d", "headers": [{"key": "h", "value": b"1"}]},
        {"offset": 4, "timestamp": ts(4), "key": b"k4", "value": None, "headers": [{"key": "h", "value": b"1"}]},
        {"offset": 5, "timestamp": ts(5), "key": None, "value": b"f", "headers": None},
    ]
    assert converted.dead_letters.num_rows == 0


def test_a_gap_in_the_offsets_is_an_error_not_a_skip() -> None:
    data = stored(0, [b"a", b"b"]) + stored(5, [b"f"])
    with pytest.raises(TieringError, match="not contiguous"):
        convert(data, 0, 6, settings())
    with pytest.raises(TieringError, match="no records"):
        convert(stored(0, [b"a"]), 5, 6, settings())


def test_day_partition_column() -> None:
    rows = convert(stored(0, [b"a"]), 0, 1, settings(partition_by="day")).rows
    assert rows.column_names == ["offset", "timestamp", "key", "value", "headers", "day"]
    assert rows.column("day").to_pylist() == [datetime.date(2023, 11, 14)]


def test_json_rows_and_exactly_the_malformed_records_as_dead_letters() -> None:
    good = [b'{"id": 1, "name": "a", "when": "2024-01-02T03:04:05Z", "tags": ["x"], "at": {"city": "P"}}',
            b'{"id": 2, "extra": true}', b'{"id": 3,\n "name": "two lines"}', b'{"id": 4, "day2": "2024-02-29"}']
    bad = {b'not json': "JSON parse error: Invalid value.", None: "null value",
           b'{"id": "x"}': "JSON parse error: Column(/id) changed from number to string",
           b'': "empty value: not a JSON object", b' \t': "empty value: not a JSON object",
           b'{"id": 5}{"id": 6}': "2 JSON objects in one record", b'[1, 2]': "JSON parse error: Column() changed "
           "from object to array", b'{"name": "no id"}': "NOT NULL column(s) id missing or null",
           b'{"id": 7, "day2": "2024-02-30"}': "'2024-02-30' as a scalar of type date32"}
    values: list[bytes | None] = []
    kinds = []
    for i in range(40):  # good and bad records interleaved, in batches of 7
        if i % 4 == 1:
            value = list(bad)[(i // 4) % len(bad)]
            kinds.append(("bad", value))
        else:
            value = good[i % len(good)]
            kinds.append(("good", value))
        values.append(value)
    data = b"".join(stored(b, values[b:b + 7]) for b in range(0, 40, 7))
    schema = "id BIGINT NOT NULL, name STRING, when TIMESTAMP, tags ARRAY<STRING>, at STRUCT<city: STRING>, day2 DATE"
    converted = convert(data, 0, 40, settings("json", schema))
    assert converted.rows.column("offset").to_pylist() == [i for i, (k, _) in enumerate(kinds) if k == "good"]
    assert converted.dead_letters.column("offset").to_pylist() == [i for i, (k, _) in enumerate(kinds) if k == "bad"]
    assert converted.dead_letters.column("value").to_pylist() == [v for k, v in kinds if k == "bad"]
    for letter in converted.dead_letters.to_pylist():
        assert bad[letter["value"]] in letter["error"], letter
        assert letter["key"] == b"k%d" % letter["offset"] and letter["timestamp"] == ts(letter["offset"])
    first = converted.rows.to_pylist()[0]
    assert first == {"offset": 0, "timestamp": ts(0), "id": 1, "name": "a",
                     "when": datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC), "tags": ["x"],
                     "at": {"city": "P"}, "day2": None}
    by_offset = {row["offset"]: row for row in converted.rows.to_pylist()}
    assert by_offset[2]["name"] == "two lines" and by_offset[3]["day2"] == datetime.date(2024, 2, 29)


def test_json_schema_problems_are_the_tables_error() -> None:
    with pytest.raises(TieringError, match="column 'offset' is reserved"):
        table_schema(settings("json", "offset BIGINT"))
    with pytest.raises(TieringError, match="MAP columns are not supported"):
        table_schema(settings("json", "m MAP<STRING, INT>"))


def txn(base_offset: int, values: list[bytes], producer_id: int) -> bytes:
    builder = RecordBatchBuilder(base_offset=base_offset, producer_id=producer_id, producer_epoch=0, base_sequence=0,
                                 is_transactional=True)
    for i, value in enumerate(values):
        builder.append(T0 + base_offset + i, None, value)
    return builder.build()


def marker(offset: int, producer_id: int, commit: bool) -> bytes:
    data = bytearray(end_txn_marker(producer_id, 0, commit, 0, T0))
    struct.pack_into(">q", data, 0, offset)
    return bytes(data)


def test_committed_records_only_markers_and_aborted_transactions_take_offsets_but_no_rows() -> None:
    # 0: plain; 1-2: producer 7 (aborted at 5); 3: producer 8 (committed at 6); 4: producer 7 again.
    data = (stored(0, [b"plain"]) + txn(1, [b"a1", b"a2"], 7) + txn(3, [b"c1"], 8) + txn(4, [b"a3"], 7)
            + marker(5, 7, False) + marker(6, 8, True) + stored(7, [b"after"]))
    converted = convert(data, 0, 8, settings(), aborted=[(7, 1, 5)])
    assert [(r["offset"], r["value"]) for r in converted.rows.to_pylist()] == [(0, b"plain"), (3, b"c1"), (7, b"after")]
    assert converted.skipped == 5
    # A range of markers and aborted records only: no rows, no error.
    empty = convert(data, 4, 7, settings(), aborted=[(7, 1, 5)])
    assert (empty.rows.num_rows, empty.skipped, empty.rows.schema) == (0, 3, table_schema(settings()))
    # The same producer's batches outside its aborted range are committed.
    assert convert(data, 3, 5, settings(), aborted=[(7, 1, 2)]).rows.column("value").to_pylist() == [b"c1", b"a3"]
    # A gap is still an error, markers or not.
    with pytest.raises(TieringError, match="not contiguous"):
        convert(data[:len(stored(0, [b"plain"]))] + txn(2, [b"x"], 9), 0, 3, settings())

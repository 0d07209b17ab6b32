"""Streams that are Delta tables, on one real broker: the table holds exactly the stream's records
(compared with what kafka-python reads from the log), json tables send exactly the malformed
records to the dead-letter table, retention deletes only segments already in the table, a path
holding another stream's table is refused, and describe shows the table's state."""

from __future__ import annotations

import datetime
import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from tests.support.cluster import VDL_CLI, BrokerProcess, free_port, wait_until
from tests.support.kafka import wait_for_stable_offset
from tests.support.metrics import scrape_url
from vdl_client import ClientSettings, VdlClient
from vdl_client.configs import alter_stream_configs, describe_stream_configs

pytestmark = pytest.mark.timeout(180)


def client(broker: BrokerProcess) -> VdlClient:
    return VdlClient(ClientSettings.from_bootstrap(broker.bootstrap, deadline_ms=30_000))


def produce(bootstrap: str, stream: str, values: list[bytes | None], headers: bool = True,
            batch_size: int = 16384) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, batch_size=batch_size)
    for i, value in enumerate(values):
        producer.send(stream, key=b"k%d" % i, value=value, headers=[("n", str(i).encode())] if headers and i % 3 else [])
    producer.flush(30)
    producer.close()


def log_records(bootstrap: str, stream: str, start: int = 0, isolation: str = "read_uncommitted") -> list[dict[str, Any]]:
    """Every record of the log from `start`, as kafka-python reads it, in table-row form."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level=isolation)
    partition = TopicPartition(stream, 0)
    consumer.assign([partition])
    end = consumer.end_offsets([partition])[partition]
    consumer.seek(partition, start)
    rows: list[dict[str, Any]] = []
    while consumer.position(partition) < end:
        for record in consumer.poll(1000).get(partition, []):
            rows.append({"offset": record.offset, "key": record.key, "value": record.value,
                         "timestamp": datetime.datetime.fromtimestamp(record.timestamp / 1000, datetime.UTC),
                         "headers": [{"key": k, "value": v} for k, v in record.headers] or None})
    consumer.close()
    return rows


def table_rows(path: Path) -> list[dict[str, Any]]:
    return sorted(DeltaTable(str(path)).to_pyarrow_table().to_pylist(), key=lambda row: row["offset"])


def status(broker: BrokerProcess, stream: str) -> dict[str, str | None]:
    with client(broker) as vdl:
        return {c.name: c.value for c in describe_stream_configs(vdl, stream) if c.read_only}


def table_holds(path: Path, count: int) -> Callable[[], bool]:
    def check() -> bool:
        try:
            return DeltaTable(str(path)).to_pyarrow_table(columns=["offset"]).num_rows >= count
        except Exception:  # not created yet
            return False
    return check


def test_raw_table_holds_exactly_the_log(broker_factory: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    broker = broker_factory()
    path = tmp_path / "tables" / "events"
    with client(broker) as vdl:
        vdl.create_stream("events", config={"vdl.table.path": str(path), "vdl.table.lag.ms": "500"})
    values = [b"value-%d" % i if i % 11 else None for i in range(3000)]
    produce(broker.bootstrap, "events", values[:1000])
    produce(broker.bootstrap, "events", values[1000:])
    wait_until(table_holds(path, 3000), 30, "the table holding 3000 rows")
    rows = table_rows(path)
    assert rows == log_records(broker.bootstrap, "events")
    assert [row["offset"] for row in rows] == list(range(3000))
    shown = wait_until(lambda: (s := status(broker, "events"))["vdl.table.status.lag.records"] == "0" and s, 10,
                       "describe showing no lag")
    assert shown["vdl.table.status.last.offset"] == "2999"
    assert shown["vdl.table.status.lag.seconds"] == "0.0"
    assert shown["vdl.table.status.writer"] == "this node (leader)"
    assert int(shown["vdl.table.status.commits"] or 0) >= 1 and shown["vdl.table.status.dead.letters"] == "0"
    assert "vdl.table.status.error" not in shown
    history = DeltaTable(str(path)).history()
    assert all(h["operation"] in ("WRITE", "CREATE TABLE") for h in history)


def test_a_table_holds_committed_records_only(broker_factory: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    """A stream with transactions: the table holds what a read_committed consumer reads (no
    markers, nothing of an aborted transaction), and says so in its properties."""
    import confluent_kafka

    broker = broker_factory()
    path = tmp_path / "txn"
    with client(broker) as vdl:
        vdl.create_stream("txn", config={"vdl.table.path": str(path), "vdl.table.lag.ms": "300"})
    produce(broker.bootstrap, "txn", [b"plain-%d" % i for i in range(3)])
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tiered",
                                         "linger.ms": 5})
    producer.init_transactions(30)
    for number, commit in enumerate([True, False, True, False, False]):
        producer.begin_transaction()
        for i in range(4):
            producer.produce("txn", b"t%d-%d" % (number, i), headers=[("n", b"%d" % i)])
        producer.flush(30)
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)
    wait_for_stable_offset(broker.bootstrap, "txn", 3 + 5 * 5)  # the last abort's marker before "after"
    produce(broker.bootstrap, "txn", [b"after"], headers=False)
    expected = log_records(broker.bootstrap, "txn", isolation="read_committed")
    assert [row["value"] for row in expected] == [b"plain-0", b"plain-1", b"plain-2", b"t0-0", b"t0-1", b"t0-2",
                                                  b"t0-3", b"t2-0", b"t2-1", b"t2-2", b"t2-3", b"after"]
    with client(broker) as vdl:
        end = vdl.list_offset("txn", -1)
    assert end == 3 + 5 * 5 + 1  # 4 records and a marker per transaction
    wait_until(lambda: table_end(path) == end - 1, 30, "the table reaching the log's end")
    assert table_rows(path) == expected
    assert "vdl.table.status.error" not in status(broker, "txn")
    assert DeltaTable(str(path)).metadata().configuration["vdl.table.start"] == "0"


def table_end(path: Path) -> int | None:
    """The last offset the stream's writer committed to a table of committed records only."""
    try:
        table = DeltaTable(str(path))
    except Exception:  # not created yet
        return None
    writer = table.metadata().configuration.get("vdl.table.writer")
    return None if writer is None else table.transaction_version(writer)


def test_json_table_dead_letters_hold_exactly_the_malformed(broker_factory: Callable[..., BrokerProcess],
                                                            tmp_path: Path) -> None:
    metrics_port = free_port()
    broker = broker_factory(metrics_listen=f"127.0.0.1:{metrics_port}")
    path = tmp_path / "orders"
    with client(broker) as vdl:
        vdl.create_stream("orders", config={
            "vdl.table.path": str(path), "vdl.table.format": "json", "vdl.table.lag.ms": "300",
            "vdl.table.schema": "order_id BIGINT NOT NULL, amount DOUBLE, placed TIMESTAMP",
            "vdl.table.partition.by": "day"})
    values: list[bytes | None] = []
    malformed: dict[int, bytes | None] = {}
    for i in range(2000):
        if i % 97 == 5:
            value: bytes | None = [b"{broken", b'{"order_id": "abc"}', b"", None, b'{"amount": 1.5}'][len(malformed) % 5]
            malformed[i] = value
        else:
            value = json.dumps({"order_id": i, "amount": i / 4, "placed": "2024-05-06T07:08:09Z"}).encode()
        values.append(value)
    produce(broker.bootstrap, "orders", values)
    wait_until(table_holds(path, 2000 - len(malformed)), 30, "the json table's rows")
    wait_until(table_holds(Path(f"{path}_dlq"), len(malformed)), 30, "the dead letters")
    rows = table_rows(path)
    assert [row["order_id"] for row in rows] == [i for i in range(2000) if i not in malformed]
    assert all(row["offset"] == row["order_id"] and row["amount"] == row["offset"] / 4 for row in rows)
    assert all(row["day"] == row["timestamp"].date() for row in rows)
    letters = table_rows(Path(f"{path}_dlq"))
    assert [(row["offset"], row["value"]) for row in letters] == sorted(malformed.items())
    assert all(row["error"] and row["key"] == b"k%d" % row["offset"] for row in letters)
    assert DeltaTable(str(path)).metadata().partition_columns == ["day"]
    wait_until(lambda: status(broker, "orders")["vdl.table.status.dead.letters"] == str(len(malformed)), 10,
               "the dead-letter count")
    metrics = scrape_url(f"http://127.0.0.1:{metrics_port}/metrics")
    assert metrics.value("vdl_table_dead_letters_total", stream="orders") == len(malformed)
    assert metrics.get("vdl_table_commits_total", stream="orders") >= 1
    assert metrics.value("vdl_table_lag_records", stream="orders") == 0
    assert metrics.value("vdl_table_lag_seconds", stream="orders") == 0


def test_retention_deletes_only_what_the_table_holds(broker_factory: Callable[..., BrokerProcess],
                                                      tmp_path: Path) -> None:
    broker = broker_factory(retention_check_ms=100)
    path = tmp_path / "tiered"
    with client(broker) as vdl:
        # The table far behind (lag 1 hour): retention must wait for it.
        vdl.create_stream("tiered", config={"vdl.table.path": str(path), "vdl.table.lag.ms": "3600000",
                                            "segment.bytes": "4096", "retention.bytes": "8192"})
        produce(broker.bootstrap, "tiered", [b"r%05d" % i + b"." * 90 for i in range(600)], headers=False,
                batch_size=1024)
        directory = broker.data_dir / "tiered"
        segments = len(list(directory.glob("*.log")))
        assert segments > 10
        wait_until(lambda: status(broker, "tiered").get("vdl.table.status.last.offset") == "-1", 10, "a status")
        assert vdl.list_offset("tiered", -2) == 0 and len(list(directory.glob("*.log"))) == segments
        alter_stream_configs(vdl, "tiered", {"vdl.table.lag.ms": "200"})
        wait_until(table_holds(path, 600), 30, "the table catching up")
        wait_until(lambda: vdl.list_offset("tiered", -2) > 0, 30, "retention deleting tiered segments")
        assert len(list(directory.glob("*.log"))) < segments
    assert [row["value"] for row in table_rows(path)] == [b"r%05d" % i + b"." * 90 for i in range(600)]


def test_a_table_of_another_stream_is_refused(broker_factory: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    broker = broker_factory()
    path = tmp_path / "shared"
    with client(broker) as vdl:
        vdl.create_stream("first", config={"vdl.table.path": str(path), "vdl.table.lag.ms": "200"})
        produce(broker.bootstrap, "first", [b"a", b"b"])
        wait_until(table_holds(path, 2), 20, "the first stream's table")
        vdl.create_stream("second", config={"vdl.table.path": str(path), "vdl.table.lag.ms": "200"})
        produce(broker.bootstrap, "second", [b"c"])
    error = wait_until(lambda: status(broker, "second").get("vdl.table.status.error"), 20, "the table's error")
    assert "already holds rows that this stream did not write" in error
    assert [row["value"] for row in table_rows(path)] == [b"a", b"b"]
    described = subprocess.run([*VDL_CLI, "streams", "describe", "second", "--bootstrap", broker.bootstrap],
                               capture_output=True, text=True, timeout=30)
    # (the configs' column width follows the longest config name)
    assert "vdl.table.status.error" in described.stdout
    assert re.search(r"^  vdl\.table\.status\.last\.offset +-1$", described.stdout, re.MULTILINE), described.stdout


def mapped(broker: BrokerProcess) -> str:
    assert broker.process is not None
    return Path(f"/proc/{broker.process.pid}/maps").read_text()


def test_a_node_holding_a_tiered_replica_loads_the_tiering_libraries_as_it_starts(
        broker_factory: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    """The libraries a Delta commit loads (deltalake and its runtime, pyarrow, pyarrow's pandas
    bridge when pandas is installed) are loaded right after the node serves when it holds a
    replica of a stream with a table (not before: a restart does not wait for them), or as soon
    as a serving node gets its first such replica, not when it first writes the table (a step
    of ~80 MB in a serving process); a node without one loads none of them (idle nodes stay
    small)."""
    import importlib.util

    def loaded() -> bool:
        maps = mapped(broker)
        return ("deltalake/_internal" in maps and "libarrow" in maps
                and ("/pandas/" in maps or importlib.util.find_spec("pandas") is None))

    broker = broker_factory(log_level="INFO")
    with client(broker) as vdl:
        vdl.create_stream("plain")
    broker.restart()
    maps = mapped(broker)
    assert "deltalake" not in maps and "pyarrow" not in maps and "/pandas/" not in maps
    with client(broker) as vdl:  # a table, no records: the leader never commits a row
        vdl.create_stream("tiered", config={"vdl.table.path": str(tmp_path / "tiered")})
    # A serving node's first tiered replica: loaded then (no commit needed).
    wait_until(loaded, 30, "the tiering libraries loaded")
    broker.restart()

    def said() -> bool:
        """The restarted node logged loading them after its `serving` line (Broker.start's)."""
        lines = list(broker.output)
        serving = max(i for i, line in enumerate(lines) if ": serving " in line)
        return any("tiering libraries loaded" in line for line in lines[serving:])

    # Before serving, they would have been loaded ahead of that line, never after it.
    wait_until(said, 30, "the restarted node loading the tiering libraries after it serves")
    assert loaded()

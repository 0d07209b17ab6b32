"""Restarts: SIGTERM then restart keeps everything readable; SIGKILL in the middle of an
acks=-1 produce loop loses nothing that was acknowledged (each record at its acknowledged offset)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import confluent_kafka

from tests.faults.harness import stream_directory
from tests.support.cluster import BrokerProcess
from tests.support.kafka import RequestFailed, client, make_batch
from tests.support.waiting import wait_until
from vdl_broker.raft.persistence import COMMIT_POINT_FILE
from vdl_wire.records.record_batch import iter_batches, read_records


def read_all(bootstrap: str, stream: str) -> list[tuple[int, bytes]]:
    rows: list[tuple[int, bytes]] = []
    with client(bootstrap) as c:
        end = c.list_offset(stream, -1)
        offset = c.list_offset(stream, -2)
        while offset < end:
            _, records = c.fetch(stream, offset, max_wait_ms=0)
            for _, batch in iter_batches(records or b""):
                for record in read_records(batch):
                    if record.offset >= offset:
                        rows.append((record.offset, record.value or b""))
                        offset = record.offset + 1
    return rows


def test_sigterm_restart_keeps_everything(broker: BrokerProcess) -> None:
    with client(broker.bootstrap) as c:
        c.create_stream("keep")
        for n in range(20):
            c.produce("keep", make_batch([f"{n}-{i}".encode() for i in range(50)]), acks=1)
    before = read_all(broker.bootstrap, "keep")
    assert len(before) == 1000
    assert broker.terminate() == 0
    broker.start()
    assert read_all(broker.bootstrap, "keep") == before
    with client(broker.bootstrap) as c:  # and the log continues where it was
        assert c.produce("keep", make_batch([b"after"])) == 1000


def test_sigkill_during_acks_all_loses_nothing_acknowledged(broker: BrokerProcess) -> None:
    with client(broker.bootstrap) as c:
        c.create_stream("durable")
    acked: list[tuple[int, list[bytes]]] = []
    stop = threading.Event()

    def produce_loop() -> None:
        try:
            with client(broker.bootstrap, timeout=5) as c:
                n = 0
                while not stop.is_set():
                    values = [f"batch{n}-rec{i}".encode() for i in range(20)]
                    acked.append((c.produce("durable", make_batch(values), acks=-1), values))
                    n += 1
        except (OSError, RequestFailed):
            pass  # the broker died under us: expected

    threads = [threading.Thread(target=produce_loop, daemon=True) for _ in range(3)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 20
    while len(acked) < 300:
        assert time.monotonic() < deadline, "produce loop too slow"
        time.sleep(0.01)
    broker.kill()  # SIGKILL mid-loop
    stop.set()
    for thread in threads:
        thread.join(10)
    snapshot = list(acked)
    broker.start()
    stored = dict(read_all(broker.bootstrap, "durable"))
    for base_offset, values in snapshot:
        for i, value in enumerate(values):
            assert stored.get(base_offset + i) == value, f"acknowledged record at {base_offset + i} lost"
    assert sorted(stored) == list(range(len(stored))), "offsets have gaps after recovery"


def test_sigkill_after_rolls_an_idempotent_producer_continues_without_duplicates(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    """Producer state comes back from the snapshot of a segment roll plus the batches after it:
    a librdkafka idempotent producer that keeps producing through a SIGKILL and the restart gets
    no error, and every record is stored once, in order (its retried batches are recognised)."""
    broker = broker_factory(segment_bytes=4096, log_level="INFO")
    with client(broker.bootstrap) as c:
        c.create_stream("idem")
    errors: list[str] = []
    delivered: list[int] = []

    def on_delivery(error: Any, message: Any) -> None:
        if error is not None:
            errors.append(str(error))
        else:
            delivered.append(message.offset())

    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                                         "linger.ms": 2, "batch.num.messages": 20, "message.timeout.ms": 120_000,
                                         "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 500})
    directory = stream_directory(broker.data_dir, "idem")
    produced = 0
    stop = threading.Event()

    def produce_loop() -> None:  # the one thread that uses the producer until `stop`
        nonlocal produced
        while not stop.is_set():
            for _ in range(20):
                producer.produce("idem", f"r{produced}".encode(), on_delivery=on_delivery)
                produced += 1
            producer.flush(0.2)  # returns early (undelivered left queued) while the broker is down

    def commit_point() -> bytes:
        return (directory / COMMIT_POINT_FILE).read_bytes() if (directory / COMMIT_POINT_FILE).exists() else b""

    thread = threading.Thread(target=produce_loop, daemon=True)
    thread.start()
    wait_until(lambda: len(list(directory.glob("*.snapshot"))) >= 2, 30, "state snapshots at segment rolls")
    # The commit point (saved every 2 s) passes the first snapshot: a restart starts from it.
    saved = commit_point()
    wait_until(lambda: commit_point() != saved, 30, "the commit point saved again")
    broker.kill()  # batches in flight: librdkafka retries them after the restart
    broker.start()
    before = produced
    wait_until(lambda: len(delivered) > before + 200, 60, "records delivered after the restart")
    stop.set()
    thread.join(30)
    assert producer.flush(90) == 0
    assert errors == []
    values = [value for _, value in read_all(broker.bootstrap, "idem")]
    assert values == [f"r{i}".encode() for i in range(produced)]
    assert sorted(delivered) == list(range(produced))
    rebuilt = [line for line in broker.output if "stream idem: producer state from" in line]
    assert rebuilt and "from the snapshot at offset" in rebuilt[-1], rebuilt

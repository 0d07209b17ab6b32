"""Restarts: SIGTERM then restart keeps everything readable; SIGKILL in the middle of an
acks=-1 produce loop loses nothing that was acknowledged (each record at its acknowledged offset)."""

from __future__ import annotations

import threading
import time

from tests.support.cluster import BrokerProcess
from tests.support.kafka import RequestFailed, client, make_batch
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

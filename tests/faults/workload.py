"""Client workloads for the fault tests, running through the faults in threads: producers that
record every acknowledgement (Acks, ProducerThread, Workload), consumers that record every read
per session (ConsumerThread), and a monitor of the high watermark every node serves
(HighWatermarkMonitor). Every wait is a condition polled against a deadline.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.support.cluster import node_address, running_nodes, wait_until
from tests.support.kafka import fetch_raw
from vdl_dev.dev_cluster import DevCluster

# Client-side request timeout of the workload producers (see ProducerThread._run_confluent).
REQUEST_TIMEOUT_MS = 3000


class LogTail(logging.Handler):
    """The last lines a librdkafka client logged (its debug contexts included), to explain a
    client that stalls under faults: timing decides such a stall, so a replay may not show it."""

    def __init__(self, name: str, lines: int = 200) -> None:
        super().__init__()
        self.lines: deque[str] = deque(maxlen=lines)
        # A logger of its own, not logging's registry: clients of the same name in later tests
        # must not feed this one.
        self.logger = logging.Logger(f"client.{name}", logging.DEBUG)
        self.logger.propagate = False
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{time.monotonic():.3f} {record.getMessage()}")

    def config(self, debug: str) -> dict[str, Any]:
        """librdkafka settings sending its logs of the `debug` contexts here."""
        return {"logger": self.logger, "debug": debug, "log_level": 7}

    def shown(self) -> str:
        """The lines kept, for a failure message ("" when the client logged nothing here)."""
        return "\n  its last log lines:\n" + "\n".join(self.lines) if self.lines else ""


@dataclass
class Acks:
    """Acknowledged records of every client: (client, offset, value). Thread-safe appends."""

    records: list[tuple[str, int, bytes]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # monotonic time of each record's acknowledgement
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, client: str, offset: int, value: bytes) -> None:
        with self.lock:
            self.records.append((client, offset, value))
            self.times.append(time.monotonic())

    def error(self, text: str) -> None:
        with self.lock:
            self.errors.append(text)

    def count(self) -> int:
        with self.lock:
            return len(self.records)

    def snapshot(self) -> list[tuple[str, int, bytes]]:
        with self.lock:
            return list(self.records)

    def timed(self) -> list[tuple[float, str, int, bytes]]:
        """(time, client, offset, value) of every acknowledgement."""
        with self.lock:
            return [(t, *record) for t, record in zip(self.times, self.records, strict=True)]


class ProducerThread(threading.Thread):
    """One client producing unique values `<name>-<seq>` with acks=-1 until stopped. Kinds:
    "confluent" (librdkafka, idempotence off), "confluent-idempotent", "kafka-python"
    (idempotent: kafka-python 3.0's default)."""

    KINDS = ("confluent", "confluent-idempotent", "kafka-python")

    def __init__(self, kind: str, name: str, bootstrap: str, stream: str, acks: Acks,
                 rate_per_s: float = 300.0) -> None:
        super().__init__(daemon=True, name=f"producer-{name}")
        self.kind, self.client, self.bootstrap, self.stream = kind, name, bootstrap, stream
        self.acks, self.rate = acks, rate_per_s
        self.stop_event = threading.Event()
        self.sent = 0
        self.undelivered = -1
        self.failure: BaseException | None = None
        self.log = LogTail(name)

    @property
    def idempotent(self) -> bool:
        return self.kind != "confluent"

    def value(self, seq: int) -> bytes:
        return f"{self.client}-{seq:08d}".encode() + b"." * 60

    def run(self) -> None:
        try:
            if self.kind.startswith("confluent"):
                self._run_confluent()
            else:
                self._run_kafka_python()
        except BaseException as error:  # surfaced by the test through .failure
            self.failure = error

    def _paced(self) -> Iterator[int]:
        started = time.monotonic()
        for seq in itertools.count():
            if self.stop_event.is_set():
                return
            delay = started + seq / self.rate - time.monotonic()
            if delay > 0:
                self.stop_event.wait(delay)
            yield seq

    def _run_confluent(self) -> None:
        import confluent_kafka

        # Client defaults except the ones the test needs: acks=-1 (all), linger small so batches
        # are in flight at every moment; idempotence stays at librdkafka's default (off).
        # socket.timeout.ms: a request to a SIGSTOPped leader gets no RST; give up on it after
        # 3 s (default 60 s) so the client moves to the new leader while the old one is paused.
        producer = confluent_kafka.Producer({"bootstrap.servers": self.bootstrap, "acks": -1, "linger.ms": 5,
                                             "topic.metadata.refresh.interval.ms": 1000,
                                             "socket.timeout.ms": REQUEST_TIMEOUT_MS,
                                             "enable.idempotence": self.idempotent,
                                             "log.connection.close": False,
                                             **self.log.config("eos,msg")})

        def report(error: Any, message: Any) -> None:
            if error is not None:
                self.acks.error(f"{self.client}: {error}")
            else:
                self.acks.add(self.client, message.offset(), message.value())

        for seq in self._paced():
            while True:
                try:
                    producer.produce(self.stream, self.value(seq), partition=0, on_delivery=report)
                    break
                except BufferError:
                    producer.poll(0.05)
            self.sent += 1
            producer.poll(0)
        self.undelivered = producer.flush(60)

    def _run_kafka_python(self) -> None:
        from kafka import KafkaProducer

        # kafka-python 3.0 defaults: acks=all, enable_idempotence=True, retries unbounded.
        producer = KafkaProducer(bootstrap_servers=self.bootstrap.split(","), linger_ms=5,
                                 metadata_max_age_ms=1000, request_timeout_ms=REQUEST_TIMEOUT_MS)
        try:
            for seq in self._paced():
                value = self.value(seq)
                future = producer.send(self.stream, value=value, partition=0)
                future.add_callback(lambda md, v=value: self.acks.add(self.client, md.offset, v))
                future.add_errback(lambda exc, v=value: self.acks.error(f"{self.client} {v[:20]!r}: {exc!r}"))
                self.sent += 1
            producer.flush(60)
            self.undelivered = 0
        finally:
            producer.close(5)


class Workload:
    """Three producers (two confluent-kafka, one kafka-python) writing through faults."""

    def __init__(self, bootstrap: str, stream: str, rate_per_s: float = 300.0, tag: str = "w",
                 kinds: Sequence[str] = ("confluent", "confluent", "kafka-python")) -> None:
        self.acks = Acks()
        short = {"confluent": "ck", "confluent-idempotent": "ci", "kafka-python": "kp"}
        self.producers = [ProducerThread(kind, f"{tag}{short[kind]}{i}", bootstrap, stream, self.acks, rate_per_s)
                          for i, kind in enumerate(kinds, 1)]

    def start(self) -> Workload:
        for producer in self.producers:
            producer.start()
        return self

    def per_client(self) -> dict[str, int]:
        """Acknowledgements so far, per producer."""
        counts = {p.client: 0 for p in self.producers}
        for client, _, _ in self.acks.snapshot():
            counts[client] += 1
        return counts

    def wait_progress(self, more: int, timeout: float = 30.0) -> None:
        """Wait until every producer has `more` further acknowledgements."""
        per_client = self.per_client
        before = per_client()
        wait_until(lambda: all(c >= before[k] + more for k, c in per_client().items()) or self._failed(),
                   timeout, f"{more} more acknowledgements from every producer (had {before})")
        self._raise_failures()

    def _failed(self) -> bool:
        return any(p.failure is not None for p in self.producers)

    def _raise_failures(self) -> None:
        for producer in self.producers:
            if producer.failure is not None:
                raise AssertionError(f"producer {producer.client} failed: {producer.failure!r}")

    def stop(self, timeout: float = 90.0) -> None:
        for producer in self.producers:
            producer.stop_event.set()
        for producer in self.producers:
            producer.join(timeout)
            assert not producer.is_alive(), f"producer {producer.client} did not finish within {timeout} s"
        self._raise_failures()
        undelivered = {p.client: p.undelivered for p in self.producers if p.undelivered != 0}
        logs = "".join(f"\n{p.client}:{p.log.shown()}" for p in self.producers if p.client in undelivered and p.log.lines)
        assert not undelivered, f"records never delivered (client: count): {undelivered}{logs}"


class ConsumerThread(threading.Thread):
    """A consumer reading the stream's partition 0 through the faults, recording every record it
    is handed, per session (reads between two assignments), with the time it got them. Kinds:
    "kafka-python" (assign, from offset 0: one session), "confluent-assign" (the same with
    librdkafka, which does not check CRCs by default: a damaged batch a node handed out would
    show as a wrong value) and "confluent-group" (subscribe in a group of its own with offsets
    never committed, so each assignment starts a session at offset 0)."""

    def __init__(self, bootstrap: str, stream: str, kind: str = "kafka-python", name: str | None = None) -> None:
        super().__init__(daemon=True, name=f"consumer-{stream}")
        self.bootstrap, self.stream, self.kind = bootstrap, stream, kind
        self.reader = name or f"{kind}-consumer"
        self.sessions: list[list[tuple[float, int, bytes | None]]] = [[]]
        self.stop_event = threading.Event()
        self.failure: BaseException | None = None
        self.lock = threading.Lock()
        self.log = LogTail(self.reader)

    @property
    def seen(self) -> list[tuple[int, bytes | None]]:
        """(offset, value) of every record read, all sessions in order."""
        with self.lock:
            return [(offset, value) for session in self.sessions for _, offset, value in session]

    def position(self) -> int:
        with self.lock:
            last = self.sessions[-1]
            return last[-1][1] + 1 if last else 0

    def _record(self, records: Iterable[tuple[int, bytes | None]]) -> None:
        now = time.monotonic()
        with self.lock:
            self.sessions[-1].extend((now, offset, value) for offset, value in records)

    def _new_session(self) -> None:
        with self.lock:
            if self.sessions[-1]:
                self.sessions.append([])

    def run(self) -> None:
        try:
            if self.kind.startswith("confluent"):
                self._run_confluent()
            else:
                self._run_kafka_python()
        except BaseException as error:
            self.failure = error

    def _run_kafka_python(self) -> None:
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap.split(","), group_id=None,
                                 enable_auto_commit=False, auto_offset_reset="earliest",
                                 fetch_max_wait_ms=100, metadata_max_age_ms=1000)
        partition = TopicPartition(self.stream, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        try:
            while not self.stop_event.is_set():
                for records in consumer.poll(timeout_ms=100).values():
                    self._record((r.offset, r.value) for r in records)
        finally:
            consumer.close()

    def _run_confluent(self) -> None:
        import confluent_kafka

        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": f"{self.reader}-{self.stream}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000, "log.connection.close": False,
            **self.log.config("fetch,consumer,cgrp")})
        if self.kind == "confluent-group":
            consumer.subscribe([self.stream], on_assign=lambda *_: self._new_session())
        else:
            consumer.assign([confluent_kafka.TopicPartition(self.stream, 0, 0)])
        try:
            while not self.stop_event.is_set():
                for message in consumer.consume(500, timeout=0.1):
                    if message.error() is None:
                        self._record([(message.offset(), message.value())])
        finally:
            consumer.close()

    def finish(self, end_offset: int, timeout: float = 30.0) -> list[tuple[int, bytes | None]]:
        """Wait until it has read up to `end_offset`, stop it, and return what it saw."""
        wait_until(lambda: self.position() >= end_offset or self.failure is not None, timeout,
                   lambda: f"the consumer reaching offset {end_offset} (at {self.position()}){self.log.shown()}")
        self.stop_event.set()
        self.join(15)
        assert self.failure is None, f"consumer failed: {self.failure!r}"
        return self.seen


class HighWatermarkMonitor(threading.Thread):
    """Asks every running node for the stream's high watermark (Fetch at offset 0, which only a
    leader serves) every 50 ms through the faults; the values served must never go down."""

    def __init__(self, cluster: DevCluster, stream: str) -> None:
        super().__init__(daemon=True, name=f"hw-monitor-{stream}")
        self.cluster, self.stream = cluster, stream
        self.samples: list[tuple[float, int, int]] = []  # (time, node, hw)
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.wait(0.05):
            for node_id in running_nodes(self.cluster):
                try:
                    code, hw, _ = fetch_raw(node_address(self.cluster, node_id), self.stream, 0, max_bytes=1)
                except (OSError, ValueError):
                    continue
                if code == 0:
                    self.samples.append((time.monotonic(), node_id, hw))

    def finish(self) -> list[str]:
        """Stop; the places where the served high watermark went backwards."""
        self.stop_event.set()
        self.join(10)
        problems: list[str] = []
        highest, where = -1, -1
        for _, node_id, hw in self.samples:
            if hw < highest:
                problems.append(f"node {node_id} served HW {hw} after node {where} served {highest}")
            if hw > highest:
                highest, where = hw, node_id
        return problems

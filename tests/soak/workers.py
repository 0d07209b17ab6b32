"""The soak's client threads: an aiokafka producer beside the fault tests' confluent-kafka and
kafka-python ones (tests/faults/workload.py), and group committers of each client that spread
over many consumer groups, committing every 100 ms and recording every commit acknowledged."""

from __future__ import annotations

import asyncio
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.faults.workload import REQUEST_TIMEOUT_MS, ProducerThread

COMMIT_INTERVAL_S = 0.1


class AiokafkaProducerThread(ProducerThread):
    """An aiokafka producer (acks=all, idempotence off: aiokafka's default) on its own event loop."""

    @property
    def idempotent(self) -> bool:
        return False

    def run(self) -> None:
        try:
            asyncio.run(self._run_aiokafka())
        except BaseException as error:  # surfaced through .failure, as the other producers do
            self.failure = error

    async def _run_aiokafka(self) -> None:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap.split(","), acks="all", linger_ms=5,
                                    metadata_max_age_ms=1000, request_timeout_ms=REQUEST_TIMEOUT_MS)
        await producer.start()
        pending: set[asyncio.Future[Any]] = set()

        def report(future: asyncio.Future[Any], value: bytes) -> None:
            if future.cancelled() or future.exception() is not None:
                self.acks.error(f"{self.client} {value[:20]!r}: {None if future.cancelled() else future.exception()!r}")
            else:
                self.acks.add(self.client, future.result().offset, value)

        try:
            loop = asyncio.get_running_loop()
            started = loop.time()
            seq = 0
            while not self.stop_event.is_set():
                delay = started + seq / self.rate - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)  # the workload's pace, not a synchronization
                value = self.value(seq)
                future = await producer.send(self.stream, value=value, partition=0)
                future.add_done_callback(lambda f, v=value: report(f, v))
                pending.add(future)
                future.add_done_callback(pending.discard)
                self.sent += 1
                seq += 1
            await producer.flush()
            if pending:
                await asyncio.wait(set(pending), timeout=60)
            self.undelivered = len(pending)
        finally:
            await producer.stop()


@dataclass
class GroupLedger:
    """What each group committed: the last offset the broker acknowledged, and offsets sent
    since whose outcome is unknown (the request failed: it may have been applied or not)."""

    acked: dict[str, int] = field(default_factory=dict)
    unknown: dict[str, set[int]] = field(default_factory=dict)
    commits: int = 0
    failures: int = 0
    resumed_wrong: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def committed(self, group: str, offset: int) -> None:
        with self.lock:
            self.acked[group] = offset
            self.unknown.pop(group, None)
            self.commits += 1

    def failed(self, group: str, offset: int) -> None:
        with self.lock:
            self.unknown.setdefault(group, set()).add(offset)
            self.failures += 1

    def possible(self, group: str) -> set[int]:
        """The offsets the broker may hold for `group` (an empty set: never committed)."""
        with self.lock:
            acked = {self.acked[group]} if group in self.acked else set()
            return acked | self.unknown.get(group, set())

    def check_resume(self, group: str, found: int | None) -> None:
        """A consumer taking a group over found `found` committed: it must be what we committed."""
        possible = self.possible(group)
        if possible and found not in possible:
            with self.lock:
                self.resumed_wrong.append(f"group {group}: found {found} committed, expected one of {sorted(possible)}")


def where(error: BaseException) -> str:
    """The innermost frames an exception came from (file:line in function, innermost first):
    one of a cancelled task another awaited shows that task's frames too."""
    frames = traceback.extract_tb(error.__traceback__)[-6:]
    return " <- ".join(f"{Path(f.filename).name}:{f.lineno} in {f.name}" for f in reversed(frames)) or "?"


class GroupCommitter(threading.Thread):
    """One client consuming `stream` for each of its groups in turn, for `session_s` each: it
    resumes from the group's committed offset (checked against the ledger), reads, and commits
    its position every 100 ms. Kinds: confluent, kafka-python, aiokafka."""

    def __init__(self, kind: str, bootstrap: str, stream: str, groups: list[str], ledger: GroupLedger,
                 session_s: float) -> None:
        super().__init__(daemon=True, name=f"committer-{kind}-{groups[0]}")
        self.kind, self.bootstrap, self.stream, self.groups = kind, bootstrap, stream, groups
        self.ledger, self.session_s = ledger, session_s
        self.stop_event = threading.Event()
        self.consumed = 0
        self.sessions = 0
        self.errors: list[str] = []
        self.leaked_cancellations: list[str] = []  # aiokafka only: see _run_aiokafka
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            if self.kind == "aiokafka":
                asyncio.run(self._run_aiokafka())
            else:
                while not self.stop_event.is_set():
                    for group in self.groups:
                        if self.stop_event.is_set():
                            break
                        try:
                            (self._confluent if self.kind == "confluent" else self._kafka_python)(group)
                        except Exception as error:  # a session broken by a restart: the next group goes on
                            self.errors.append(f"{group}: {error!r}")
                        self.sessions += 1
        except BaseException as error:
            self.failure = error

    def _until(self) -> float:
        return time.monotonic() + self.session_s

    def _confluent(self, group: str) -> None:
        import confluent_kafka

        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100, "topic.metadata.refresh.interval.ms": 1000,
            "log.connection.close": False, "log_level": 2})
        try:
            partition = confluent_kafka.TopicPartition(self.stream, 0)
            found = consumer.committed([partition], timeout=10)[0].offset
            self.ledger.check_resume(group, found if found >= 0 else None)
            partition.offset = found if found >= 0 else confluent_kafka.OFFSET_BEGINNING
            consumer.assign([partition])
            position, next_commit, until = max(found, 0), time.monotonic(), self._until()
            while time.monotonic() < until and not self.stop_event.is_set():
                for message in consumer.consume(200, timeout=COMMIT_INTERVAL_S):
                    offset = message.offset()
                    if message.error() is None and offset is not None:
                        position = offset + 1
                        self.consumed += 1
                if time.monotonic() >= next_commit and position > 0:
                    next_commit = time.monotonic() + COMMIT_INTERVAL_S
                    try:
                        consumer.commit(offsets=[confluent_kafka.TopicPartition(self.stream, 0, position)],
                                        asynchronous=False)
                        self.ledger.committed(group, position)
                    except Exception:  # unknown outcome: it may have been stored
                        self.ledger.failed(group, position)
        finally:
            consumer.close()

    def _kafka_python(self, group: str) -> None:
        from kafka import KafkaConsumer, TopicPartition
        from kafka.structs import OffsetAndMetadata

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap.split(","), group_id=group,
                                 enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                                 metadata_max_age_ms=1000, request_timeout_ms=10_000)
        try:
            partition = TopicPartition(self.stream, 0)
            consumer.assign([partition])
            found = consumer.committed(partition)
            self.ledger.check_resume(group, found)
            position, next_commit, until = found or 0, time.monotonic(), self._until()
            while time.monotonic() < until and not self.stop_event.is_set():
                for records in consumer.poll(timeout_ms=int(COMMIT_INTERVAL_S * 1000), max_records=200).values():
                    if records:
                        position = records[-1].offset + 1
                        self.consumed += len(records)
                if time.monotonic() >= next_commit and position > 0:
                    next_commit = time.monotonic() + COMMIT_INTERVAL_S
                    try:
                        consumer.commit({partition: OffsetAndMetadata(position, "", -1)})
                        self.ledger.committed(group, position)
                    except Exception:  # unknown outcome: it may have been stored
                        self.ledger.failed(group, position)
        finally:
            consumer.close(autocommit=False)

    async def _run_aiokafka(self) -> None:
        while not self.stop_event.is_set():
            for group in self.groups:
                if self.stop_event.is_set():
                    break
                try:
                    await self._aiokafka(group)
                except Exception as error:
                    self.errors.append(f"{group}: {error!r}")
                except asyncio.CancelledError as error:
                    current = asyncio.current_task()
                    if current is not None and current.cancelling():
                        raise  # this task was cancelled: it stops
                    # Nothing cancelled this task: aiokafka let the cancellation of one of its own
                    # tasks out (its stop() and coordinator cancel their tasks and await them; one
                    # cancelled before it first ran raises CancelledError in the caller, as in
                    # aio-libs/aiokafka#647). A session broken by the client, as by a restart:
                    # noted with where it came from, and the next group goes on.
                    self.leaked_cancellations.append(f"{group}: {error!r} at {where(error)}")
                self.sessions += 1

    async def _aiokafka(self, group: str) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap.split(","), group_id=group,
                                    enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                                    metadata_max_age_ms=1000, request_timeout_ms=10_000)
        await consumer.start()
        try:
            partition = TopicPartition(self.stream, 0)
            consumer.assign([partition])
            found = await consumer.committed(partition)
            self.ledger.check_resume(group, found)
            position, next_commit, until = found or 0, time.monotonic(), self._until()
            while time.monotonic() < until and not self.stop_event.is_set():
                batches = await consumer.getmany(partition, timeout_ms=int(COMMIT_INTERVAL_S * 1000), max_records=200)
                for records in batches.values():
                    if records:
                        position = records[-1].offset + 1
                        self.consumed += len(records)
                if time.monotonic() >= next_commit and position > 0:
                    next_commit = time.monotonic() + COMMIT_INTERVAL_S
                    try:
                        await consumer.commit({partition: position})
                        self.ledger.committed(group, position)
                    except Exception:  # unknown outcome: it may have been stored
                        self.ledger.failed(group, position)
                    except asyncio.CancelledError:  # the same, and the session ends (_run_aiokafka)
                        self.ledger.failed(group, position)
                        raise
        finally:
            await consumer.stop()

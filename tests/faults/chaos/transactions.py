"""The campaign's transactional workload and its checker, after Jepsen's analysis of Bufstream's
transactions (2024): transactional producers write every one of several streams in each
transaction and commit or abort at random while the nemeses strike; read_committed consumers read
every stream throughout; at the end a fresh read_committed read of every stream is the final
history.

Each record's value names its transaction, stream and place (`<writer>-<txn>-<stream>-<i>`), so
the checker (`check_transactions`, pure) knows what every read means. A transaction's outcome is
what its producer was told: committed, aborted, or unknown (the call failed or the producer was
lost: either is allowed, but all or nothing). Anomaly kinds:
- aborted_read: a read_committed reader saw a record of a transaction whose abort was acknowledged;
- lost_commit: a reader that read to the end lacks a record of an acknowledged commit;
- torn: a reader saw part of a transaction (some of its records, in any of its streams);
- txn_order: readers saw a stream's records in different orders, or a transaction's records of
  a stream out of the order they were sent in, or one record twice;
- txn_phantom: a record no transactional writer sent.
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests.faults.chaos.checker import Anomaly
from tests.faults.workload import LogTail
from tests.support.waiting import wait_until

TXN_KINDS = ("aborted_read", "lost_commit", "torn", "txn_order", "txn_phantom")
TXN_STREAMS = ("chaos-tx-a", "chaos-tx-b")
TXN_TIMEOUT_MS = 10_000  # a transaction its lost producer left open is aborted after this
CALL_TIMEOUT_S = 15.0


@dataclass
class Txn:
    name: str  # <writer>-<number>
    writes: dict[str, list[bytes]]  # stream -> values, in the order sent
    outcome: str = "unknown"  # "committed" | "aborted" | "unknown"
    ended: float = 0.0


def parse(value: bytes | None) -> tuple[str, str, int] | None:
    """(transaction name, stream, place) of a workload value; None for anything else."""
    if value is None:
        return None
    try:
        writer, number, rest = value.decode().split("-", 2)
        stream, _, place = rest.rpartition("-")
        return f"{writer}-{number}", stream, int(place)
    except ValueError:
        return None


class TxnWriter(threading.Thread):
    """One transactional id: transactions writing 1-3 records to every stream, committed or
    aborted at random; a failed call leaves the outcome unknown and a new producer instance
    (the same transactional id: it fences the old one) takes over."""

    def __init__(self, bootstrap: str, name: str, streams: Sequence[str], seed: int,
                 abort_probability: float = 0.3, pause_s: float = 0.0) -> None:
        super().__init__(daemon=True, name=f"txn-{name}")
        self.bootstrap, self.writer, self.streams = bootstrap, name, list(streams)
        self.rng = random.Random(seed)
        self.abort_probability = abort_probability
        self.pause_s = pause_s  # between one transaction's end and the next one's begin
        self.txns: list[Txn] = []
        self.instances = 0
        self.stop_event = threading.Event()
        self.failure: BaseException | None = None
        self._old: list[Any] = []  # producers given up on: kept, not destroyed mid-campaign

    def _producer(self) -> Any:
        import confluent_kafka

        self.instances += 1
        producer = confluent_kafka.Producer({
            "bootstrap.servers": self.bootstrap, "transactional.id": f"chaos-{self.writer}", "linger.ms": 2,
            "transaction.timeout.ms": TXN_TIMEOUT_MS, "message.timeout.ms": TXN_TIMEOUT_MS - 1000,
            "topic.metadata.refresh.interval.ms": 1000, "log_level": 2})
        producer.init_transactions(CALL_TIMEOUT_S)
        return producer

    def run(self) -> None:
        from confluent_kafka import KafkaException

        producer: Any = None
        number = 0
        try:
            while not self.stop_event.is_set():
                if producer is None:
                    try:
                        producer = self._producer()
                    except KafkaException:
                        producer = None
                        self.stop_event.wait(0.5)  # back off while the coordinator is unreachable
                        continue
                number += 1
                tag = f"{self.writer}-{number:06d}"
                txn = Txn(tag, {s: [f"{tag}-{s}-{i}".encode() for i in range(self.rng.randint(1, 3))]
                                for s in self.streams})
                self.txns.append(txn)
                abort = self.rng.random() < self.abort_probability
                try:
                    producer.begin_transaction()
                    for stream, values in txn.writes.items():
                        for value in values:
                            producer.produce(stream, value)
                    if abort:
                        producer.abort_transaction(CALL_TIMEOUT_S)
                        txn.outcome = "aborted"
                    else:
                        producer.commit_transaction(CALL_TIMEOUT_S)
                        txn.outcome = "committed"
                except KafkaException as error:
                    if error.args and error.args[0].txn_requires_abort():
                        try:
                            producer.abort_transaction(CALL_TIMEOUT_S)
                            txn.outcome = "aborted"
                        except KafkaException:
                            self._old.append(producer)
                            producer = None
                    else:  # timed out or fatal: the outcome is unknown; a new instance goes on
                        self._old.append(producer)
                        producer = None
                txn.ended = time.monotonic()
                if self.pause_s:
                    self.stop_event.wait(self.pause_s)  # the workload's pace, not a synchronization
        except BaseException as error:
            self.failure = error

    def finish(self, timeout: float = 60.0) -> list[Txn]:
        self.stop_event.set()
        self.join(timeout)
        assert not self.is_alive(), f"writer {self.writer} did not stop"
        assert self.failure is None, f"writer {self.writer} failed: {self.failure!r}"
        return self.txns


class CommittedReader(threading.Thread):
    """A read_committed consumer (confluent-kafka) of every stream from its start, through the faults."""

    def __init__(self, bootstrap: str, streams: Sequence[str], name: str) -> None:
        super().__init__(daemon=True, name=name)
        self.bootstrap, self.streams, self.reader = bootstrap, list(streams), name
        self.reads: dict[str, list[tuple[int, bytes | None]]] = {s: [] for s in streams}
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.failure: BaseException | None = None
        self.log = LogTail(name)

    def positions(self) -> dict[str, int]:
        with self.lock:
            return {s: reads[-1][0] + 1 if reads else 0 for s, reads in self.reads.items()}

    def run(self) -> None:
        import confluent_kafka

        try:
            consumer = confluent_kafka.Consumer({
                "bootstrap.servers": self.bootstrap, "group.id": f"chaos-{self.reader}", "enable.auto.commit": False,
                "isolation.level": "read_committed", "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
                "topic.metadata.refresh.interval.ms": 1000, "log.connection.close": False,
                **self.log.config("fetch,consumer,topic")})
            consumer.assign([confluent_kafka.TopicPartition(s, 0, confluent_kafka.OFFSET_BEGINNING)
                             for s in self.streams])
            try:
                while not self.stop_event.is_set():
                    for message in consumer.consume(500, timeout=0.1):
                        if message.error() is None:
                            with self.lock:
                                self.reads[message.topic()].append((message.offset(), message.value()))
            finally:
                consumer.close()
        except BaseException as error:
            self.failure = error

    def finish(self, final: Mapping[str, list[tuple[int, bytes | None]]],
               timeout: float = 60.0) -> dict[str, list[tuple[int, bytes | None]]]:
        """Wait until it has read every stream up to the last record of the final read, then stop."""
        lasts = {s: reads[-1][0] for s, reads in final.items() if reads}
        wait_until(lambda: self.failure is not None or all(self.positions()[s] > last for s, last in lasts.items()),
                   timeout, lambda: f"{self.reader} reading up to {lasts} (at {self.positions()}){self.log.shown()}")
        self.stop_event.set()
        self.join(15)
        assert self.failure is None, f"{self.reader} failed: {self.failure!r}"
        return self.reads


def check_transactions(txns: Sequence[Txn], readers: Mapping[str, Mapping[str, list[tuple[int, bytes | None]]]],
                       final: Mapping[str, list[tuple[int, bytes | None]]]) -> list[Anomaly]:
    """Every transactional anomaly of what the readers read (each to the end of every stream)
    and of the final read (a reader too)."""
    by_name = {t.name: t for t in txns}
    everyone = dict(readers) | {"the final read": final}
    out: list[Anomaly] = []
    for reader, streams in everyone.items():
        seen: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))  # txn -> stream -> places
        for stream, reads in streams.items():
            for offset, value in reads:
                parsed = parse(value)
                txn = by_name.get(parsed[0]) if parsed is not None else None
                if parsed is None or txn is None or value not in txn.writes.get(stream, []):
                    out.append(Anomaly("txn_phantom", 0.0, f"{reader} read {value!r} at {stream}@{offset}, "
                                                           f"which no transactional writer sent there"))
                    continue
                if txn.outcome == "aborted":
                    out.append(Anomaly("aborted_read", txn.ended, f"{reader} read {value!r} at {stream}@{offset}; "
                                                                  f"its transaction's abort was acknowledged"))
                seen[txn.name][stream].append(parsed[2])
        for name, places in seen.items():
            txn = by_name[name]
            for stream, got in places.items():
                if got != sorted(set(got)):
                    out.append(Anomaly("txn_order", txn.ended, f"{reader} read {name}'s records of {stream} as "
                                                               f"{got}, sent as {list(range(len(txn.writes[stream])))}"))
            count = sum(len(set(p)) for p in places.values())
            total = sum(len(v) for v in txn.writes.values())
            if count < total and txn.outcome != "aborted":
                out.append(Anomaly("torn", txn.ended, f"{reader} read {count} of {name}'s {total} records "
                                                      f"({ {s: sorted(p) for s, p in places.items()} }, "
                                                      f"outcome {txn.outcome})"))
        out += [Anomaly("lost_commit", txn.ended, f"{reader} never read {txn.name}, whose commit was acknowledged")
                for txn in txns if txn.outcome == "committed" and txn.name not in seen]
        for stream, reads in streams.items():  # the same records at the same offsets in the same order
            truth = final.get(stream, [])
            if reads != truth:
                where = next((i for i, (a, b) in enumerate(zip(reads, truth, strict=False)) if a != b),
                             min(len(reads), len(truth)))
                out.append(Anomaly("txn_order", 0.0, f"{reader}'s {stream} differs from the final read at read "
                                                     f"#{where}: {reads[where:where + 2]} vs {truth[where:where + 2]}"))
    return out


class TxnWorkload:
    """The writers and the reader of the campaign's transactional streams."""

    def __init__(self, bootstrap: str, writers: int, seed: int, streams: Sequence[str] = TXN_STREAMS,
                 pause_s: float = 0.0) -> None:
        self.bootstrap, self.streams = bootstrap, list(streams)
        self.writers = [TxnWriter(bootstrap, f"w{n}", streams, seed + n, pause_s=pause_s) for n in range(writers)]
        self.readers = [CommittedReader(bootstrap, streams, "committed-reader")]

    def start(self) -> TxnWorkload:
        for thread in [*self.writers, *self.readers]:
            thread.start()
        return self

    def outcomes(self) -> dict[str, int]:
        counts = dict.fromkeys(("committed", "aborted", "unknown"), 0)
        for writer in self.writers:
            for txn in writer.txns:
                counts[txn.outcome] += 1
        return counts

    def stop_writers(self) -> list[Txn]:
        """Stop the writers (their last transaction ended); every transaction they began."""
        return [txn for writer in self.writers for txn in writer.finish()]

    def finish(self, cluster: Any) -> list[Anomaly]:
        """Once the writers stopped: wait for every transaction to end (the coordinator aborts
        those of lost producers), read every stream read_committed, let the readers read as far,
        check."""
        from tests.faults.harness import high_watermark, node_address, read_committed_log

        txns = self.stop_writers()
        final: dict[str, list[tuple[int, bytes | None]]] = {}
        for stream in self.streams:
            def settled(stream: str = stream) -> tuple[str, int, int] | None:
                leader, hw = high_watermark(cluster, stream, timeout=30)
                address = node_address(cluster, leader)
                stable, start = list_offsets(address, stream, -1, 1), list_offsets(address, stream, -2, 0)
                return (address, start, stable) if stable == hw else None
            address, start, end = wait_until(settled, TXN_TIMEOUT_MS / 1000 + 30,
                                             f"every transaction on {stream} ended (LSO at the high watermark)")
            final[stream] = read_committed_log(address, stream, start, end)
        readers = {reader.reader: reader.finish(final) for reader in self.readers}
        return check_transactions(txns, readers, final)


def list_offsets(address: str, stream: str, timestamp: int, isolation: int) -> int:
    from tests.support.kafka import raw_request
    from vdl_wire import messages as m

    request = m.ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[m.ListOffsetsRequest.ListOffsetsTopic(
        name=stream, partitions=[m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])
    partition = raw_request(address, request, 5).topics[0].partitions[0]
    assert partition.error_code == 0, f"ListOffsets {stream} at {address}: error {partition.error_code}"
    return int(partition.offset)

"""Rounds of "a node cut off from the others" (Raft links only: clients still reach every node)
with one producer per client library (confluent-kafka, kafka-python, aiokafka and Apache Kafka's
Java client), each bootstrapped with the cut-off node first, as a new
user would configure it (client defaults but acks=all and idempotence). Per round and client:
how long acknowledged writes stopped (the longest gap between two acknowledgements around the
cut), for producers running at the cut and for new ones started at it ("(new)": from the cut to
their first acknowledgement, at most); after each round heals, every acknowledged record must be
in the stream exactly once. A new producer's stall counts its client's start-up too (librdkafka
waits 500 ms before it asks for a producer id, a Java producer is built in the harness JVM), so
the table also gives it from the producer's first send, and each client's start-up without a
cut: the producers running at the cut, started at the round's beginning on the same machine,
from their start to their first acknowledgement.

Shapes (3 nodes, as tests/faults/chaos/nemesis.py draws them):
    isolate-leader  the stream's leader cut off from both others
    minority        a follower cut off from both others
    bridge          the leader's link to one follower cut: that follower hears only the third
                    node, which hears both (the cut-off node named first is that follower)

`python -m tests.faults.cutoff --rounds N` (make cutoff ROUNDS=N) prints the table of stalls.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import itertools
import logging
import math
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.faults.chaos.world import World, start_world
from tests.faults.harness import high_watermark, node_address, read_all, wait_for_full_isr, wait_until
from tests.faults.workload import Acks
from tests.support.waiting import within

CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")
JAVA = "java"
# Running at the cut / started at it.
MEASURED = tuple(f"{client}{suffix}" for suffix in ("", " (new)") for client in (*CLIENTS, JAVA))
SHAPES = ("isolate-leader", "minority", "bridge")
STREAM = "cutoff"
RATE_PER_S = 50.0
WARM_ACKS = 20  # acknowledgements each producer has before the cut
RESUMED_ACKS = 20  # ... and after it, before the round heals
OBSERVE_S = 30.0  # how long a round waits for every producer to resume


@dataclass
class Round:
    shape: str
    cut_node: int
    stalls: dict[str, float] = field(default_factory=dict)  # client -> seconds without acknowledgements
    from_send: dict[str, float] = field(default_factory=dict)  # new producers: the stall from their first send
    startup: dict[str, float] = field(default_factory=dict)  # running ones: start to first ack, no cut


class JavaProducer(threading.Thread):
    """Apache Kafka's Java producer (tests/support/java_client.py: one shared harness JVM),
    acks=all and idempotent (its defaults), writing `<name>-<i>` every 1/RATE_PER_S s. The
    harness reports acknowledgements when asked: their times are those of the first poll that
    counted them (polled every POLL_S)."""

    POLL_S = 0.05

    def __init__(self, java: Any, name: str, bootstrap: str, acks: Acks) -> None:
        super().__init__(daemon=True, name=f"cutoff-{name}")
        self.kind, self.client, self.java, self.bootstrap, self.acks = "java", name, java, bootstrap, acks
        self.stop_event = threading.Event()
        self.failure: BaseException | None = None
        self.undelivered = -1
        self.times: list[float] = []  # one per acknowledgement, at the poll that saw it
        self.started = self.first_send = math.nan

    def run(self) -> None:
        self.started = time.monotonic()
        try:
            self.java.producer(self.client, self.bootstrap, acks="all", **{"linger.ms": 5})
            self.first_send = time.monotonic()  # the harness starts sending as it answers
            self.java.call("produce_in_background", name=self.client, task=self.client, topic=STREAM,
                           prefix=self.client, interval_ms=int(1000 / RATE_PER_S))
            while not self.stop_event.wait(self.POLL_S):  # a measurement's sampling period
                count = self.java.call("task_status", task=self.client)["count"]
                now = time.monotonic()
                self.times += [now] * (count - len(self.times))
            result = self.java.call("task_stop", task=self.client)
            for event in result["events"]:
                self.acks.add(self.client, int(event["offset"]), str(event["value"]).encode())
            for error in result["errors"]:
                self.acks.error(f"{self.client}: {error['error']}: {error['message']}")
            self.undelivered = 0 if result["done"] else -1
        except BaseException as error:  # surfaced by the round
            self.failure = error


CLIENT_DEBUG = "broker,topic,eos,metadata"  # librdkafka's debug contexts kept (not msg: one line per batch)
CLIENT_LOG_LINES = 200


class _LineKeeper(logging.Logger):
    """A logger for librdkafka that keeps its lines (the last ones: a bounded deque) and prints none."""

    def __init__(self, lines: collections.deque[str]) -> None:
        super().__init__("cutoff-librdkafka", logging.DEBUG)
        self.lines = lines

    def handle(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{time.monotonic():.3f} {record.getMessage()}")


class Producer(threading.Thread):
    """Values `<name>-<seq>` at RATE_PER_S with acks=all until stopped; every acknowledgement
    timed in `acks` (Acks.timed)."""

    def __init__(self, kind: str, name: str, bootstrap: str, acks: Acks) -> None:
        super().__init__(daemon=True, name=f"cutoff-{name}")
        self.kind, self.client, self.bootstrap, self.acks = kind, name, bootstrap, acks
        self.stop_event = threading.Event()
        self.failure: BaseException | None = None
        self.undelivered = -1
        self.started = self.first_send = math.nan  # thread start; first send, once the client is built
        # librdkafka's debug log, its last lines: what a producer that never resumes was doing
        # (its broker states, metadata and producer-id requests) goes into the round's failure.
        self.client_log: collections.deque[str] = collections.deque(maxlen=CLIENT_LOG_LINES)

    def value(self, seq: int) -> bytes:
        return f"{self.client}-{seq:08d}".encode()

    def _paced(self) -> Iterator[int]:
        started = time.monotonic()
        for seq in itertools.count():
            if self.stop_event.is_set():
                return
            delay = started + seq / RATE_PER_S - time.monotonic()
            if delay > 0:
                self.stop_event.wait(delay)  # pacing the workload, not synchronization
            if seq == 0:
                self.first_send = time.monotonic()
            yield seq

    def run(self) -> None:
        self.started = time.monotonic()
        try:
            if self.kind == "confluent-kafka":
                self._confluent()
            elif self.kind == "kafka-python":
                self._kafka_python()
            else:
                asyncio.run(self._aiokafka())
        except BaseException as error:  # surfaced by the round
            self.failure = error

    def _confluent(self) -> None:
        import confluent_kafka

        producer = confluent_kafka.Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                                             "enable.idempotence": True, "linger.ms": 5,
                                             "log.connection.close": False, "debug": CLIENT_DEBUG},
                                            logger=_LineKeeper(self.client_log))

        def report(error: Any, message: Any) -> None:
            if error is not None:
                self.acks.error(f"{self.client}: {error}")
            else:
                self.acks.add(self.client, message.offset(), message.value())

        for seq in self._paced():
            producer.produce(STREAM, self.value(seq), partition=0, on_delivery=report)
            producer.poll(0)
        self.undelivered = producer.flush(60)

    def _kafka_python(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap.split(","), acks="all", enable_idempotence=True,
                                 linger_ms=5)
        try:
            for seq in self._paced():
                value = self.value(seq)
                future = producer.send(STREAM, value=value, partition=0)
                future.add_callback(lambda md, v=value: self.acks.add(self.client, md.offset, v))
                future.add_errback(lambda exc, v=value: self.acks.error(f"{self.client} {v!r}: {exc!r}"))
            producer.flush(60)
            self.undelivered = 0
        finally:
            producer.close(5)

    async def _aiokafka(self) -> None:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap.split(","), acks="all", enable_idempotence=True,
                                    linger_ms=5)
        await producer.start()
        pending: set[asyncio.Future[Any]] = set()
        try:
            started = time.monotonic()
            for seq in itertools.count():
                if self.stop_event.is_set():
                    break
                await asyncio.sleep(max(0.0, started + seq / RATE_PER_S - time.monotonic()))  # pacing
                if seq == 0:
                    self.first_send = time.monotonic()
                value = self.value(seq)
                future = await producer.send(STREAM, value=value, partition=0)
                pending.add(future)
                future.add_done_callback(lambda f, v=value: self._aiokafka_done(f, v, pending))
            await within(asyncio.gather(*pending, return_exceptions=True), 60)
            self.undelivered = 0
        finally:
            await producer.stop()

    def _aiokafka_done(self, future: asyncio.Future[Any], value: bytes, pending: set[asyncio.Future[Any]]) -> None:
        pending.discard(future)
        if future.exception() is not None:
            self.acks.error(f"{self.client} {value!r}: {future.exception()!r}")
        else:
            self.acks.add(self.client, future.result().offset, value)


def stall(times: Sequence[float], cut: float) -> float:
    """The longest time without an acknowledgement across the cut: the largest gap between two
    consecutive acknowledgements where the later one came after the cut (from the cut itself
    when none came before it)."""
    before = [t for t in times if t < cut]
    after = sorted(t for t in times if t >= cut)
    previous = before[-1] if before else cut
    longest = 0.0
    for t in after:
        longest = max(longest, t - previous)
        previous = t
    return longest


def p99(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)] if ordered else float("nan")


def _leader(world: World) -> int:
    return wait_until(lambda: world.leader_of(STREAM), 60, f"a leader of {STREAM}")


def _cut(world: World, shape: str) -> int:
    """Cut the Raft links of `shape`; the node clients should not be held by."""
    leader = _leader(world)
    others = [n for n in world.node_ids if n != leader]
    if shape == "isolate-leader":
        world.links.partition([[leader], others])
        return leader
    if shape == "minority":
        world.links.partition([[others[0]], [leader, others[1]]])
        return others[0]
    world.links.cut(leader, others[0])  # bridge: others[1] hears both
    return others[0]


def run_round(world: World, shape: str, number: int, java: Any = None) -> Round:
    target = _pick_target(world, shape)
    bootstrap = ",".join(node_address(world.cluster, n) for n in [target, *[n for n in world.node_ids if n != target]])
    acks = Acks()

    def start(suffix: str) -> list[Any]:
        started: list[Any] = [Producer(kind, f"r{number}{kind[:2]}{suffix}", bootstrap, acks) for kind in CLIENTS]
        if java is not None:
            started.append(JavaProducer(java, f"r{number}ja{suffix}", bootstrap, acks))
        for producer in started:
            producer.start()
        return started

    producers = start("")

    def ack_times(producer: Any) -> list[float]:
        if isinstance(producer, JavaProducer):
            return list(producer.times)
        return [t for t, client, _, _ in acks.timed() if client == producer.client]

    def counts() -> Counter[str]:
        return Counter({p.client: len(ack_times(p)) for p in producers})

    def failed() -> str:
        return "; ".join(f"{p.client}: {p.failure!r}" for p in producers if p.failure is not None)

    try:
        wait_until(lambda: all(counts()[p.client] >= WARM_ACKS for p in producers) or failed(), 60,
                   lambda: f"every producer acknowledged before the cut: {dict(counts())} {acks.errors[-3:]}")
        assert not failed(), failed()
        cut_node = _cut(world, shape)
        cut = time.monotonic()
        before = counts()
        # New producers too, started at the cut: a new user's first Metadata comes from the
        # cut-off node, before or after it notices.
        late = start("n")
        producers += late

        def not_resumed() -> list[Any]:
            now = counts()
            return [p for p in producers if now[p.client] < before[p.client] + RESUMED_ACKS]

        wait_until(lambda: not not_resumed() or failed(),
                   OBSERVE_S, lambda: f"every producer resumed after cutting off node {cut_node} ({shape}): "
                                      f"{dict(counts())} (before {dict(before)}), cut at {cut:.3f}"
                                      + stuck_logs(not_resumed()))
        result = Round(shape, cut_node)
        for producer in producers:
            times = ack_times(producer)
            if producer in late:
                result.stalls[producer.kind + " (new)"] = stall(times, cut)
                result.from_send[producer.kind] = stall(times, producer.first_send)
            else:
                result.stalls[producer.kind] = stall(times, cut)
                result.startup[producer.kind] = times[0] - producer.started
    finally:
        world.links.heal()
        for producer in producers:
            producer.stop_event.set()
        for producer in producers:
            producer.join(90)
    assert not failed(), failed()
    stuck = {p.client: p.undelivered for p in producers if p.undelivered != 0 or p.is_alive()}
    assert not stuck, f"records never delivered: {stuck}"
    check_exactly_once(world, acks)
    return result


def stuck_logs(stuck: Iterable[Any]) -> str:
    """The client logs kept of producers that did not resume (librdkafka's: the others keep none)."""
    return "".join(f"\n--- {p.client}'s last client log lines:\n" + "\n".join(p.client_log)
                   for p in stuck if getattr(p, "client_log", None))


def _pick_target(world: World, shape: str) -> int:
    """The node the round will cut off (named first in the bootstrap list)."""
    leader = _leader(world)
    if shape == "isolate-leader":
        return leader
    return next(n for n in world.node_ids if n != leader)


def check_exactly_once(world: World, acks: Acks) -> None:
    """Every acknowledged value is in the stream exactly once, at the offset it was acknowledged at."""
    leader, hw = high_watermark(world.cluster, STREAM, timeout=60)
    stored = read_all(node_address(world.cluster, leader), STREAM, 0, hw)
    occurrences = Counter(value for _, value in stored.values())
    acked = acks.snapshot()
    problems = [f"{value!r} acknowledged at {offset}, stored {occurrences[value]} time(s)"
                for _, offset, value in acked if occurrences[value] != 1 or stored.get(offset, (None, None))[1] != value]
    assert not problems, f"{len(problems)} acknowledged records not stored exactly once: {problems[:5]}"


def run_rounds(directory: Path, rounds: int, seed: int = 7, with_java: bool = False) -> list[Round]:
    """`with_java`: the Java client too (needs `make jars`; one harness JVM for every round)."""
    world = start_world(directory, 3, seed=seed, streams=[STREAM])
    with contextlib.ExitStack() as stack:
        stack.callback(world.close)
        java = None
        if with_java:
            from tests.support.java_client import JavaClients
            java = stack.enter_context(JavaClients(directory))
        wait_for_full_isr(world.cluster, STREAM, timeout=60)
        results = []
        for number in range(rounds):
            shape = SHAPES[number % len(SHAPES)]
            results.append(run_round(world, shape, number, java))
            wait_for_full_isr(world.cluster, STREAM, timeout=60)
        return results


def table(results: Sequence[Round]) -> str:
    """Per shape and client, p99 over the rounds in seconds: the stall of producers running at
    the cut; of new ones started at it, from the cut (the goal's measure: start-up included) and
    from their first send; and the client's start-up without a cut (from the start of the
    producers running at the cut to their first acknowledgement)."""
    header = ("running", "new: from cut", "from 1st send", "start-up, no cut")
    lines = [f"{'shape':<16}{'client':<17}{'rounds':>7}" + "".join(f"{h:>18}" for h in header)]
    for shape in [*SHAPES, "all"]:
        chosen = [r for r in results if shape in (r.shape, "all")]
        if not chosen:
            continue
        for client in (*CLIENTS, JAVA):
            columns = [[r.stalls[client] for r in chosen if client in r.stalls],
                       [r.stalls[f"{client} (new)"] for r in chosen if f"{client} (new)" in r.stalls],
                       [r.from_send[client] for r in chosen if client in r.from_send],
                       [r.startup[client] for r in chosen if client in r.startup]]
            if not columns[0]:
                continue
            lines.append(f"{shape:<16}{client:<17}{len(columns[0]):>7}" + "".join(f"{p99(c):>18.2f}" for c in columns))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-java", action="store_true", help="leave the Java client out")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vdl-cutoff-") as directory:
        results = run_rounds(Path(directory), args.rounds, args.seed, with_java=not args.no_java)
    for number, result in enumerate(results):
        stalls = "  ".join(f"{client} {seconds:.2f} s" for client, seconds in result.stalls.items())
        stalls += "  from first send: " + "  ".join(f"{c} {s:.2f} s" for c, s in result.from_send.items())
        stalls += "  start-up, no cut: " + "  ".join(f"{c} {s:.2f} s" for c, s in result.startup.items())
        print(f"round {number:3d} {result.shape:<15} node {result.cut_node} cut off: {stalls}")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

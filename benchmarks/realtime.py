"""End-to-end latency of Spark's real-time mode through Spark's own Kafka connector, for
bench_connector: events produced at a steady rate into one topic, a query
`readStream.format("kafka") -> writeStream.format("kafka")` with `trigger(realTime=...)` copying
them to another, and a consumer of the copy taking each event's age when it arrives.

Real-time mode (Spark 4.1+, `trigger(realTime="...")` in PySpark 4.2) runs long-lived tasks that
read, transform and write records as they come, for stateless queries in update mode; its
sources are Spark's Kafka source only (Python data sources such as format("vdl") cannot join),
its sinks Spark's Kafka sink, foreach writers, the console and memory sinks. The trigger's
duration is how often it checkpoints, not a latency bound.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

PROBE_DIGITS = 19  # a probe's value starts with its send time in ns, 19 digits
PADDING = b"x" * 81  # 100-byte values, as the other benchmarks
WARM_UP = b"warm-up"


def start_copy(spark, bootstrap: str, source: str, target: str, checkpoint: Path, trigger: str = "1 minute"):  # noqa: ANN001, ANN201
    """The real-time query: source -> target, key and value unchanged."""
    return (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source).option("startingOffsets", "latest").load()
            .select("key", "value")
            .writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", target)
            .option("checkpointLocation", str(checkpoint)).outputMode("update")
            .trigger(realTime=trigger).start())


def copy_latencies(bootstrap: str, source: str, target: str, rate: int, seconds: float,
                   warm_up_timeout_s: float = 120.0) -> list[float]:
    """Produce to `source` at `rate` events/s for `seconds` (after probes show the query is
    copying), consume `target`; each event's send-to-arrival time in ms."""
    import confluent_kafka

    arrivals: list[float] = []
    copying = threading.Event()  # a warm-up probe came through
    stop = threading.Event()
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-realtime",
                                         "enable.auto.commit": False, "fetch.wait.max.ms": 10,
                                         "fetch.error.backoff.ms": 0})
    consumer.assign([confluent_kafka.TopicPartition(target, 0, confluent_kafka.OFFSET_END)])

    def consume() -> None:
        while not stop.is_set():
            message = consumer.poll(0.05)
            if message is None or message.error() is not None:
                continue
            if message.value().startswith(WARM_UP):
                copying.set()
            else:
                arrivals.append((time.time_ns() - int(message.value()[:PROBE_DIGITS])) / 1e6)

    thread = threading.Thread(target=consume, daemon=True, name="realtime-consumer")
    thread.start()
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    try:
        deadline = time.monotonic() + warm_up_timeout_s
        while not copying.wait(0.1):  # until the query is up, its tasks reading and writing
            if time.monotonic() > deadline:
                raise TimeoutError(f"the real-time query copied nothing within {warm_up_timeout_s} s")
            producer.produce(source, WARM_UP)
            producer.flush(10)
        expected = int(rate * seconds)
        per_tick = max(1, rate // 1000)
        started = time.perf_counter()
        sent = 0
        while sent < expected:
            delay = started + sent / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            for _ in range(per_tick):
                producer.produce(source, b"%019d" % time.time_ns() + PADDING)
            sent += per_tick
            producer.poll(0)
        producer.flush(30)
        deadline = time.monotonic() + 30
        while len(arrivals) < expected and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(10)
        consumer.close()
    if len(arrivals) < expected:
        raise RuntimeError(f"only {len(arrivals)} of {expected} events came through the real-time query")
    return arrivals

"""Apache Kafka's own Java client and command-line tools, driven from the tests.

`JavaClients` is one JVM running tests/support/java/KafkaHarness.java (compiled by `make jars`
into jvm/lib/harness/): producers, consumers and admin clients of kafka-clients 4.4, created and
used by name over stdin/stdout, so one JVM start (seconds on this machine) serves many
operations. A test that needs two clients at once on separate threads (a producer and a group
consumer across a kill -9, say) starts them as background tasks in the same JVM:

    with JavaClients(tmp_path) as java:
        java.producer("p", bootstrap, acks="all")
        java.send("p", "orders", ["a", "b"])                # [{"partition", "offset", "timestamp"}]
        java.consumer("c", bootstrap, **{"group.id": "g", "auto.offset.reset": "earliest"})
        java.call("subscribe", name="c", topics=["orders"])
        java.poll("c", min_records=2)                       # [{"offset", "key", "value", ...}]
        java.call("produce_in_background", name="p", task="t", topic="orders", count=1000)
        java.call("task_stop", task="t")                    # {"events": acknowledged records, "errors"}

Every operation the harness knows is `java.call(op, name=..., **args)` (see KafkaHarness.run and
adminOp); a Java exception raises JavaError carrying its class name. Keys and values are UTF-8
strings. `kafka_tool(tool, *args)` runs one of Kafka's bin/*.sh tools by its main class.
"""

from __future__ import annotations

import json
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vdl_dev.jvm import java, jvm_lib, kafka_classpath

LOG4J_CONFIG = Path(__file__).resolve().parent / "java" / "log4j2.properties"
CALL_TIMEOUT_S = 180.0

# Kafka 4.4's bin/<tool>.sh -> its main class (kafka-run-class.sh <class>).
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-streams-application-reset": "org.apache.kafka.tools.StreamsResetter",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
    # no bin/ script: Kafka's system tests run these with kafka-run-class.sh
    "transactional-message-copier": "org.apache.kafka.tools.TransactionalMessageCopier",
    "client-compatibility-test": "org.apache.kafka.tools.ClientCompatibilityTest",
}


class JavaError(Exception):
    """An operation threw in the JVM: `error` is the exception's class name (TimeoutException,
    InvalidPartitionsException, ...)."""

    def __init__(self, error: str, message: str, causes: list[str] | None = None) -> None:
        super().__init__(f"{error}: {message}" + (f" (caused by {'; '.join(causes)})" if causes else ""))
        self.error = error
        self.message = message


def java_command(main_class: str, *args: str, heap: str = "256m", classpath: str | None = None) -> list[str]:
    """`java` running `main_class` on Kafka's classpath, with the tests' logging (stderr, WARN)."""
    return [java(), f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={LOG4J_CONFIG}", "-cp", classpath or kafka_classpath(), main_class, *args]


def harness_classpath(needed: str = "KafkaHarness", kafka: str | None = None) -> str:
    """The tests' compiled Java programs (tests/support/java/) and Kafka's jars (or `kafka`, a
    classpath with another release's client); `needed` is the class the caller runs (missing
    after a checkout that added it: `make jars` compiles it)."""
    harness = jvm_lib() / "harness"
    if not (harness / f"{needed}.class").exists():
        raise FileNotFoundError(f"{harness}/{needed}.class is missing: run `make jars`")
    return f"{harness}:{kafka or kafka_classpath()}"


class JavaClients:
    """One harness JVM; its stderr (Kafka's warnings) goes to `log_dir`/java-clients-N.log.
    `kafka`: the classpath of another release's client (vdl_dev.jvm.kafka3_client_classpath)
    instead of Kafka 4.4's; the harness, compiled against 4.4, runs on it as long as the
    operations used exist in that release."""

    _count = 0

    def __init__(self, log_dir: Path, kafka: str | None = None) -> None:
        JavaClients._count += 1
        self.log_path = Path(log_dir) / f"java-clients-{JavaClients._count}.log"
        self._log = self.log_path.open("w")
        self._process = subprocess.Popen(java_command("KafkaHarness", classpath=harness_classpath(kafka=kafka)),
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
                                         bufsize=1)
        self._lock = threading.Lock()
        self._next_id = 0
        ready = self._read_line(CALL_TIMEOUT_S)
        if json.loads(ready) != {"ready": True}:
            raise RuntimeError(f"the Java harness did not start: {ready!r} (log: {self.log_path})")

    def __enter__(self) -> JavaClients:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read_line(self, timeout_s: float) -> str:
        assert self._process.stdout is not None
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self._process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout_s)
        if not line or not line[0]:
            self._process.kill()
            raise RuntimeError(f"the Java harness gave no answer within {timeout_s:.0f} s; its log:\n{self.log_tail()}")
        return line[0]

    def log_tail(self, lines: int = 40) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def call(self, op: str, timeout_s: float = CALL_TIMEOUT_S, **args: Any) -> Any:
        """Run one harness operation; its result, or JavaError."""
        with self._lock:
            self._next_id += 1
            assert self._process.stdin is not None
            self._process.stdin.write(json.dumps({"id": self._next_id, "op": op, **args}) + "\n")
            self._process.stdin.flush()
            answer = json.loads(self._read_line(timeout_s))
        if not answer["ok"]:
            raise JavaError(answer["error"], answer["message"], answer.get("causes"))
        return answer["result"]

    # -- conveniences over call()

    def producer(self, name: str, bootstrap: str, security: dict[str, str] | None = None, **props: Any) -> None:
        self.call("producer", name=name, props=_props(bootstrap, security, props))

    def consumer(self, name: str, bootstrap: str, security: dict[str, str] | None = None, **props: Any) -> None:
        self.call("consumer", name=name, props=_props(bootstrap, security, props))

    def admin(self, name: str, bootstrap: str, security: dict[str, str] | None = None, **props: Any) -> None:
        self.call("admin", name=name, props=_props(bootstrap, security, props))

    def send(self, name: str, topic: str, values: list[str], keys: list[str | None] | None = None) -> list[dict]:
        records = [{"value": value, "key": keys[i] if keys else None} for i, value in enumerate(values)]
        return self.call("send", name=name, topic=topic, records=records)

    def poll(self, name: str, min_records: int = 1, timeout_ms: int = 30_000) -> list[dict]:
        return self.call("poll", name=name, min_records=min_records, timeout_ms=timeout_ms,
                         timeout_s=timeout_ms / 1000 + CALL_TIMEOUT_S)

    def tool(self, tool: str, *args: str, input: str | None = None, timeout_s: float = CALL_TIMEOUT_S) -> ToolResult:
        """One of Kafka's command-line tools (`tool` as its bin/ script is named) run to its end in
        this JVM (KafkaHarness.runTool): what `kafka_tool` does, without a JVM start per run."""
        done = self.call("tool", main=TOOLS[tool], args=list(args), input=input or "", timeout_s=timeout_s)
        return ToolResult(done["returncode"], done["stdout"], done["stderr"])

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                self.call("exit", timeout_s=60)
                self._process.wait(30)
            except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
        self._log.close()


def _props(bootstrap: str, security: dict[str, str] | None, props: dict[str, Any]) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap, **(security or {}), **{k.replace("_", "."): str(v) for k, v in props.items()}}


@dataclass(frozen=True)
class ToolResult:
    returncode: int
    stdout: str
    stderr: str


def kafka_tool(tool: str, *args: str, timeout_s: float = 180.0, input: str | None = None) -> ToolResult:
    """One of Kafka's command-line tools (`tool` as its bin/ script is named), run to its end."""
    done = subprocess.run(java_command(TOOLS[tool], *args), input=input, capture_output=True, text=True,
                          timeout=timeout_s)
    return ToolResult(done.returncode, done.stdout, done.stderr)


def write_properties(path: Path, props: dict[str, str]) -> Path:
    """A client .properties file (the tools' --command-config / --producer.config)."""
    path.write_text("".join(f"{key}={value}\n" for key, value in props.items()))
    return path

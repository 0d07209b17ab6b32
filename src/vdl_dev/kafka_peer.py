"""Apache Kafka beside VDL: a local KRaft cluster from the jars `make jars` fetched, for benchmarks
and comparisons (`python -m vdl_dev.kafka_peer --nodes 3` runs one in the foreground).

Every node runs in combined mode (`process.roles=broker,controller`, a static quorum of all
nodes), on loopback ports from VDL_DEV_PORT_RANGE (free_base_port: client ports P..P+n-1,
controller ports P+n..P+2n-1), with its logs and data in `DIR/node<i>/`. The JVM is started as
Kafka's own scripts start it (kafka-server-start.sh: a 1 GiB heap, G1 with its pause target).

Durability, stated because it is what a comparison with VDL turns on:
- Kafka's defaults (`flush_every_message=False`): `log.flush.interval.messages` and
  `log.flush.interval.ms` unset, so Kafka never fsyncs on its own schedule; an acknowledged
  write is in the page cache of the replicas (acks=all: every in-sync replica), written back
  by the kernel later. It survives a process crash, not a power loss of every replica.
- `flush_every_message=True`: `log.flush.interval.messages=1`, the broker-wide form of the
  topic setting `flush.messages=1` (FLUSH_EVERY_MESSAGE below sets it per topic): each replica
  fsyncs its log after every appended batch, before the leader answers acks=1 and before a
  follower fetches on, so acks=all is answered once every in-sync replica has fsync'd -- as
  VDL answers acks=all once a majority has fsync'd.
- Three nodes: replication factor 3 and `min.insync.replicas=2` for every topic (the usual
  production setting; Kafka's default of 1 would let acks=all succeed on the leader alone).
  One node: replication factor 1.
Everything else is Kafka's default.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vdl_dev.dev_cluster import die_with_parent, fetch_metadata, free_base_port
from vdl_dev.jvm import kafka_command

# Topic config: fsync after every appended batch (Kafka's `flush.messages`), the per-topic form
# of flush_every_message. A topic created with it on a default cluster compares with VDL's fsync.
FLUSH_EVERY_MESSAGE = {"flush.messages": "1"}
# kafka-server-start.sh's heap and kafka-run-class.sh's performance options
KAFKA_JVM_OPTIONS = ("-Xms1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
                     "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true")
KAFKA_HEAP = "1g"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
LOG4J2 = """\
# Kafka's server log in the node's directory; warnings and errors on the console
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
appender.console.filter.threshold.type = ThresholdFilter
appender.console.filter.threshold.level = warn
rootLogger.level = info
rootLogger.appenderRef.file.ref = FILE
rootLogger.appenderRef.console.ref = STDOUT
"""


class KafkaPeerError(RuntimeError):
    """A Kafka node did not start, or exited."""


@dataclass
class KafkaNode:
    node_id: int
    directory: Path
    client_port: int
    controller_port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def client_address(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    @property
    def console(self) -> Path:
        return self.directory / "console.log"

    def tail(self, lines: int = 30) -> str:
        text = []
        for path in (self.console, self.directory / "server.log"):
            with contextlib.suppress(OSError):
                text += [f"[{path.name}] {line}" for line in path.read_text(errors="replace").splitlines()[-lines:]]
        return "\n".join(text)


def cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (Kafka's Uuid). Like
    Kafka's Uuid.randomUuid, never one starting with "-", which a command line takes for an option."""
    while True:
        identity = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not identity.startswith("-"):
            return identity


class KafkaPeer:
    """`nodes` Apache Kafka brokers (combined mode, KRaft) on loopback, data under `data_dir`.

        with KafkaPeer(3, tmp_path) as kafka:
            producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "all"})
    """

    def __init__(self, nodes: int, data_dir: Path, *, flush_every_message: bool = False,
                 settings: dict[str, str] | None = None) -> None:
        if nodes < 1:
            raise ValueError(f"a Kafka cluster needs at least one node, got {nodes}")
        self.data_dir = Path(data_dir)
        self.flush_every_message = flush_every_message
        base = free_base_port(2 * nodes)
        self.nodes = {i: KafkaNode(i, self.data_dir / f"node{i}", base + i - 1, base + nodes + i - 1)
                      for i in range(1, nodes + 1)}
        self.settings = self.durability_settings() | dict(settings or {})

    # ------------------------------------------------------------------ settings

    def durability_settings(self) -> dict[str, str]:
        """What decides when an acknowledged write is safe (see the module docstring)."""
        nodes = len(self.nodes)
        min_isr = str(min(2, nodes))
        settings = {"default.replication.factor": str(nodes), "min.insync.replicas": min_isr,
                    "offsets.topic.replication.factor": str(nodes),
                    "transaction.state.log.replication.factor": str(nodes),
                    "transaction.state.log.min.isr": min_isr,
                    "share.coordinator.state.topic.replication.factor": str(nodes),
                    "share.coordinator.state.topic.min.isr": min_isr}
        if self.flush_every_message:
            settings["log.flush.interval.messages"] = "1"
        return settings

    def describe(self) -> str:
        """One line for a benchmark table: the durability Kafka runs with."""
        flush = ("fsync after every batch (log.flush.interval.messages=1)" if self.flush_every_message
                 else "page cache, no fsync of its own (defaults)")
        return f"Apache Kafka 4.4, {len(self.nodes)} node(s), KRaft combined, {flush}, min.insync.replicas=" \
               f"{self.settings['min.insync.replicas']}"

    def _properties(self, node: KafkaNode) -> str:
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes.values())
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{node.client_port},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.client_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(node.directory / "data"),
        } | self.settings
        return "".join(f"{key}={value}\n" for key, value in settings.items())

    # ------------------------------------------------------------------ addresses

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.client_address for n in self.nodes.values())

    def pids(self) -> list[int]:
        return [n.pid for n in self.nodes.values() if n.running and n.pid is not None]

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout_s: float = START_TIMEOUT_S) -> KafkaPeer:
        """Format every node's storage, start them, and wait until each lists every broker."""
        identity = cluster_id()
        formats = []
        for node in self.nodes.values():
            node.directory.mkdir(parents=True, exist_ok=True)
            (node.directory / "server.properties").write_text(self._properties(node))
            (node.directory / "log4j2.properties").write_text(LOG4J2.format(log=node.directory / "server.log"))
            formats.append((node, subprocess.Popen(
                kafka_command("kafka.tools.StorageTool", "format", "--config", str(node.directory / "server.properties"),
                              "--cluster-id", identity, heap="256m"),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
        for node, process in formats:
            output, _ = process.communicate(timeout=120)
            if process.returncode != 0:
                raise KafkaPeerError(f"formatting node {node.node_id} failed: {output.decode(errors='replace')}")
        for node in self.nodes.values():
            self._spawn(node)
        try:
            self.wait_ready(timeout_s)
        except BaseException:
            self.kill_all()
            raise
        return self

    def _spawn(self, node: KafkaNode) -> None:
        command = kafka_command("kafka.Kafka", str(node.directory / "server.properties"), heap=KAFKA_HEAP,
                                jvm_options=(*KAFKA_JVM_OPTIONS,
                                             f"-Dlog4j2.configurationFile={node.directory / 'log4j2.properties'}",
                                             f"-Dkafka.logs.dir={node.directory}"))
        with open(node.console, "ab") as console:
            node.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=console,
                                            stderr=subprocess.STDOUT, cwd=node.directory,
                                            start_new_session=True, preexec_fn=die_with_parent)

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until every node's Metadata lists every node; raises with a node's log tail if one
        exits or the deadline passes."""
        deadline = time.monotonic() + timeout_s
        expected = set(self.nodes)
        for node in self.nodes.values():
            while True:
                if not node.running:
                    raise KafkaPeerError(f"Kafka node {node.node_id} exited "
                                         f"({node.process.poll() if node.process else None}):\n{node.tail()}")
                with contextlib.suppress(OSError, ValueError):
                    if {b.node_id for b in fetch_metadata(node.client_address, [], 1.0).brokers} == expected:
                        break
                if time.monotonic() > deadline:
                    raise KafkaPeerError(f"Kafka node {node.node_id} not ready within {timeout_s} s:\n{node.tail()}")
                time.sleep(0.2)

    def stop_all(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM to every node at once (Kafka's controlled shutdown), SIGKILL after timeout_s."""
        running = [n for n in self.nodes.values() if n.running]
        for node in running:
            _signal_group(node, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for node in running:
            assert node.process is not None
            try:
                node.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(node, signal.SIGKILL)
                node.process.wait(10)
            _signal_group(node, signal.SIGKILL)  # anything left in its group

    def kill_all(self) -> None:
        for node in self.nodes.values():
            if node.process is not None:
                _signal_group(node, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    node.process.wait(10)

    def __enter__(self) -> KafkaPeer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop_all()


def _signal_group(node: KafkaNode, sig: int) -> None:
    if node.process is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(node.process.pid, sig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vdl_dev.kafka_peer",
                                     description="Run Apache Kafka (KRaft, combined mode) on loopback until Ctrl-C.")
    parser.add_argument("--nodes", type=int, default=1, help="number of nodes (default 1)")
    parser.add_argument("--data-dir", type=Path, help="node<i>/ directories go here (default: a temporary one, removed)")
    parser.add_argument("--flush-every-message", action="store_true",
                        help="log.flush.interval.messages=1: fsync every batch before acknowledging")
    args = parser.parse_args(argv)
    directory = args.data_dir or Path(tempfile.mkdtemp(prefix="vdl-kafka-peer-"))
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    peer = KafkaPeer(args.nodes, directory, flush_every_message=args.flush_every_message)
    try:
        peer.start()
        print(f"kafka peer: {peer.describe()}; bootstrap servers: {peer.bootstrap_servers}; data in {directory}",
              flush=True)
        stop.wait()
        return 0
    except (KafkaPeerError, ValueError) as error:
        print(f"kafka peer: {error}", file=sys.stderr)
        return 1
    finally:
        peer.stop_all()
        if args.data_dir is None:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

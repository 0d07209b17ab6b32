"""Kafka Connect 4.4's distributed worker (connect-runtime, bin/connect-distributed.sh's main) on a
3-node VDL cluster, as a Kafka user runs it: the worker creates its three internal topics compacted
(it refuses to start otherwise) and checks them, joins its group, serves its REST API; a source
connector (tests/support/java/CountingSourceConnector.java: "line-0", "line-1"...) is created
through REST, with exactly.once.source.support=enabled (KIP-618: each batch and its source offsets
in one transaction), Connect creates its topic, and a read_committed reader finds every line once,
in order, across a kill -9 of the worker mid-work and a new worker resuming from the offsets
topic."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import free_port
from tests.support.java_client import harness_classpath, java_command
from tests.support.kafka import stream_set_configs
from tests.support.waiting import wait_until
from vdl_dev.dev_cluster import DevCluster

pytestmark = pytest.mark.timeout(300)

INTERNAL = ("connect-offsets", "connect-configs", "connect-status")
TOPIC = "counted"
COUNT = 2000


class Worker:
    """One distributed worker's JVM; stderr (Connect's warnings) in a log file."""

    def __init__(self, cluster: DevCluster, directory: Path, name: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        properties = directory / f"{name}.properties"
        properties.write_text("\n".join(f"{k}={v}" for k, v in {
            "bootstrap.servers": cluster.bootstrap_servers, "group.id": "connect-cluster",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": "connect-configs", "offset.storage.topic": "connect-offsets",
            "status.storage.topic": "connect-status",
            # A VDL stream has one partition (Connect's defaults: 25 offset, 5 status partitions).
            "offset.storage.partitions": 1, "status.storage.partitions": 1,
            "exactly.once.source.support": "enabled",
            # A killed task's open transaction is aborted this long after it began (60 s by
            # default): until then a starting worker waits, reading the offsets topic
            # read_committed up to its high watermark (Connect's TopicAdmin.endOffsets), as on Kafka.
            "producer.transaction.timeout.ms": 5000,
            # A departed worker's tasks go to the others at once (5 minutes by default).
            "scheduled.rebalance.max.delay.ms": 0,
            "listeners": self.url, "plugin.discovery": "service_load",
        }.items()) + "\n")
        self.log_path = directory / f"{name}.log"
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(
            java_command("org.apache.kafka.connect.cli.ConnectDistributed", str(properties), heap="512m",
                         classpath=harness_classpath("CountingSourceConnector")),
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read() or b"null")

    def wait_serving(self) -> dict[str, Any]:
        def serving() -> Any:
            assert self.process.poll() is None, f"the worker exited {self.process.returncode}:\n{self.log_tail()}"
            try:
                self.request("GET", "/connectors")  # 404 until the herder's resources are up
                return self.request("GET", "/")
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                return None
        answer: dict[str, Any] = wait_until(serving, 90, lambda: f"the worker serving REST; log:\n{self.log_tail()}",
                                            interval=0.5)
        return answer

    def log_tail(self, count: int = 30) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-count:])

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # connect-distributed.sh's shutdown hook: leave the group
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()



class CommittedReader:
    """The connector's topic from offset 0, read_committed: (offset, value) in order."""

    def __init__(self, cluster: DevCluster) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "reader",
                                  "isolation.level": "read_committed", "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        self.values: list[str] = []

    def read_until(self, count: int, timeout: float = 90) -> None:
        def enough() -> bool:
            for message in self.consumer.consume(500, 0.2):
                if message.error() is None:
                    self.values.append(message.value().decode())
            return len(self.values) >= count
        wait_until(enough, timeout, lambda: f"{count} records (read {len(self.values)})")


def test_distributed_worker_runs_an_exactly_once_source_across_a_kill(cluster: DevCluster, tmp_path: Path) -> None:
    worker = Worker(cluster, tmp_path, "worker-1")
    reader = None
    try:
        assert worker.wait_serving()["version"] == "4.4.0"
        # Created by the worker as it started, compacted as it demands (and checks).
        from confluent_kafka import KafkaException

        def described(name: str) -> dict[str, str] | None:
            try:
                return stream_set_configs(cluster.bootstrap_servers, name)
            except KafkaException:
                return None  # not created yet: the herder starts its stores after REST answers
        for name in INTERNAL:
            assert wait_until(lambda n=name: described(n), 60, f"{name} created") == {"cleanup.policy": "compact"}
        assert worker.request("PUT", "/connectors/counting/config", {
            "connector.class": "CountingSourceConnector", "tasks.max": "1", "topic": TOPIC, "count": str(COUNT),
            "poll.delay.ms": "10", "topic.creation.default.replication.factor": "3",
            "topic.creation.default.partitions": "1"})["name"] == "counting"

        def task_state() -> str | None:
            try:
                tasks = worker.request("GET", "/connectors/counting/status")["tasks"]
            except urllib.error.HTTPError:
                return None  # 404 until the connector's status is written
            return tasks[0]["state"] if tasks else None
        wait_until(lambda: task_state() == "RUNNING", 60, lambda: f"the task running; log:\n{worker.log_tail()}")
        reader = CommittedReader(cluster)
        reader.read_until(300)
        worker.kill()  # mid-work: an open transaction of records and their source offsets
    finally:
        worker.stop()

    successor = Worker(cluster, tmp_path, "worker-2")
    try:
        successor.wait_serving()
        assert reader is not None
        reader.read_until(COUNT)
        assert reader.values == [f"line-{i}" for i in range(COUNT)]
        assert successor.request("GET", "/connectors") == ["counting"]
    finally:
        successor.stop()
        if reader is not None:
            reader.consumer.close()

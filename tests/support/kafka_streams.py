"""Kafka Streams applications (tests/support/java/*App.java, compiled by `make jars`) run as a
user runs them: one JVM per instance, its stdout lines ("STATE RUNNING", answers to interactive
queries) collected, its stderr (Kafka's warnings) in a log file; and a read_committed reader of
their output streams.

    app = StreamsApp("StreamsTopologiesApp", [bootstrap, "app", str(state), "a", "1"], tmp_path / "a.log")
    app.wait_running()
    app.query("GET payment-totals c1")      # the app's answer line, without the query
    app.kill()                              # kill -9
"""

from __future__ import annotations

import subprocess
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from tests.support.java_client import harness_classpath, java_command
from tests.support.waiting import wait_until


class StreamsApp:
    """One instance of a Streams application: `main_class ARGS...`, closed cleanly at the end of
    its stdin. Interactive queries are lines on its stdin, each answered by a stdout line that
    starts with the query."""

    def __init__(self, main_class: str, args: Sequence[str], log: Path) -> None:
        self.log_path = log
        self._log = log.open("w")
        self.process = subprocess.Popen(java_command(main_class, *args, classpath=harness_classpath(main_class)),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
                                        bufsize=1)
        self.lines: list[str] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def states(self) -> list[str]:
        with self._lock:
            return [line.removeprefix("STATE ") for line in self.lines if line.startswith("STATE ")]

    def _check_alive(self) -> None:
        with self._lock:
            failed = [line for line in self.lines if line.startswith("FAILED") or line == "STATE ERROR"]
        assert not failed, f"{failed}; log:\n{self.log_tail()}"

    def wait_running(self, timeout: float = 90) -> None:
        def running() -> bool:
            self._check_alive()
            states = self.states()
            return bool(states) and states[-1] == "RUNNING"
        wait_until(running, timeout, lambda: f"the app RUNNING (states {self.states()}); log:\n{self.log_tail()}")

    def query(self, query: str, until: Callable[[str], bool] = lambda answer: True, timeout: float = 30) -> str:
        """The app's answer to `query` (the rest of its answer line), asked again until `until`
        holds for it."""
        prefix = query + " "
        answers: list[str] = []

        def ask() -> bool:
            self._check_alive()
            with self._lock:
                start = len(self.lines)
            assert self.process.stdin is not None
            self.process.stdin.write(query + "\n")
            self.process.stdin.flush()

            def answer() -> str | None:
                with self._lock:
                    return next((line[len(prefix):] for line in self.lines[start:] if line.startswith(prefix)), None)
            answers.append(wait_until(answer, 10, f"an answer to {query!r}"))
            return until(answers[-1])
        wait_until(ask, timeout, lambda: f"{query!r} answered as expected; answers {answers[-3:]}", interval=0.2)
        return answers[-1]

    def log_tail(self, count: int = 30) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-count:])

    def kill(self) -> None:
        """kill -9: no close, no commit, its transaction left open."""
        self.process.kill()
        self.process.wait(30)
        self._log.close()

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


class CommittedReader:
    """Streams from offset 0, read_committed: every (key, value) of each, in order."""

    def __init__(self, bootstrap: str, streams: Sequence[str]) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                                  "isolation.level": "read_committed", "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(stream, 0, OFFSET_BEGINNING) for stream in streams])
        self.seen: dict[str, list[tuple[str, str | None]]] = {stream: [] for stream in streams}

    def read(self) -> None:
        """What has come since the last read."""
        for message in self.consumer.consume(500, 0.2):
            assert message.error() is None, message.error()
            topic, key, value = message.topic(), message.key(), message.value()
            assert topic is not None and key is not None, message
            self.seen[topic].append((key.decode(), None if value is None else value.decode()))

    def read_until(self, condition: Callable[[dict[str, list[tuple[str, str | None]]]], bool],
                   timeout: float = 60) -> None:
        def holds() -> bool:
            self.read()
            return condition(self.seen)
        wait_until(holds, timeout, lambda: f"the output to hold; seen {self.seen}")

    def close(self) -> None:
        self.consumer.close()

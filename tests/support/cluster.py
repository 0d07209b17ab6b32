"""Real `vdl-broker` processes and clusters for tests: the one place that starts them.

`start_broker(tmp_path, **config)` starts one broker on a free loopback port and returns once it
printed its readiness line (with a deadline; no blind sleeps). Keyword arguments become flags:
`auto_create_streams=True` -> `--auto-create-streams`, `max_request_bytes=4096` ->
`--max-request-bytes 4096`. `start_cluster(directory, nodes)` starts a vdl_dev DevCluster and
waits until every node lists every broker. Processes run this interpreter's modules
(`python -m ...`), so PYTHONPATH decides which tree they import.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.waiting import wait_until as wait_until  # the helper every test imports from here
from vdl_dev.dev_cluster import DevCluster, free_base_port, ports_needed

REPO = Path(__file__).resolve().parents[2]
READY_PREFIX = "vdl-broker listening on "
START_TIMEOUT_S = 20.0


def free_port() -> int:
    """A free loopback port below the ephemeral range, so a restart can bind it again."""
    return free_base_port(1)


BROKER_COMMAND = (sys.executable, "-m", "vdl_broker.server.main")
VDL_CLI = (sys.executable, "-m", "vdl_client.cli")
# Test clusters skip fsync: kill -9 keeps the page cache, so process crashes test the same
# protocol paths and the 2-core machine is spared the flushes.
DEFAULT_CLUSTER_SETTINGS: dict[str, Any] = {"log_level": os.environ.get("VDL_TEST_LOG_LEVEL", "WARNING"),
                                            "fsync": False}


def broker_command() -> list[str]:
    return list(BROKER_COMMAND)


def _flags(config: dict[str, Any]) -> list[str]:
    flags: list[str] = []
    for key, value in config.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is False:
            flags.append("--no-" + key.replace("_", "-"))
        elif value is not None:
            flags += [flag, str(value)]
    return flags


@dataclass
class BrokerProcess:
    data_dir: Path
    port: int
    config: dict[str, Any] = field(default_factory=dict)
    process: subprocess.Popen[str] | None = None
    output: deque[str] = field(default_factory=lambda: deque(maxlen=2000))
    log_path: Path | None = None
    command: tuple[str, ...] = BROKER_COMMAND

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def host(self) -> str:
        return "127.0.0.1"

    def start(self) -> BrokerProcess:
        command = [*self.command, "--data-dir", str(self.data_dir),
                   "--listen", self.bootstrap, *_flags(self.config)]
        self.log_path = self.data_dir.parent / f"broker-{self.port}.log"
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, env=env, cwd=REPO)
        ready, listening = threading.Event(), threading.Event()
        threading.Thread(target=self._pump, args=(self.process, ready, listening), daemon=True).start()
        # Its output ending is not yet its exit (poll() may still say running): only the
        # readiness line says it serves.
        if not ready.wait(START_TIMEOUT_S) or not listening.is_set() or self.process.poll() is not None:
            self.kill()
            raise RuntimeError(f"vdl-broker did not become ready:\n{self.recent_output()}")
        return self

    def _pump(self, process: subprocess.Popen[str], ready: threading.Event, listening: threading.Event) -> None:
        assert process.stdout is not None
        with open(self.log_path or os.devnull, "a") as sink:
            for line in process.stdout:
                self.output.append(line.rstrip("\n"))
                sink.write(line)
                if line.startswith(READY_PREFIX):
                    listening.set()
                    ready.set()
        ready.set()  # process ended: let start() notice instead of waiting out the deadline

    def recent_output(self, lines: int = 60) -> str:
        return "\n".join(list(self.output)[-lines:])

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def terminate(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait for a clean exit; returns the exit code."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise RuntimeError(f"vdl-broker ignored SIGTERM:\n{self.recent_output()}") from None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def restart(self) -> BrokerProcess:
        if self.alive():
            self.terminate()
        return self.start()


def start_broker(tmp_path: Path, command: tuple[str, ...] = BROKER_COMMAND, **config: Any) -> BrokerProcess:
    data_dir = Path(tmp_path) / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    config.setdefault("log_level", os.environ.get("VDL_TEST_LOG_LEVEL", "WARNING"))
    for attempt in range(3):
        broker = BrokerProcess(data_dir, free_port(), dict(config), command=command)
        try:
            return broker.start()
        except RuntimeError:
            # Another process may have taken the port between free_port() and bind: retry.
            if attempt == 2 or "address already in use" not in broker.recent_output().lower():
                raise
    raise AssertionError("unreachable")


def start_cluster(directory: Path, nodes: int = 3, settings: dict[str, Any] | None = None,
                  register: Callable[[DevCluster], None] | None = None, metrics: bool = True,
                  racks: dict[int, str] | None = None, **secure: Any) -> DevCluster:
    """Start a DevCluster under `directory` and wait until every node lists every broker.
    `register` is called with each cluster before it starts (the caller's finalizer). Test
    clusters serve metrics (DevCluster.metrics_urls()), so every test runs the counting code.
    `racks` gives nodes a rack (node id -> rack); `secure`: DevCluster's protocols, tls_dir,
    client_security, env."""
    merged = DEFAULT_CLUSTER_SETTINGS | dict(settings or {})
    for attempt in range(3):
        cluster = DevCluster(nodes, Path(directory) / f"attempt{attempt}",
                             free_base_port(ports_needed(nodes, metrics, secure.get("protocols", ()))),
                             command=broker_command(), settings=merged, metrics=metrics, racks=racks,
                             log_files=True, **secure)
        if register is not None:
            register(cluster)
        try:
            cluster.start(timeout_s=60)
            cluster.wait_for_brokers(timeout_s=60)
            return cluster
        except (RuntimeError, TimeoutError):
            output = "\n".join(line for n in cluster.nodes.values() for line in n.output).lower()
            cluster.kill_all()
            # Another process may have taken a port between free_base_port() and bind: retry.
            if attempt == 2 or "address already in use" not in output:
                raise
    raise AssertionError("unreachable")


def node_address(cluster: DevCluster, node_id: int) -> str:
    return cluster.nodes[node_id].client_address


def running_nodes(cluster: DevCluster) -> list[int]:
    return [i for i in cluster.node_ids() if cluster.nodes[i].running]


def ensure_all_running(cluster: DevCluster) -> None:
    """Bring a shared cluster back to full strength between tests (SIGCONT, restart dead nodes)."""
    for node_id in cluster.node_ids():
        node = cluster.nodes[node_id]
        if node.running:
            cluster.stop(node_id, signal.SIGCONT)
        else:
            cluster.restart(node_id, timeout_s=60)

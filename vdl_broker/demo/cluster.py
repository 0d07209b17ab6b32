"""The demo's local cluster: `DevCluster` (vdl_broker/dev_cluster.py) on free loopback ports.

FALLBACK (temporary, while the broker's cluster mode is being finished): when the 3-node
cluster cannot start, the demo runs one `vdl-broker` process instead and says so loudly.
Every broker runs in its own process group and is stopped in `stop()`; a broker also gets
SIGTERM from the kernel if the demo process dies without cleaning up (PR_SET_PDEATHSIG), so
nothing outlives the demo.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

READY_PREFIX = "vdl-broker listening on "
STATE_FILE = "cluster.json"  # node id -> pid and address, for notebook 03 (kill the leader)
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """preexec_fn: the kernel sends SIGTERM to this child when its parent dies (Linux only)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def free_port_range(count: int, attempts: int = 50) -> int:
    """A base port such that base .. base+count-1 are all free on 127.0.0.1 right now."""
    rng = random.Random()
    for _ in range(attempts):
        base = rng.randrange(20_000, 60_000 - count)
        sockets: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise RuntimeError(f"no {count} consecutive free ports found")


def broker_command() -> list[str]:
    script = Path(sys.executable).parent / "vdl-broker"
    return [str(script)] if script.exists() else [sys.executable, "-m", "vdl_broker.server.main"]


@dataclass
class SingleBroker:
    """FALLBACK: one `vdl-broker` subprocess (no replication)."""

    data_dir: Path
    port: int
    fsync: bool = True
    process: subprocess.Popen[str] | None = None
    output: deque[str] = field(default_factory=lambda: deque(maxlen=500))

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [*broker_command(), "--data-dir", str(self.data_dir), "--listen", self.bootstrap_servers,
                   "--log-level", "WARNING", *([] if self.fsync else ["--no-fsync"])]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                        preexec_fn=_die_with_parent, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        ready = threading.Event()
        threading.Thread(target=self._pump, args=(ready,), daemon=True).start()
        try:
            started = ready.wait(timeout_s) and self.process.poll() is None
        except BaseException:  # Ctrl-C while it starts
            self.stop()
            raise
        if not started:
            self.stop()
            raise RuntimeError("vdl-broker did not start:\n" + "\n".join(self.output))

    def _pump(self, ready: threading.Event) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line.rstrip("\n"))
            if line.startswith(READY_PREFIX):
                ready.set()
        ready.set()

    def stop(self, timeout_s: float = 15.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@dataclass
class DemoCluster:
    """What the demo needs from a running cluster."""

    kind: str  # "3-node dev cluster" | "single broker (FALLBACK)"
    nodes: int
    bootstrap_servers: str
    impl: Any  # DevCluster | SingleBroker
    data_dir: Path

    def node_pids(self) -> dict[int, int]:
        if isinstance(self.impl, SingleBroker):
            return {1: self.impl.process.pid} if self.impl.process is not None else {}
        return {i: n.pid for i, n in self.impl.nodes.items() if n.running and n.pid is not None}

    def write_state(self) -> Path:
        """DATA_DIR/cluster.json: bootstrap servers and node pids (notebook 03 reads it)."""
        path = self.data_dir / STATE_FILE
        addresses = ({1: self.bootstrap_servers} if isinstance(self.impl, SingleBroker)
                     else {i: n.client_address for i, n in self.impl.nodes.items()})
        state = {"kind": self.kind, "bootstrap_servers": self.bootstrap_servers,
                 "nodes": {str(i): {"pid": pid, "address": addresses[i]} for i, pid in self.node_pids().items()}}
        path.write_text(json.dumps(state, indent=2))
        return path

    def stop(self) -> None:
        if isinstance(self.impl, SingleBroker):
            self.impl.stop()
        else:
            self.impl.stop_all()


def start_cluster(nodes: int, data_dir: Path, *, fsync: bool = True, log: Any = print) -> DemoCluster:
    """Start `nodes` brokers under data_dir (DevCluster), or the single-broker FALLBACK."""
    data_dir.mkdir(parents=True, exist_ok=True)
    error: Exception | None = None
    try:
        from vdl_broker.dev_cluster import DevCluster
    except ImportError as exc:
        error = exc
    else:
        cluster = DevCluster(nodes, data_dir / "cluster", free_port_range(2 * nodes),
                             settings=None if fsync else {"fsync": False})
        started = time.monotonic()
        try:
            cluster.start()
        except (RuntimeError, TimeoutError) as exc:
            cluster.kill_all()
            error = exc
        except BaseException:  # Ctrl-C while the nodes start: none may outlive us
            cluster.kill_all()
            raise
        else:
            log(f"started a {nodes}-node VDL cluster in {time.monotonic() - started:.1f} s: "
                f"{cluster.bootstrap_servers}")
            return DemoCluster(f"{nodes}-node dev cluster", nodes, cluster.bootstrap_servers, cluster, data_dir)
    # FALLBACK while the broker's cluster mode is unfinished: one broker, clearly announced.
    reason = str(error).strip().splitlines()[-1] if error else "unknown"
    log(f"WARNING: the {nodes}-node cluster did not start ({reason}); "
        "FALLBACK: running ONE broker without replication")
    broker = SingleBroker(data_dir / "single-broker", free_port_range(1), fsync=fsync)
    broker.start()
    log(f"started one VDL broker: {broker.bootstrap_servers}")
    return DemoCluster("single broker (FALLBACK)", 1, broker.bootstrap_servers, broker, data_dir)

"""DevCluster process management with a stub broker (a tiny script that reads node.toml, listens
on its client port and starts a child), plus fetch_metadata against a real broker."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import start_broker, wait_until
from vdl_broker.config import load_node_config
from vdl_dev.dev_cluster import DevCluster, fetch_metadata, free_base_port, ports_needed

pytestmark = pytest.mark.timeout(60)

STUB = textwrap.dedent("""
    import signal, socket, subprocess, sys, tomllib
    from pathlib import Path
    config = tomllib.loads(Path(sys.argv[2]).read_text())
    host, port = config["listen"].rsplit(":", 1)
    server = socket.create_server((host, int(port)))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    Path(config["data_dir"], "child.pid").write_text(str(child.pid))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("vdl-broker listening on " + config["listen"], flush=True)
    while True:
        connection, _ = server.accept()
        connection.close()
""")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child of an exited stub is reparented and reaped by init: treat it as gone.
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while alive(pid):
        assert time.monotonic() < deadline, f"process {pid} still alive"
        time.sleep(0.02)


@pytest.fixture
def stub(tmp_path: Path) -> list[str]:
    script = tmp_path / "stub_broker.py"
    script.write_text(STUB)
    return [sys.executable, str(script)]


def child_pid(cluster: DevCluster, node_id: int) -> int:
    return int((cluster.nodes[node_id].config.data_dir / "child.pid").read_text())


def test_start_kill_restart_stop_without_orphans(tmp_path: Path, stub: list[str]) -> None:
    port = free_base_port(6)
    with DevCluster(3, tmp_path / "c", port, command=stub) as cluster:
        cluster.start(timeout_s=30)
        assert cluster.bootstrap_servers == ",".join(f"127.0.0.1:{port + i}" for i in range(3))
        config = load_node_config(cluster.nodes[2].config_path)
        assert config.node_id == 2 and config.raft_listen == f"127.0.0.1:{port + 4}"
        assert [p.id for p in config.peers] == [1, 2, 3]
        socket.create_connection(("127.0.0.1", port + 1), timeout=5).close()
        victim = child_pid(cluster, 2)
        cluster.kill(2)
        assert not cluster.nodes[2].running and cluster.nodes[2].exit_codes[-1] == -signal.SIGKILL
        wait_gone(victim)  # the broker's own child died with its process group
        cluster.restart(2)
        assert cluster.nodes[2].running
        cluster.stop(1, signal.SIGSTOP)
        assert cluster.nodes[1].running
        cluster.stop(1, signal.SIGCONT)
        assert cluster.stop(3) == 0  # SIGTERM: clean exit
        children = [child_pid(cluster, i) for i in (1, 2)]
    for pid in children:
        wait_gone(pid)
    assert not any(n.running for n in cluster.nodes.values())


def test_run_dev_cluster_stops_every_node_on_sigterm(tmp_path: Path, stub: list[str]) -> None:
    port = free_base_port(ports_needed(2, metrics=True))
    code = (f"import sys; from pathlib import Path; from vdl_dev.dev_cluster import run_dev_cluster; "
            f"sys.exit(run_dev_cluster(2, Path({str(tmp_path / 'c')!r}), {port}, command={stub!r}))")
    launcher = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, cwd=Path(__file__).resolve().parents[3])
    try:
        assert launcher.stdout is not None
        lines: list[str] = []
        for line in launcher.stdout:
            lines.append(line)
            if "metrics:" in line:
                break
        assert any(line.endswith(f"bootstrap servers: 127.0.0.1:{port},127.0.0.1:{port + 1}\n")
                   for line in lines), lines
        # Metrics ports follow the client and raft ports.
        assert lines[-1] == (f"vdl dev-cluster: metrics: http://127.0.0.1:{port + 4}/metrics "
                             f"http://127.0.0.1:{port + 5}/metrics\n"), lines
        pids = [int((tmp_path / "c" / f"node{i}" / "data" / "child.pid").read_text()) for i in (1, 2)]
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(30) == 0
        for pid in pids:
            wait_gone(pid)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()


def test_start_broker_says_a_broker_that_failed_did_not_become_ready(tmp_path: Path) -> None:
    """A broker whose output ended without its readiness line failed, even if its exit is not
    seen yet: start_broker raises with its output (it returned the failed broker when the exit
    came a moment after the output's end, and the test using it failed later on "connection
    refused"). The stand-in prints an error, closes its output and exits a little later."""
    exits_later = ("sh", "-c", "echo 'vdl-broker: error: unrecognized arguments'; exec >&- 2>&-; exec sleep 5")
    with pytest.raises(RuntimeError, match="(?s)did not become ready.*unrecognized arguments"):
        start_broker(tmp_path, command=exits_later)


def test_fetch_metadata_names_the_leader(tmp_path: Path) -> None:
    broker = start_broker(tmp_path, auto_create_streams=True)
    try:
        fetch_metadata(broker.bootstrap, ["events"])  # auto-creates
        # The stream is listed (topic error 0) before its leader serves (the partition answers
        # LEADER_NOT_AVAILABLE meanwhile, as Kafka does): wait for the partition's leader.

        def served() -> Any:
            response = fetch_metadata(broker.bootstrap, ["events"])
            [topic] = response.topics
            return response if topic.error_code == 0 and topic.partitions[0].error_code == 0 else None

        response = wait_until(served, timeout=10, message="the auto-created stream never got a leader")
        assert response.topics[0].partitions[0].leader_id == response.brokers[0].node_id
        brokers_only = fetch_metadata(broker.bootstrap, [])
        assert brokers_only.topics == [] and len(brokers_only.brokers) == 1
    finally:
        broker.kill()


def test_echoed_lines_of_concurrent_nodes_never_run_together(tmp_path: Path) -> None:
    """`vdl dev-cluster` echoes every node's output from one thread per node next to its own
    lines; a reader parsing "bootstrap servers: ..." once got a node's log line glued to it."""
    class Pipe:
        """Like stdout on a pipe: each write is a system call that lets other threads run."""

        def __init__(self) -> None:
            self.parts: list[str] = []

        def write(self, text: str) -> None:
            self.parts.append(text)
            time.sleep(0)

        def flush(self) -> None:
            time.sleep(0)

        def getvalue(self) -> str:
            return "".join(self.parts)

    cluster = DevCluster(3, tmp_path, free_base_port(6))
    out = Pipe()
    lines = {f"thread {t} line {i} " + "x" * (i % 50) for t in range(8) for i in range(300)}
    by_thread = [sorted(line for line in lines if line.startswith(f"thread {t} ")) for t in range(8)]
    threads = [threading.Thread(target=lambda own=own: [cluster.say(line, out) for line in own]) for own in by_thread]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(out.getvalue().splitlines()) == sorted(lines)


def test_dev_cluster_auto_create_streams_lets_a_producer_write_a_new_stream(tmp_path: Path) -> None:
    """`vdl dev-cluster --auto-create-streams`: a stream is created on its first produce, as Kafka's
    default (confluent-kafka's test_consumer_memberid produces to a topic it never created)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    port = free_base_port(ports_needed(1, metrics=True))
    vdl = Path(sys.executable).with_name("vdl")
    launcher = subprocess.Popen([str(vdl), "dev-cluster", "--nodes", "1", "--data-dir", str(tmp_path / "c"),
                                 "--base-port", str(port), "--auto-create-streams"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert launcher.stdout is not None
        for line in launcher.stdout:
            if "press Ctrl-C" in line:
                break
        assert load_node_config(tmp_path / "c" / "node1" / "node.toml").auto_create_streams
        bootstrap = f"127.0.0.1:{port}"
        producer = Producer({"bootstrap.servers": bootstrap})
        for value in (b"first", b"second"):
            producer.produce("never-created", value)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "auto", "enable.auto.commit": False})
        consumer.assign([TopicPartition("never-created", 0, 0)])
        values = []
        deadline = time.monotonic() + 30
        while len(values) < 2 and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append((message.offset(), message.value()))
        consumer.close()
        assert values == [(0, b"first"), (1, b"second")]
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(30) == 0
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()

"""`vdl dev-cluster --nodes 3 --data-dir DIR --base-port P`: a local cluster of `vdl-broker`
subprocesses in the foreground (the CLI wiring is in vdl_dev/cli.py; this is the logic).

Node i (1-based) gets client port P + i - 1 and raft port P + nodes + i - 1 (with metrics on,
metrics port P + 2 * nodes + i - 1: http://HOST:PORT/metrics), and the directory DIR/node<i>/
holding its node.toml and its data (DIR/node<i>/data). With `protocols` (listener protocols,
e.g. ("SASL_SSL", "PLAINTEXT")) the first protocol takes the client port and each further one
the next block of `nodes` ports; `tls_dir` holds ca.pem and node<i>.pem/.key (vdl_dev/certs.py)
and `client_security` is how the launcher itself talks to the nodes. Every node runs in its own
process group, so a stop signals the broker and anything it started; an atexit hook and the
signal handlers of run_dev_cluster make sure no node outlives the launcher.

`DevCluster` is also the test harness for process-level fault tests: kill(node) (SIGKILL),
stop(node, sig) (SIGTERM and wait, or SIGSTOP/SIGCONT without waiting), restart(node),
leader_of(stream) (asks the nodes with a Kafka Metadata request).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from vdl_broker.config import NodeAddress, NodeConfig, dump_node_config, split_host_port
from vdl_broker.listeners import Listener
from vdl_client.connection import request_once
from vdl_client.security import SecuritySettings
from vdl_client.settings import VdlClientError
from vdl_wire.messages.metadata import MetadataRequest

READY_PREFIX = "vdl-broker listening on "
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
_PR_SET_PDEATHSIG = 1  # prctl(2)


def die_with_parent() -> None:
    """preexec_fn: the kernel sends SIGTERM to a node whose launcher died, even by SIGKILL
    (Linux only), so no node outlives the process that started it."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


PORT_RANGE_VARIABLE = "VDL_DEV_PORT_RANGE"  # "LOW-HIGH": where free_base_port looks (HIGH excluded)


def free_base_port(count: int, host: str = "127.0.0.1", attempts: int = 200) -> int:
    """The first of `count` consecutive ports that all bind on `host` right now, below the
    kernel's ephemeral range. A listen port inside that range can be taken while its node is
    down, by any outgoing connection drawing it as its source port or by a peer's reconnect loop
    connecting to itself (TCP self-connect), and then the node cannot restart. Processes that
    start clusters side by side (parallel test workers) give each its own range in
    VDL_DEV_PORT_RANGE, so one never takes a port another reserved for a node that is down."""
    low, high = port_range()
    if high - low <= count:
        raise ValueError(f"port range {low}-{high} (set {PORT_RANGE_VARIABLE} to change it) has no room for "
                         f"{count} consecutive ports")
    rng = random.Random()
    for _ in range(attempts):
        base = rng.randrange(low, high - count)
        try:
            with contextlib.ExitStack() as stack:
                for port in range(base, base + count):
                    stack.enter_context(socket.socket()).bind((host, port))
            return base
        except OSError:
            continue
    raise RuntimeError(f"no {count} consecutive free ports in {low}-{high} on {host}")


def port_range() -> tuple[int, int]:
    """VDL_DEV_PORT_RANGE if set, else the 12,000 ports below the kernel's ephemeral range."""
    setting = os.environ.get(PORT_RANGE_VARIABLE)
    if setting:
        try:
            low, high = (int(part) for part in setting.split("-"))
        except ValueError:
            raise ValueError(f"{PORT_RANGE_VARIABLE}={setting!r}: expected LOW-HIGH, e.g. 20000-26000") from None
        if not 1024 <= low < high <= 65536:
            raise ValueError(f"{PORT_RANGE_VARIABLE}={setting!r}: expected 1024 <= LOW < HIGH <= 65536")
        return low, high
    ephemeral_low = _ephemeral_port_low()
    return max(1024, ephemeral_low - 12_000), ephemeral_low


def _ephemeral_port_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def ports_needed(nodes: int, metrics: bool, protocols: Sequence[str] = ()) -> int:
    """Consecutive ports a cluster takes from its base port: client and raft ports per node, a
    metrics port per node when metrics are on, and one per node for each listener after the first."""
    return (3 if metrics else 2) * nodes + max(0, len(protocols) - 1) * nodes


def broker_command() -> list[str]:
    """The `vdl-broker` console script next to this interpreter, else the module."""
    script = Path(sys.executable).parent / "vdl-broker"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "vdl_broker.server.main"]


@dataclass
class NodeProcess:
    config: NodeConfig
    config_path: Path
    process: subprocess.Popen[str] | None = None
    output: deque[str] = field(default_factory=lambda: deque(maxlen=2000))
    ready: threading.Event = field(default_factory=threading.Event)
    exit_codes: list[int] = field(default_factory=list)

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def client_address(self) -> str:
        return self.config.client_address

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None


class DevCluster:
    """n local `vdl-broker` processes forming one cluster."""

    def __init__(self, nodes: int, data_dir: Path, base_port: int, *, host: str = "127.0.0.1",
                 command: Sequence[str] | None = None, settings: dict[str, Any] | None = None,
                 echo: bool = False, log_files: bool = False, metrics: bool = False, protocols: Sequence[str] = (),
                 tls_dir: Path | None = None, client_security: SecuritySettings | None = None,
                 env: dict[str, str] | None = None, racks: dict[int, str] | None = None) -> None:
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        ports = ports_needed(nodes, metrics, protocols)
        if not 0 < base_port <= 65535 - ports:
            raise ValueError(f"base port {base_port} leaves no room for {ports} ports")
        self.data_dir = Path(data_dir)
        self.host = host
        self.settings = dict(settings or {})
        self.command = list(command) if command is not None else broker_command()
        self.echo = echo
        self.log_files = log_files  # also append each node's output to DIR/node<i>/output.log
        self.client_security = client_security
        self.env = dict(env or {})
        self._say_lock = threading.Lock()
        first_extra = 3 if metrics else 2  # blocks of `nodes` ports before the extra listeners
        extra = {protocol: base_port + (first_extra + k) * nodes for k, protocol in enumerate(protocols[1:])}

        def listeners(i: int) -> list[Listener]:
            first = Listener(protocols[0], host, base_port + i - 1) if protocols else None
            return ([first] if first else []) + [Listener(p, host, start + i - 1) for p, start in extra.items()]

        # A node's rack is its own setting only, as in Kafka: it registers itself with it.
        members = [NodeAddress(i, f"{host}:{base_port + i - 1}", f"{host}:{base_port + nodes + i - 1}",
                               tuple(str(lst) for lst in listeners(i)))
                   for i in range(1, nodes + 1)]
        self.nodes: dict[int, NodeProcess] = {}
        for member in members:
            directory = self.data_dir / f"node{member.id}"
            host, port = split_host_port(member.client, "client")
            node_settings = dict(settings or {})
            if metrics:
                node_settings["metrics_listen"] = f"{host}:{base_port + 2 * nodes + member.id - 1}"
            if protocols:
                node_settings["listeners"] = listeners(member.id)
            if tls_dir is not None:
                node_settings |= {"ssl_certfile": str(tls_dir / f"node{member.id}.pem"),
                                  "ssl_keyfile": str(tls_dir / f"node{member.id}.key"),
                                  "ssl_cafile": str(tls_dir / "ca.pem")}
            config = NodeConfig(directory / "data", host, port, member.id, raft_listen=member.raft, peers=members,
                                **(node_settings | {"rack": (racks or {}).get(member.id)}))
            self.nodes[member.id] = NodeProcess(config, directory / "node.toml")
        self._atexit_registered = False

    # ------------------------------------------------------------------ addresses

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.client_address for n in self.nodes.values())

    def address(self, node_id: int, protocol: str | None = None) -> str:
        """Where clients of listener `protocol` (default: the first) reach node `node_id`."""
        config = self.nodes[node_id].config
        listener = next((lst for lst in config.client_listeners if protocol in (None, lst.protocol)), None)
        if listener is None:
            raise KeyError(f"node {node_id} has no {protocol} listener")
        return config.advertised_address(listener)

    def bootstrap_for(self, protocol: str) -> str:
        return ",".join(self.address(i, protocol) for i in self.node_ids())

    def metrics_urls(self) -> dict[int, str]:
        """node id -> http://HOST:PORT/metrics of the nodes serving metrics."""
        return {i: f"http://{n.config.metrics_listen}/metrics" for i, n in self.nodes.items()
                if n.config.metrics_listen}

    def node_ids(self) -> list[int]:
        return sorted(self.nodes)

    def add_node(self, wait: bool = True, timeout_s: float = START_TIMEOUT_S, peers: Sequence[int] | None = None,
                 **settings: Any) -> int:
        """Start one more node (the next id, on free ports) with `join = true` and every current
        node (or those of `peers`: a joining node needs one) as its peers: it joins the running
        cluster by itself. Returns its id."""
        node_id = max(self.nodes) + 1
        base = free_base_port(2, self.host)
        member = NodeAddress(node_id, f"{self.host}:{base}", f"{self.host}:{base + 1}")
        named = [NodeAddress(n.node_id, n.client_address, n.config.raft_listen or "") for n in self.nodes.values()
                 if peers is None or n.node_id in peers]
        directory = self.data_dir / f"node{node_id}"
        config = NodeConfig(directory / "data", self.host, base, node_id, raft_listen=member.raft,
                            peers=[*named, member], join=True, **(self.settings | settings))
        node = self.nodes[node_id] = NodeProcess(config, directory / "node.toml")
        node.config_path.parent.mkdir(parents=True, exist_ok=True)
        config.data_dir.mkdir(parents=True, exist_ok=True)
        node.config_path.write_text(dump_node_config(config))
        self._spawn(node_id)
        if wait:
            self.wait_ready([node_id], timeout_s)
        return node_id

    # ------------------------------------------------------------------ lifecycle

    def write_configs(self) -> None:
        for node in self.nodes.values():
            node.config_path.parent.mkdir(parents=True, exist_ok=True)
            node.config.data_dir.mkdir(parents=True, exist_ok=True)
            node.config_path.write_text(dump_node_config(node.config))

    def start(self, wait: bool = True, timeout_s: float = START_TIMEOUT_S) -> None:
        """Write node.toml files, start every node, and (by default) wait until all are ready."""
        self.write_configs()
        if not self._atexit_registered:
            atexit.register(self.kill_all)
            self._atexit_registered = True
        for node_id in self.nodes:
            self._spawn(node_id)
        if wait:
            self.wait_ready(timeout_s=timeout_s)

    def _spawn(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.running:
            raise RuntimeError(f"node {node_id} is already running")
        node.ready.clear()
        node.process = subprocess.Popen(
            [*self.command, "--config", str(node.config_path)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,  # its own process group: signals reach everything it starts
            preexec_fn=die_with_parent,
            env=dict(os.environ, PYTHONUNBUFFERED="1", **self.env),
        )
        threading.Thread(target=self._pump, args=(node, node.process), daemon=True,
                         name=f"dev-cluster-node{node_id}").start()

    def say(self, line: str, stream: TextIO | None = None) -> None:
        """One whole line on stdout (or `stream`): the nodes' echoed output comes from one thread
        per node, and print() writes the text and its newline separately, so lines of two
        threads could run together (a reader of "bootstrap servers: ..." then gets a node's log
        line glued to the addresses)."""
        with self._say_lock:
            out = stream or sys.stdout
            out.write(line + "\n")
            out.flush()

    def _pump(self, node: NodeProcess, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        with open(node.config_path.parent / "output.log", "a") if self.log_files else contextlib.nullcontext() as sink:
            for line in process.stdout:
                if sink is not None:
                    sink.write(line)
                self._handle_line(node, process, line.rstrip("\n"))

    def _handle_line(self, node: NodeProcess, process: subprocess.Popen[str], line: str) -> None:
        node.output.append(line)
        if self.echo:
            self.say(f"[node{node.node_id}] {line}")
        if line.startswith(READY_PREFIX) and node.process is process:
            node.ready.set()

    def wait_ready(self, node_ids: Sequence[int] | None = None, timeout_s: float = START_TIMEOUT_S) -> None:
        """Wait until the nodes printed their readiness line; raises with their output if one
        exits or the deadline passes."""
        deadline = time.monotonic() + timeout_s
        for node_id in node_ids or self.node_ids():
            node = self.nodes[node_id]
            while not node.ready.wait(0.05):
                if not node.running:
                    raise RuntimeError(f"node {node_id} exited ({self._exit_code(node)}) before it was ready:\n"
                                       + "\n".join(list(node.output)[-30:]))
                if time.monotonic() > deadline:
                    raise TimeoutError(f"node {node_id} not ready within {timeout_s} s:\n"
                                       + "\n".join(list(node.output)[-30:]))

    @staticmethod
    def _exit_code(node: NodeProcess) -> int | None:
        return node.process.poll() if node.process is not None else None

    def _signal_group(self, node: NodeProcess, sig: int) -> None:
        if node.process is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(node.process.pid, sig)

    def _wait_exit(self, node: NodeProcess, timeout_s: float) -> bool:
        assert node.process is not None
        try:
            code = node.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return False
        node.exit_codes.append(code)
        return True

    def stop(self, node_id: int, sig: int = signal.SIGTERM, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """Send `sig` to the node's process group. SIGSTOP/SIGCONT return at once; any other
        signal waits for the exit (SIGKILL after timeout_s). Returns the exit code, if any."""
        node = self.nodes[node_id]
        if not node.running:
            return self._exit_code(node)
        self._signal_group(node, sig)
        if sig in (signal.SIGSTOP, signal.SIGCONT):
            return None
        self._signal_group(node, signal.SIGCONT)  # a SIGSTOPped node must run to handle `sig`
        if not self._wait_exit(node, timeout_s):
            self._signal_group(node, signal.SIGCONT)
            self._signal_group(node, signal.SIGKILL)
            self._wait_exit(node, timeout_s)
        self._reap_group(node)
        return self._exit_code(node)

    def kill(self, node_id: int) -> None:
        """kill -9 (the whole process group), and wait for it."""
        self.stop(node_id, signal.SIGKILL)

    def restart(self, node_id: int, wait: bool = True, timeout_s: float = START_TIMEOUT_S) -> None:
        if self.nodes[node_id].running:
            self.stop(node_id)
        self._spawn(node_id)
        if wait:
            self.wait_ready([node_id], timeout_s)

    def _reap_group(self, node: NodeProcess) -> None:
        # Anything the broker started in its group dies with it (no orphans).
        self._signal_group(node, signal.SIGKILL)

    def stop_all(self, sig: int = signal.SIGTERM, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Graceful: signal every node at once (each transfers its leaderships), then wait."""
        running = [n for n in self.nodes.values() if n.running]
        for node in running:
            self._signal_group(node, signal.SIGCONT)  # a stopped process cannot handle SIGTERM
            self._signal_group(node, sig)
        deadline = time.monotonic() + timeout_s
        for node in running:
            if not self._wait_exit(node, max(0.1, deadline - time.monotonic())):
                self._signal_group(node, signal.SIGKILL)
                self._wait_exit(node, timeout_s)
            self._reap_group(node)

    def kill_all(self) -> None:
        for node in self.nodes.values():
            if node.process is not None:
                self._signal_group(node, signal.SIGCONT)
                self._signal_group(node, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    node.process.wait(5)

    def __enter__(self) -> DevCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()

    # ------------------------------------------------------------------ Kafka metadata

    def wait_for_brokers(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Wait until every running node's Metadata lists every node of the cluster as it
        describes itself (the metadata group has a leader, and every node registered itself)."""
        deadline = time.monotonic() + timeout_s
        expected = {node_id: node.config.rack for node_id, node in self.nodes.items()}
        while True:
            pending = []
            for node in self.nodes.values():
                if not node.running:
                    continue
                try:
                    response = fetch_metadata(node.client_address, [], timeout_s=1.0, security=self.client_security)
                    if {b.node_id: b.rack for b in response.brokers} != expected:
                        pending.append(node.node_id)
                except (OSError, ValueError, VdlClientError):  # a login refused: users not applied yet
                    pending.append(node.node_id)
            if not pending:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"nodes {pending} do not list all {len(expected)} brokers after {timeout_s} s")
            time.sleep(0.05)

    def leader_of(self, stream: str, timeout_s: float = 2.0) -> int | None:
        """The leader node id of the stream's partition 0 as some running node reports it
        (None if no node knows one)."""
        for node in self.nodes.values():
            if not node.running:
                continue
            try:
                response = fetch_metadata(node.client_address, [stream], timeout_s, security=self.client_security)
            except (OSError, ValueError):
                continue
            for topic in response.topics:
                if topic.name == stream and topic.error_code == 0:
                    for partition in topic.partitions:
                        if partition.partition_index == 0 and partition.leader_id >= 0:
                            return int(partition.leader_id)
        return None


def fetch_metadata(address: str, topics: Sequence[str] | None, timeout_s: float = 2.0,
                   security: SecuritySettings | None = None) -> Any:
    """One Metadata request to `address` ("host:port"); returns the decoded response."""
    request = MetadataRequest(
        topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics])
    return request_once(address, request, timeout_s, client_id="vdl-dev-cluster", security=security)



def run_dev_cluster(nodes: int, data_dir: Path, base_port: int, *, command: Sequence[str] | None = None,
                    settings: dict[str, Any] | None = None, secure: bool = False) -> int:
    """Run the cluster in the foreground until Ctrl-C or SIGTERM; returns the exit status.
    `secure`: SASL_SSL listeners, Raft mutual TLS, ACLs and an admin (vdl_dev/secure.py)."""
    setup = None
    options: dict[str, Any] = {}
    if secure:
        from vdl_dev.secure import prepare

        setup = prepare(Path(data_dir), nodes)
        settings = dict(settings or {}) | setup.settings
        options = {"protocols": ("SASL_SSL",), "tls_dir": setup.tls_dir, "client_security": setup.client_security,
                   "env": setup.env}
    cluster = DevCluster(nodes, data_dir, base_port, command=command, settings=settings, echo=True, metrics=True,
                         **options)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            cluster.start()
            if setup is not None:  # the printed properties work from the first try
                cluster.wait_for_brokers()
        except (RuntimeError, TimeoutError) as error:
            cluster.say(f"vdl dev-cluster: {error}", sys.stderr)
            return 1
        cluster.say(f"vdl dev-cluster: {nodes} node(s) running; bootstrap servers: {cluster.bootstrap_servers}")
        cluster.say("vdl dev-cluster: metrics: " + " ".join(cluster.metrics_urls().values()))
        if setup is not None:
            cluster.say(f"vdl dev-cluster: SASL_SSL, authorizer acl, super user {setup.properties['sasl.username']}; "
                        f"client properties in {setup.properties_path} (vdl ... --config {setup.properties_path}, "
                        f"kcat -F {setup.properties_path}):")
            for line in setup.properties_text().splitlines():
                cluster.say(f"    {line}")
        cluster.say("vdl dev-cluster: press Ctrl-C to stop")
        reported: set[int] = set()
        while not stop.wait(0.2):
            for node in cluster.nodes.values():
                if not node.running and node.node_id not in reported:
                    reported.add(node.node_id)
                    cluster.say(f"vdl dev-cluster: node {node.node_id} exited ({DevCluster._exit_code(node)})",
                                sys.stderr)
        cluster.say("vdl dev-cluster: stopping")
        return 0
    finally:
        cluster.stop_all()
        for sig, handler in previous.items():
            signal.signal(sig, handler)

"""A cluster end to end: a real 3-node `DevCluster` of `vdl-broker --config
node.toml` processes on loopback. Streams created through a node that does not lead the
metadata group, kafka-python producing acks=-1 and confluent-kafka consuming, Metadata's
leader/replicas/isr, NOT_LEADER_OR_FOLLOWER at followers, kill -9 of the leader (a new leader
within 3 s, acknowledged records intact), the killed node catching up after a restart, graceful
SIGTERM handing leadership over, replication-factor rules, delete and re-create.

One cluster for the module (the `cluster` fixture of tests/conftest.py); each test uses its own
stream. Every wait polls a condition against a deadline.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import DEFAULT_CLUSTER_SETTINGS, broker_command, wait_until
from tests.support.kafka import (
    LATEST,
    create_topic_raw,
    delete_topic_raw,
    fetch_raw,
    list_offset_raw,
    metadata_raw,
    one_record_batch,
    produce_raw,
)
from tests.support.metrics import scrape
from vdl_broker.log import LogConfig, StreamLog
from vdl_dev.dev_cluster import DevCluster, free_base_port, ports_needed
from vdl_wire.errors import ErrorCode
from vdl_wire.records.record_batch import iter_batches, read_records

pytestmark = pytest.mark.timeout(90)

FAILOVER_LIMIT_S = 3.0


# ------------------------------------------------------------------------------------ helpers


def produce(address: str, stream: str, value: bytes, acks: int = -1, timeout: float = 5.0) -> tuple[int, int]:
    return produce_raw(address, stream, one_record_batch(value), acks=acks, socket_timeout=timeout)


def fetch(address: str, stream: str, offset: int, max_wait_ms: int = 0) -> tuple[int, int, list[tuple[int, bytes]]]:
    code, high_watermark, raw = fetch_raw(address, stream, offset, max_wait_ms, max_bytes=1 << 20,
                                          socket_timeout=10)
    records = [(r.offset, bytes(r.value or b"")) for _, b in iter_batches(memoryview(raw)) for r in read_records(b)]
    return code, high_watermark, records


def list_offset(address: str, stream: str) -> int:
    """The error code of a ListOffsets(latest) (the offset itself is not needed here)."""
    return list_offset_raw(address, stream, LATEST)[0]


def create(address: str, name: str, rf: int = -1) -> tuple[int, str | None]:
    return create_topic_raw(address, name, replication_factor=rf)


metadata = metadata_raw
delete = delete_topic_raw


def addr(cluster: DevCluster, node_id: int) -> str:
    return cluster.nodes[node_id].client_address


def view(cluster: DevCluster, node_id: int, stream: str) -> tuple[int, int, list[int], list[int]] | None:
    """(error, leader, replicas, isr) of partition 0 as node `node_id` reports it."""
    try:
        response = metadata(addr(cluster, node_id), [stream])
    except OSError:
        return None
    topic = response.topics[0]
    if topic.error_code or not topic.partitions:
        return int(topic.error_code), -1, [], []
    p = topic.partitions[0]
    return int(p.error_code), int(p.leader_id), sorted(p.replica_nodes), sorted(p.isr_nodes)


def serving_leader(cluster: DevCluster, stream: str, timeout: float = 10.0) -> int:
    """The node that answers an acks=-1 write to `stream` (the probe record is written)."""
    def probe() -> int | None:
        for node_id in cluster.node_ids():
            if not cluster.nodes[node_id].running:
                continue
            try:
                code, _ = produce(addr(cluster, node_id), stream, b"probe", timeout=2.0)
            except OSError:
                continue
            if code == 0:
                return node_id
        return None
    return wait_until(probe, timeout, f"a leader of {stream} acknowledging a write")


def metadata_leader(cluster: DevCluster) -> int:
    """The node leading the metadata group (Metadata's controller id)."""
    return wait_until(lambda: max(0, metadata(addr(cluster, 1), []).controller_id), 10, "a metadata leader")


def on_disk_end_offset(cluster: DevCluster, node_id: int, stream: str) -> int:
    """The log end offset of a copy of the node's stream directory (recovered like after a crash)."""
    source = cluster.nodes[node_id].config.data_dir / stream
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / stream
        copy.mkdir()
        for item in source.iterdir():
            if item.is_file():
                shutil.copyfile(item, copy / item.name)
        log = StreamLog.open(copy, LogConfig(fsync=False))
        try:
            return log.log_end_offset
        finally:
            log.close()


# ------------------------------------------------------------------------------------- tests


def test_create_via_follower_produce_kafka_python_consume_confluent(cluster: DevCluster) -> None:
    controller = metadata_leader(cluster)
    follower = next(i for i in cluster.node_ids() if i != controller)
    assert create(addr(cluster, follower), "orders") == (0, None)
    assert create(addr(cluster, follower), "orders")[0] == ErrorCode.TOPIC_ALREADY_EXISTS

    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers.split(","), acks="all", linger_ms=5)
    futures = [producer.send("orders", value=f"order-{i}".encode(), partition=0) for i in range(200)]
    producer.flush(30)
    offsets = [f.get(10).offset for f in futures]
    producer.close(5)
    assert offsets == list(range(200))  # one producer, in order, no duplicates

    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "t-orders",
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([confluent_kafka.TopicPartition("orders", 0, 0)])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    while len(got) < 200 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append((message.offset(), message.value()))
    consumer.close()
    assert got == [(i, f"order-{i}".encode()) for i in range(200)]


def test_metadata_leader_replicas_isr_and_not_leader_at_followers(cluster: DevCluster) -> None:
    assert create(addr(cluster, 3), "meta")[0] == 0
    leader = serving_leader(cluster, "meta")

    def agreed() -> bool:
        views = [view(cluster, i, "meta") for i in cluster.node_ids()]
        return all(v is not None and v[:3] == (0, leader, [1, 2, 3]) for v in views)
    wait_until(agreed, 10, "every node naming the same leader and replicas [1, 2, 3]")
    wait_until(lambda: view(cluster, leader, "meta")[3] == [1, 2, 3], 10, "a full ISR at the leader")
    brokers = sorted((b.node_id, b.port) for b in metadata(addr(cluster, 2), None).brokers)
    assert brokers == [(i, int(addr(cluster, i).rpartition(":")[2])) for i in (1, 2, 3)]

    for follower in (i for i in cluster.node_ids() if i != leader):
        assert produce(addr(cluster, follower), "meta", b"x")[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert fetch(addr(cluster, follower), "meta", 0)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert list_offset(addr(cluster, follower), "meta") == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert list_offset(addr(cluster, leader), "meta") == 0

    # A long-poll fetch at the high watermark is woken by the next commit, not by its timeout.
    _, hw, _ = fetch(addr(cluster, leader), "meta", 0)
    result: list[Any] = []
    poller = threading.Thread(target=lambda: result.append(fetch(addr(cluster, leader), "meta", hw, 8000)))
    started = time.monotonic()
    poller.start()  # whether the fetch parks before the write arrives or after, it must answer it
    assert produce(addr(cluster, leader), "meta", b"wake-up") == (0, hw)
    poller.join(10)
    assert time.monotonic() - started < 4 and result and result[0][2] == [(hw, b"wake-up")]


def test_replication_factor_rules_and_delete_recreate(cluster: DevCluster) -> None:
    assert create(addr(cluster, 1), "rf2", rf=2)[0] == ErrorCode.INVALID_REPLICATION_FACTOR
    assert create(addr(cluster, 2), "rf5", rf=5)[0] == ErrorCode.INVALID_REPLICATION_FACTOR
    # rf 1 through the CLI: one replica; the other nodes answer Metadata with its leader.
    cli = [sys.executable, "-m", "vdl_client.cli", "streams", "create", "single", "--replication-factor", "1",
           "--bootstrap", addr(cluster, 2)]
    done = subprocess.run(cli, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    owner = serving_leader(cluster, "single")
    for node_id in cluster.node_ids():
        wait_until(lambda n=node_id: (v := view(cluster, n, "single")) is not None and v[1] == owner and v[2] == [owner],
                   10, f"node {node_id} naming node {owner} for stream single")

    code, first = produce(addr(cluster, owner), "single", b"before-delete")
    assert code == 0
    assert delete(addr(cluster, 3), "single") == 0
    wait_until(lambda: all(view(cluster, i, "single")[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                           for i in cluster.node_ids()), 10, "every node forgetting stream single")
    assert delete(addr(cluster, 1), "single") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert create(addr(cluster, 1), "single", rf=3)[0] == 0
    leader = serving_leader(cluster, "single")  # writes a probe at offset 0 of the new incarnation
    code, hw, records = fetch(addr(cluster, leader), "single", 0)
    assert code == 0 and records[0] == (0, b"probe")


def test_kill_leader_failover_and_catch_up(cluster: DevCluster) -> None:
    assert create(addr(cluster, 2), "failover")[0] == 0
    leader = serving_leader(cluster, "failover")
    wait_until(lambda: view(cluster, leader, "failover")[3] == [1, 2, 3], 10, "a full ISR")
    acked: dict[int, bytes] = {}
    for i in range(50):
        value = f"before-{i}".encode()
        code, offset = produce(addr(cluster, leader), "failover", value)
        assert code == 0
        acked[offset] = value

    killed_at = time.monotonic()
    cluster.kill(leader)
    survivors = [i for i in cluster.node_ids() if i != leader]

    def new_leader() -> int | None:
        for node_id in survivors:
            code, offset = produce(addr(cluster, node_id), "failover", b"after-kill", timeout=2.0)
            if code == 0:
                acked[offset] = b"after-kill"
                return node_id
        return None
    successor = wait_until(new_leader, 10, "a new leader acknowledging a write", interval=0.02)
    failover = time.monotonic() - killed_at
    assert failover <= FAILOVER_LIMIT_S, f"failover took {failover:.2f} s"

    code, hw, records = fetch(addr(cluster, successor), "failover", 0)
    stored = dict(records)
    while code == 0 and records and max(stored) + 1 < hw:
        code, hw, records = fetch(addr(cluster, successor), "failover", max(stored) + 1)
        stored.update(records)
    assert code == 0
    for offset, value in acked.items():
        assert stored.get(offset) == value, f"acknowledged offset {offset} lost or changed"

    for i in range(50):  # the restarted node must catch up on these too
        code, offset = produce(addr(cluster, successor), "failover", f"while-down-{i}".encode())
        assert code == 0
    _, hw, _ = fetch(addr(cluster, successor), "failover", 0)
    cluster.restart(leader, timeout_s=30)
    wait_until(lambda: view(cluster, successor, "failover")[3] == [1, 2, 3], 15, "the restarted node back in the ISR")
    wait_until(lambda: on_disk_end_offset(cluster, leader, "failover") >= hw, 15,
               f"node {leader}'s log reaching offset {hw}", interval=0.2)


def test_sigterm_hands_leadership_over(cluster: DevCluster) -> None:
    assert create(addr(cluster, 1), "graceful")[0] == 0
    leader = serving_leader(cluster, "graceful")
    wait_until(lambda: view(cluster, leader, "graceful")[3] == [1, 2, 3], 10, "a full ISR")
    stopped_at = time.monotonic()
    assert cluster.stop(leader, signal.SIGTERM) == 0
    successor = serving_leader(cluster, "graceful", timeout=5)
    elapsed = time.monotonic() - stopped_at
    assert successor != leader
    print(f"\nSIGTERM of leader {leader} -> node {successor} serving after {elapsed:.2f} s")
    # A transfer, not an election after a timeout of 1-2 s following the exit.
    assert elapsed < 2.5


def test_sigterm_to_every_node_at_once_waits_out_no_transfer(cluster: DevCluster) -> None:
    """Every node stopped together (DevCluster.stop_all, `docker compose down`): each node says
    it is leaving before handing its groups over, so no leader waits out its 2 s transfer timeout
    for a transferee that is stopping too (which took every such stop 2.0-2.1 s)."""
    assert create(addr(cluster, 1), "stop-all")[0] == 0
    leader = serving_leader(cluster, "stop-all")
    wait_until(lambda: view(cluster, leader, "stop-all")[3] == [1, 2, 3], 10, "a full ISR")
    stopped_at = time.monotonic()
    cluster.stop_all()
    elapsed = time.monotonic() - stopped_at
    print(f"\nSIGTERM to every node: all stopped after {elapsed:.2f} s")
    assert [cluster.nodes[i].process.returncode for i in cluster.node_ids()] == [0, 0, 0]  # type: ignore[union-attr]
    assert elapsed < 1.5  # a stop's exit takes ~0.1 s; the transfer timeout alone is 2 s
    cluster.start(timeout_s=60)  # together: a node alone has no quorum to come up with
    cluster.wait_for_brokers(timeout_s=30)


def test_vdl_dev_cluster_command_runs_and_stops_on_sigterm(tmp_path: Path) -> None:
    base = free_base_port(6)
    command = [sys.executable, "-m", "vdl_client.cli", "dev-cluster", "--nodes", "3", "--data-dir", str(tmp_path),
               "--base-port", str(base)]
    launcher = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
    try:
        assert launcher.stdout is not None
        deadline = time.monotonic() + 30
        line = ""
        while "bootstrap servers:" not in line:
            line = launcher.stdout.readline()
            assert line and time.monotonic() < deadline, "vdl dev-cluster did not report its bootstrap servers"
        bootstrap = line.rsplit("bootstrap servers:", 1)[1].strip()
        assert bootstrap == ",".join(f"127.0.0.1:{base + i}" for i in range(3))
        create_cli = [sys.executable, "-m", "vdl_client.cli", "streams", "create", "dev", "--bootstrap",
                      f"127.0.0.1:{base + 2}"]
        wait_until(lambda: subprocess.run(create_cli, capture_output=True, timeout=30).returncode == 0, 20,
                   "vdl streams create through node 3")
        # produce/consume/describe find the stream's leader whichever node they are pointed at.
        vdl = [sys.executable, "-m", "vdl_client.cli"]
        lines = "".join(f"line-{i}\n" for i in range(100))
        for node in range(3):
            bootstrap_n = f"127.0.0.1:{base + node}"
            produced = subprocess.run([*vdl, "produce", "dev", "--quiet", "--bootstrap", bootstrap_n], input=lines,
                                      capture_output=True, text=True, timeout=30)
            assert produced.returncode == 0, produced.stderr
        consumed = subprocess.run([*vdl, "consume", "dev", "--end", "--bootstrap", f"127.0.0.1:{base}"],
                                  capture_output=True, text=True, timeout=30)
        assert consumed.returncode == 0 and consumed.stdout == lines * 3, consumed.stderr
        described = subprocess.run([*vdl, "streams", "describe", "dev", "--bootstrap", f"127.0.0.1:{base + 1}"],
                                   capture_output=True, text=True, timeout=30)
        assert "offsets 0..300 (300 records)" in described.stdout, described.stderr
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(30) == 0
        for port in range(base, base + 3):  # every node stopped with the launcher
            with socket.socket() as sock:
                assert sock.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still accepts connections"
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()


def test_idempotent_producer_across_leader_kill_writes_each_record_once(cluster: DevCluster) -> None:
    assert create(addr(cluster, 1), "idempotent")[0] == 0
    leader = serving_leader(cluster, "idempotent")  # probe record at offset 0
    wait_until(lambda: view(cluster, leader, "idempotent")[3] == [1, 2, 3], 10, "a full ISR")

    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers.split(","), acks="all", linger_ms=2,
                             enable_idempotence=True, metadata_max_age_ms=500, retry_backoff_ms=50)
    values = [f"idem-{i:04d}".encode() for i in range(400)]
    futures = []
    try:
        for i, value in enumerate(values):
            futures.append(producer.send("idempotent", value=value, partition=0))
            if i == 150:
                producer.flush(10)  # some batches committed, the next ones in flight at the kill
            if i == 160:
                cluster.kill(leader)
        producer.flush(30)
        offsets = [future.get(30).offset for future in futures]
    finally:
        producer.close(5)

    successor = serving_leader(cluster, "idempotent")
    stored: dict[int, bytes] = {}
    _, hw, _ = fetch(addr(cluster, successor), "idempotent", 0)
    while len(stored) < hw:
        code, _, records = fetch(addr(cluster, successor), "idempotent", len(stored))
        assert code == 0 and records
        stored.update(records)
    written = [v for _, v in sorted(stored.items()) if v.startswith(b"idem-")]
    assert written == values  # each record exactly once, in order (retries deduplicated)
    assert [stored[o] for o in offsets] == values  # acknowledged offsets hold the records


def test_long_poll_on_an_idle_stream_answers_after_its_group_went_quiet(cluster: DevCluster) -> None:
    """Regression: a Fetch long-polling an idle stream woke the quiescent group for its lease,
    the group went quiet again during the wait, and the answer at the deadline was
    NOT_LEADER_OR_FOLLOWER (a tailing consumer refreshing metadata every poll). The read after
    the wait takes the lease again."""
    stream = "idle-long-poll"
    assert create(addr(cluster, 1), stream)[0] == 0
    leader = serving_leader(cluster, stream)  # writes the record at offset 0
    wait_until(lambda: all(scrape(cluster, i).get("vdl_raft_groups_awake") == 1 for i in cluster.node_ids()),
               30, "every stream group quiescent")
    started = time.monotonic()
    code, high_watermark, records = fetch(addr(cluster, leader), stream, 1, max_wait_ms=1500)
    assert (code, high_watermark, records) == (0, 1, [])
    assert time.monotonic() - started >= 1.4  # it did wait, through the group's quiet spell


def test_sigterm_while_a_node_looks_for_its_cluster_is_a_clean_stop(tmp_path: Path,
                                                                    request: pytest.FixtureRequest) -> None:
    """A node of a new 3-node cluster started alone waits for its peers to say whether the
    cluster exists (and, the cluster formed, up to 10 s for a metadata leader); SIGTERM then
    stops it at once, exit code 0, with one line saying so, as a stop once it serves. The
    signal's default action killed it (exit code -15, no line)."""
    cluster = DevCluster(3, tmp_path, free_base_port(ports_needed(3, False, ())), command=broker_command(),
                         settings=DEFAULT_CLUSTER_SETTINGS | {"log_level": "INFO"}, metrics=False, log_files=True)
    request.addfinalizer(cluster.kill_all)
    cluster.write_configs()
    cluster.restart(1, wait=False)  # node 1 alone
    node = cluster.nodes[1]
    waiting = ("WARNING vdl_broker.server.joining: node 1: its metadata log is empty; waiting for node(s) 2, 3 to "
               "say whether the cluster exists (a new cluster forms once every node in peers has started)")
    # node.output is appended by the thread reading the node: read copies (list()).
    wait_until(lambda: any(line.endswith(waiting.split(" ", 1)[1]) for line in list(node.output)), 30,
               lambda: "node 1 to wait for its peers:\n" + "\n".join(node.output))
    assert cluster.stop(1, signal.SIGTERM, timeout_s=10) == 0  # else killed after 10 s: -9
    logged = [line.split(" ", 2)[2] for line in list(node.output)]  # without the date and time
    assert logged[logged.index(waiting):][-1] == (
        "INFO vdl_broker: node 1: stopped cleanly before serving (it was still starting)"), logged
    assert not [line for line in logged if "Traceback" in line or line.startswith("ERROR")], logged
    # Restarted alone once the cluster exists, it waits (up to 10 s) for a metadata leader: the
    # same clean stop then, its replica's log closed as a stop closes it.
    cluster.start()
    wait_until(lambda: create_topic_raw(addr(cluster, 1), "held", 3)[0] == 0, 30, "the stream created")
    cluster.stop_all()
    node.output.clear()
    cluster.restart(1, wait=False)
    wait_until(lambda: any("peers down [2, 3]" in line for line in list(node.output)), 30,
               lambda: "node 1 to find its peers down:\n" + "\n".join(node.output))
    assert cluster.stop(1, signal.SIGTERM, timeout_s=10) == 0
    logged = [line.split(" ", 2)[2] for line in list(node.output) if line.startswith("20")]
    assert logged[-1] == "INFO vdl_broker: node 1: stopped cleanly before serving (it was still starting)", logged
    assert not [line for line in logged if "Traceback" in line or line.startswith("ERROR")], logged

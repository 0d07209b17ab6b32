"""Security with real clients on one secured node: kafka-python, confluent-kafka, aiokafka and kcat
produce and consume over SSL (mutual TLS), SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256
and SCRAM-SHA-512; failed logins get the documented errors, close the connection, are logged
without the password, and do not hold up other clients; an unauthenticated SASL connection can
do nothing but ApiVersions and the handshake; Metadata advertises the listener a client came in
on; nothing in the node's output holds a password."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioPartition
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpPartition

from tests.support.cluster import start_cluster, wait_until
from tests.support.kafka import CLIENT_API_VERSIONS, closed_by_peer, encode, read_frame
from tests.support.security import (
    ADMIN_PASSWORD,
    ADMIN_PASSWORD_ENV,
    ADMIN_USER,
    MTLS_USER,
    TlsMaterial,
    confluent_conf,
    kafka_python_conf,
    kcat_args,
)
from vdl_broker.listeners import parse_bootstrap_users
from vdl_client import ClientSettings, VdlClient, admin
from vdl_client.security import AuthenticationError, SecuritySettings
from vdl_dev.dev_cluster import DevCluster
from vdl_wire.acls import AclBinding, Operation, PatternType, Permission, ResourceType
from vdl_wire.api import decode_response
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import (
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from vdl_wire.sasl import plain_token

PROTOCOLS = ("SASL_SSL", "SASL_PLAINTEXT", "SSL", "PLAINTEXT")
USERS = {"alice": ("SCRAM-SHA-256", "alice-Pa55"), "bob": ("SCRAM-SHA-512", "bob-Pa55")}
LOGIN = {"PLAIN": "alice", "SCRAM-SHA-256": "alice", "SCRAM-SHA-512": "bob"}
CASES = [("SSL", None), ("SASL_PLAINTEXT", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
         ("SASL_PLAINTEXT", "SCRAM-SHA-512"), ("SASL_SSL", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-256"),
         ("SASL_SSL", "SCRAM-SHA-512")]
PASSWORDS = [ADMIN_PASSWORD, *(password for _, password in USERS.values()), "wr0ng-Pa55"]
VALUES = [f"record-{i}".encode() for i in range(5)]
HIDDEN = "hidden-stream"


def admin_security(tls: TlsMaterial) -> SecuritySettings:
    return SecuritySettings("SASL_SSL", "SCRAM-SHA-512", ADMIN_USER, ADMIN_PASSWORD, str(tls.ca))


@pytest.fixture(scope="module")
def secure_node(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                tls_material: TlsMaterial) -> Iterator[DevCluster]:
    bootstrap = [{"name": ADMIN_USER, "mechanism": "SCRAM-SHA-512", "password_env": ADMIN_PASSWORD_ENV}]
    settings = {"authorizer": "acl", "super_users": [ADMIN_USER], "ssl_client_auth": "requested",
                "bootstrap_users": parse_bootstrap_users(bootstrap, "bootstrap_users")}
    cluster = start_cluster(tmp_path_factory.mktemp("secure-node"), nodes=1, settings=settings,
                            register=lambda c: request.addfinalizer(c.kill_all), protocols=PROTOCOLS,
                            tls_dir=tls_material.directory, client_security=admin_security(tls_material),
                            env={ADMIN_PASSWORD_ENV: ADMIN_PASSWORD})
    with admin_client(cluster, tls_material) as client:
        for user, (mechanism, password) in USERS.items():
            admin.upsert_user(client, user, mechanism, password, iterations=4096)
        admin.create_acls(client, [AclBinding(kind, "sec-", PatternType.PREFIXED, f"User:{user}", "*", Operation.ALL,
                                              Permission.ALLOW)
                                   for user in (*USERS, MTLS_USER) for kind in (ResourceType.TOPIC, ResourceType.GROUP)])
        client.create_stream(HIDDEN, exist_ok=False)  # nobody but the admin may see it
    yield cluster
    output = "\n".join(cluster.nodes[1].output)
    for password in PASSWORDS:
        assert password not in output, "a password reached the node's log"


def admin_client(cluster: DevCluster, tls: TlsMaterial) -> VdlClient:
    return VdlClient(ClientSettings.from_bootstrap(cluster.bootstrap_for("SASL_SSL"), deadline_ms=20_000,
                                                   security=admin_security(tls)))


def credentials(mechanism: str | None) -> tuple[str | None, str | None]:
    if mechanism is None:
        return None, None
    user = LOGIN[mechanism]
    return user, USERS[user][1]


def new_stream(cluster: DevCluster, tls: TlsMaterial, name: str) -> str:
    with admin_client(cluster, tls) as client:
        client.create_stream(name, exist_ok=False)
    return name


def case_id(case: tuple[str, str | None]) -> str:
    return f"{case[0]}-{case[1] or 'mtls'}"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_confluent_kafka(secure_node: DevCluster, tls_material: TlsMaterial, case: tuple[str, str | None]) -> None:
    protocol, mechanism = case
    stream = new_stream(secure_node, tls_material, f"sec-ck-{case_id(case)}")
    conf = confluent_conf(protocol, tls_material, mechanism, *credentials(mechanism)) | {
        "bootstrap.servers": secure_node.bootstrap_for(protocol)}
    producer = Producer(conf | {"acks": "all", "enable.idempotence": True})
    errors: list[object] = []
    for value in VALUES:
        producer.produce(stream, value, on_delivery=lambda error, _: errors.append(error))
    assert producer.flush(30) == 0 and errors == [None] * len(VALUES)
    consumer = Consumer(conf | {"group.id": "sec-ck", "enable.auto.commit": False})
    consumer.assign([TopicPartition(stream, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < len(VALUES) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    assert got == VALUES


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_kafka_python(secure_node: DevCluster, tls_material: TlsMaterial, case: tuple[str, str | None]) -> None:
    protocol, mechanism = case
    stream = new_stream(secure_node, tls_material, f"sec-kp-{case_id(case)}")
    conf = kafka_python_conf(protocol, tls_material, mechanism, *credentials(mechanism)) | {
        "bootstrap_servers": secure_node.bootstrap_for(protocol)}
    producer = KafkaProducer(**conf, acks="all")
    for value in VALUES:
        producer.send(stream, value).get(30)
    producer.close()
    consumer = KafkaConsumer(**conf, enable_auto_commit=False, consumer_timeout_ms=20_000)
    consumer.assign([KpPartition(stream, 0)])
    consumer.seek(KpPartition(stream, 0), 0)
    got = [message.value for _, message in zip(VALUES, consumer, strict=False)]
    consumer.close()
    assert got == VALUES


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_aiokafka(secure_node: DevCluster, tls_material: TlsMaterial, case: tuple[str, str | None]) -> None:
    protocol, mechanism = case
    stream = new_stream(secure_node, tls_material, f"sec-aio-{case_id(case)}")
    conf = kafka_python_conf(protocol, tls_material, mechanism, *credentials(mechanism)) | {
        "bootstrap_servers": secure_node.bootstrap_for(protocol)}

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**conf, acks="all")
        await producer.start()
        try:
            for value in VALUES:
                await producer.send_and_wait(stream, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**conf, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([AioPartition(stream, 0)])
            consumer.seek(AioPartition(stream, 0), 0)
            got: list[bytes] = []
            async with asyncio.timeout(30):
                while len(got) < len(VALUES):
                    got.append((await consumer.getone()).value)
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == VALUES


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_kcat(secure_node: DevCluster, tls_material: TlsMaterial, case: tuple[str, str | None]) -> None:
    protocol, mechanism = case
    stream = new_stream(secure_node, tls_material, f"sec-kcat-{case_id(case)}")
    args = ["-b", secure_node.bootstrap_for(protocol), *kcat_args(protocol, tls_material, mechanism,
                                                                   *credentials(mechanism))]
    subprocess.run(["kcat", "-P", *args, "-t", stream, "-X", "acks=all"], check=True, timeout=60,
                   input=b"\n".join(VALUES) + b"\n")
    # -e ends at the partition's end, learnt from an empty fetch: 10 ms for the broker to hold it
    # rather than fetch.wait.max.ms's 500.
    consumed = subprocess.run(["kcat", "-C", *args, "-t", stream, "-o", "beginning", "-e", "-q",
                               "-X", "fetch.wait.max.ms=10"], check=True, timeout=60, capture_output=True)
    assert consumed.stdout.splitlines() == VALUES


def sasl_socket(cluster: DevCluster, protocol: str = "SASL_PLAINTEXT") -> socket.socket:
    host, port = cluster.address(1, protocol).rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


def call(sock: socket.socket, request: object, version: int, correlation_id: int = 1) -> object:
    sock.sendall(encode(request, version, correlation_id))
    return decode_response(type(request).DECL.api_key, version, read_frame(sock))[1]


def test_wrong_password_unknown_user_and_unsupported_mechanism(secure_node: DevCluster, tls_material: TlsMaterial) -> None:
    # The documented errors, through a real client...
    for user, password in (("alice", "wr0ng-Pa55"), ("nobody", "wr0ng-Pa55")):
        for mechanism in ("PLAIN", "SCRAM-SHA-256"):
            security = SecuritySettings("SASL_PLAINTEXT", mechanism, user, password)
            with pytest.raises(AuthenticationError, match="SASL_AUTHENTICATION_FAILED"):
                VdlClient(ClientSettings.from_bootstrap(secure_node.bootstrap_for("SASL_PLAINTEXT"),
                                                        security=security, deadline_ms=5000)).list_streams()
    conf = confluent_conf("SASL_PLAINTEXT", tls_material, "SCRAM-SHA-512", "bob", "wr0ng-Pa55") | {
        "bootstrap.servers": secure_node.bootstrap_for("SASL_PLAINTEXT"), "socket.timeout.ms": 5000}
    errors: list[str] = []
    producer = Producer(conf | {"error_cb": lambda error: errors.append(str(error))})
    wait_until(lambda: producer.poll(0.1) is not None and any("Authentication failed" in e for e in errors),
               timeout=20, message=f"confluent-kafka reports the failed login (got {errors})")
    # ...and on the wire: the error code, then the connection is closed.
    with sasl_socket(secure_node) as sock:
        assert call(sock, SaslHandshakeRequest(mechanism="SCRAM-SHA-1"), 1).error_code == \
            ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert closed_by_peer(sock)
    with sasl_socket(secure_node) as sock:
        handshake = call(sock, SaslHandshakeRequest(mechanism="PLAIN"), 1)
        assert handshake.error_code == 0 and handshake.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        failed = call(sock, SaslAuthenticateRequest(auth_bytes=plain_token("nobody", "wr0ng-Pa55")), 2, 2)
        assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "nobody" not in failed.error_message and "wr0ng" not in failed.error_message
        assert closed_by_peer(sock)
    wait_until(lambda: any("authentication failed: user 'nobody'" in line for line in secure_node.nodes[1].output),
               message="the failure is logged with the user name")


def test_unauthenticated_sasl_connections_get_only_api_versions_and_the_handshake(secure_node: DevCluster) -> None:
    with sasl_socket(secure_node) as sock:
        versions = call(sock, CLIENT_API_VERSIONS, 3)
        assert versions.error_code == 0 and {k.api_key for k in versions.api_keys} >= {17, 36, 29, 30, 31, 50, 51}
        sock.sendall(encode(MetadataRequest(topics=None), 8, 2))
        assert closed_by_peer(sock)
    with sasl_socket(secure_node) as sock:  # handshake v0: the token follows as a bare frame
        assert call(sock, SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
        token = plain_token("alice", USERS["alice"][1])
        sock.sendall(len(token).to_bytes(4, "big") + token)
        assert read_frame(sock) == b""  # PLAIN's empty server token: authenticated
        metadata = call(sock, MetadataRequest(topics=None), 8, 3)
        names = [t.name for t in metadata.topics]
        assert HIDDEN not in names and all(name.startswith("sec-") for name in names)  # only what alice may see


def test_metadata_advertises_the_listener_the_client_came_in_on(secure_node: DevCluster, tls_material: TlsMaterial) -> None:
    for protocol in ("SASL_SSL", "SASL_PLAINTEXT"):
        security = SecuritySettings(protocol, "SCRAM-SHA-512", ADMIN_USER, ADMIN_PASSWORD, str(tls_material.ca))
        with VdlClient(ClientSettings.from_bootstrap(secure_node.bootstrap_for(protocol), security=security)) as c:
            brokers = c.metadata([]).brokers
        assert [f"{b.host}:{b.port}" for b in brokers] == [secure_node.address(1, protocol)]


def test_failed_logins_do_not_hold_up_other_clients(secure_node: DevCluster, tls_material: TlsMaterial) -> None:
    """Dozens of PLAIN logins with wrong passwords (a PBKDF2 each) in flight while an
    authenticated client keeps asking: its answers keep coming."""
    stop = threading.Event()

    def attack() -> None:
        while not stop.is_set():
            try:
                with sasl_socket(secure_node) as sock:
                    call(sock, SaslHandshakeRequest(mechanism="PLAIN"), 1)
                    call(sock, SaslAuthenticateRequest(auth_bytes=plain_token("alice", "wr0ng-Pa55")), 2, 2)
            except OSError:
                pass

    attackers = [threading.Thread(target=attack, daemon=True) for _ in range(8)]
    for thread in attackers:
        thread.start()
    try:
        with admin_client(secure_node, tls_material) as client:
            answered = 0
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                client.metadata([])
                answered += 1
        assert answered >= 10, f"only {answered} Metadata answers in 3 s while logins failed"
    finally:
        stop.set()
        for thread in attackers:
            thread.join(10)


def test_mutual_tls_principal_is_the_certificate_cn(secure_node: DevCluster, tls_material: TlsMaterial) -> None:
    """carol authenticates by certificate only: allowed on sec-* (her ACLs), denied elsewhere;
    without a certificate the SSL principal is ANONYMOUS, which has no ACL."""
    conf = confluent_conf("SSL", tls_material) | {"bootstrap.servers": secure_node.bootstrap_for("SSL")}
    producer = Producer(conf)
    errors: list[object] = []
    producer.produce(HIDDEN, b"x", on_delivery=lambda error, _: errors.append(error))
    producer.flush(30)
    assert len(errors) == 1 and "TOPIC_AUTHORIZATION_FAILED" in str(errors[0])
    anonymous = {k: v for k, v in conf.items() if not k.startswith("ssl.certificate") and not k.startswith("ssl.key")}
    producer = Producer(anonymous)
    errors.clear()
    producer.produce("sec-ck-SSL-mtls", b"x", on_delivery=lambda error, _: errors.append(error))
    producer.flush(30)
    assert len(errors) == 1 and "TOPIC_AUTHORIZATION_FAILED" in str(errors[0])


def test_tls_and_scram_connection_setup_works_from_the_cli(secure_node: DevCluster, tls_material: TlsMaterial,
                                                           tmp_path: Path) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username={ADMIN_USER}\n"
                          f"sasl.password={ADMIN_PASSWORD}\nssl.ca.location={tls_material.ca}\n")
    from tests.support.cluster import VDL_CLI

    base = ["--bootstrap", secure_node.bootstrap_for("SASL_SSL"), "--config", str(properties)]
    created = subprocess.run([*VDL_CLI, "users", "create", "dave", "--mechanism", "SCRAM-SHA-256", "--password-stdin",
                              *base], input="dave-Pa55\n", capture_output=True, text=True, timeout=60)
    assert created.returncode == 0, created.stderr
    listed = subprocess.run([*VDL_CLI, "users", "list", *base], capture_output=True, text=True, timeout=60)
    assert "dave  SCRAM-SHA-256 (iterations 8192)" in listed.stdout.splitlines()
    acl = subprocess.run([*VDL_CLI, "acls", "create", "--allow", "User:dave", "--operation", "DESCRIBE",
                          "--topic", "sec-", "--prefixed", *base], capture_output=True, text=True, timeout=60)
    assert acl.returncode == 0, acl.stderr
    as_dave = ["--bootstrap", secure_node.bootstrap_for("SASL_SSL"), "-X", "security.protocol=SASL_SSL",
               "-X", "sasl.mechanism=SCRAM-SHA-256", "-X", "sasl.username=dave", "-X", "sasl.password=dave-Pa55",
               "-X", f"ssl.ca.location={tls_material.ca}"]
    streams = subprocess.run([*VDL_CLI, "streams", "list", *as_dave], capture_output=True, text=True, timeout=60)
    assert streams.returncode == 0 and streams.stdout.split() and all(s.startswith("sec-") for s in streams.stdout.split())
    wrong = subprocess.run([*VDL_CLI, "streams", "list", *as_dave[:-3], "sasl.password=nope",
                            *as_dave[-2:]], capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 1 and "SASL_AUTHENTICATION_FAILED" in wrong.stderr and "nope" not in wrong.stderr
    for args in (["acls", "delete", "--principal", "User:dave"], ["users", "delete", "dave"]):
        assert subprocess.run([*VDL_CLI, *args, *base], capture_output=True, timeout=60).returncode == 0


def test_the_cli_says_a_stream_is_not_authorized_at_once(secure_node: DevCluster, tls_material: TlsMaterial) -> None:
    """Metadata answers TOPIC_AUTHORIZATION_FAILED for a named stream the principal may not
    describe (as for one that does not exist, as Kafka does): the client reports it at once, as the
    one line the CLI prints. It used to retry until its deadline (30 s) and then say the stream
    had no leader yet; and CreateTopics' refusal without a message printed "(None)"."""
    from tests.support.cluster import VDL_CLI

    user, password = "alice", USERS["alice"][1]
    as_alice = ["--bootstrap", secure_node.bootstrap_for("SASL_SSL"), "-X", "security.protocol=SASL_SSL",
                "-X", "sasl.mechanism=SCRAM-SHA-256", "-X", f"sasl.username={user}", "-X", f"sasl.password={password}",
                "-X", f"ssl.ca.location={tls_material.ca}"]
    refused = f"vdl: error: Metadata '{HIDDEN}': TOPIC_AUTHORIZATION_FAILED (29)\n"
    for command, stdin, expected in (
            (["consume", HIDDEN, "--from", "earliest", "--max", "1"], None, refused),
            (["streams", "describe", HIDDEN], None, refused),
            (["produce", HIDDEN], "x\n", refused),
            (["consume", "no-such-stream", "--max", "1"], None,
             "vdl: error: Metadata 'no-such-stream': TOPIC_AUTHORIZATION_FAILED (29)\n"),
            (["streams", "create", "not-alices"], None,
             "vdl: error: CreateTopics 'not-alices': TOPIC_AUTHORIZATION_FAILED (29)\n")):
        done = subprocess.run([*VDL_CLI, *command, *as_alice], input=stdin, capture_output=True, text=True,
                              timeout=120)
        assert (done.returncode, done.stdout, done.stderr) == (1, "", expected), command


def test_requests_split_over_tls_records_are_not_held_by_delayed_acks(secure_node: DevCluster,
                                                                      tls_material: TlsMaterial) -> None:
    """librdkafka writes one request as several TLS records with Nagle on; each record after the
    first waits for the ACK of the one before, which Linux delays up to 40 ms unless the broker
    asks for a quick ACK. 60 requests, each sent as two records: well under 60 x 40 ms."""
    import ssl

    host, port = secure_node.address(1, "SSL").rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(tls_material.ca))
    with context.wrap_socket(socket.create_connection((host, int(port)), timeout=10), server_hostname=host) as sock:
        started = time.perf_counter()
        for correlation in range(60):
            frame = encode(CLIENT_API_VERSIONS, 3, correlation)
            sock.sendall(frame[:6])  # one TLS record, then the rest in another (Nagle is on)
            sock.sendall(frame[6:])
            read_frame(sock)
        elapsed = time.perf_counter() - started
    assert elapsed < 1.2, f"60 requests took {elapsed:.2f} s: delayed ACKs held the second records"

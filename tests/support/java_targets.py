"""The four ways Kafka's Java client and tools reach VDL in the tests: one node or three, over
the PLAINTEXT listener or the SASL_SSL one (TLS + SCRAM-SHA-512 as the `admin` super user).

A cluster here has both listeners and the ACL authorizer, with `admin` and the plain listener's
User:ANONYMOUS as super users: one cluster serves a plain and a secured target, and a test may
give other SCRAM users ACLs of their own. Test modules get them from tests/integration/conftest.py
(`java_targets`, and `target` parametrized over JAVA_TARGETS).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.cluster import start_cluster
from tests.support.java_client import JavaClients, write_properties
from tests.support.security import ADMIN_PASSWORD, ADMIN_PASSWORD_ENV, ADMIN_USER, TlsMaterial, confluent_conf
from vdl_broker.listeners import parse_bootstrap_users
from vdl_dev.dev_cluster import DevCluster

# Every Java consumer's: its close waits for its fetch in flight, which the broker holds up to
# fetch.max.wait.ms when no record comes (500 ms by default, paid at every close).
FETCH_WAIT = {"fetch.max.wait.ms": "100"}
JAVA_TARGETS = ("1-node-plain", "1-node-sasl-ssl", "3-nodes-plain", "3-nodes-sasl-ssl")
SECURED = "SASL_SSL"

# Every group here starts at once (no wait for more members: each wait costs seconds); KIP-848
# members heartbeat at a short interval so rebalances settle fast; no leader balancing runs by
# itself (only the tests' elections move a leader).
CLUSTER_SETTINGS: dict[str, Any] = {"group_initial_rebalance_delay_ms": 0,
                                    "group_consumer_heartbeat_interval_ms": 500, "leader_balance_interval_ms": 0}


def java_login(tls: TlsMaterial, user: str = ADMIN_USER, password: str = ADMIN_PASSWORD) -> dict[str, str]:
    """The Java client's properties for the SASL_SSL listener as `user` (the JVM reads the CA's
    PEM file as its trust store)."""
    return {"security.protocol": SECURED, "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                f'username="{user}" password="{password}";',
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(tls.ca)}


def start_java_cluster(directory: Path, nodes: int, tls: TlsMaterial,
                       register: Callable[[DevCluster], None]) -> DevCluster:
    bootstrap = parse_bootstrap_users([{"name": ADMIN_USER, "mechanism": "SCRAM-SHA-512",
                                        "password_env": ADMIN_PASSWORD_ENV}], "bootstrap_users")
    settings = CLUSTER_SETTINGS | {"authorizer": "acl", "super_users": [ADMIN_USER, "ANONYMOUS"],
                                   "bootstrap_users": bootstrap}
    return start_cluster(directory, nodes=nodes, settings=settings, protocols=("PLAINTEXT", SECURED),
                         tls_dir=tls.directory, env={ADMIN_PASSWORD_ENV: ADMIN_PASSWORD}, register=register)


@dataclass(frozen=True)
class JavaTarget:
    """One way in: a cluster, the listener the clients and tools use, and how they log in."""

    name: str  # one of JAVA_TARGETS
    cluster: DevCluster
    protocol: str  # PLAINTEXT or SASL_SSL
    security: dict[str, str]  # the Java client's properties ({} on the plain listener)
    login_file: Path | None  # the same as a .properties file (the tools' --command-config)
    tls: TlsMaterial

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_for(self.protocol)

    @property
    def plain(self) -> str:
        """A PLAINTEXT address (User:ANONYMOUS, a super user) for raw requests and checks."""
        return self.cluster.bootstrap_for("PLAINTEXT").split(",")[0]

    @property
    def secured(self) -> bool:
        return self.protocol == SECURED

    @property
    def replication(self) -> int:
        return len(self.cluster.node_ids())

    def addresses(self) -> list[tuple[int, str, int]]:
        """(node id, host, port) of every node on this listener."""
        found = []
        for node_id in self.cluster.node_ids():
            host, port = self.cluster.address(node_id, self.protocol).rsplit(":", 1)
            found.append((node_id, host, int(port)))
        return found

    def confluent(self) -> dict[str, Any]:
        """librdkafka's configuration for the same way in."""
        security = confluent_conf(SECURED, self.tls, "SCRAM-SHA-512", ADMIN_USER, ADMIN_PASSWORD) if self.secured \
            else {}
        return {"bootstrap.servers": self.bootstrap, **security}

    def tool_args(self, config_option: str = "--command-config") -> list[str]:
        """A tool's --bootstrap-server and, on the secured listener, its client properties file
        (`config_option`: how the tool names it)."""
        login = [config_option, str(self.login_file)] if self.login_file is not None else []
        return ["--bootstrap-server", self.bootstrap, *login]


def make_targets(one_node: DevCluster, three_nodes: DevCluster, tls: TlsMaterial,
                 directory: Path) -> dict[str, JavaTarget]:
    login = java_login(tls)
    login_file = write_properties(directory / "admin.properties", login)
    found = {}
    for name in JAVA_TARGETS:
        cluster = one_node if name.startswith("1-") else three_nodes
        secured = name.endswith("sasl-ssl")
        found[name] = JavaTarget(name, cluster, SECURED if secured else "PLAINTEXT", login if secured else {},
                                 login_file if secured else None, tls)
    return found


def create_streams(java: JavaClients, target: JavaTarget, *names: str) -> None:
    """Create one-partition streams through `target`'s admin client in `java` (named as the
    target: tests/integration/conftest.py's `admins`), checking each was made as asked."""
    created = java.call("create_topics", name=target.name,
                        topics=[{"name": name, "replication": target.replication} for name in names])
    assert {name: (outcome.get("error"), outcome.get("ok", {}).get("partitions"),
                   outcome.get("ok", {}).get("replication")) for name, outcome in created.items()} == {
        name: (None, 1, target.replication) for name in names}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce_every_codec_and_read_back(java: JavaClients, target: JavaTarget, prefix: str, count: int) -> None:
    """A producer with its defaults (idempotent, acks=all) per codec, each writing `count`
    records (every third without a key) to a stream of its own, and all of them read back
    exactly by one consumer, with the producer's timestamps."""
    codecs = ("none", "gzip", "snappy", "lz4", "zstd")
    streams = {codec: unique(f"{prefix}-{codec}") for codec in codecs}
    create_streams(java, target, *streams.values())
    keys = [f"key-{i}" if i % 3 else None for i in range(count)]
    values = {codec: [f"{codec}-value-{i}-" + "x" * (i % 50) for i in range(count)] for codec in codecs}
    for codec, stream in streams.items():
        producer = unique(f"producer-{codec}")
        # linger lets several records share a batch
        java.producer(producer, target.bootstrap, target.security, **{"compression.type": codec, "linger.ms": 20})
        try:
            sent = java.send(producer, stream, values[codec], keys)
            assert [(s.get("error"), s["partition"], s["offset"]) for s in sent] == [
                (None, 0, i) for i in range(count)], codec
        finally:
            java.call("close", name=producer)
    reader = unique("reader")
    java.consumer(reader, target.bootstrap, target.security, **FETCH_WAIT)
    try:
        java.call("assign", name=reader, partitions=list(streams.values()))
        java.call("seek_to_beginning", name=reader, partitions=list(streams.values()))
        got = java.poll(reader, min_records=count * len(codecs))
        for codec, stream in streams.items():
            assert [(r["offset"], r["key"], r["value"]) for r in got if r["topic"] == stream] == [
                (i, keys[i], values[codec][i]) for i in range(count)], codec
        assert {r["timestamp_type"] for r in got} == {"CreateTime"}
    finally:
        java.call("close", name=reader)

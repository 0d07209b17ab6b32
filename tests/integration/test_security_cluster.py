"""Security on a 3-node cluster (SASL_SSL listeners, Raft over mutual TLS): users and ACLs created
through confluent-kafka's AdminClient at a node that does not lead the metadata take effect
through every node and survive a kill -9 of the metadata leader; a node with a foreign
certificate, or one claiming another node's id, is refused and logged."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.support.cluster import start_cluster, wait_until
from tests.support.security import ADMIN_PASSWORD, ADMIN_PASSWORD_ENV, ADMIN_USER, TlsMaterial, confluent_conf
from vdl_broker.config import NodeConfig
from vdl_broker.listeners import parse_bootstrap_users
from vdl_broker.raft.transport import RaftTransport, TransportConfig
from vdl_broker.server.tls import raft_contexts
from vdl_client.security import SecuritySettings
from vdl_dev.dev_cluster import DevCluster

USER, PASSWORD = "frank", "Fr4nk-pa55"


@pytest.fixture(scope="module")
def secure_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                   tls_material: TlsMaterial) -> Iterator[DevCluster]:
    bootstrap = parse_bootstrap_users([{"name": ADMIN_USER, "mechanism": "SCRAM-SHA-512",
                                        "password_env": ADMIN_PASSWORD_ENV}], "bootstrap_users")
    cluster = start_cluster(tmp_path_factory.mktemp("secure-cluster"), nodes=3, protocols=("SASL_SSL",),
                            settings={"authorizer": "acl", "super_users": [ADMIN_USER], "bootstrap_users": bootstrap},
                            register=lambda c: request.addfinalizer(c.kill_all), tls_dir=tls_material.directory,
                            env={ADMIN_PASSWORD_ENV: ADMIN_PASSWORD},
                            client_security=SecuritySettings("SASL_SSL", "SCRAM-SHA-512", ADMIN_USER, ADMIN_PASSWORD,
                                                             str(tls_material.ca)))
    yield cluster
    for node in cluster.nodes.values():
        output = "\n".join(node.output)
        assert ADMIN_PASSWORD not in output and PASSWORD not in output


def conf(cluster: DevCluster, tls: TlsMaterial, node_id: int, user: str, password: str) -> dict:
    return confluent_conf("SASL_SSL", tls, "SCRAM-SHA-512", user, password) | {
        "bootstrap.servers": cluster.address(node_id)}


def metadata_leader(cluster: DevCluster, tls: TlsMaterial, through: int) -> int:
    admin = AdminClient(conf(cluster, tls, through, ADMIN_USER, ADMIN_PASSWORD))
    return admin.list_topics(timeout=10).controller_id


def produce_through(cluster: DevCluster, tls: TlsMaterial, node_id: int, stream: str) -> str | None:
    """frank produces one record bootstrapped at `node_id` only; the error name or None."""
    outcome: list[str | None] = []
    producer = Producer(conf(cluster, tls, node_id, USER, PASSWORD) | {"acks": "all", "message.timeout.ms": 20_000})
    producer.produce(stream, b"v", on_delivery=lambda error, _: outcome.append(error.name() if error else None))
    producer.flush(30)
    return outcome[0] if outcome else "NO_DELIVERY_REPORT"


def test_users_and_acls_through_any_node_survive_a_leader_kill(secure_cluster: DevCluster,
                                                              tls_material: TlsMaterial) -> None:
    cluster, tls = secure_cluster, tls_material
    leader = metadata_leader(cluster, tls, cluster.node_ids()[0])
    follower = next(i for i in cluster.node_ids() if i != leader)
    admin = AdminClient(conf(cluster, tls, follower, ADMIN_USER, ADMIN_PASSWORD))
    for future in admin.create_topics([NewTopic(s, 1, 3) for s in ("fr-open", "fr-secret")]).values():
        future.result(30)
    upsert = UserScramCredentialUpsertion(USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                         PASSWORD.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    bindings = [AclBinding(ResourceType.TOPIC, "fr-", ResourcePatternType.PREFIXED, f"User:{USER}", "*",
                           AclOperation.WRITE, AclPermissionType.ALLOW),
                AclBinding(ResourceType.TOPIC, "fr-secret", ResourcePatternType.LITERAL, f"User:{USER}", "*",
                           AclOperation.WRITE, AclPermissionType.DENY)]
    for future in admin.create_acls(bindings).values():
        future.result(30)
    # The metadata leader answers once the user and the ACLs are committed; each other node
    # applies them a moment later (as Kafka's brokers learn of the controller's changes): frank's
    # first record through a node waits for that node's copy. Both bindings came in one request
    # (one metadata command), so a node that allows fr-open holds the DENY too.
    for node_id in cluster.node_ids():
        wait_until(lambda n=node_id: produce_through(cluster, tls, n, "fr-open") is None, timeout=60,
                   message=f"node {node_id} authenticating and authorizing frank")
    for node_id in cluster.node_ids():  # every node's copy of the metadata has them
        assert produce_through(cluster, tls, node_id, "fr-open") is None
        assert produce_through(cluster, tls, node_id, "fr-secret") == "TOPIC_AUTHORIZATION_FAILED"

    cluster.kill(leader)
    survivors = [i for i in cluster.node_ids() if i != leader]
    for node_id in survivors:
        assert produce_through(cluster, tls, node_id, "fr-open") is None
        assert produce_through(cluster, tls, node_id, "fr-secret") == "TOPIC_AUTHORIZATION_FAILED"
    # The admin API goes to the metadata leader (Kafka's controller): wait until a survivor leads.
    wait_until(lambda: metadata_leader(cluster, tls, survivors[0]) in survivors, timeout=30,
               message="a new metadata leader among the survivors")
    admin = AdminClient(conf(cluster, tls, survivors[0], ADMIN_USER, ADMIN_PASSWORD))
    described = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, f"User:{USER}",
                                                     None, AclOperation.ANY, AclPermissionType.ANY)).result(30)
    assert sorted(str(b) for b in described) == sorted(str(b) for b in bindings)
    described_user = admin.describe_user_scram_credentials([USER])[USER].result(30)
    assert [(i.mechanism, i.iterations) for i in described_user.scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_512, 4096)]
    cluster.restart(leader, timeout_s=60)
    wait_until(lambda: produce_through(cluster, tls, leader, "fr-open") is None, timeout=60,
               message="the restarted node authenticates and authorizes frank")
    assert produce_through(cluster, tls, leader, "fr-secret") == "TOPIC_AUTHORIZATION_FAILED"


def test_raft_refuses_a_node_with_a_foreign_certificate(secure_cluster: DevCluster, tls_material: TlsMaterial) -> None:
    """An impostor dials node 3's Raft port as node 1: with a certificate of another CA, then with
    a certificate of the cluster's CA that names node 2. Node 3 refuses both and says so."""
    target = secure_cluster.nodes[3]
    host, port = target.config.raft_peers()[1][0], int(target.config.raft_listen.rsplit(":", 1)[1])

    def logged(*parts: str) -> bool:
        return any(all(part in line for part in parts) for line in target.output)

    async def dial_until(directory, cert_of: int, ca, refused: tuple[str, ...]) -> None:  # noqa: ANN001
        """Dial as node 1 (retrying every 50-200 ms) until node 3 logged a refusal naming `refused`."""
        config = NodeConfig(target.config.data_dir, ssl_certfile=str(directory / f"node{cert_of}.pem"),
                            ssl_keyfile=str(directory / f"node{cert_of}.key"), ssl_cafile=str(ca))
        impostor = RaftTransport(1, ("127.0.0.1", 0), lambda group, message: None,
                                 config=TransportConfig(backoff_min_s=0.05, backoff_max_s=0.2),
                                 tls=raft_contexts(config), identify=lambda cert: 3)  # it trusts anyone
        await impostor.start()
        impostor.add_peer(3, (host, port))
        try:
            deadline = time.monotonic() + 30
            while not logged(*refused):
                assert time.monotonic() < deadline, "node 3 never logged a refusal naming " + repr(refused) + \
                    ":\n" + "\n".join(line for line in target.output if "raft" in line)[-3000:]
                await asyncio.sleep(0.05)  # polling node 3's output while the impostor dials
        finally:
            await impostor.stop()

    # (the impostor trusts the cluster's CA, so it is node 3 that refuses it)
    asyncio.run(dial_until(tls_material.foreign_directory, 1, tls_material.ca,
                           ("refused raft connection", "TLS failed")))
    asyncio.run(dial_until(tls_material.directory, 2, tls_material.ca,
                           ("claims node 1, its certificate names node 2",)))

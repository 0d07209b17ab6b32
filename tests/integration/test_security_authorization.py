"""Every API answers its authorization error to a principal without the ACL, and a DENY beats an
ALLOW: one secured node (authorizer = acl), a user `eve` with no ACL at all, another `dan` with
an ALLOW on a prefix and a DENY on one stream of it. Every API the broker serves is listed here,
so an API added without authorization fails this test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.support.cluster import start_cluster
from tests.support.kafka import make_batch
from tests.support.security import ADMIN_PASSWORD, ADMIN_PASSWORD_ENV, ADMIN_USER, TlsMaterial, confluent_conf
from vdl_broker.listeners import parse_bootstrap_users
from vdl_client import ClientSettings, Connection, VdlClient, admin
from vdl_client.requests import fetch_request, produce_request
from vdl_client.security import SecuritySettings
from vdl_dev.dev_cluster import DevCluster
from vdl_wire import messages as m
from vdl_wire.acls import AclBinding, Operation, PatternType, Permission, ResourceType
from vdl_wire.api import API_SPECS
from vdl_wire.errors import ErrorCode

STREAM, GROUP = "guarded", "guarded-group"
TOPIC_DENIED, GROUP_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED, TXN_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
UNAUTHORIZED_APIS = {17, 18, 36}  # SaslHandshake, ApiVersions, SaslAuthenticate: before any principal exists


@pytest.fixture(scope="module")
def guarded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
            tls_material: TlsMaterial) -> Iterator[DevCluster]:
    bootstrap = parse_bootstrap_users([{"name": ADMIN_USER, "mechanism": "SCRAM-SHA-512",
                                        "password_env": ADMIN_PASSWORD_ENV}], "bootstrap_users")
    cluster = start_cluster(tmp_path_factory.mktemp("guarded"), nodes=1, protocols=("SASL_PLAINTEXT",),
                            settings={"authorizer": "acl", "super_users": [ADMIN_USER], "bootstrap_users": bootstrap},
                            register=lambda c: request.addfinalizer(c.kill_all), env={ADMIN_PASSWORD_ENV: ADMIN_PASSWORD},
                            client_security=login(ADMIN_USER, ADMIN_PASSWORD, "SCRAM-SHA-512"))
    with VdlClient(ClientSettings.from_bootstrap(cluster.bootstrap_servers,
                                                 security=login(ADMIN_USER, ADMIN_PASSWORD, "SCRAM-SHA-512"))) as c:
        admin.upsert_user(c, "eve", "SCRAM-SHA-256", "eve-Pa55", 4096)
        admin.upsert_user(c, "dan", "SCRAM-SHA-256", "dan-Pa55", 4096)
        admin.upsert_user(c, "olga", "SCRAM-SHA-256", "olga-Pa55", 4096)  # a lag monitor: DESCRIBE only
        admin.create_acls(c, [
            AclBinding(ResourceType.TOPIC, STREAM, PatternType.LITERAL, "User:olga", "*", Operation.DESCRIBE,
                       Permission.ALLOW),
            AclBinding(ResourceType.TOPIC, "deny-", PatternType.PREFIXED, "User:dan", "*", Operation.ALL,
                       Permission.ALLOW),
            AclBinding(ResourceType.TOPIC, "deny-this", PatternType.LITERAL, "User:dan", "*", Operation.WRITE,
                       Permission.DENY)])
        for name in (STREAM, "deny-this", "deny-that"):
            c.create_stream(name, exist_ok=False)
        c.produce(STREAM, make_batch([b"secret"]), 10_000, 1e12)
    yield cluster


def login(user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> SecuritySettings:
    return SecuritySettings("SASL_PLAINTEXT", mechanism, user, password)


def topic_errors(response: Any, topics: str, partitions: str, code: str = "error_code") -> list[int]:
    return [getattr(p, code) for t in getattr(response, topics) for p in getattr(t, partitions)]


# API key -> (request, the error codes read from its answer, what they must be)
CHECKS: dict[int, tuple[Callable[[], Any], Callable[[Any], list[int]], list[int]]] = {
    0: (lambda: produce_request(STREAM, make_batch([b"x"]), 5000),
        lambda r: topic_errors(r, "responses", "partition_responses"), [TOPIC_DENIED]),
    1: (lambda: fetch_request(STREAM, 0, 1 << 20, 1 << 20, 0),
        lambda r: topic_errors(r, "responses", "partitions"), [TOPIC_DENIED]),
    2: (lambda: m.ListOffsetsRequest(replica_id=-1, topics=[m.ListOffsetsRequest.ListOffsetsTopic(
            name=STREAM, partitions=[m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]),
        lambda r: topic_errors(r, "topics", "partitions"), [TOPIC_DENIED]),
    3: (lambda: m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=STREAM)]),
        lambda r: [t.error_code for t in r.topics], [TOPIC_DENIED]),
    8: (lambda: m.OffsetCommitRequest(group_id=GROUP, topics=[m.OffsetCommitRequest.OffsetCommitRequestTopic(
            name=STREAM, partitions=[m.OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0,
                                                                                        committed_offset=1)])]),
        lambda r: topic_errors(r, "topics", "partitions"), [GROUP_DENIED]),
    9: (lambda: m.OffsetFetchRequest(groups=[m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=GROUP, topics=None)]),
        lambda r: [g.error_code for g in r.groups], [GROUP_DENIED]),
    10: (lambda: m.FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP]),
         lambda r: [c.error_code for c in r.coordinators], [GROUP_DENIED]),
    11: (lambda: m.JoinGroupRequest(group_id=GROUP, session_timeout_ms=10_000, member_id="", protocol_type="consumer",
                                    protocols=[m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]),
         lambda r: [r.error_code], [GROUP_DENIED]),
    12: (lambda: m.HeartbeatRequest(group_id=GROUP, generation_id=1, member_id="x"), lambda r: [r.error_code],
         [GROUP_DENIED]),
    13: (lambda: m.LeaveGroupRequest(group_id=GROUP, members=[m.LeaveGroupRequest.MemberIdentity(member_id="x")]),
         lambda r: [r.error_code], [GROUP_DENIED]),
    14: (lambda: m.SyncGroupRequest(group_id=GROUP, generation_id=1, member_id="x"), lambda r: [r.error_code],
         [GROUP_DENIED]),
    15: (lambda: m.DescribeGroupsRequest(groups=[GROUP]), lambda r: [g.error_code for g in r.groups], [GROUP_DENIED]),
    16: (lambda: m.ListGroupsRequest(), lambda r: [r.error_code, len(r.groups)], [0, 0]),  # filtered, as Kafka
    19: (lambda: m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
            name="eve-stream", num_partitions=1, replication_factor=-1)], timeout_ms=5000),
         lambda r: [t.error_code for t in r.topics], [TOPIC_DENIED]),
    20: (lambda: m.DeleteTopicsRequest(topics=[m.DeleteTopicsRequest.DeleteTopicState(name=STREAM)], timeout_ms=5000),
         lambda r: [t.error_code for t in r.responses], [TOPIC_DENIED]),
    21: (lambda: m.DeleteRecordsRequest(topics=[m.DeleteRecordsRequest.DeleteRecordsTopic(
            name=STREAM, partitions=[m.DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=-1)])],
            timeout_ms=5000), lambda r: topic_errors(r, "topics", "partitions"), [TOPIC_DENIED]),
    22: (lambda: m.InitProducerIdRequest(transactional_id="vdl-spark/q/0/0", transaction_timeout_ms=60_000),
         lambda r: [r.error_code], [TXN_DENIED]),
    23: (lambda: m.OffsetForLeaderEpochRequest(replica_id=-1, topics=[
            m.OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=STREAM, partitions=[
                m.OffsetForLeaderEpochRequest.OffsetForLeaderPartition(partition=0, leader_epoch=1)])]),
         lambda r: topic_errors(r, "topics", "partitions"), [TOPIC_DENIED]),
    24: (lambda: m.AddPartitionsToTxnRequest(transactions=[m.AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
            transactional_id="t", producer_id=1, producer_epoch=0, topics=[
                m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=STREAM, partitions=[0])])]),
         lambda r: [p.partition_error_code for x in r.results_by_transaction for t in x.topic_results
                    for p in t.results_by_partition], [TXN_DENIED]),
    25: (lambda: m.AddOffsetsToTxnRequest(transactional_id="t", producer_id=1, producer_epoch=0, group_id=GROUP),
         lambda r: [r.error_code], [TXN_DENIED]),
    26: (lambda: m.EndTxnRequest(transactional_id="t", producer_id=1, producer_epoch=0, committed=True),
         lambda r: [r.error_code], [TXN_DENIED]),
    27: (lambda: m.WriteTxnMarkersRequest(markers=[m.WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=1, producer_epoch=0, transaction_result=True, coordinator_epoch=0, topics=[
                m.WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=STREAM, partition_indexes=[0])])]),
         lambda r: [p.error_code for x in r.markers for t in x.topics for p in t.partitions], [CLUSTER_DENIED]),
    28: (lambda: m.TxnOffsetCommitRequest(transactional_id="t", group_id=GROUP, producer_id=1, producer_epoch=0,
                                          topics=[m.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
                                              name=STREAM, partitions=[
                                                  m.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                                                      partition_index=0, committed_offset=1)])]),
         lambda r: [p.error_code for t in r.topics for p in t.partitions], [TXN_DENIED]),
    29: (lambda: m.DescribeAclsRequest(resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1),
         lambda r: [r.error_code], [CLUSTER_DENIED]),
    30: (lambda: m.CreateAclsRequest(creations=[m.CreateAclsRequest.AclCreation(
            resource_type=2, resource_name="*", resource_pattern_type=3, principal="User:eve", host="*", operation=2,
            permission_type=3)]), lambda r: [x.error_code for x in r.results], [CLUSTER_DENIED]),
    31: (lambda: m.DeleteAclsRequest(filters=[m.DeleteAclsRequest.DeleteAclsFilter(
            resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1)]),
         lambda r: [x.error_code for x in r.filter_results], [CLUSTER_DENIED]),
    32: (lambda: m.DescribeConfigsRequest(resources=[
            m.DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name=STREAM),
            m.DescribeConfigsRequest.DescribeConfigsResource(resource_type=4, resource_name="1"),
            m.DescribeConfigsRequest.DescribeConfigsResource(resource_type=8, resource_name="1"),
            m.DescribeConfigsRequest.DescribeConfigsResource(resource_type=16, resource_name="producers"),
            m.DescribeConfigsRequest.DescribeConfigsResource(resource_type=32, resource_name=GROUP)]),
         lambda r: [x.error_code for x in r.results],
         [TOPIC_DENIED, CLUSTER_DENIED, CLUSTER_DENIED, CLUSTER_DENIED, GROUP_DENIED]),
    44: (lambda: m.IncrementalAlterConfigsRequest(resources=[m.IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=2, resource_name=STREAM, configs=[m.IncrementalAlterConfigsRequest.AlterableConfig(
                name="retention.ms", config_operation=0, value="1000")]),
            m.IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=8, resource_name="1", configs=[m.IncrementalAlterConfigsRequest.AlterableConfig(
                name="vdl_broker", config_operation=0, value="DEBUG")]),
            m.IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=32, resource_name=GROUP, configs=[m.IncrementalAlterConfigsRequest.AlterableConfig(
                name="consumer.session.timeout.ms", config_operation=0, value="30000")])]),
         lambda r: [x.error_code for x in r.responses], [TOPIC_DENIED, CLUSTER_DENIED, GROUP_DENIED]),
    33: (lambda: m.AlterConfigsRequest(resources=[m.AlterConfigsRequest.AlterConfigsResource(
            resource_type=2, resource_name=STREAM, configs=[m.AlterConfigsRequest.AlterableConfig(
                name="retention.ms", value="1000")]), m.AlterConfigsRequest.AlterConfigsResource(
            resource_type=4, resource_name="1", configs=[]), m.AlterConfigsRequest.AlterConfigsResource(
            resource_type=32, resource_name=GROUP, configs=[])]),
         lambda r: [x.error_code for x in r.responses], [TOPIC_DENIED, CLUSTER_DENIED, GROUP_DENIED]),
    37: (lambda: m.CreatePartitionsRequest(topics=[m.CreatePartitionsRequest.CreatePartitionsTopic(
            name=STREAM, count=2)], timeout_ms=5000), lambda r: [x.error_code for x in r.results], [TOPIC_DENIED]),
    55: (lambda: m.DescribeQuorumRequest(topics=[m.DescribeQuorumRequest.TopicData(
            topic_name="__cluster_metadata", partitions=[m.DescribeQuorumRequest.PartitionData(partition_index=0)])]),
         lambda r: [r.error_code, len(r.topics)], [CLUSTER_DENIED, 0]),
    # DescribeCluster needs no ACL (as Metadata): eve may do nothing on the cluster
    57: (lambda: m.UpdateFeaturesRequest(timeout_ms=5000, feature_updates=[
            m.UpdateFeaturesRequest.FeatureUpdateKey(feature="vdl.metadata.version", max_version_level=1,
                                                     upgrade_type=1)]), lambda r: [r.error_code], [CLUSTER_DENIED]),
    60: (lambda: m.DescribeClusterRequest(include_cluster_authorized_operations=True),
         lambda r: [r.error_code, r.cluster_authorized_operations], [0, 0]),
    34: (lambda: m.AlterReplicaLogDirsRequest(dirs=[m.AlterReplicaLogDirsRequest.AlterReplicaLogDir(
            path="/elsewhere", topics=[m.AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic(name=STREAM,
                                                                                           partitions=[0])])]),
         lambda r: topic_errors(r, "results", "partitions"), [CLUSTER_DENIED]),
    35: (lambda: m.DescribeLogDirsRequest(topics=None), lambda r: [r.error_code], [CLUSTER_DENIED]),
    42: (lambda: m.DeleteGroupsRequest(groups_names=[GROUP]), lambda r: [g.error_code for g in r.results],
         [GROUP_DENIED]),
    47: (lambda: m.OffsetDeleteRequest(group_id=GROUP, topics=[m.OffsetDeleteRequest.OffsetDeleteRequestTopic(
            name=STREAM, partitions=[m.OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])]),
         lambda r: [r.error_code], [GROUP_DENIED]),
    48: (lambda: m.DescribeClientQuotasRequest(components=[], strict=False),
         lambda r: [r.error_code, len(r.entries or [])], [CLUSTER_DENIED, 0]),
    49: (lambda: m.AlterClientQuotasRequest(entries=[m.AlterClientQuotasRequest.EntryData(
            entity=[m.AlterClientQuotasRequest.EntityData(entity_type="user", entity_name="eve")],
            ops=[m.AlterClientQuotasRequest.OpData(key="producer_byte_rate", remove=True)])]),
         lambda r: [e.error_code for e in r.entries], [CLUSTER_DENIED]),
    50: (lambda: m.DescribeUserScramCredentialsRequest(users=None), lambda r: [r.error_code], [CLUSTER_DENIED]),
    51: (lambda: m.AlterUserScramCredentialsRequest(deletions=[m.AlterUserScramCredentialsRequest
                                                               .ScramCredentialDeletion(name="eve", mechanism=1)]),
         lambda r: [x.error_code for x in r.results], [CLUSTER_DENIED]),
    43: (lambda: m.ElectLeadersRequest(election_type=0, topic_partitions=[
            m.ElectLeadersRequest.TopicPartitions(topic=STREAM, partitions=[0])]),
         lambda r: [r.error_code, *topic_errors(r, "replica_election_results", "partition_result")],
         [CLUSTER_DENIED, CLUSTER_DENIED]),
    45: (lambda: m.AlterPartitionReassignmentsRequest(topics=[m.AlterPartitionReassignmentsRequest.ReassignableTopic(
            name=STREAM, partitions=[m.AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition(
                partition_index=0, replicas=[1])])]), lambda r: [r.error_code], [CLUSTER_DENIED]),
    46: (lambda: m.ListPartitionReassignmentsRequest(), lambda r: [r.error_code], [CLUSTER_DENIED]),
    61: (lambda: m.DescribeProducersRequest(topics=[m.DescribeProducersRequest.TopicRequest(
            name=STREAM, partition_indexes=[0])]),
         lambda r: [p.error_code for t in r.topics for p in t.partitions], [TOPIC_DENIED]),
    65: (lambda: m.DescribeTransactionsRequest(transactional_ids=["t"]),
         lambda r: [s.error_code for s in r.transaction_states], [TXN_DENIED]),
    66: (lambda: m.ListTransactionsRequest(), lambda r: [r.error_code, len(r.transaction_states)], [0, 0]),
    68: (lambda: m.ConsumerGroupHeartbeatRequest(group_id=GROUP, member_id="m", member_epoch=0,
                                                 rebalance_timeout_ms=5000, subscribed_topic_names=[STREAM],
                                                 topic_partitions=[]),
         lambda r: [r.error_code], [GROUP_DENIED]),
    69: (lambda: m.ConsumerGroupDescribeRequest(group_ids=[GROUP], include_authorized_operations=False),
         lambda r: [g.error_code for g in r.groups], [GROUP_DENIED]),
    74: (lambda: m.ListConfigResourcesRequest(resource_types=[]), lambda r: [r.error_code, len(r.config_resources)],
         [CLUSTER_DENIED, 0]),
    # A name eve may not DESCRIBE, whether it exists or not: no existence disclosed.
    75: (lambda: m.DescribeTopicPartitionsRequest(topics=[m.DescribeTopicPartitionsRequest.TopicRequest(name=n)
                                                          for n in (STREAM, "no-such-stream")]),
         lambda r: [t.error_code for t in r.topics], [TOPIC_DENIED, TOPIC_DENIED]),
    10000: (lambda: m.VdlNodesRequest(action="decommission", node_id=1), lambda r: [r.error_code],
            [CLUSTER_DENIED]),
    10001: (lambda: m.VdlWriterIdRequest(writer_key="vdl-spark/q/0/0"), lambda r: [r.error_code], [TXN_DENIED]),
}


def test_every_served_api_is_checked_here() -> None:
    assert set(CHECKS) | UNAUTHORIZED_APIS == set(API_SPECS)


@pytest.mark.parametrize("api_key", sorted(CHECKS))
def test_api_answers_its_authorization_error(guarded: DevCluster, api_key: int) -> None:
    build, codes, expected = CHECKS[api_key]
    with Connection(guarded.bootstrap_servers, 10, "eve", login("eve", "eve-Pa55")) as eve:
        assert codes(eve.request(build(), 10)) == [int(code) for code in expected]


def test_idempotent_producer_without_any_write_acl_is_a_cluster_authorization_failure(guarded: DevCluster) -> None:
    with Connection(guarded.bootstrap_servers, 10, "eve", login("eve", "eve-Pa55")) as eve:
        response = eve.request(m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000), 10)
    assert response.error_code == CLUSTER_DENIED
    with Connection(guarded.bootstrap_servers, 10, "dan", login("dan", "dan-Pa55")) as dan:  # WRITE on deny-*
        assert dan.request(m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000), 10) \
            .error_code == 0


def test_metadata_leaves_out_streams_the_principal_may_not_describe(guarded: DevCluster) -> None:
    with Connection(guarded.bootstrap_servers, 10, "dan", login("dan", "dan-Pa55")) as dan:
        names = [t.name for t in dan.request(m.MetadataRequest(topics=None), 10).topics]
    assert names == ["deny-that", "deny-this"]  # WRITE is denied on deny-this, DESCRIBE is not


def test_describe_topic_partitions_leaves_out_streams_the_principal_may_not_describe(guarded: DevCluster) -> None:
    """As Metadata: left out of the every-stream answer; named, TOPIC_AUTHORIZATION_FAILED after
    the others, with no topic id nor operations, and no room taken on the page."""
    def described(topics: list[str], limit: int = 2000) -> list[tuple[int, str, bool, int, int]]:
        request = m.DescribeTopicPartitionsRequest(
            topics=[m.DescribeTopicPartitionsRequest.TopicRequest(name=n) for n in topics], response_partition_limit=limit)
        with Connection(guarded.bootstrap_servers, 10, "dan", login("dan", "dan-Pa55")) as dan:
            response = dan.request(request, 10)
        cursor = response.next_cursor
        assert cursor is None or (cursor.topic_name, cursor.partition_index) == ("deny-this", 0)
        return [(t.error_code, t.name, t.topic_id.int != 0, len(t.partitions), t.topic_authorized_operations)
                for t in response.topics]

    # KIP-430 bits of the TOPIC operations (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE,
    # DESCRIBE_CONFIGS, ALTER_CONFIGS): dan may do all on deny-*, but WRITE on deny-this.
    every = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
    assert described([]) == [(0, "deny-that", True, 1, every), (0, "deny-this", True, 1, every & ~(1 << 4))]
    assert described(["deny-this", STREAM, "deny-that"]) == [
        (0, "deny-that", True, 1, every), (0, "deny-this", True, 1, every & ~(1 << 4)),
        (TOPIC_DENIED, STREAM, False, 0, -(2**31))]
    # A full page still walks on to a refused name (Kafka checks each as its walk reaches it) ...
    assert described([STREAM, "deny-that"], limit=1) == [
        (0, "deny-that", True, 1, every), (TOPIC_DENIED, STREAM, False, 0, -(2**31))]
    # ... but stops at the next describable one, the cursor's: names past it are not checked yet.
    assert described(["deny-this", STREAM, "deny-that"], limit=1) == [(0, "deny-that", True, 1, every)]


def test_describe_alone_lists_offsets_but_does_not_read(guarded: DevCluster) -> None:
    """ListOffsets needs DESCRIBE on the stream, as Kafka's (KafkaApis.handleListOffsetRequest),
    so a lag monitor allowed only that gets the stream's offsets; reading it still needs READ."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    olga = AdminClient(confluent_conf("SASL_PLAINTEXT", None, "SCRAM-SHA-256", "olga", "olga-Pa55")  # type: ignore[arg-type]
                       | {"bootstrap.servers": guarded.bootstrap_servers})
    offsets = {name: olga.list_offsets({TopicPartition(STREAM, 0): spec})[TopicPartition(STREAM, 0)]
               .result(timeout=30).offset for name, spec in (("earliest", OffsetSpec.earliest()),
                                                              ("latest", OffsetSpec.latest()))}
    assert offsets == {"earliest": 0, "latest": 1}
    build, codes, _ = CHECKS[1]
    with Connection(guarded.bootstrap_servers, 10, "olga", login("olga", "olga-Pa55")) as connection:
        assert codes(connection.request(build(), 10)) == [int(TOPIC_DENIED)]


def test_deny_beats_allow(guarded: DevCluster) -> None:
    conf = confluent_conf("SASL_PLAINTEXT", None, "SCRAM-SHA-256", "dan", "dan-Pa55") | {  # type: ignore[arg-type]
        "bootstrap.servers": guarded.bootstrap_servers, "acks": "all"}
    results: dict[str, str | None] = {}
    producer = Producer(conf)
    for stream in ("deny-this", "deny-that"):
        producer.produce(stream, b"v", on_delivery=lambda error, msg: results.__setitem__(
            msg.topic(), error.name() if error else None))
    assert producer.flush(30) == 0
    assert results == {"deny-this": "TOPIC_AUTHORIZATION_FAILED", "deny-that": None}


def test_authorized_operations_are_what_the_acls_allow(guarded: DevCluster) -> None:
    """KIP-430 through librdkafka's admin client (Metadata v8+ for topics and the cluster,
    ConsumerGroupDescribe / DescribeGroups for groups): each is what the principal may do,
    where they used to be left out (librdkafka: None). dan may do everything on deny-* but WRITE
    on deny-this; the admin, a super user, everything on a group and on the cluster. 0.2 s."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicCollection, TopicPartition
    from confluent_kafka.admin import AdminClient

    def client(user: str, password: str, mechanism: str) -> AdminClient:
        return AdminClient(confluent_conf("SASL_PLAINTEXT", None, mechanism, user, password)  # type: ignore[arg-type]
                           | {"bootstrap.servers": guarded.bootstrap_servers})

    def names(operations: list[Any] | None) -> list[str] | None:
        return None if operations is None else sorted(op.name for op in operations)

    dan = client("dan", "dan-Pa55", "SCRAM-SHA-256")
    topic_ops = ["ALTER", "ALTER_CONFIGS", "CREATE", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "READ", "WRITE"]
    described = dan.describe_topics(TopicCollection(["deny-this", "deny-that"]), include_authorized_operations=True)
    assert {name: names(f.result(timeout=30).authorized_operations) for name, f in described.items()} == {
        "deny-this": [op for op in topic_ops if op != "WRITE"], "deny-that": topic_ops}
    # (dan may do nothing on the cluster: an empty bit field, which librdkafka gives as None.)

    admin_client = client(ADMIN_USER, ADMIN_PASSWORD, "SCRAM-SHA-512")
    group = "ops-group"
    [altered] = admin_client.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group, [TopicPartition(STREAM, 0, 1)])]).values()
    altered.result(timeout=30)
    [future] = admin_client.describe_consumer_groups([group], include_authorized_operations=True).values()
    assert names(future.result(timeout=30).authorized_operations) == [
        "ALTER_CONFIGS", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "READ"]
    assert names(admin_client.describe_cluster(include_authorized_operations=True).result(timeout=30)
                 .authorized_operations) == ["ALTER", "ALTER_CONFIGS", "CLUSTER_ACTION", "CREATE", "DESCRIBE",
                                             "DESCRIBE_CONFIGS", "IDEMPOTENT_WRITE"]

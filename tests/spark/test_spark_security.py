"""Spark over SASL_SSL with Spark's Kafka options: a JAAS string (ScramLoginModule), a PEM trust
store; batch write and read, a streaming copy through the exactly-once sink under exactly the
ACLs README documents; no password in plans, explain() or errors; bad settings fail on the driver
naming the option."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from chispa import assert_df_equality

from tests.support.cluster import start_cluster
from tests.support.security import ADMIN_PASSWORD, ADMIN_PASSWORD_ENV, ADMIN_USER, TlsMaterial
from vdl_broker.listeners import parse_bootstrap_users
from vdl_client import ClientSettings, VdlClient, admin
from vdl_client.security import SecuritySettings
from vdl_dev.dev_cluster import DevCluster
from vdl_wire.acls import AclBinding, Operation, PatternType, Permission, ResourceType

USER, PASSWORD = "spark", "Sp4rk-pa55-in-jaas"
JAAS = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{USER}" password="{PASSWORD}";'


@pytest.fixture(scope="module")
def secured(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
            tls_material: TlsMaterial) -> Iterator[DevCluster]:
    bootstrap = parse_bootstrap_users([{"name": ADMIN_USER, "mechanism": "SCRAM-SHA-512",
                                        "password_env": ADMIN_PASSWORD_ENV}], "bootstrap_users")
    security = SecuritySettings("SASL_SSL", "SCRAM-SHA-512", ADMIN_USER, ADMIN_PASSWORD, str(tls_material.ca))
    cluster = start_cluster(tmp_path_factory.mktemp("spark-secure"), nodes=1, protocols=("SASL_SSL",),
                            settings={"authorizer": "acl", "super_users": [ADMIN_USER], "bootstrap_users": bootstrap},
                            register=lambda c: request.addfinalizer(c.kill_all), tls_dir=tls_material.directory,
                            env={ADMIN_PASSWORD_ENV: ADMIN_PASSWORD}, client_security=security)
    with VdlClient(ClientSettings.from_bootstrap(cluster.bootstrap_servers, security=security)) as client:
        admin.upsert_user(client, USER, "SCRAM-SHA-512", PASSWORD, 4096)
        # What README says a job needs: READ on its sources, WRITE on its targets, and for the
        # exactly-once sink WRITE on the transactional ids prefixed vdl-spark/.
        admin.create_acls(client, [
            AclBinding(ResourceType.TOPIC, "sp-in", PatternType.LITERAL, f"User:{USER}", "*", Operation.READ,
                       Permission.ALLOW),
            AclBinding(ResourceType.TOPIC, "sp-out", PatternType.PREFIXED, f"User:{USER}", "*", Operation.WRITE,
                       Permission.ALLOW),
            AclBinding(ResourceType.TOPIC, "sp-in", PatternType.LITERAL, f"User:{USER}", "*", Operation.WRITE,
                       Permission.ALLOW),
            AclBinding(ResourceType.TRANSACTIONAL_ID, "vdl-spark/", PatternType.PREFIXED, f"User:{USER}", "*",
                       Operation.WRITE, Permission.ALLOW),
            # (the test reads the copies back as the same user)
            AclBinding(ResourceType.TOPIC, "sp-out", PatternType.PREFIXED, f"User:{USER}", "*", Operation.READ,
                       Permission.ALLOW)])
        for stream in ("sp-in", "sp-out-eo", "sp-out-read"):
            client.create_stream(stream, exist_ok=False)
    yield cluster
    assert PASSWORD not in "\n".join(cluster.nodes[1].output)


def options(cluster: DevCluster, tls: TlsMaterial) -> dict[str, str]:
    return {"kafka.bootstrap.servers": cluster.bootstrap_servers, "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.jaas.config": JAAS,
            "kafka.ssl.truststore.location": str(tls.ca), "kafka.ssl.truststore.type": "PEM"}


def test_batch_write_then_read_over_sasl_ssl(spark, secured: DevCluster, tls_material: TlsMaterial) -> None:  # noqa: ANN001
    values = [f"v{i:03d}".encode() for i in range(50)]
    # One partition: one write task, so the stream holds the values in this order (two tasks
    # may append their halves either way round).
    frame = spark.createDataFrame([(v,) for v in values], "value binary").coalesce(1)
    frame.write.format("vdl").options(**options(secured, tls_material)).option("topic", "sp-in").mode("append").save()
    read = (spark.read.format("vdl").options(**options(secured, tls_material)).option("subscribe", "sp-in")
            .load().select("value", "offset"))
    expected = spark.createDataFrame([(v, i) for i, v in enumerate(values)], "value binary, offset long")
    assert_df_equality(read.orderBy("offset"), expected, ignore_nullable=True)
    for plan in (_explain(read), read._jdf.queryExecution().toString()):
        assert PASSWORD not in plan


def _explain(frame) -> str:  # noqa: ANN001
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        frame.explain(extended=True)
    return out.getvalue()


def test_streaming_copy_through_the_exactly_once_sink(spark, secured: DevCluster, tls_material: TlsMaterial,  # noqa: ANN001
                                                      tmp_path: Path) -> None:
    source = (spark.readStream.format("vdl").options(**options(secured, tls_material)).option("subscribe", "sp-in")
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "20").load()
              .select("key", "value"))
    query = (source.writeStream.format("vdl").options(**options(secured, tls_material)).option("topic", "sp-out-eo")
             .option("exactlyOnce", "true").option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()
    assert PASSWORD not in str(query.lastProgress) and PASSWORD not in _streaming_explain(query)
    copied = (spark.read.format("vdl").options(**options(secured, tls_material)).option("subscribe", "sp-out-eo")
              .load().select("value"))
    original = (spark.read.format("vdl").options(**options(secured, tls_material)).option("subscribe", "sp-in")
                .load().select("value"))
    assert_df_equality(copied.orderBy("value"), original.orderBy("value"))


def _streaming_explain(query) -> str:  # noqa: ANN001
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        query.explain(extended=True)
    return out.getvalue()


def test_bad_or_missing_security_settings_fail_on_the_driver(spark, secured: DevCluster,  # noqa: ANN001
                                                             tls_material: TlsMaterial) -> None:
    base = options(secured, tls_material)
    cases = [({"kafka.sasl.jaas.config": None}, "kafka.security.protocol"),
             ({"kafka.ssl.truststore.type": "JKS"}, "kafka.ssl.truststore.type"),
             ({"kafka.sasl.mechanism": "PLAIN"}, "kafka.sasl.jaas.config")]
    for change, option in cases:
        settings = {k: v for k, v in (base | change).items() if v is not None}
        with pytest.raises(Exception, match=option.replace(".", r"\.")) as info:
            spark.read.format("vdl").options(**settings).option("subscribe", "sp-in").load()
        assert PASSWORD not in str(info.value)
    wrong = base | {"kafka.sasl.jaas.config": JAAS.replace(PASSWORD, "not-the-password")}
    with pytest.raises(Exception, match="SASL_AUTHENTICATION_FAILED") as info:
        spark.read.format("vdl").options(**wrong).option("subscribe", "sp-in").load().count()
    assert "not-the-password" not in str(info.value)

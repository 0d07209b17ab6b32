"""Fixtures of the modules driving Apache Kafka's own Java client and command-line tools
(test_java_admin, test_java_client, test_kafka_tools): per module, one harness JVM (a JVM start
costs seconds here) and two clusters, one node and three, each with a PLAINTEXT and a SASL_SSL
listener (tests/support/java_targets.py). `target` runs a test on each of the four ways in."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.java_client import JavaClients
from tests.support.java_targets import JAVA_TARGETS, JavaTarget, make_targets, start_java_cluster
from tests.support.security import TlsMaterial


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaClients]:
    with JavaClients(tmp_path_factory.mktemp("java")) as clients:
        yield clients


@pytest.fixture(scope="module")
def java_targets(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                         tls_material: TlsMaterial) -> dict[str, JavaTarget]:
    directory = tmp_path_factory.mktemp("java-clusters")
    # One after the other, from this thread: a node dies with the thread that started it
    # (PR_SET_PDEATHSIG), so not from a pool's.
    one, three = (start_java_cluster(directory / f"nodes{nodes}", nodes, tls_material,
                                     register=lambda cluster: request.addfinalizer(cluster.kill_all))
                  for nodes in (1, 3))
    return make_targets(one, three, tls_material, directory)


@pytest.fixture(params=JAVA_TARGETS)
def target(request: pytest.FixtureRequest, java_targets: dict[str, JavaTarget]) -> JavaTarget:
    return java_targets[request.param]


@pytest.fixture(scope="module")
def admins(java: JavaClients, java_targets: dict[str, JavaTarget]) -> None:
    """An admin client in `java` per target, named as the target."""
    for target in java_targets.values():
        java.admin(target.name, target.bootstrap, target.security)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test on these clusters gets the tail of every node's output (as tests/conftest.py
    gives a failed test on `dev_cluster`)."""
    outcome = yield
    report = outcome.get_result()
    targets = getattr(item, "funcargs", {}).get("java_targets")
    if not report.failed or not isinstance(targets, dict):
        return
    clusters = {id(t.cluster): (name.split("-", 2)[0] + "-node", t.cluster) for name, t in targets.items()}
    for label, cluster in clusters.values():
        for node in cluster.nodes.values():
            tail = "\n".join(list(node.output)[-200:])
            state = "running" if node.running else f"exited {node.exit_codes}"
            report.sections.append((f"{label} cluster, node {node.node_id} output ({state})", tail))

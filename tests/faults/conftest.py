"""Fixtures for the process-level fault tests: one 3-node dev cluster per test module.

A module may set CLUSTER_SETTINGS (extra node.toml keys, e.g. tiny segments for retention).
Every node runs in its own process group; the finalizers SIGCONT and SIGKILL those groups, so
no broker outlives a test module, whatever the test did to it (SIGSTOP included). When a test
fails, the tail of every node's output is attached to the report.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.faults.harness import ProbeLog, ensure_all_running, start_cluster
from vdl_broker.dev_cluster import DevCluster

NODE_OUTPUT_LINES = 200


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    cluster = getattr(item, "funcargs", {}).get("dev_cluster")
    if report.failed and isinstance(cluster, DevCluster):
        for node in cluster.nodes.values():
            tail = "\n".join(list(node.output)[-NODE_OUTPUT_LINES:])
            state = "running" if node.running else f"exited {node.exit_codes}"
            report.sections.append((f"node {node.node_id} output ({state})", tail))


@pytest.fixture(scope="module")
def dev_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> DevCluster:
    settings = getattr(request.module, "CLUSTER_SETTINGS", {})
    directory = tmp_path_factory.mktemp("dev-cluster")
    return start_cluster(directory, nodes=3, settings=settings,
                         register=lambda cluster: request.addfinalizer(cluster.kill_all))


@pytest.fixture
def cluster(dev_cluster: DevCluster) -> Iterator[DevCluster]:
    """The module's cluster, with every node running before and after the test."""
    ensure_all_running(dev_cluster)
    yield dev_cluster
    ensure_all_running(dev_cluster)


@pytest.fixture
def probes() -> ProbeLog:
    return ProbeLog()

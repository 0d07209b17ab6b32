"""Rolling upgrades. A 3-node cluster started on the previous release (the commit CHANGELOG.md
names for it, taken from this repository's history) is upgraded node by node to this code under
acks=all load and a consumer: nothing acknowledged is lost, the idempotent producer's records are
stored once, the group keeps its committed offsets. Then the feature level (cluster/features.py):
raised only once every node runs a release that supports it, and a node on a release older
than the cluster's level refuses to start, naming both levels. The "next release" is this code
with one more supported level (a sitecustomize module on the nodes' PYTHONPATH)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.faults.harness import (
    check_acknowledged,
    check_consumed,
    high_watermark,
    read_all,
    wait_for_full_isr,
)
from tests.faults.workload import ConsumerThread, Workload
from tests.support.cluster import VDL_CLI, node_address, start_cluster, wait_until
from tests.support.kafka import (
    CLIENT_API_VERSIONS,
    create_topic_raw,
    fetch_partition,
    one_record_batch,
    produce_raw,
    raw_request,
    record_values,
)
from vdl_broker.cluster import features
from vdl_client import ClientSettings, VdlClient
from vdl_client.groups import commit_offsets, committed_offsets
from vdl_dev.dev_cluster import DevCluster

pytestmark = pytest.mark.timeout(400)

REPO = Path(__file__).resolve().parents[2]
LEVEL = features.SUPPORTED_LEVEL
NEXT_RELEASE = "import vdl_broker.cluster.features as features\nfeatures.SUPPORTED_LEVEL += 1\n"


def previous_release() -> tuple[str, str]:
    """(version, commit) of the newest release CHANGELOG.md lists."""
    match = re.search(r"^## (\d+\.\d+\.\d+) — `([0-9a-f]{7,40})`", (REPO / "CHANGELOG.md").read_text(), re.M)
    assert match is not None, "CHANGELOG.md names no release with its commit"
    return match.group(1), match.group(2)


@pytest.fixture(scope="module")
def previous_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The previous release's src/ tree (its dependencies are this release's: same venv)."""
    version, commit = previous_release()
    target = tmp_path_factory.mktemp(f"vdl-{version}")
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "src"], capture_output=True)
    assert archive.returncode == 0, (f"release {version} ({commit}) is not in this repository's history: "
                                     f"{archive.stderr.decode().strip()} (the upgrade test needs a full clone)")
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target / "src"


TXN_SUPPORTED = ("transaction.version", 0, 2)
TXN_FINALIZED = ("transaction.version", 2)


def vdl(cluster: DevCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*VDL_CLI, *args, "--bootstrap", cluster.bootstrap_servers], capture_output=True,
                          text=True, timeout=60)


def metadata_levels(cluster: DevCluster, node_id: int) -> tuple[list[tuple[str, int, int]], list[tuple[str, int]]]:
    """What node `node_id` says of feature levels (ApiVersions v4): supported and finalized."""
    answer = raw_request(node_address(cluster, node_id), CLIENT_API_VERSIONS, 4)
    return ([(f.name, f.min_version, f.max_version) for f in answer.supported_features or []],
            [(f.name, f.max_version_level) for f in answer.finalized_features or []])


def test_rolling_upgrade_from_the_previous_release_under_load(tmp_path: Path, previous_src: Path,
                                                              request: pytest.FixtureRequest) -> None:
    cluster = start_cluster(tmp_path, nodes=3, env={"PYTHONPATH": str(previous_src)},
                            register=lambda c: request.addfinalizer(c.kill_all))
    # The previous release knows no feature levels: its nodes report none.
    assert all(metadata_levels(cluster, n) == ([], []) for n in cluster.node_ids())
    stream = "upgrade-orders"
    assert create_topic_raw(node_address(cluster, 1), stream, 3)[0] == 0
    wait_for_full_isr(cluster, stream, timeout=60)
    with VdlClient(ClientSettings.from_bootstrap(cluster.bootstrap_servers)) as client:
        commit_offsets(client, "billing", {stream: 0})
    consumer = ConsumerThread(cluster.bootstrap_servers, stream, kind="confluent-group")
    consumer.start()
    workload = Workload(cluster.bootstrap_servers, stream, tag="u",
                        kinds=("confluent", "confluent-idempotent", "kafka-python")).start()
    try:
        workload.wait_progress(30)
        cluster.env = {}  # from now on a node starts on this release
        for node_id in cluster.node_ids():
            cluster.restart(node_id, timeout_s=60)  # SIGTERM first: it hands its leaderships over
            wait_for_full_isr(cluster, stream, timeout=60)
            workload.wait_progress(30)
        with VdlClient(ClientSettings.from_bootstrap(cluster.bootstrap_servers)) as client:
            commit_offsets(client, "billing", {stream: 5})
    finally:
        workload.stop()
    leader, hw = high_watermark(cluster, stream, timeout=30)
    seen = consumer.finish(hw, timeout=60)
    assert not workload.acks.errors, f"delivery errors: {workload.acks.errors[:10]}"
    log = {offset: value for offset, (_, value) in read_all(node_address(cluster, leader), stream, 0, hw).items()}
    assert sorted(log) == list(range(hw))
    assert check_acknowledged(workload.acks.snapshot(), log) == []
    assert check_consumed(seen, log) == []
    idempotent = tuple(f"{p.client}-".encode() for p in workload.producers if p.idempotent)
    stored = [v for v in log.values() if v is not None and v.startswith(idempotent)]
    assert len(stored) == len(set(stored)), "an idempotent producer's record is stored twice"
    with VdlClient(ClientSettings.from_bootstrap(cluster.bootstrap_servers)) as client:
        assert committed_offsets(client, "billing") == {stream: 5}

    # Every node runs this release now; the cluster, formed before levels, is at the baseline.
    for node_id in cluster.node_ids():
        # transaction.version (KIP-890 part 2) follows the level: not finalized at the baseline.
        assert metadata_levels(cluster, node_id) == ([("vdl.metadata.version", 1, LEVEL), TXN_SUPPORTED],
                                                     [("vdl.metadata.version", features.BASELINE_LEVEL)])
    upgraded = vdl(cluster, "cluster", "upgrade")
    expected = (f"vdl.metadata.version raised from level {features.BASELINE_LEVEL} to {LEVEL}\n"
                if LEVEL > features.BASELINE_LEVEL else f"vdl.metadata.version is at level {LEVEL} already\n")
    assert (upgraded.returncode, upgraded.stdout) == (0, expected), upgraded.stderr

    # At this level the nodes send each other the newest Raft frames (entries with the checksums
    # their leader stored them under): what is written now reaches every replica as stored.
    for node_id in cluster.node_ids():
        wait_until(lambda n=node_id: metadata_levels(cluster, n)[1][0] == ("vdl.metadata.version", LEVEL), 30,
                   f"node {node_id} applying level {LEVEL}")
    value = b"replicated in the frames of the new level"
    leader, hw = high_watermark(cluster, stream, timeout=30)
    assert produce_raw(node_address(cluster, leader), stream, one_record_batch(value)) == (0, hw)
    stored = fetch_partition(node_address(cluster, leader), stream, hw).records
    assert record_values(stored) == [(hw, value)]
    for node_id in cluster.node_ids():
        wait_until(lambda n=node_id: fetch_partition(node_address(cluster, n), stream, hw).high_watermark == hw + 1, 30,
                   f"node {node_id} holding offset {hw} and knowing it committed")
        assert bytes(fetch_partition(node_address(cluster, node_id), stream, hw).records) == bytes(stored)


def test_the_level_rises_once_every_node_supports_it_and_never_goes_back(tmp_path: Path,
                                                                         request: pytest.FixtureRequest) -> None:
    cluster = start_cluster(tmp_path / "cluster", nodes=3, register=lambda c: request.addfinalizer(c.kill_all))
    next_release = tmp_path / "next-release"
    next_release.mkdir()
    (next_release / "sitecustomize.py").write_text(NEXT_RELEASE)
    cluster.env = {"PYTHONPATH": str(next_release)}
    for node_id in (1, 2):
        cluster.restart(node_id, timeout_s=60)
        assert metadata_levels(cluster, node_id)[0] == [("vdl.metadata.version", 1, LEVEL + 1), TXN_SUPPORTED]
    # Node 3 last: its graceful stop hands the metadata leadership to node 1 or 2, which ask it.
    cluster.env = {}
    cluster.restart(3, timeout_s=60)
    cluster.wait_for_brokers(timeout_s=60)
    refused = vdl(cluster, "cluster", "upgrade", "--level", str(LEVEL + 1))
    assert refused.returncode != 0
    assert refused.stderr.strip().endswith(
        f"INVALID_UPDATE_VERSION: vdl.metadata.version level {LEVEL + 1} needs every node on a release supporting "
        f"it: node 3 supports up to level {LEVEL}"), refused.stderr
    assert metadata_levels(cluster, 1)[1] == [("vdl.metadata.version", LEVEL), TXN_FINALIZED]

    cluster.env = {"PYTHONPATH": str(next_release)}
    cluster.restart(3, timeout_s=60)
    cluster.wait_for_brokers(timeout_s=60)
    dry = vdl(cluster, "cluster", "upgrade", "--dry-run")
    assert (dry.returncode, dry.stdout) == (0, f"vdl.metadata.version is at level {LEVEL}; level {LEVEL + 1} may "
                                               "be finalized\n"), dry.stderr
    raised = vdl(cluster, "cluster", "upgrade")
    assert (raised.returncode, raised.stdout) == (0, f"vdl.metadata.version raised from level {LEVEL} to "
                                                     f"{LEVEL + 1}\n"), raised.stderr
    for node_id in cluster.node_ids():
        wait_until(lambda n=node_id: metadata_levels(cluster, n)[1] == [("vdl.metadata.version", LEVEL + 1), TXN_FINALIZED],
                   30,
                   f"node {node_id} applying the new level")
    again = vdl(cluster, "cluster", "upgrade", "--dry-run")
    assert (again.returncode, again.stdout) == (0, f"vdl.metadata.version is at level {LEVEL + 1} already\n"), \
        again.stderr

    # A node started on the older release again stops at once, naming both levels.
    cluster.env = {}
    cluster.stop(2)
    cluster.restart(2, wait=False)
    node = cluster.nodes[2]
    wait_until(lambda: node.process is not None and node.process.poll() is not None, 60,
               lambda: "node 2 on the older release to stop:\n" + "\n".join(list(node.output)[-20:]))
    assert node.process is not None and node.process.returncode == 1
    output = "\n".join(node.output)
    assert (f"this release supports vdl.metadata.version up to level {LEVEL}: run this node on the release the "
            "other nodes run (a downgrade below a finalized level is not possible)") in output, output
    assert f"feature level {LEVEL + 1}" in output, output

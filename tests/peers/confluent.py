"""confluent-kafka-python's own integration tests against a fresh VDL cluster (`make peer-confluent`).

The tests are those of the confluent-kafka release installed in .venv (tag v<version>), fetched
here and only here (never by `make test`): from PEER_SRC when set (a checkout, or a git directory
to `git archive` from, e.g. a mirror), else cloned from GitHub. They run in their own virtualenv
(build/peers/venv-confluent: the same confluent-kafka wheel plus the tests' requirements, from the
package index) with `BROKERS` set, which makes their `kafka_cluster` fixture use the given cluster
instead of starting Kafka with trivup (tests/integration/conftest.py in their tree).

The cluster: PEER_NODES nodes (default 1; 3 for a replicated one) from `vdl dev-cluster`'s
harness on VDL_DEV_PORT_RANGE, with `auto_create_streams` on, as Kafka's
`auto.create.topics.enable` defaults (test_consumer_memberid produces to a topic it never creates).
PEER_GROUP_PROTOCOL=consumer runs the consumers with KIP-848's protocol (their
TEST_CONSUMER_GROUP_PROTOCOL).

Left out (NOT_SERVED), each for something VDL documents it does not do or a fixture that starts
its own Kafka; PEER_ALL=1 runs them too. Extra arguments go to pytest (e.g. `-k delete_records`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

from tests.support.cluster import start_cluster

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "build" / "peers"
REPOSITORY = "https://github.com/confluentinc/confluent-kafka-python"

# Beside the wheel: what their tests import (requirements/requirements-tests.txt, and the
# schema-registry client's imports that tests/integration/cluster_fixture.py pulls in).
TEST_REQUIREMENTS = ("pytest", "pytest-timeout", "pytest-asyncio", "requests-mock", "respx", "attrs", "cachetools",
                     "httpx", "authlib", "requests", "fastavro", "avro", "jsonschema", "protobuf",
                     "googleapis-common-protos", "async-timeout")

# path or node id -> why it is left out
NOT_SERVED = {
    "tests/integration/schema_registry": "needs a Schema Registry (SR_URL), which VDL does not provide",
    "tests/integration/share_consumer": "share groups (KIP-932), which VDL does not serve",
    "tests/integration/share_consumer_oauth": "share groups (KIP-932) on a trivup cluster it starts itself",
    "tests/integration/share_consumer_sasl": "share groups (KIP-932) on a trivup cluster it starts itself",
    "tests/integration/admin/test_describe_operations.py::test_describe_operations[sasl_cluster0]":
        "its sasl_cluster fixture always starts its own Kafka with trivup (a download)",
    "tests/integration/admin/test_basic_operations.py::test_basic_operations":
        "topics of 2 partitions and CreatePartitions (a stream has one partition), ACLs on a cluster without an "
        "authorizer",
    "tests/integration/admin/test_delete_records.py::test_delete_records_multiple_topics_and_partitions":
        "topics of 3 partitions (a stream has one partition)",
    "tests/integration/admin/test_incremental_alter_configs.py::test_incremental_alter_configs":
        "topics of 2 partitions (a stream has one partition)",
    "tests/integration/consumer/test_consumer_upgrade_downgrade.py::test_consumer_upgrade_downgrade":
        "a topic of 10 partitions shared by classic and KIP-848 members (a stream has one partition)",
}


def run(command: list[str], **kwargs: object) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True, **kwargs)  # type: ignore[call-overload]


def fetch_source(tag: str) -> Path:
    """Their tree at `tag` in build/peers/ (kept: a second run does not fetch again)."""
    target = WORK / f"confluent-kafka-python-{tag}"
    if (target / "tests" / "integration").is_dir():
        return target
    source = os.environ.get("PEER_SRC")
    staging = Path(tempfile.mkdtemp(dir=WORK))
    if source and (Path(source) / "tests" / "integration").is_dir():
        shutil.copytree(source, staging, dirs_exist_ok=True)
    elif source:
        archive = subprocess.run(["git", "--git-dir", source, "archive", tag], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(staging)], input=archive.stdout, check=True)
    else:
        shutil.rmtree(staging)
        try:
            run(["git", "clone", "--quiet", "--depth", "1", "--branch", tag, REPOSITORY, str(staging)])
        except subprocess.CalledProcessError:
            raise SystemExit(f"cannot clone {REPOSITORY} at {tag} (git says why above): set PEER_SRC to a "
                             "checkout of it, or to a git directory to archive PEER_REF from (e.g. a mirror; "
                             f"PEER_REF defaults to {tag})") from None
    staging.rename(target)
    return target


def peer_venv(source: Path, wheel_version: str) -> Path:
    venv = WORK / "venv-confluent"
    python = venv / "bin" / "python"
    stamp = venv / f".installed-{wheel_version}"
    if not stamp.exists():
        run([sys.executable, "-m", "venv", str(venv)])
        trivup = sorted((source / "tests" / "trivup").glob("trivup-*.tar.gz"))  # their fixtures import it
        run([str(python), "-m", "pip", "install", "--quiet", f"confluent-kafka=={wheel_version}",
             *TEST_REQUIREMENTS, *(str(t) for t in trivup)])
        stamp.touch()
    return python


def main(argv: list[str]) -> int:
    WORK.mkdir(parents=True, exist_ok=True)
    wheel_version = version("confluent-kafka")
    tag = os.environ.get("PEER_REF", f"v{wheel_version}")
    source = fetch_source(tag)
    python = peer_venv(source, wheel_version)
    nodes = int(os.environ.get("PEER_NODES", "1"))
    everything = os.environ.get("PEER_ALL") == "1"
    left_out = {} if everything else NOT_SERVED
    for target, why in left_out.items():
        print(f"left out: {target}: {why}")
    options = [f"--ignore={t}" if "::" not in t else f"--deselect={t}" for t in left_out]
    directory = Path(tempfile.mkdtemp(prefix="vdl-peer-confluent-"))
    # fsync on, as `vdl dev-cluster` runs (the suite's clusters turn it off)
    cluster = start_cluster(directory, nodes=nodes, settings={"auto_create_streams": True, "fsync": True})
    try:
        env = os.environ | {"BROKERS": cluster.bootstrap_servers}
        if os.environ.get("PEER_GROUP_PROTOCOL"):
            env["TEST_CONSUMER_GROUP_PROTOCOL"] = os.environ["PEER_GROUP_PROTOCOL"]
        print(f"VDL: {nodes} node(s) at {cluster.bootstrap_servers}; confluent-kafka {wheel_version}, tests of {tag}",
              flush=True)
        command = [str(python), "-m", "pytest", "tests/integration", "-p", "no:cacheprovider", "-rA", "-q",
                   "--timeout", "300", f"--junitxml={WORK / f'confluent-{nodes}-node.xml'}", *options, *argv]
        return subprocess.run(command, cwd=source, env=env).returncode
    finally:
        cluster.stop_all()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

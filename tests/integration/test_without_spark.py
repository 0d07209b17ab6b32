"""A plain install (no extras) runs the broker and the `vdl` CLI: the same processes started with
the Spark extra's modules made unimportable by a meta-path finder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.cluster import BrokerProcess, free_port, start_broker

SPARK_EXTRA_MODULES = ("pyspark", "py4j", "pyarrow", "numpy", "pandas", "deltalake")
# Runs a module as __main__ after installing a finder that refuses the Spark extra's packages.
WITHOUT_SPARK = f"""
import runpy, sys
BLOCKED = {SPARK_EXTRA_MODULES!r}
class BlockSparkExtra:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked: not in a plain install)")
        return None
sys.meta_path.insert(0, BlockSparkExtra())
module, sys.argv = sys.argv[1], sys.argv[1:]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def without_spark(module: str) -> tuple[str, ...]:
    return (sys.executable, "-c", WITHOUT_SPARK, module)


def vdl(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*without_spark("vdl_client.cli"), *args], input=stdin, capture_output=True, timeout=60)


def test_broker_and_cli_run_without_the_spark_extra(tmp_path: Path) -> None:
    broker: BrokerProcess = start_broker(tmp_path, command=without_spark("vdl_broker.server.main"))
    try:
        bootstrap = f"127.0.0.1:{free_port()},{broker.bootstrap}"  # a dead server first
        created = vdl("streams", "create", "plain", "--bootstrap", bootstrap)
        assert created.returncode == 0, created.stderr
        listed = vdl("streams", "list", "--bootstrap", bootstrap)
        assert (listed.returncode, listed.stdout) == (0, b"plain\n"), listed.stderr
        produced = vdl("produce", "plain", "--quiet", "--bootstrap", bootstrap, stdin=b"lz4?\nno spark\n")
        assert produced.returncode == 0, produced.stderr
        consumed = vdl("consume", "plain", "--end", "--bootstrap", bootstrap)
        assert (consumed.returncode, consumed.stdout) == (0, b"lz4?\nno spark\n"), consumed.stderr
        tiered = vdl("streams", "create", "tiered", "--config", "vdl.table.path=/tmp/lake/tiered",
                      "--bootstrap", bootstrap)
        assert tiered.returncode == 1
        assert b"INVALID_CONFIG" in tiered.stderr and b"vdl.table.path: this node cannot write Delta tables: " \
            b"deltalake, pyarrow, numpy not installed (pip install 'vdl-for-spark[tables]')" in tiered.stderr
        described = vdl("streams", "describe", "plain", "--bootstrap", bootstrap)
        assert described.returncode == 0 and b"vdl.table.path" in described.stdout, described.stderr
        demo = vdl("demo", "--records", "5")
        assert demo.returncode == 1
        assert demo.stderr.startswith(b"vdl: error: `vdl demo` needs the Spark extra"), demo.stderr
    finally:
        broker.kill()
    assert broker.alive() is False


def test_the_blocker_really_blocks() -> None:
    probe = subprocess.run([*without_spark("json.tool")], input=b"{}", capture_output=True, timeout=30)
    assert probe.returncode == 0
    blocked = subprocess.run([sys.executable, "-c", WITHOUT_SPARK, "pyarrow"], capture_output=True, timeout=30)
    assert blocked.returncode != 0 and b"blocked: not in a plain install" in blocked.stderr

"""The `vdl` command line against a real broker; a failure is one clear line and a non-zero exit."""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from tests.support.cluster import BROKER_COMMAND, VDL_CLI, BrokerProcess, free_port


def vdl(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*VDL_CLI, *args], input=stdin, capture_output=True, timeout=30)


def test_streams_produce_consume(broker: BrokerProcess) -> None:
    b = ["--bootstrap", broker.bootstrap]
    assert vdl("streams", "create", "events", *b).returncode == 0
    assert vdl("streams", "create", "other", *b).returncode == 0
    listed = vdl("streams", "list", *b)
    assert listed.returncode == 0 and listed.stdout.split() == [b"events", b"other"]
    lines = b"".join(b"line %d\n" % i for i in range(100))
    produced = vdl("produce", "events", *b, stdin=lines)
    assert produced.returncode == 0, produced.stderr
    described = vdl("streams", "describe", "events", *b)
    assert b"offsets 0..100" in described.stdout and b"leader node 1" in described.stdout
    consumed = vdl("consume", "events", "--from", "earliest", "--max", "100", *b)
    assert consumed.returncode == 0 and consumed.stdout == lines
    middle = vdl("consume", "events", "--from", "40", "--max", "3", "--print-offsets", *b)
    assert middle.stdout == b"40\tline 40\n41\tline 41\n42\tline 42\n"
    latest = vdl("consume", "events", "--from", "latest", "--end", *b)
    assert latest.returncode == 0 and latest.stdout == b""
    assert vdl("streams", "delete", "other", *b).returncode == 0
    assert vdl("streams", "list", *b).stdout.split() == [b"events"]


def test_kafka_tools_spellings(broker: BrokerProcess) -> None:
    """--bootstrap-server and --max-messages, as kafka-topics and kafka-console-consumer spell them."""
    b = ["--bootstrap-server", broker.bootstrap]
    assert vdl("streams", "create", "spelled", *b).returncode == 0
    assert vdl("produce", "spelled", "--quiet", *b, stdin=b"a\nb\nc\n").returncode == 0
    consumed = vdl("consume", "spelled", "--max-messages", "2", *b)
    assert consumed.returncode == 0 and consumed.stdout == b"a\nb\n", consumed.stderr


def test_produce_from_file_with_keys(broker: BrokerProcess, tmp_path: Path) -> None:
    b = ["--bootstrap", broker.bootstrap]
    source = tmp_path / "input.txt"
    source.write_bytes(b"k1=v1\nk2=v2\n")
    assert vdl("streams", "create", "keyed", *b).returncode == 0
    assert vdl("produce", "keyed", "--file", str(source), "--key-separator", "=", *b).returncode == 0
    assert vdl("consume", "keyed", "--max", "2", *b).stdout == b"v1\nv2\n"


def test_version_of_both_command_lines() -> None:
    release = version("vdl-for-spark")
    for command, name in ((VDL_CLI, b"vdl"), (BROKER_COMMAND, b"vdl-broker")):
        result = subprocess.run([*command, "--version"], capture_output=True, timeout=30)
        assert (result.returncode, result.stdout, result.stderr) == (0, b"%s %s\n" % (name, release.encode()), b"")


def test_version_of_a_source_tree_that_was_not_installed(tmp_path: Path) -> None:
    """Run from a checkout without `make install` (no site-packages: no installed distribution),
    the release its setup.cfg declares, not "unknown"."""
    root = Path(__file__).resolve().parents[2]
    shutil.copy(root / "setup.cfg", tmp_path / "setup.cfg")
    shutil.copytree(root / "src" / "vdl_wire", tmp_path / "src" / "vdl_wire")
    code = "import sys; sys.path.insert(0, 'src'); from vdl_wire.software import software_version; print(software_version())"
    result = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, capture_output=True, timeout=30)
    assert (result.returncode, result.stdout, result.stderr) == (0, version("vdl-for-spark").encode() + b"\n", b"")


def _one_line_failure(result: subprocess.CompletedProcess[bytes], words: bytes) -> None:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(b"vdl: error:"), result.stderr
    assert words in lines[0], lines[0]


def test_failures_are_one_line(broker: BrokerProcess) -> None:
    b = ["--bootstrap", broker.bootstrap]
    _one_line_failure(vdl("streams", "describe", "missing", *b), b"does not exist")
    _one_line_failure(vdl("produce", "missing", *b, stdin=b"x\n"), b"does not exist")
    assert vdl("streams", "create", "twice", *b).returncode == 0
    _one_line_failure(vdl("streams", "create", "twice", *b), b"already exists")
    _one_line_failure(vdl("streams", "create", "bad name!", *b), b"INVALID_TOPIC_EXCEPTION")
    _one_line_failure(vdl("consume", "twice", "--from", "soon", *b), b"--from")
    _one_line_failure(vdl("streams", "list", "--bootstrap", "127.0.0.1:1"), b"cannot connect")
    _one_line_failure(vdl("produce", "twice", "--file", "/nonexistent/file", *b), b"cannot read")


def test_bootstrap_list_skips_a_dead_server(broker: BrokerProcess) -> None:
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    b = ["--bootstrap", f"{dead},{broker.bootstrap}"]
    assert vdl("streams", "create", "listed", *b).returncode == 0
    listed = vdl("streams", "list", *b)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == [b"listed"]
    assert vdl("produce", "listed", "--quiet", *b, stdin=b"a\nb\n").returncode == 0
    assert vdl("consume", "listed", "--end", *b).stdout == b"a\nb\n"
    _one_line_failure(vdl("streams", "list", "--bootstrap", f"{dead},127.0.0.1:1"), b"cannot connect")
    _one_line_failure(vdl("streams", "list", "--bootstrap", "no-port"), b"HOST:PORT")


def test_demo_arguments_reach_vdl_dev() -> None:
    result = vdl("demo", "--records", "0")
    assert result.returncode == 2
    assert result.stderr.strip() == b"vdl demo: error: --records and --nodes must be >= 1"

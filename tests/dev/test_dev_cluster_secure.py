"""`vdl dev-cluster --secure`: a throw-away CA and node certificates, SASL_SSL listeners with an
admin super user, Raft over mutual TLS, and the printed client properties that kcat and the vdl
CLI use as they are; an anonymous client gets nothing."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.cluster import REPO, VDL_CLI
from vdl_dev.dev_cluster import free_base_port, ports_needed

pytestmark = pytest.mark.timeout(180)


def test_secure_dev_cluster_prints_properties_that_work(tmp_path: Path) -> None:
    port = free_base_port(ports_needed(2, metrics=True))
    data = tmp_path / "secure"
    launcher = subprocess.Popen([*VDL_CLI, "dev-cluster", "--secure", "--nodes", "2", "--data-dir", str(data),
                                 "--base-port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, cwd=REPO)
    try:
        assert launcher.stdout is not None
        lines: list[str] = []
        properties: dict[str, str] = {}
        for line in launcher.stdout:
            lines.append(line)
            if line.startswith("    ") and "=" in line:
                key, _, value = line.strip().partition("=")
                properties[key] = value
            if len(properties) == 5:
                break
        assert properties.keys() == {"security.protocol", "sasl.mechanism", "sasl.username", "sasl.password",
                                     "ssl.ca.location"}, lines
        assert properties["security.protocol"] == "SASL_SSL" and properties["sasl.username"] == "admin"
        config = data / "client.properties"
        assert config.stat().st_mode & 0o077 == 0  # the admin's password is for its owner only
        assert {"ca.pem", "node1.pem", "node2.pem"} <= {p.name for p in (data / "tls").iterdir()}
        bootstrap = f"127.0.0.1:{port},127.0.0.1:{port + 1}"
        cli = [*VDL_CLI, "streams", "create", "secured", "--bootstrap", bootstrap, "--config", str(config)]
        assert subprocess.run(cli, capture_output=True, text=True, timeout=60, cwd=REPO).returncode == 0
        subprocess.run(["kcat", "-P", "-b", bootstrap, "-F", str(config), "-t", "secured"], input=b"one\ntwo\n",
                       check=True, timeout=60)
        consumed = subprocess.run(["kcat", "-C", "-b", bootstrap, "-F", str(config), "-t", "secured", "-o",
                                   "beginning", "-e", "-q"], capture_output=True, check=True, timeout=60)
        assert consumed.stdout.splitlines() == [b"one", b"two"]
        anonymous = subprocess.run([*VDL_CLI, "streams", "list", "--bootstrap", bootstrap, "-X",
                                    "security.protocol=SSL", "-X", f"ssl.ca.location={properties['ssl.ca.location']}"],
                                   capture_output=True, text=True, timeout=60, cwd=REPO)
        assert anonymous.returncode != 0  # a SASL_SSL listener talks to nobody who does not log in
        output = "".join(lines)
        launcher.send_signal(signal.SIGTERM)
        rest = launcher.communicate(timeout=60)[0]
        assert launcher.returncode == 0
        node_lines = [line for line in (output + rest).splitlines() if line.startswith("[node")]
        assert any("mutual TLS" in line for line in node_lines)
        assert not any(properties["sasl.password"] in line for line in node_lines)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()

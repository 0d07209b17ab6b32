"""`vdl dev-cluster --secure`: a throw-away CA and node certificates (vdl_dev/certs.py), SASL_SSL
listeners, Raft over mutual TLS, authorizer `acl` and an `admin` super user, and the client
properties that reach it (DIR/client.properties, readable by its owner only).

The admin password is random, made once per data directory and kept in client.properties, so
the same directory restarts with the same credentials (the bootstrap user is applied once).
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vdl_broker.listeners import BootstrapUser
from vdl_client.security import SecuritySettings, parse_properties_text
from vdl_dev.certs import Authority, make_authority, node_certificate

ADMIN = "admin"
MECHANISM = "SCRAM-SHA-512"
PASSWORD_ENV = "VDL_DEV_ADMIN_PASSWORD"


@dataclass(frozen=True)
class SecureSetup:
    tls_dir: Path
    properties_path: Path
    properties: dict[str, str]
    settings: dict[str, Any] = field(default_factory=dict)  # node settings
    env: dict[str, str] = field(default_factory=dict)  # the nodes' environment (the admin password)

    @property
    def client_security(self) -> SecuritySettings:
        return SecuritySettings.from_properties(self.properties, str(self.properties_path))

    def properties_text(self) -> str:
        return "".join(f"{key}={value}\n" for key, value in self.properties.items())


def prepare(data_dir: Path, nodes: int) -> SecureSetup:
    """Certificates for nodes 1..n under DIR/tls (kept if there), the admin's properties file."""
    tls_dir = Path(data_dir) / "tls"
    if (tls_dir / "ca.pem").is_file() and all((tls_dir / f"node{i}.pem").is_file() for i in range(1, nodes + 1)):
        pass  # a restart of the same directory: same CA, same certificates
    else:
        authority: Authority = make_authority(tls_dir, "VDL dev-cluster CA (throw-away)")
        for node_id in range(1, nodes + 1):
            node_certificate(authority, tls_dir, node_id)
    path = Path(data_dir) / "client.properties"
    if path.is_file():
        properties = parse_properties_text(path.read_text(), str(path))
    else:
        properties = {"security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM, "sasl.username": ADMIN,
                      "sasl.password": secrets.token_urlsafe(18), "ssl.ca.location": str((tls_dir / "ca.pem").resolve())}
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write("".join(f"{key}={value}\n" for key, value in properties.items()))
    settings = {"authorizer": "acl", "super_users": [ADMIN],
                "bootstrap_users": [BootstrapUser(ADMIN, MECHANISM, PASSWORD_ENV)]}
    return SecureSetup(tls_dir, path, properties, settings, {PASSWORD_ENV: properties["sasl.password"]})

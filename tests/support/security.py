"""TLS material and client settings for the security tests (certificates made once per session).

`make_tls_material(dir)`: a CA with node certificates node1..node5 (CN node-<i>), a client
certificate for the mutual-TLS user `carol`, and a foreign CA with its own node certificates (a
node the cluster must refuse). `client_conf` and friends spell one set of credentials for each
client library the tests drive.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vdl_dev.certs import CertFiles, make_authority, node_certificate

ADMIN_USER, ADMIN_PASSWORD = "admin", "Adm1n-pa55word-for-tests"
ADMIN_PASSWORD_ENV = "VDL_TEST_ADMIN_PASSWORD"
MTLS_USER = "carol"


@dataclass(frozen=True)
class TlsMaterial:
    directory: Path  # ca.pem, node<i>.pem/.key: DevCluster's tls_dir
    ca: Path
    client: CertFiles  # CN carol
    foreign_directory: Path  # another CA's ca.pem and node<i>.pem/.key

    def node(self, node_id: int) -> CertFiles:
        return CertFiles(self.directory / f"node{node_id}.pem", self.directory / f"node{node_id}.key")


def make_tls_material(directory: Path) -> TlsMaterial:
    authority = make_authority(directory / "trusted")
    for node_id in range(1, 6):
        node_certificate(authority, directory / "trusted", node_id)
    client = authority.issue(directory / "trusted", "client-carol", MTLS_USER, server=False)
    foreign = make_authority(directory / "foreign", "Foreign CA")
    for node_id in range(1, 6):
        node_certificate(foreign, directory / "foreign", node_id)
    return TlsMaterial(directory / "trusted", authority.certfile, client, directory / "foreign")


def confluent_conf(protocol: str, tls: TlsMaterial, mechanism: str | None = None, user: str | None = None,
                   password: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {"security.protocol": protocol}
    if protocol.endswith("SSL"):
        conf["ssl.ca.location"] = str(tls.ca)
    if protocol == "SSL":
        conf |= {"ssl.certificate.location": str(tls.client.certfile), "ssl.key.location": str(tls.client.keyfile)}
    if protocol.startswith("SASL"):
        conf |= {"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
    return conf


def kafka_python_conf(protocol: str, tls: TlsMaterial, mechanism: str | None = None, user: str | None = None,
                      password: str | None = None) -> dict[str, Any]:
    """kafka-python and aiokafka take the same keyword names."""
    conf: dict[str, Any] = {"security_protocol": protocol}
    if protocol.endswith("SSL"):
        context = ssl.create_default_context(cafile=str(tls.ca))
        if protocol == "SSL":
            context.load_cert_chain(str(tls.client.certfile), str(tls.client.keyfile))
        conf["ssl_context"] = context
    if protocol.startswith("SASL"):
        conf |= {"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
    return conf


def kcat_args(protocol: str, tls: TlsMaterial, mechanism: str | None = None, user: str | None = None,
              password: str | None = None) -> list[str]:
    return [arg for key, value in confluent_conf(protocol, tls, mechanism, user, password).items()
            for arg in ("-X", f"{key}={value}")]

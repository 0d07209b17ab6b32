"""Throw-away TLS material for local clusters (`vdl dev-cluster --secure`, the tests), made with
the `cryptography` package: one CA, a certificate per node (subject CN `node-<id>`: its Raft
identity, see vdl_broker/server/tls.py; subjectAltName localhost and 127.0.0.1, so clients
verify the host name as usual) and client certificates (CN = the user name mutual TLS yields).

Keys are EC P-256 (fast handshakes), files PEM, private keys readable by the owner only.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 30


@dataclass(frozen=True)
class CertFiles:
    certfile: Path
    keyfile: Path


@dataclass(frozen=True)
class Authority:
    """A CA on disk: its certificate (the `ssl_cafile` every party trusts) and key."""

    certfile: Path
    keyfile: Path

    def _load(self) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        cert = x509.load_pem_x509_certificate(self.certfile.read_bytes())
        key = serialization.load_pem_private_key(self.keyfile.read_bytes(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return cert, key

    def issue(self, directory: Path, name: str, common_name: str, *, hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
              server: bool = True) -> CertFiles:
        """A certificate for `common_name`, signed by this CA, valid for `hosts`."""
        ca_cert, ca_key = self._load()
        key = ec.generate_private_key(ec.SECP256R1())
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] if server else [])
        builder = (_builder(_name(common_name), ca_cert.subject, key)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        return _write(Path(directory), name, cert, key)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS)))


def _write(directory: Path, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> CertFiles:
    directory.mkdir(parents=True, exist_ok=True)
    certfile, keyfile = directory / f"{name}.pem", directory / f"{name}.key"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    fd = os.open(keyfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    return CertFiles(certfile, keyfile)


def make_authority(directory: Path, common_name: str = "VDL dev CA") -> Authority:
    """A new self-signed CA under `directory` (ca.pem, ca.key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = _name(common_name)
    cert = (_builder(subject, subject, key)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .sign(key, hashes.SHA256()))
    files = _write(Path(directory), "ca", cert, key)
    return Authority(files.certfile, files.keyfile)


def node_certificate(authority: Authority, directory: Path, node_id: int) -> CertFiles:
    return authority.issue(directory, f"node{node_id}", f"node-{node_id}")

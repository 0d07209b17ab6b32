"""How the client secures its connections, from librdkafka-style properties:

    security.protocol = PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    sasl.mechanism(s) = PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
    sasl.username, sasl.password
    ssl.ca.location                       PEM CA bundle (default: the system's)
    ssl.certificate.location, ssl.key.location        client certificate (mutual TLS)
    ssl.endpoint.identification.algorithm = https (default) | none

`SecuritySettings` is picklable (it travels to Spark executors) and never shows the password
(repr, errors). A connection calls `wrap(sock, host)` (TLS) and then `authenticate(request)`
(SASL: SaslHandshake v1 + SaslAuthenticate, the mechanisms of vdl_wire.sasl).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vdl_client.settings import VdlClientError
from vdl_wire.errors import ErrorCode
from vdl_wire.sasl import MECHANISMS as SASL_MECHANISMS
from vdl_wire.sasl import PLAIN, SaslError, ScramClient, plain_token
from vdl_wire.sasl import SECURITY_PROTOCOLS as LISTENER_PROTOCOLS

PROPERTIES = ("security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password",
              "ssl.ca.location", "ssl.certificate.location", "ssl.key.location",
              "ssl.endpoint.identification.algorithm")
SECRET_PROPERTIES = frozenset({"sasl.password"})


class SecurityError(ValueError):
    """A bad security property (the message names it and what it accepts, never a secret)."""


class AuthenticationError(VdlClientError):
    """The broker refused the credentials (SASL_AUTHENTICATION_FAILED and the like): not retried."""


@dataclass(frozen=True)
class SecuritySettings:
    protocol: str = "PLAINTEXT"
    mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_location: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None
    check_hostname: bool = True

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def from_properties(cls, properties: Mapping[str, str], source: str = "-X") -> SecuritySettings:
        """From librdkafka property names (others are the caller's business)."""
        get = {k: str(v).strip() for k, v in properties.items()}.get
        protocol = (get("security.protocol") or "PLAINTEXT").upper()
        if protocol not in LISTENER_PROTOCOLS:
            raise SecurityError(f"{source} security.protocol accepts {' | '.join(LISTENER_PROTOCOLS)}, "
                                f"got {get('security.protocol')!r}")
        mechanism = (get("sasl.mechanism") or get("sasl.mechanisms") or "PLAIN").upper()
        if mechanism not in SASL_MECHANISMS:
            raise SecurityError(f"{source} sasl.mechanism accepts {' | '.join(SASL_MECHANISMS)}, got {mechanism!r}")
        settings = cls(protocol, mechanism, get("sasl.username") or None, get("sasl.password") or None,
                       get("ssl.ca.location") or None, get("ssl.certificate.location") or None,
                       get("ssl.key.location") or None, _hostname_check(get, source))
        if settings.sasl and (not settings.username or settings.password is None):
            raise SecurityError(f"{source} security.protocol={protocol} needs sasl.username and sasl.password")
        if bool(settings.certificate_location) != bool(settings.key_location):
            raise SecurityError(f"{source} ssl.certificate.location and ssl.key.location go together")
        return settings

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca_location)
        context.check_hostname = self.check_hostname
        if self.certificate_location:
            context.load_cert_chain(self.certificate_location, self.key_location)
        return context

    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        """TLS over a connected socket (when the protocol has it)."""
        if self.tls:
            sock = self.ssl_context().wrap_socket(sock, server_hostname=host)
        return sock

    def authenticate(self, request: Callable[[Any], Any]) -> None:
        """SASL over an established connection (after `wrap`); `request(r)` sends one request and
        returns its response. Raises AuthenticationError."""
        if not self.sasl:
            return
        # Imported here: loading every message class costs a Spark worker that only parses
        # options (vdl_connector.security_options) a good part of its start-up.
        from vdl_wire.messages import SaslHandshakeRequest

        handshake = request(SaslHandshakeRequest(mechanism=self.mechanism))
        if handshake.error_code != 0:
            raise AuthenticationError(f"SASL handshake: {ErrorCode(handshake.error_code).name} (the broker offers "
                                      f"{', '.join(handshake.mechanisms)})")
        assert self.username is not None and self.password is not None
        if self.mechanism == PLAIN:
            self._step(request, plain_token(self.username, self.password))
            return
        scram = ScramClient(self.mechanism, self.username, self.password)
        try:
            final = scram.final(self._step(request, scram.first()))
            scram.check(self._step(request, final))
        except SaslError as error:
            raise AuthenticationError(str(error)) from None

    @staticmethod
    def _step(request: Callable[[Any], Any], token: bytes) -> bytes:
        from vdl_wire.messages import SaslAuthenticateRequest

        response = request(SaslAuthenticateRequest(auth_bytes=token))
        if response.error_code != 0:
            raise AuthenticationError(f"{ErrorCode(response.error_code).name}: {response.error_message or ''}".strip())
        return bytes(response.auth_bytes)


def _hostname_check(get: Callable[[str], str | None], source: str) -> bool:
    value = (get("ssl.endpoint.identification.algorithm") or "https").lower()
    if value not in ("https", "none"):
        raise SecurityError(f"{source} ssl.endpoint.identification.algorithm accepts https | none, got {value!r}")
    return value == "https"


def parse_properties_text(text: str, source: str) -> dict[str, str]:
    """A Java/librdkafka properties file: `key=value` lines, `#` or `!` comments."""
    properties = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise SecurityError(f"{source} line {number}: expected key=value")
        properties[key.strip()] = value.strip()
    return properties

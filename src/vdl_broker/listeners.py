"""The security side of a node's configuration: Kafka-style listeners, TLS, SASL, authorizer.

    listeners = ["SASL_SSL://0.0.0.0:9093", "PLAINTEXT://127.0.0.1:9092"]   # Kafka's `listeners`
    ssl_certfile = "node1.pem"        # PEM; the node's certificate (also its Raft identity)
    ssl_keyfile = "node1.key"
    ssl_cafile = "ca.pem"             # with it, Raft traffic between nodes is mutual TLS
    ssl_client_auth = "required"      # none | requested | required (principal User:<CN>)
    sasl_mechanisms = ["SCRAM-SHA-512"]
    authorizer = "acl"                # none | acl
    super_users = ["admin"]
    [[bootstrap_users]]               # applied once, when the cluster forms
    name = "admin"
    mechanism = "SCRAM-SHA-512"
    password_env = "VDL_ADMIN_PASSWORD"

Parsing only (config.py owns the file and the flags); every error is a ValueError whose message
names the setting and what it accepts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from vdl_wire.address import AddressError, split_host_port
from vdl_wire.sasl import MECHANISMS, SCRAM_SHA_256, SCRAM_SHA_512, SECURITY_PROTOCOLS

PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL = SECURITY_PROTOCOLS
LISTENER_PROTOCOLS = SECURITY_PROTOCOLS
SASL_MECHANISMS = MECHANISMS
SCRAM_MECHANISMS = (SCRAM_SHA_256, SCRAM_SHA_512)
SSL_CLIENT_AUTH = ("none", "requested", "required")
AUTHORIZERS = ("none", "acl")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Listener:
    """One client listener: `PROTOCOL://host:port`."""

    protocol: str
    host: str
    port: int

    @property
    def tls(self) -> bool:
        return self.protocol in (SSL, SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self.protocol in (SASL_PLAINTEXT, SASL_SSL)

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.protocol}://{self.address}"


def parse_listener(value: Any, setting: str) -> Listener:
    if not isinstance(value, str) or "://" not in value:
        raise ValueError(f"{setting}: expected PROTOCOL://HOST:PORT with PROTOCOL one of "
                         f"{', '.join(LISTENER_PROTOCOLS)}, got {value!r}")
    protocol, _, address = value.partition("://")
    protocol = protocol.strip().upper()
    if protocol not in LISTENER_PROTOCOLS:
        raise ValueError(f"{setting}: unknown protocol {protocol!r} in {value!r}; accepted: "
                         f"{', '.join(LISTENER_PROTOCOLS)}")
    try:
        host, port = split_host_port(address, setting, listening=True)
    except AddressError as error:
        raise ValueError(str(error)) from None
    return Listener(protocol, host, port)


def parse_listeners(value: Any, setting: str) -> list[Listener]:
    """A list (TOML) or a comma-separated string (flag) of listeners; one per protocol."""
    items = [v for v in value.split(",") if v.strip()] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not items:
        raise ValueError(f"{setting}: expected a non-empty list of PROTOCOL://HOST:PORT")
    listeners = [parse_listener(item.strip() if isinstance(item, str) else item, setting) for item in items]
    protocols = [listener.protocol for listener in listeners]
    if len(set(protocols)) != len(protocols):
        raise ValueError(f"{setting}: one listener per protocol (Metadata tells a client the addresses "
                         f"of the protocol it came in on), got {', '.join(protocols)}")
    return listeners


def parse_choice(value: Any, setting: str, accepted: Sequence[str], *, upper: bool = False) -> str:
    text = value.strip() if isinstance(value, str) else value
    if isinstance(text, str) and upper:
        text = text.upper()
    if text not in accepted:
        raise ValueError(f"{setting} accepts {' | '.join(accepted)}, got {value!r}")
    return text


def parse_string_list(value: Any, setting: str) -> list[str]:
    """A TOML list of strings, or a comma-separated flag value."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
        raise ValueError(f"{setting}: expected a list of strings, got {value!r}")
    return [item.strip() for item in items if item.strip()]


def parse_mechanisms(value: Any, setting: str) -> list[str]:
    mechanisms = [parse_choice(m, setting, SASL_MECHANISMS, upper=True) for m in parse_string_list(value, setting)]
    if not mechanisms:
        raise ValueError(f"{setting}: at least one of {', '.join(SASL_MECHANISMS)}")
    return mechanisms


def user_name(principal_or_name: str) -> str:
    """`User:alice` or `alice` -> `alice` (super_users accepts both spellings)."""
    return principal_or_name.removeprefix("User:")


@dataclass(frozen=True)
class BootstrapUser:
    """A user created once, when the cluster forms, with the password from an environment
    variable (the password itself never appears in a file of ours)."""

    name: str
    mechanism: str
    password_env: str


def parse_bootstrap_users(value: Any, setting: str) -> list[BootstrapUser]:
    if not isinstance(value, list):
        raise ValueError(f"{setting} must be an array of tables ([[bootstrap_users]]) with name, mechanism, "
                         "password_env")
    users = []
    for number, item in enumerate(value):
        where = f"{setting}[{number}]"
        if not isinstance(item, dict) or set(item) != {"name", "mechanism", "password_env"}:
            raise ValueError(f"{where} must be a table with exactly name, mechanism, password_env")
        name, env = item["name"], item["password_env"]
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{where}.name must be a non-empty string")
        mechanism = parse_choice(item["mechanism"], f"{where}.mechanism", SCRAM_MECHANISMS, upper=True)
        if not isinstance(env, str) or not _ENV_NAME.match(env):
            raise ValueError(f"{where}.password_env must name an environment variable, got {env!r}")
        users.append(BootstrapUser(name.strip(), mechanism, env))
    return users


class NodeSecurity(Protocol):
    """The security fields of a NodeConfig (config.py imports this module, not the reverse)."""

    @property
    def client_listeners(self) -> list[Listener]: ...
    @property
    def ssl_certfile(self) -> str | None: ...
    @property
    def ssl_keyfile(self) -> str | None: ...
    @property
    def ssl_cafile(self) -> str | None: ...
    @property
    def ssl_client_auth(self) -> str: ...
    @property
    def bootstrap_users(self) -> list[BootstrapUser]: ...


def security_problem(config: NodeSecurity) -> str | None:
    """What is wrong with the security settings taken together (naming them), or None."""
    tls = [str(lst) for lst in config.client_listeners if lst.tls]
    if tls and not (config.ssl_certfile and config.ssl_keyfile):
        return f"ssl_certfile and ssl_keyfile are required by the TLS listener(s) {', '.join(tls)}"
    if config.ssl_client_auth != "none" and not config.ssl_cafile:
        return f"ssl_client_auth = {config.ssl_client_auth} needs ssl_cafile (the CA that signs client certificates)"
    if bool(config.ssl_certfile) != bool(config.ssl_keyfile):
        return "ssl_certfile and ssl_keyfile go together"
    for setting in ("ssl_certfile", "ssl_keyfile", "ssl_cafile"):
        path = getattr(config, setting)
        if path and not Path(path).is_file():
            return f"{setting}: no such file {path}"
    names = [user.name for user in config.bootstrap_users]
    if len(set(names)) != len(names):
        return f"bootstrap_users: a user is named twice in {names}"
    return None

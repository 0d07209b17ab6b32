"""Spark's Kafka security options for format("vdl"), checked on the driver:

    kafka.security.protocol          PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    kafka.sasl.mechanism             PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 (default PLAIN, as Kafka)
    kafka.sasl.jaas.config           org.apache.kafka.common.security.plain.PlainLoginModule required
                                     username="..." password="...";   (or ...scram.ScramLoginModule)
    kafka.sasl.username, kafka.sasl.password      the same, for Python users (instead of JAAS)
    kafka.ssl.truststore.location    a PEM file of CA certificates, with
    kafka.ssl.truststore.type        PEM (Java keystores cannot be read here)
    kafka.ssl.keystore.location      a PEM file holding the client certificate and key (mutual TLS),
    kafka.ssl.keystore.type          PEM
    kafka.ssl.endpoint.identification.algorithm   https (default) | "" (no host name check)

Errors name the option and what it accepts and never repeat a secret: a JAAS string is described,
not quoted.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from vdl_client.security import SecurityError, SecuritySettings
from vdl_wire.sasl import MECHANISMS, SECURITY_PROTOCOLS

SECURITY_OPTIONS = (
    "kafka.security.protocol", "kafka.sasl.mechanism", "kafka.sasl.jaas.config", "kafka.sasl.username",
    "kafka.sasl.password", "kafka.ssl.truststore.location", "kafka.ssl.truststore.type",
    "kafka.ssl.keystore.location", "kafka.ssl.keystore.type", "kafka.ssl.endpoint.identification.algorithm",
)
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_JAAS = re.compile(r'^\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)\s+(?P<body>.*?)\s*;\s*$',
                   re.DOTALL)
_JAAS_OPTION = re.compile(r'\s*([\w.]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))\s*')
JAAS_ACCEPTS = (f'\'{PLAIN_MODULE} required username="..." password="...";\' or the same with '
                f"{SCRAM_MODULE}")


class SecurityOptionError(ValueError):
    """A security option is missing or wrong (the message never holds a secret)."""


def parse_jaas(value: str) -> tuple[str, dict[str, str]]:
    """(login module, options) of a one-entry JAAS configuration."""
    match = _JAAS.match(value)
    if not match:
        raise SecurityOptionError(f"option 'kafka.sasl.jaas.config' is not a JAAS entry; it accepts {JAAS_ACCEPTS}")
    body, options, position = match.group("body"), {}, 0
    while position < len(body):
        option = _JAAS_OPTION.match(body, position)
        if not option or option.end() == position:
            raise SecurityOptionError("option 'kafka.sasl.jaas.config' has a malformed key=\"value\" list; "
                                      f"it accepts {JAAS_ACCEPTS}")
        raw = option.group(2)
        options[option.group(1)] = (re.sub(r"\\(.)", r"\1", raw) if raw is not None else option.group(3))
        position = option.end()
    return match.group("module"), options


def parse_security_options(get: Callable[[str], str | None]) -> SecuritySettings | None:
    """The client's security from Spark options (`get(name)`: the value, or None); None when the
    protocol is PLAINTEXT and nothing else is set."""
    protocol = (get("kafka.security.protocol") or "PLAINTEXT").strip().upper()
    mechanism = (get("kafka.sasl.mechanism") or "PLAIN").strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise SecurityOptionError(f"option 'kafka.security.protocol' accepts {' | '.join(SECURITY_PROTOCOLS)}, "
                                  f"got {get('kafka.security.protocol')!r}")
    if mechanism not in MECHANISMS:
        raise SecurityOptionError(f"option 'kafka.sasl.mechanism' accepts {' | '.join(MECHANISMS)}, "
                                  f"got {get('kafka.sasl.mechanism')!r}")
    properties = {"security.protocol": protocol, "sasl.mechanism": mechanism}
    jaas = get("kafka.sasl.jaas.config")
    username, password = get("kafka.sasl.username"), get("kafka.sasl.password")
    if jaas is not None:
        if username is not None or password is not None:
            raise SecurityOptionError("give either option 'kafka.sasl.jaas.config' or 'kafka.sasl.username' with "
                                      "'kafka.sasl.password', not both")
        module, options = parse_jaas(jaas)
        expected = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
        if module != expected:
            raise SecurityOptionError(f"option 'kafka.sasl.jaas.config' names the login module {module}, but "
                                      f"'kafka.sasl.mechanism' {mechanism} needs {expected}")
        username, password = options.get("username"), options.get("password")
        if not username or password is None:
            raise SecurityOptionError("option 'kafka.sasl.jaas.config' needs username=\"...\" and password=\"...\"")
    if protocol.startswith("SASL_") and (not username or password is None):
        raise SecurityOptionError(f"option 'kafka.security.protocol' {protocol} needs credentials: "
                                  "'kafka.sasl.jaas.config' (or 'kafka.sasl.username' and 'kafka.sasl.password')")
    if username is not None:
        properties |= {"sasl.username": username, "sasl.password": password or ""}
    for kind, wanted in (("truststore", ("ssl.ca.location",)), ("keystore", ("ssl.certificate.location",
                                                                             "ssl.key.location"))):
        location = get(f"kafka.ssl.{kind}.location")
        store_type = (get(f"kafka.ssl.{kind}.type") or "JKS").strip().upper()
        if location is None:
            continue
        if store_type != "PEM":
            raise SecurityOptionError(f"option 'kafka.ssl.{kind}.type' must be PEM (Java keystores such as "
                                      f"{store_type} cannot be read by the Python connector), with "
                                      f"'kafka.ssl.{kind}.location' a PEM file")
        if not Path(location).is_file():
            raise SecurityOptionError(f"option 'kafka.ssl.{kind}.location': no such file {location}")
        for name in wanted:
            properties[name] = location
    algorithm = get("kafka.ssl.endpoint.identification.algorithm")
    if algorithm is not None:
        properties["ssl.endpoint.identification.algorithm"] = algorithm.strip() or "none"
    try:
        settings = SecuritySettings.from_properties(properties, "option: kafka.")
    except SecurityError as error:
        raise SecurityOptionError(str(error)) from None
    return None if settings == SecuritySettings() else settings

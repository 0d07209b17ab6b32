"""Spark's Kafka security options: JAAS strings, Python-style credentials, PEM trust stores; every
bad or missing setting is a driver-side error naming the option, and no error shows a secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from vdl_connector.options import VdlOptionError, parse_sink_options, parse_source_options

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "s"}
SECRET = "Pa55-w0rd\"x"
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="alice" password="Pa55-w0rd\\"x";')


def test_jaas_scram_over_sasl_ssl(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("pem")
    options = BASE | {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
                      "kafka.sasl.jaas.config": SCRAM_JAAS, "kafka.ssl.truststore.location": str(ca),
                      "kafka.ssl.truststore.type": "PEM"}
    security = parse_source_options({k.lower(): v for k, v in options.items()}).client.security
    assert security is not None
    assert (security.protocol, security.mechanism, security.username, security.password, security.ca_location) == \
        ("SASL_SSL", "SCRAM-SHA-512", "alice", SECRET, str(ca))
    assert SECRET not in repr(security) and "alice" in repr(security)
    plain = parse_sink_options(BASE | {"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.username": "bob",
                                       "kafka.sasl.password": "pw"}).client.security
    assert plain is not None and (plain.mechanism, plain.username, plain.password) == ("PLAIN", "bob", "pw")
    assert parse_source_options(BASE).client.security is None


@pytest.mark.parametrize(("extra", "message"), [
    ({"kafka.security.protocol": "SASL_TLS"}, "'kafka.security.protocol' accepts PLAINTEXT | SSL"),
    ({"kafka.security.protocol": "SASL_SSL"}, "'kafka.security.protocol' SASL_SSL needs credentials"),
    ({"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "GSSAPI", "kafka.sasl.jaas.config": SCRAM_JAAS},
     "'kafka.sasl.mechanism' accepts PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512"),
    ({"kafka.security.protocol": "SASL_SSL", "kafka.sasl.jaas.config": SCRAM_JAAS},
     "names the login module .*ScramLoginModule, but 'kafka.sasl.mechanism' PLAIN needs .*PlainLoginModule"),
    ({"kafka.sasl.jaas.config": "username=alice password=" + SECRET}, "'kafka.sasl.jaas.config' is not a JAAS entry"),
    ({"kafka.sasl.jaas.config": SCRAM_JAAS.replace("username", "user name"), "kafka.sasl.mechanism": "SCRAM-SHA-256"},
     "'kafka.sasl.jaas.config' has a malformed"),
    ({"kafka.sasl.jaas.config": SCRAM_JAAS, "kafka.sasl.mechanism": "SCRAM-SHA-256", "kafka.sasl.password": "x"},
     "either option 'kafka.sasl.jaas.config' or"),
    ({"kafka.ssl.truststore.location": "/x.jks"}, "'kafka.ssl.truststore.type' must be PEM"),
    ({"kafka.ssl.truststore.location": "/no/ca.pem", "kafka.ssl.truststore.type": "PEM"},
     "'kafka.ssl.truststore.location': no such file"),
])
def test_bad_security_options_name_the_option_and_hide_secrets(extra: dict, message: str) -> None:
    with pytest.raises(VdlOptionError, match=message) as info:
        parse_source_options(BASE | extra)
    assert SECRET not in str(info.value) and "Pa55" not in str(info.value)

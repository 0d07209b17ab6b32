"""SASL mechanisms (sans-IO): SCRAM against RFC 7677's test vector, client and server against each
other, PLAIN tokens, and the ways a login must fail."""

from __future__ import annotations

import base64

import pytest

from vdl_wire.sasl import (
    SaslError,
    ScramClient,
    ScramCredential,
    ScramServer,
    parse_plain,
    plain_token,
)

# RFC 7677 section 3: user "user", password "pencil".
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_credential() -> ScramCredential:
    return ScramCredential.from_password("SCRAM-SHA-256", "pencil", 4096, SALT)


def test_rfc7677_vector_server_side() -> None:
    server = ScramServer("SCRAM-SHA-256", server_nonce=SERVER_NONCE)
    assert server.first(f"n,,n=user,r={CLIENT_NONCE}".encode()) == "user"
    first = server.reply(rfc_credential())
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert server.final(CLIENT_FINAL) == SERVER_FINAL


def test_rfc7677_vector_client_side() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=CLIENT_NONCE)
    assert client.first() == f"n,,n=user,r={CLIENT_NONCE}".encode()
    server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert client.final(server_first) == CLIENT_FINAL
    client.check(SERVER_FINAL)
    with pytest.raises(SaslError):
        client.check(b"v=" + base64.b64encode(b"x" * 32))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_client_and_server_agree_and_a_wrong_password_fails(mechanism: str) -> None:
    credential = ScramCredential.from_password(mechanism, "s3cret", 4096)
    for password, ok in (("s3cret", True), ("wrong", False)):
        client, server = ScramClient(mechanism, "a,b=c", password), ScramServer(mechanism)
        assert server.first(client.first()) == "a,b=c"  # ',' and '=' travel escaped
        final = client.final(server.reply(credential))
        if ok:
            client.check(server.final(final))
        else:
            with pytest.raises(SaslError):
                server.final(final)


def test_credential_keeps_no_password_and_checks_plain() -> None:
    credential = ScramCredential.from_password("SCRAM-SHA-512", "pencil", 4096)
    assert b"pencil" not in repr(credential).encode()
    assert credential.matches_password("pencil") and not credential.matches_password("pencil2")


def test_nonce_tampering_and_garbage_fail() -> None:
    server = ScramServer("SCRAM-SHA-256", server_nonce=SERVER_NONCE)
    server.first(f"n,,n=user,r={CLIENT_NONCE}".encode())
    server.reply(rfc_credential())
    with pytest.raises(SaslError):
        server.final(CLIENT_FINAL.replace(b"k0,", b"k1,"))
    for bad in (b"", b"p=abc", b"y", b"n,,r=x", b"\xff\xfe"):
        with pytest.raises(SaslError):
            ScramServer("SCRAM-SHA-256").first(bad)
    with pytest.raises(SaslError):
        ScramServer("SCRAM-SHA-256").final(CLIENT_FINAL)  # final before first


def test_plain_tokens() -> None:
    assert parse_plain(plain_token("alice", "pw")) == ("alice", "pw")
    assert parse_plain(b"alice\0alice\0pw") == ("alice", "pw")
    for bad in (b"alice\0pw", b"\0\0pw", b"bob\0alice\0pw"):
        with pytest.raises(SaslError):
            parse_plain(bad)

"""SASL mechanisms, sans-IO: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677).

Both sides live here: the broker's authenticators and vdl_client's. A SCRAM credential is what a
server keeps of a password: salt, iteration count, StoredKey = H(HMAC(SaltedPassword, "Client
Key")) and ServerKey = HMAC(SaltedPassword, "Server Key") -- never the password, nor the salted
password. Verifying a SCRAM proof costs two HMACs; only PLAIN (a password on the wire) costs the
PBKDF2 of `salted_password`, which is why a server runs `verify_plain` off its event loop.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
# Kafka's security.protocol values (a listener's protocol).
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
# AlterUserScramCredentials / DescribeUserScramCredentials mechanism codes (KIP-554).
MECHANISM_CODES = {SCRAM_SHA_256: 1, SCRAM_SHA_512: 2}
MECHANISMS_BY_CODE = {code: name for name, code in MECHANISM_CODES.items()}
MIN_ITERATIONS = 4096  # RFC 7677's minimum; Kafka refuses fewer too
DEFAULT_ITERATIONS = 8192
MAX_ITERATIONS = 16384  # Kafka's upper bound for SCRAM iterations
_GS2_HEADER = "n,,"  # no channel binding, no authorization id


class SaslError(ValueError):
    """Authentication failed; the message is safe to show and log (it never holds a secret)."""


def is_scram(mechanism: str) -> bool:
    return mechanism in _HASHES


def _hmac(mechanism: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, _HASHES[mechanism]).digest()


def _hash(mechanism: str, data: bytes) -> bytes:
    return hashlib.new(_HASHES[mechanism], data).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)


@dataclass(frozen=True)
class ScramCredential:
    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, iterations: int, salted: bytes) -> ScramCredential:
        client_key = _hmac(mechanism, salted, b"Client Key")
        return cls(mechanism, salt, iterations, _hash(mechanism, client_key), _hmac(mechanism, salted, b"Server Key"))

    @classmethod
    def from_password(cls, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                      salt: bytes | None = None) -> ScramCredential:
        salt = secrets.token_bytes(32) if salt is None else salt
        return cls.from_salted_password(mechanism, salt, iterations,
                                        salted_password(mechanism, password, salt, iterations))

    def matches_password(self, password: str) -> bool:
        """PLAIN against a SCRAM credential: one PBKDF2 (expensive by design)."""
        other = ScramCredential.from_password(self.mechanism, password, self.iterations, self.salt)
        return hmac.compare_digest(other.stored_key, self.stored_key)


def parse_plain(token: bytes) -> tuple[str, str]:
    """RFC 4616: [authzid] NUL authcid NUL passwd -> (user, password)."""
    parts = token.split(b"\0")
    if len(parts) != 3 or not parts[1]:
        raise SaslError("malformed PLAIN token")
    authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
    if authzid and authzid != user:
        raise SaslError("PLAIN: an authorization id other than the user name is not supported")
    return user, password


def plain_token(user: str, password: str) -> bytes:
    return b"\0" + user.encode() + b"\0" + password.encode()


def _attributes(message: str) -> dict[str, str]:
    attributes: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise SaslError("malformed SCRAM message")
        attributes.setdefault(key, value)
    return attributes


def _decode_name(name: str) -> str:
    # RFC 5802 5.1: ',' and '=' in a user name travel as =2C and =3D.
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise SaslError("malformed SCRAM user name")
    return name.replace("=2C", ",").replace("=3D", "=")


def _encode_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise SaslError("malformed SCRAM message") from None


class ScramServer:
    """One server-side exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, server_nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._server_nonce = server_nonce or secrets.token_urlsafe(24)  # fixed only in tests (RFC vectors)
        self.user: str | None = None
        self._bare_first = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None

    def first(self, message: bytes) -> str:
        """Parse client-first; returns the user name (look its credential up, then reply())."""
        text = message.decode("utf-8", "replace")
        if not text.startswith(("n,", "y,")):
            raise SaslError("SCRAM: channel binding is not supported")
        _, _, rest = text.partition(",")
        authzid, _, bare = rest.partition(",")
        attributes = _attributes(bare)
        if "n" not in attributes or "r" not in attributes or not attributes["r"]:
            raise SaslError("malformed SCRAM client-first message")
        self.user = _decode_name(attributes["n"])
        if authzid and authzid != "a=" + attributes["n"]:
            raise SaslError("SCRAM: an authorization id other than the user name is not supported")
        self._bare_first = bare
        self._nonce = attributes["r"] + self._server_nonce
        return self.user

    def reply(self, credential: ScramCredential) -> bytes:
        """server-first for the user's credential (an unknown user gets a decoy, so the answer
        does not tell whether the user exists; its proof then fails like a wrong password)."""
        self._credential = credential
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        return self._server_first.encode()

    def final(self, message: bytes) -> bytes:
        """Check client-final's proof; server-final (v=signature) when it holds."""
        credential = self._credential
        if credential is None:
            raise SaslError("SCRAM: client-final before client-first")
        text = message.decode("utf-8", "replace")
        without_proof, sep, proof_text = text.rpartition(",p=")
        attributes = _attributes(without_proof)
        # Kafka's server accepts a nonce that ends with its own (librdkafka 2.0 sends the client
        # nonce twice); the proof below covers the text as sent, so this loses nothing.
        if not sep or not attributes.get("r", "").endswith(self._nonce):
            raise SaslError("SCRAM: nonce mismatch")
        if _unb64(attributes.get("c", "")) not in (b"n,,", f"n,a={_encode_name(self.user or '')},".encode()):
            raise SaslError("SCRAM: channel binding is not supported")
        auth_message = f"{self._bare_first},{self._server_first},{without_proof}".encode()
        signature = _hmac(self.mechanism, credential.stored_key, auth_message)
        proof = _unb64(proof_text)
        if len(proof) != len(signature):
            raise SaslError("SCRAM: bad proof")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(_hash(self.mechanism, client_key), credential.stored_key):
            raise SaslError("SCRAM: invalid credentials")
        return f"v={_b64(_hmac(self.mechanism, credential.server_key, auth_message))}".encode()


class ScramClient:
    """The client side (vdl_client): first() -> final(server_first) -> check(server_final)."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None) -> None:
        if not is_scram(mechanism):
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        self._user = user
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._bare_first = f"n={_encode_name(user)},r={self._nonce}"
        self._auth_message = b""
        self._server_key = b""

    def first(self) -> bytes:
        return (_GS2_HEADER + self._bare_first).encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", "replace")
        attributes = _attributes(text)
        nonce, salt, iterations = attributes.get("r", ""), _unb64(attributes.get("s", "")), attributes.get("i", "")
        if not nonce.startswith(self._nonce) or not iterations.isdigit():
            raise SaslError("SCRAM: bad server-first message")
        salted = salted_password(self.mechanism, self._password, salt, int(iterations))
        without_proof = f"c={_b64(_GS2_HEADER.encode())},r={nonce}"
        self._auth_message = f"{self._bare_first},{text},{without_proof}".encode()
        client_key = _hmac(self.mechanism, salted, b"Client Key")
        signature = _hmac(self.mechanism, _hash(self.mechanism, client_key), self._auth_message)
        self._server_key = _hmac(self.mechanism, salted, b"Server Key")
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={_b64(proof)}".encode()

    def check(self, server_final: bytes) -> None:
        expected = _hmac(self.mechanism, self._server_key, self._auth_message)
        attributes = _attributes(server_final.decode("utf-8", "replace"))
        if "e" in attributes:
            raise SaslError(f"SCRAM: server error {attributes['e']}")
        if not hmac.compare_digest(_unb64(attributes.get("v", "")), expected):
            raise SaslError("SCRAM: the server's signature does not verify")

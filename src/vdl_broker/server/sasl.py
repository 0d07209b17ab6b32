"""SASL on one connection of a SASL_PLAINTEXT / SASL_SSL listener (KIP-43, KIP-152).

SaslHandshake picks a mechanism; the tokens then come in SaslAuthenticate requests (handshake
v1) or as bare size-prefixed frames (v0). PLAIN checks the password against the user's SCRAM
credential (one PBKDF2, run on the broker's authentication threads so the event loop, and every
other client, never waits for it); SCRAM-SHA-256/512 verify a proof with two HMACs. An unknown
user gets the same work and the same answer as a wrong password, so neither timing nor errors
tell which user names exist. A failure is logged with the user name and peer address -- never a
password or a token.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
from concurrent.futures import Executor
from typing import Any

from vdl_wire.sasl import (
    DEFAULT_ITERATIONS,
    PLAIN,
    SaslError,
    ScramCredential,
    ScramServer,
    is_scram,
    parse_plain,
)

log = logging.getLogger(__name__)

FAILED_MESSAGE = "Authentication failed: invalid credentials with SASL mechanism {}"


class Decoys:
    """Stand-in credentials for unknown users: stable per name (a client probing twice sees the
    same salt), useless for logging in (random keys)."""

    def __init__(self) -> None:
        self._secret = secrets.token_bytes(32)

    def credential(self, mechanism: str, user: str) -> ScramCredential:
        salt = hmac.new(self._secret, f"{mechanism}\0{user}".encode(), hashlib.sha256).digest()
        return ScramCredential(mechanism, salt, DEFAULT_ITERATIONS, secrets.token_bytes(32), secrets.token_bytes(32))


class SaslSession:
    """The SASL state of one connection; `user` is set once authentication succeeded."""

    def __init__(self, mechanisms: list[str], users: Any, decoys: Decoys, executor: Executor | None,
                 peer: str) -> None:
        self.enabled_mechanisms = mechanisms
        self._users = users  # callable -> cluster/users.py UsersState (the replicated metadata's)
        self._decoys = decoys
        self._executor = executor
        self.peer = peer
        self.mechanism: str | None = None
        self.raw_tokens = False  # handshake v0: tokens come as bare frames
        self.user: str | None = None
        self._scram: ScramServer | None = None

    @property
    def authenticated(self) -> bool:
        return self.user is not None

    def handshake(self, mechanism: str, version: int) -> bool:
        """Pick `mechanism`; False when this listener does not offer it."""
        if mechanism not in self.enabled_mechanisms:
            log.warning("SASL handshake from %s: unsupported mechanism %r", self.peer, mechanism[:64])
            return False
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        self._scram = ScramServer(mechanism) if is_scram(mechanism) else None
        return True

    async def step(self, token: bytes) -> tuple[bytes, bool]:
        """One client token -> (server token, done). Raises SaslError when authentication fails
        (already logged)."""
        mechanism = self.mechanism or "?"
        user = "?"
        try:
            if mechanism == PLAIN:
                user, password = parse_plain(token)
                await self._check_plain(user, password)
                self.user = user
                return b"", True
            scram = self._scram
            if scram is None:
                raise SaslError("SASL token before the handshake")
            if scram.user is None:
                user = scram.first(token)
                credential = self._users().credential(user, mechanism) or self._decoys.credential(mechanism, user)
                return scram.reply(credential), False
            user = scram.user
            final = scram.final(token)
            self.user = user
            return final, True
        except SaslError as error:
            log.warning("authentication failed: user %r from %s, mechanism %s: %s", user[:255], self.peer,
                        mechanism, error)
            raise SaslError(FAILED_MESSAGE.format(mechanism)) from None

    async def _check_plain(self, user: str, password: str) -> None:
        credential = self._users().any_credential(user)
        known = credential is not None
        if credential is None:
            credential = self._decoys.credential("SCRAM-SHA-256", user)
        loop = asyncio.get_running_loop()
        matches = await loop.run_in_executor(self._executor, credential.matches_password, password)
        if not (known and matches):
            raise SaslError("invalid user or password")

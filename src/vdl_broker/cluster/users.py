"""SCRAM users in the cluster metadata (pure: no I/O).

Per user and mechanism (SCRAM-SHA-256, SCRAM-SHA-512) the metadata keeps a SCRAM credential:
salt, iterations, stored key, server key (RFC 5802) -- never a password, so the replicated log
on every node's disk holds nothing a client could log in with. PLAIN logins are checked against
the same credentials.

Commands (bytes as base64):

    {"op": "upsert_scram", "user": u, "mechanism": m, "iterations": i, "salt": s, "stored_key": k,
     "server_key": k}
    {"op": "delete_scram", "user": u, "mechanism": m}
    {"op": "bootstrap_user", ...as upsert_scram...}   applied only the first time a bootstrap
                                                      user of that name is seen (`[[bootstrap_users]]`)
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from vdl_wire.sasl import MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential, is_scram

USER_OPS = frozenset({"upsert_scram", "delete_scram", "bootstrap_user"})
MAX_USER_NAME = 255


def check_user_name(name: Any) -> str | None:
    """Why `name` cannot be a user name, or None."""
    if not isinstance(name, str) or not name or len(name) > MAX_USER_NAME:
        return f"a user name is 1-{MAX_USER_NAME} characters"
    if any(ord(c) < 32 for c in name):
        return "a user name holds no control characters"
    return None


def check_credential(mechanism: Any, iterations: Any) -> str | None:
    if not isinstance(mechanism, str) or not is_scram(mechanism):
        return f"unknown SCRAM mechanism {mechanism!r}"
    if isinstance(iterations, bool) or not isinstance(iterations, int) or not (
            MIN_ITERATIONS <= iterations <= MAX_ITERATIONS):
        return f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {iterations!r}"
    return None


@dataclass
class UsersState:
    credentials: dict[str, dict[str, ScramCredential]] = field(default_factory=dict)
    bootstrapped: set[str] = field(default_factory=set)

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.credentials.get(user, {}).get(mechanism)

    def any_credential(self, user: str) -> ScramCredential | None:
        """The strongest credential of a user (PLAIN logins check against it)."""
        mechanisms = self.credentials.get(user, {})
        return next((mechanisms[m] for m in ("SCRAM-SHA-512", "SCRAM-SHA-256") if m in mechanisms), None)

    def apply(self, op: str, command: dict[str, Any]) -> str | None:
        """Apply one user command; an error text, or None when applied."""
        user, mechanism = command.get("user"), command.get("mechanism")
        problem = check_user_name(user)
        if problem is not None or not isinstance(user, str):
            return f"{op}: {problem}"
        if op == "delete_scram":
            mechanisms = self.credentials.get(user, {})
            if mechanism not in mechanisms:
                return f"delete_scram: user {user!r} has no {mechanism} credential"
            del mechanisms[mechanism]
            if not mechanisms:
                del self.credentials[user]
            return None
        if op == "bootstrap_user":
            if user in self.bootstrapped:
                return None  # applied once: a later password change through the admin API stays
            self.bootstrapped.add(user)
        iterations = command.get("iterations")
        problem = check_credential(mechanism, iterations)
        if problem is not None or not isinstance(mechanism, str) or not isinstance(iterations, int):
            return f"{op}: {problem}"
        try:
            salt, stored, server = (base64.b64decode(command[key], validate=True)
                                    for key in ("salt", "stored_key", "server_key"))
        except (KeyError, TypeError, ValueError):
            return f"{op}: salt, stored_key and server_key must be base64"
        self.credentials.setdefault(user, {})[mechanism] = ScramCredential(mechanism, salt, iterations, stored, server)
        return None


def upsert_scram_command(user: str, credential: ScramCredential, op: str = "upsert_scram") -> dict[str, Any]:
    return {"op": op, "user": user, "mechanism": credential.mechanism, "iterations": credential.iterations,
            "salt": _b64(credential.salt), "stored_key": _b64(credential.stored_key),
            "server_key": _b64(credential.server_key)}


def bootstrap_user_command(user: str, credential: ScramCredential) -> dict[str, Any]:
    return upsert_scram_command(user, credential, op="bootstrap_user")


def delete_scram_command(user: str, mechanism: str) -> dict[str, Any]:
    return {"op": "delete_scram", "user": user, "mechanism": mechanism}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()

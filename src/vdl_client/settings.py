"""How a VdlClient reaches the cluster, and the errors it reports."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vdl_client.bootstrap import DEFAULT_CLIENT_ID, parse_bootstrap
from vdl_wire.errors import ErrorCode

if TYPE_CHECKING:
    from vdl_client.security import SecuritySettings


@dataclass(frozen=True)
class ClientSettings:
    """How to reach the cluster; picklable (it travels to Spark executors)."""

    bootstrap_servers: tuple[str, ...]  # tried in this order until one answers
    request_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100
    deadline_ms: int = 120_000  # give up on leader discovery / retries after this long
    client_id: str = DEFAULT_CLIENT_ID
    # A command-line user wants "cannot connect" at once rather than retries until the deadline;
    # a Spark job started with its cluster wants the retries.
    fail_fast_when_unreachable: bool = False
    security: SecuritySettings | None = None  # None: PLAINTEXT
    # Kafka's isolation.level for Fetch and ListOffsets (KIP-98): 0 READ_UNCOMMITTED reads up to
    # the high watermark; 1 READ_COMMITTED up to the last stable offset, with the aborted
    # transactions of each fetched range (the reader skips their records).
    isolation_level: int = 0

    @classmethod
    def from_bootstrap(cls, servers: str | Sequence[str], **settings: Any) -> ClientSettings:
        """Settings for a `host:port,host:port` bootstrap list (validated)."""
        return cls(parse_bootstrap(servers), **settings)


# Errors after which the same request is sent again once the leader is known again.
LEADER_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.BROKER_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.NETWORK_EXCEPTION, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.NOT_CONTROLLER, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.FENCED_LEADER_EPOCH,
})


class RetriableError(Exception):
    """One attempt failed in a way a retry may cure: a leader or coordinator change, a node that
    did not answer, a route that does not resolve yet. VdlClient.retrying catches it and tries
    again; it never reaches the caller of a retrying method (that one gets VdlClientError at the
    deadline). Not a VdlClientError, so that `except VdlClientError` inside an attempt cannot
    swallow a retry."""


class VdlClientError(RuntimeError):
    """A request failed for good (non-retriable error, or retries ran past the deadline)."""


def with_message(what: str, message: str | None) -> str:
    """`what`, followed by the broker's error message in parentheses when it sent one (an answer
    without one has null there: never shown as "(None)")."""
    return f"{what} ({message})" if message else what


class StreamNotFoundError(VdlClientError):
    """The stream does not exist."""


class StreamExistsError(VdlClientError):
    """Creating a stream that already exists (when the caller asked to be told)."""


class BrokerUnreachableError(VdlClientError):
    """No bootstrap server accepted a connection."""

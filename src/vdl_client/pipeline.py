"""Pipelined produce: several Produce requests in flight to one stream's leader."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from vdl_client.connection import Connection
from vdl_client.requests import Batch, produce_request
from vdl_client.settings import LEADER_ERRORS, VdlClientError, with_message
from vdl_wire.errors import ErrorCode
from vdl_wire.messages import ProduceRequest

if TYPE_CHECKING:
    from vdl_client.client import VdlClient

log = logging.getLogger("vdl_client")


class ProducePipeline:
    """Up to `window` Produce requests in flight to one stream's leader, on a connection of its
    own, so the client encodes the next batch while the broker appends and syncs the last.

    Safe with the idempotent producer (KIP-98 allows 5 in flight): the broker handles one
    connection's requests in order and appends a batch only in sequence after the producer's last
    one, so a batch behind a refused one is refused too (OUT_OF_ORDER_SEQUENCE_NUMBER). Answers
    are read in order, and the first failure sends every unacknowledged batch again, in order, one
    at a time through the retrying path (answers behind it are not read: the connection is
    dropped); batches the broker already stored come back as duplicates (acknowledged, not stored
    again). Until the broker has acknowledged one batch of the producer it does not know it, and
    takes a first batch at any sequence (KIP-360): so the first batch goes alone, lest the one
    behind it be stored ahead of it should it be refused (its retry would then be taken for an
    old duplicate, and lost).

    `acknowledged` is called with each batch once the broker has acknowledged it: the pipeline
    holds no reference to it any more, and its buffer may be reused.
    """

    def __init__(self, client: VdlClient, stream: str, timeout_ms: int, delivery_timeout_ms: int,
                 window: int, transactional_id: str | None = None,
                 acknowledged: Callable[[Batch], None] | None = None) -> None:
        self._client = client
        self._stream = stream
        self._timeout_ms = timeout_ms
        self._delivery_timeout_ms = delivery_timeout_ms
        self._window = max(1, window)
        self._transactional_id = transactional_id  # set for the batches of a transactional producer
        self._inflight: deque[tuple[Batch, int]] = deque()
        self._acknowledged = acknowledged
        self._key = ("pipeline", stream)
        self._connection: Connection | None = None
        self._known = False  # whether the broker acknowledged a batch of this producer yet

    @property
    def _timeout_s(self) -> float:
        return self._client.settings.request_timeout_ms / 1000 + self._timeout_ms / 1000

    def _open(self) -> Connection:
        if self._connection is None:
            leader = self._client.leader_of(self._stream)
            self._connection = self._client.connection(leader, key=self._key)
        return self._connection

    def submit(self, batch: Batch) -> None:
        while len(self._inflight) >= (self._window if self._known else 1):
            self._complete_oldest()
        try:
            correlation = self._open().send(produce_request(self._stream, batch, self._timeout_ms, self._transactional_id),
                                            self._timeout_s)
        except (OSError, VdlClientError) as exc:
            log.debug("pipeline to %r: send failed (%s); resending in order", self._stream, exc)
            self._recover([batch])
            return
        self._inflight.append((batch, correlation))

    def _complete_oldest(self) -> None:
        _, correlation = self._inflight[0]
        try:
            assert self._connection is not None
            response = self._connection.receive(ProduceRequest, correlation, self._timeout_s)
        except OSError as exc:
            log.debug("pipeline to %r: %s; resending in order", self._stream, exc)
            self._recover([])
            return
        partition = response.responses[0].partition_responses[0]
        error = partition.error_code
        if error in (0, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
            batch, _ = self._inflight.popleft()
            self._known = True
            if self._acknowledged is not None:
                self._acknowledged(batch)
            return
        if ErrorCode(error) in LEADER_ERRORS:
            self._recover([])
            return
        # Every batch before this one is acknowledged: a gap (OUT_OF_ORDER_SEQUENCE_NUMBER) or any
        # other refusal is not cured by sending it again.
        raise VdlClientError(with_message(f"Produce to {self._stream!r}: {ErrorCode(error).name}", partition.error_message))

    def _recover(self, extra: list[Batch]) -> None:
        pending = [batch for batch, _ in self._inflight] + extra
        self._inflight.clear()
        self._client.disconnect(self._key)
        self._client.forget_leader(self._stream)
        self._connection = None
        for batch in pending:
            deadline = time.monotonic() + self._delivery_timeout_ms / 1000
            self._client.produce(self._stream, batch, self._timeout_ms, deadline, self._transactional_id)
            self._known = True
            if self._acknowledged is not None:
                self._acknowledged(batch)

    def finish(self) -> None:
        while self._inflight:
            self._complete_oldest()

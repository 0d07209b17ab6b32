"""The transaction coordinator of one node, tied to the metadata group (KIP-98): this node
coordinates every transactional id while it leads the metadata group (FindCoordinator key type 1
names that node), and every change of a transaction is a metadata command (cluster/transactions.py),
so a new leader carries on where the old one stopped.

A decision (PrepareCommit / PrepareAbort) is committed in the metadata first, and EndTxn is
answered then, as Kafka answers once PrepareCommit is in its transaction log; the markers then go
to every stream of the transaction through the stream's own Raft group (`MarkerWriter`), and only
then is the transaction completed. The producer's next step on a decided transaction
(AddPartitionsToTxn, AddOffsetsToTxn, InitProducerId) waits here until the markers are written,
then is proposed with the completion -- its entry right behind it, in the same Raft round; one
arriving once the completion is proposed is proposed at once behind it, not after it applies --
instead of answering CONCURRENT_TRANSACTIONS at once and having
the client back off. A new metadata leader resumes every decided transaction, and aborts every
ongoing one older than its timeout.

The leader also removes transactional ids idle for `transactional_id_expiration_ms` (checked every
`transaction_remove_expired_transaction_cleanup_interval_ms`; Kafka's settings of the same names),
once the cluster's feature level allows the command (cluster/features.py): the metadata and its
snapshots do not grow with every id ever used.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from vdl_broker.cluster.service import MetadataService
from vdl_broker.cluster.transactions import (
    TxnMeta,
    TxnResult,
    TxnState,
    add_offsets_command,
    add_partitions_command,
    complete_txn_command,
    end_txn_command,
    expire_txns_command,
    init_producer_command,
    needs_new_producer_id,
    timeout_txn_command,
    txn_offset_commit_command,
)
from vdl_broker.raft.group import RaftGroup
from vdl_broker.raft.proposals import Proposal
from vdl_broker.raft.types import NotLeaderError, RaftError
from vdl_wire.errors import ErrorCode

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 1.0  # how often the leader looks for timed-out and unfinished transactions
SETTLE_WAIT_S = 10.0  # how long a request waits for the previous transaction's markers before
# answering CONCURRENT_TRANSACTIONS (the client retries)
RETRY_S = 0.5  # between attempts to write a decided transaction's markers
EXPIRATION_MS = 7 * 24 * 3600 * 1000  # Kafka's transactional.id.expiration.ms default
EXPIRATION_CHECK_MS = 3_600_000  # Kafka's transaction.remove.expired.transaction.cleanup.interval.ms


CommandOf = Callable[[], dict[str, Any]]  # a command made when it is proposed (its time, a fresh id)


class MarkerWriter(Protocol):
    async def write_markers(self, meta: TxnMeta, commit: bool, streams: list[str]) -> set[str]:
        """Write the commit/abort marker of `meta` into each of `streams`; the streams that hold
        it now (committed by their Raft groups)."""
        ...


class TransactionCoordinator:
    def __init__(self, metadata: MetadataService, allocate_producer_id: Callable[[], int],
                 markers: MarkerWriter | None,
                 clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
                 expiration_ms: int = EXPIRATION_MS, expiration_check_ms: int = EXPIRATION_CHECK_MS) -> None:
        self.metadata = metadata
        self.expiration_ms = expiration_ms
        self.expiration_check_ms = expiration_check_ms
        self._next_expiry_ms: int | None = None  # when the leader looks for expired ids next
        self.markers = markers
        self._allocate = allocate_producer_id
        self._clock_ms = clock_ms
        self._task: asyncio.Task[None] | None = None
        self._finishing: dict[str, asyncio.Task[bool]] = {}
        # Per transactional id, the commands of requests waiting for its decided transaction's
        # completion: proposed right behind it, in the same pass (one Raft round carries them).
        self._queued: dict[str, list[tuple[CommandOf, asyncio.Future[Proposal | ErrorCode]]]] = {}
        # Transactional ids whose completion is proposed and not applied yet: a command for one
        # goes right behind it (the log applies a leader's proposals in the order made).
        self._completing: set[str] = set()
        # Per transactional id, the last produce request of this node (as a stream leader) that
        # waits for its transaction to hold its streams (server/handlers/produce.py): the
        # producer's later requests wait behind it, so they are appended in the order sent.
        self.produce_chain: dict[str, asyncio.Future[None]] = {}

    # -- lifecycle

    def start(self, group: RaftGroup) -> None:
        group.add_role_listener(self._role_changed)
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="txn-coordinator")

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for task in self._finishing.values():
            task.cancel()
        self._finishing.clear()
        for queued in self._queued.values():
            for _, slot in queued:
                slot.cancel()
        self._queued.clear()

    def _role_changed(self, group: RaftGroup) -> None:
        if group.leader_ready:
            self._resume()

    def active(self) -> bool:
        """True while this node leads the metadata group: the caller answers NOT_COORDINATOR
        otherwise and the client looks the coordinator up again."""
        return self.metadata.is_leader

    def state(self, transactional_id: str) -> TxnMeta | None:
        return self.metadata.state.transactions.get(transactional_id)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(CHECK_INTERVAL_S)
            if not self.metadata.is_leader:
                continue
            try:
                self._resume()
                await self.abort_timed_out()
                now = self._clock_ms()
                if self._next_expiry_ms is None or now >= self._next_expiry_ms:
                    self._next_expiry_ms = now + self.expiration_check_ms
                    await self.expire_transactional_ids()
            except Exception:
                log.exception("transaction coordinator pass failed")

    async def abort_timed_out(self) -> list[str]:
        """Abort every ongoing transaction older than its timeout, with an epoch bump that fences
        its producer, and start writing the markers (leader only); the transactional ids."""
        if not self.metadata.is_leader:
            return []
        aborted = []
        for meta in self.metadata.state.transactions.timed_out(self._clock_ms()):
            log.info("transaction %s (producer %d, epoch %d) timed out after %d ms: aborting",
                     meta.transactional_id, meta.producer_id, meta.epoch, meta.timeout_ms)
            await self._submit(timeout_txn_command(meta.transactional_id, self._clock_ms(), meta.producer_id,
                                                   meta.epoch))
            aborted.append(meta.transactional_id)
        self._resume()
        return aborted

    async def expire_transactional_ids(self) -> list[str]:
        """Propose the removal of every transactional id idle for `expiration_ms` (leader only);
        the ids due. Nothing while the cluster is below the level that brought the command: a
        node still on the previous release could not apply it."""
        if not self.metadata.is_leader or self.metadata.state.features.refuses("txn_expire") is not None:
            return []
        now = self._clock_ms()
        due = self.metadata.state.transactions.expired(now, self.expiration_ms)
        if due:
            log.info("removing %d transactional id(s) idle for %d ms: %s", len(due), self.expiration_ms,
                     due[:10])
            await self._submit(expire_txns_command(now, self.expiration_ms))
        return due

    def _resume(self) -> None:
        """Finish every decided transaction nobody is finishing (a new leader's inheritance)."""
        if not self.metadata.is_leader:
            return
        for meta in self.metadata.state.transactions.decided():
            self._finish(meta)

    def _finish(self, meta: TxnMeta) -> asyncio.Task[bool]:
        running = self._finishing.get(meta.transactional_id)
        if running is not None and not running.done():
            return running
        task = asyncio.get_running_loop().create_task(self._complete(meta), name=f"txn-{meta.transactional_id}")
        self._finishing[meta.transactional_id] = task
        task.add_done_callback(lambda _: self._finishing.pop(meta.transactional_id, None)
                               if self._finishing.get(meta.transactional_id) is task else None)
        return task

    async def _complete(self, meta: TxnMeta) -> bool:
        commit = meta.state is TxnState.PREPARE_COMMIT
        written: set[str] = set()
        while self.metadata.is_leader:
            current = self.state(meta.transactional_id)
            if current is None or not current.state.decided or \
                    (current.producer_id, current.epoch) != (meta.producer_id, meta.epoch):
                return True  # completed already (by this leader or an earlier one)
            missing = [s for s in current.streams if s not in written]
            if missing and self.markers is not None:
                written |= await self.markers.write_markers(current, commit, missing)
                missing = [s for s in current.streams if s not in written]
            if not missing or self.markers is None:
                proposed = self._propose(complete_txn_command(meta.transactional_id, self._clock_ms(),
                                                              meta.producer_id, meta.epoch))
                for command, slot in self._queued.pop(meta.transactional_id, []):
                    if not slot.done():
                        slot.set_result(self._propose(command()))
                if not isinstance(proposed, ErrorCode):
                    self._completing.add(meta.transactional_id)
                try:
                    result = await self._outcome(proposed)
                finally:
                    self._completing.discard(meta.transactional_id)
                if isinstance(result, TxnResult):
                    return True
            await asyncio.sleep(RETRY_S)
        return False

    async def _after_settled(self, transactional_id: str, command: CommandOf) -> TxnResult | ErrorCode:
        """Submit `command()`; while `transactional_id`'s transaction is decided, not completed,
        first wait (a bounded while) for its markers: the command is then proposed right behind
        the completion, in the same Raft round, and applies after it. Kafka answers
        CONCURRENT_TRANSACTIONS here and the client retries after its backoff (librdkafka
        100 ms): longer than the markers take."""
        meta = self.state(transactional_id)
        if meta is not None and meta.state.decided and self.metadata.is_leader \
                and transactional_id not in self._completing:
            task = self._finish(meta)
            slot: asyncio.Future[Proposal | ErrorCode] = asyncio.get_running_loop().create_future()
            queue = self._queued.setdefault(transactional_id, [])
            queue.append((command, slot))
            waits: set[asyncio.Future[Any]] = {task, slot}
            try:
                # FIRST_COMPLETED: the completion may have been proposed before this request came;
                # the finishing task's end lets it go on then.
                await asyncio.wait(waits, timeout=SETTLE_WAIT_S, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not slot.done():
                    queue[:] = [entry for entry in queue if entry[1] is not slot]
                    slot.cancel()
            if not slot.cancelled():
                return await self._outcome(slot.result())
        return await self._submit(command())

    def _propose(self, command: dict[str, Any]) -> Proposal | ErrorCode:
        if self.metadata.state.features.refuses(command["op"]) is not None:
            # A cluster formed by an older release, not yet upgraded (`vdl cluster upgrade`).
            return ErrorCode.UNSUPPORTED_VERSION
        try:
            return self.metadata.propose_entry(command)
        except NotLeaderError:
            return ErrorCode.NOT_COORDINATOR
        except RaftError:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE

    async def _outcome(self, proposed: Proposal | ErrorCode) -> TxnResult | ErrorCode:
        if isinstance(proposed, ErrorCode):
            return proposed
        try:
            result = await self.metadata.result_of(proposed)
        except NotLeaderError:
            return ErrorCode.NOT_COORDINATOR
        except RaftError:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if result.txn is None:
            log.warning("transaction command refused: %s", result.message)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        return result.txn

    async def _submit(self, command: dict[str, Any]) -> TxnResult | ErrorCode:
        return await self._outcome(self._propose(command))

    async def _then_finish(self, submitted: Awaitable[TxnResult | ErrorCode]) -> TxnResult | ErrorCode:
        """The result of a command that may decide a transaction; a decision is finished in the
        background (markers, then completion) -- durable now, it holds whatever happens."""
        result = await submitted
        if isinstance(result, TxnResult) and result.meta is not None and result.meta.state.decided:
            self._finish(result.meta)
        return result

    # -- requests (the caller has checked active())

    async def init_producer(self, transactional_id: str, timeout_ms: int,
                            expected: tuple[int, int] | None) -> TxnResult | ErrorCode:
        return await self._then_finish(self._after_settled(transactional_id, lambda: init_producer_command(
            transactional_id, self._clock_ms(), timeout_ms, self._allocate(), expected)))

    async def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                             streams: list[str]) -> TxnResult | ErrorCode:
        return await self._after_settled(transactional_id, lambda: add_partitions_command(
            transactional_id, self._clock_ms(), producer_id, epoch, streams))

    async def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, group: str) -> TxnResult | ErrorCode:
        return await self._after_settled(transactional_id, lambda: add_offsets_command(
            transactional_id, self._clock_ms(), producer_id, epoch, group))

    async def offset_commit(self, transactional_id: str, producer_id: int, epoch: int, group: str,
                            offsets: dict[str, tuple[int, int, str | None]]) -> TxnResult | ErrorCode:
        return await self._in_order(transactional_id, lambda: txn_offset_commit_command(
            transactional_id, self._clock_ms(), producer_id, epoch, group, offsets))

    async def end(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                  bump: bool) -> TxnResult | ErrorCode:
        # An exhausted epoch's bump moves the producer to a new id, which the command carries
        # (applying stays deterministic); it is taken only then, as Kafka's handleEndTransaction.
        new_pid = self._allocate() if needs_new_producer_id(epoch, bump) else None
        return await self._then_finish(self._in_order(transactional_id, lambda: end_txn_command(
            transactional_id, self._clock_ms(), producer_id, epoch, commit, bump, new_pid)))

    async def _in_order(self, transactional_id: str, command: CommandOf) -> TxnResult | ErrorCode:
        """Submit `command()` at once -- or, while earlier requests of the transactional id wait
        for its decided transaction's completion, behind them. Kafka handles a connection's
        requests one at a time: a producer's EndTxn sent after its AddPartitionsToTxn meets the
        add's outcome. Here the add may wait for the markers (`_after_settled`) while the EndTxn
        runs: applied first, librdkafka's abort of the new transaction would meet the previous,
        committed one (INVALID_TXN_STATE, fatal to it) and the add would then open a transaction
        nobody ends."""
        if self._queued.get(transactional_id):
            return await self._after_settled(transactional_id, command)
        return await self._submit(command())


def error_of(result: TxnResult | ErrorCode) -> ErrorCode:
    return result if isinstance(result, ErrorCode) else ErrorCode(result.error)

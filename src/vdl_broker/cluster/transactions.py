"""Transaction coordinator state in the cluster metadata (pure: no I/O, no clock of its own).

Kafka keeps this in __transaction_state (KIP-98); here it is part of the metadata group's state
machine, like group offsets, so it survives any node and a change of metadata leader (the
coordinator of every transactional id is the metadata leader, as FindCoordinator key type 1
says). Per transactional id: producer id, epoch, last epoch, state, partitions (streams: each
stream is one partition), transaction timeout, start time.

Commands (JSON objects; every time and every fresh producer id comes from the proposer, so
applying stays deterministic on every node):

    {"op": "txn_init_producer", "txn": t, "ts": ms, "timeout_ms": n, "new_producer_id": p,
     "expected": [pid, epoch] | null}
    {"op": "txn_add_partitions", "txn": t, "ts": ms, "producer_id": p, "epoch": e, "streams": [s, ...]}
    {"op": "txn_end", "txn": t, "ts": ms, "producer_id": p, "epoch": e, "commit": bool, "bump": bool,
     "new_producer_id": p2 | null}  (p2: the id a bump moves to when the epoch is exhausted)
    {"op": "txn_timeout", "txn": t, "ts": ms, "producer_id": p, "epoch": e}
    {"op": "txn_complete", "txn": t, "ts": ms, "producer_id": p, "epoch": e}
    {"op": "txn_add_offsets", "txn": t, "ts": ms, "producer_id": p, "epoch": e, "group": g}
    {"op": "txn_offset_commit", "txn": t, "ts": ms, "producer_id": p, "epoch": e, "group": g,
     "offsets": {"stream": [offset, leader_epoch, metadata]}}
    {"op": "txn_expire", "ts": ms, "expiration_ms": n}  (every id `expired` at ts: removed)

Offsets committed in a transaction wait in it and reach the group's committed offsets only when
it commits -- with the commit decision (ClusterState applies TxnResult.commit_offsets); an abort
drops them.

Each yields a TxnResult: a Kafka error code (0 = done) and the transaction's metadata after it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from vdl_wire.errors import ErrorCode
from vdl_wire.records.control import MARKER_EPOCHS

NO_EPOCH = -1
NO_PRODUCER_ID = -1
# An epoch at or past this is exhausted: the producer's next bump moves it to a new producer id
# with epoch 0 (Kafka's TransactionMetadata.isEpochExhausted: epoch >= Short.MaxValue - 1).
MAX_EPOCH = 2**15 - 2
# Short.MaxValue: reached only inside the coordinator -- by the bump of a transaction that ends
# under an exhausted epoch (its markers carry it, the producer moves to the new id) or by a fence
# (a timeout, a new instance) -- never handed to a producer.
FENCE_EPOCH = 2**15 - 1
MAX_TIMEOUT_MS = 900_000  # Kafka's transaction.max.timeout.ms default


class TxnState(Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"

    @property
    def decided(self) -> bool:
        """Committed or aborted in the metadata, markers not all written yet."""
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def idle(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


@dataclass(frozen=True)
class PendingOffset:
    group: str
    stream: str
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(frozen=True)
class TxnMeta:
    transactional_id: str
    producer_id: int
    epoch: int
    # The epoch before the producer's own last bump (KIP-360): a retried InitProducerId or EndTxn
    # of that producer naming it gets the current one. NO_EPOCH after a fence by a new instance.
    last_epoch: int
    state: TxnState
    streams: tuple[str, ...]
    timeout_ms: int
    start_ms: int  # when the ongoing transaction began (-1: none)
    update_ms: int
    groups: tuple[str, ...] = ()  # consumer groups added (AddOffsetsToTxn)
    offsets: tuple[PendingOffset, ...] = ()  # TxnOffsetCommit's, applied on commit
    # KIP-890 part 2 with an exhausted epoch: a decided transaction's bump moves the producer to
    # this id (epoch 0) at its completion; EndTxn already answers it (Kafka's nextProducerId).
    next_producer_id: int = NO_PRODUCER_ID
    # The id the producer had before it moved to a new one (an exhausted epoch): a retried
    # EndTxn or InitProducerId naming it and `last_epoch` is recognised (Kafka's prevProducerId).
    prev_producer_id: int = NO_PRODUCER_ID
    # How many commits/aborts this transactional id has decided (the current one's number while
    # decided): its markers carry it as their coordinator epoch, so a stream tells a late marker
    # of an earlier decision -- a deposed coordinator's, a retry's copy -- from the current one
    # (server/txn_index.py), which the classic protocol's unchanged producer id and epoch cannot.
    decision: int = 0

    @property
    def marker_epoch(self) -> int:
        """The coordinator epoch of this decision's markers: 1 .. MARKER_EPOCHS, wrapping (0: a
        decision made before decisions were numbered)."""
        return 0 if self.decision <= 0 else (self.decision - 1) % MARKER_EPOCHS + 1

    def producer_ids(self) -> tuple[int, int]:
        """The producer id and epoch the producer is to use from now on (EndTxn v5's answer)."""
        if self.next_producer_id != NO_PRODUCER_ID:
            return self.next_producer_id, 0
        return self.producer_id, self.epoch


@dataclass(frozen=True)
class TxnResult:
    error: int
    meta: TxnMeta | None
    commit_offsets: tuple[PendingOffset, ...] = ()  # a commit decided: these become committed


@dataclass
class TransactionsState:
    txns: dict[str, TxnMeta] = field(default_factory=dict)
    # Whether decisions are numbered (TxnMeta.decision). A state that began without the numbering
    # (a snapshot written before it) never starts it: its nodes' counts would differ from those
    # of nodes that counted from the start, and a stream would refuse the current decision's
    # markers as late; its markers carry coordinator epoch 0, which streams do not check. A new
    # cluster's state numbers them (ClusterState).
    numbered: bool = False

    def get(self, transactional_id: str) -> TxnMeta | None:
        return self.txns.get(transactional_id)

    def timed_out(self, now_ms: int) -> list[TxnMeta]:
        """Ongoing transactions older than their timeout: the coordinator aborts them."""
        return [t for t in self.txns.values()
                if t.state is TxnState.ONGOING and t.start_ms + t.timeout_ms <= now_ms]

    def expired(self, now_ms: int, expiration_ms: int) -> list[str]:
        """Transactional ids without a transaction (Empty, CompleteCommit, CompleteAbort) and
        unchanged for `expiration_ms`: their state is removed, and the id's next InitProducerId
        starts afresh with a new producer id (Kafka's `transactional.id.expiration.ms`,
        TransactionStateManager.removeExpiredTransactionalIds). An Ongoing transaction never
        expires -- its timeout aborts it first -- nor does a decided one, whose markers are due."""
        return sorted(t.transactional_id for t in self.txns.values()
                      if t.state.idle and t.update_ms + expiration_ms <= now_ms)

    def decided(self) -> list[TxnMeta]:
        """Commits and aborts decided but not completed: a new coordinator resumes them."""
        return [t for t in self.txns.values() if t.state.decided]

    # -- applying (each returns a TxnResult, or an error text for a malformed command)

    def apply(self, op: str, command: dict[str, Any]) -> TxnResult | str:
        if op == "txn_expire":
            return self._expire(command)
        txn, ts = command.get("txn"), command.get("ts")
        if not isinstance(txn, str) or not txn or not isinstance(ts, int):
            return f"{op}: txn must be a non-empty string and ts an int"
        try:
            if op == "txn_init_producer":
                return self._init(txn, ts, command)
            pid, epoch = int(command["producer_id"]), int(command["epoch"])
            if op == "txn_add_partitions":
                return self._add(txn, ts, pid, epoch, [str(s) for s in command["streams"]])
            if op == "txn_end":
                new_pid = command.get("new_producer_id")
                return self._end(txn, ts, pid, epoch, bool(command["commit"]), bool(command.get("bump", False)),
                                 None if new_pid is None else int(new_pid))
            if op == "txn_timeout":
                return self._timeout(txn, ts, pid, epoch)
            if op == "txn_complete":
                return self._complete(txn, ts, pid, epoch)
            if op == "txn_add_offsets":
                return self._add_group(txn, ts, pid, epoch, str(command["group"]))
            if op == "txn_offset_commit":
                return self._offset_commit(txn, ts, pid, epoch, str(command["group"]), command["offsets"])
        except (KeyError, TypeError, ValueError) as error:
            return f"{op}: {error!r}"
        return f"unknown transaction command {op}"

    def _expire(self, command: dict[str, Any]) -> TxnResult | str:
        # Which ids are due is decided here, from the command's time, not by the proposer: an id
        # used again between the proposal and now stays (as Kafka removes an id only if its
        # metadata did not change meanwhile).
        ts, expiration = command.get("ts"), command.get("expiration_ms")
        if (isinstance(ts, bool) or not isinstance(ts, int) or isinstance(expiration, bool)
                or not isinstance(expiration, int) or expiration < 0):
            return "txn_expire: ts must be an int and expiration_ms an int >= 0"
        for txn in self.expired(ts, expiration):
            del self.txns[txn]
        return TxnResult(0, None)

    def _put(self, meta: TxnMeta) -> TxnResult:
        previous = self.txns.get(meta.transactional_id)
        # The decision number outlives every change of the transactional id (a new instance, a
        # new producer id) and counts one more whenever a transaction becomes decided.
        decision = max(meta.decision, previous.decision if previous is not None else 0)
        if self.numbered and meta.state.decided and (previous is None or not previous.state.decided):
            decision += 1
        if decision != meta.decision:
            meta = dataclasses.replace(meta, decision=decision)
        self.txns[meta.transactional_id] = meta
        return TxnResult(0, meta)

    def _init(self, txn: str, ts: int, command: dict[str, Any]) -> TxnResult:
        timeout, new_pid = int(command["timeout_ms"]), int(command["new_producer_id"])
        expected = command.get("expected")
        if timeout <= 0 or timeout > MAX_TIMEOUT_MS:
            return TxnResult(int(ErrorCode.INVALID_TRANSACTION_TIMEOUT), self.txns.get(txn))
        current = self.txns.get(txn)
        if current is None:
            return self._put(TxnMeta(txn, new_pid, 0, NO_EPOCH, TxnState.EMPTY, (), timeout, -1, ts))
        if expected is not None:
            exp_pid, exp_epoch = int(expected[0]), int(expected[1])
            if _retried_bump(current, exp_pid, exp_epoch):
                # The producer's own bump, retried: it already happened (KIP-360); the abort it
                # started may still be completing.
                if current.state.decided:
                    return TxnResult(int(ErrorCode.CONCURRENT_TRANSACTIONS), current)
                if current.epoch >= FENCE_EPOCH:
                    # The bump was a fence (a timeout) that exhausted the epoch: the producer
                    # recovers on a new id (Kafka's prepareProducerIdRotation).
                    return self._put(_moved(current, new_pid, exp_epoch, current.state, timeout, ts))
                return TxnResult(0, current)
            if (exp_pid, exp_epoch) != (current.producer_id, current.epoch):
                return TxnResult(int(ErrorCode.PRODUCER_FENCED), current)
        if current.state.decided:
            return TxnResult(int(ErrorCode.CONCURRENT_TRANSACTIONS), current)
        # Only the producer's own bump (it named its id and epoch) may be retried under the old
        # epoch; a new instance fences every older one for good (Kafka's prepareIncrementProducerEpoch).
        own = expected is not None
        if current.state is TxnState.ONGOING:
            # The old instance's transaction is aborted under a bumped epoch of the same producer
            # id -- the id its records carry, so the markers must too, even with an exhausted
            # epoch (Kafka's prepareFenceProducerEpoch) -- which fences it; the new instance
            # retries (CONCURRENT_TRANSACTIONS) once the abort completed.
            self._put(dataclasses.replace(current, epoch=min(current.epoch + 1, FENCE_EPOCH),
                                          last_epoch=current.epoch if own else NO_EPOCH,
                                          state=TxnState.PREPARE_ABORT, update_ms=ts))
            return TxnResult(int(ErrorCode.CONCURRENT_TRANSACTIONS), self.txns[txn])
        if current.epoch >= MAX_EPOCH:
            if own:
                return self._put(_moved(current, new_pid, current.epoch, TxnState.EMPTY, timeout, ts))
            return self._put(TxnMeta(txn, new_pid, 0, NO_EPOCH, TxnState.EMPTY, (), timeout, -1, ts))
        return self._put(TxnMeta(txn, current.producer_id, current.epoch + 1, current.epoch if own else NO_EPOCH,
                                 TxnState.EMPTY, (), timeout, -1, ts, prev_producer_id=current.prev_producer_id))

    def _fenced(self, current: TxnMeta | None, pid: int, epoch: int) -> TxnResult | None:
        if current is None:
            return TxnResult(int(ErrorCode.INVALID_PRODUCER_ID_MAPPING), None)
        if current.producer_id != pid:
            return TxnResult(int(ErrorCode.INVALID_PRODUCER_ID_MAPPING), current)
        if current.epoch != epoch:
            return TxnResult(int(ErrorCode.PRODUCER_FENCED), current)
        return None

    def _add(self, txn: str, ts: int, pid: int, epoch: int, streams: list[str]) -> TxnResult:
        current = self.txns.get(txn)
        fenced = self._fenced(current, pid, epoch)
        if fenced is not None:
            return fenced
        assert current is not None
        if current.state.decided:
            return TxnResult(int(ErrorCode.CONCURRENT_TRANSACTIONS), current)
        if current.state is TxnState.ONGOING:
            merged = tuple(sorted(set(current.streams) | set(streams)))
            return self._put(dataclasses.replace(current, streams=merged, update_ms=ts))
        return self._put(dataclasses.replace(current, state=TxnState.ONGOING, streams=tuple(sorted(set(streams))),
                                             start_ms=ts, update_ms=ts))

    def _add_group(self, txn: str, ts: int, pid: int, epoch: int, group: str) -> TxnResult:
        added = self._add(txn, ts, pid, epoch, [])
        if added.error or added.meta is None:
            return added
        groups = tuple(sorted(set(added.meta.groups) | {group}))
        return self._put(dataclasses.replace(added.meta, groups=groups))

    def _offset_commit(self, txn: str, ts: int, pid: int, epoch: int, group: str,
                       offsets: dict[str, Any]) -> TxnResult:
        current = self.txns.get(txn)
        fenced = self._fenced(current, pid, epoch)
        if fenced is not None:
            return fenced
        assert current is not None
        if current.state is not TxnState.ONGOING or group not in current.groups:
            return TxnResult(int(ErrorCode.INVALID_TXN_STATE), current)
        kept = {(o.group, o.stream): o for o in current.offsets}
        for stream, (offset, leader_epoch, metadata) in sorted(offsets.items()):
            kept[(group, stream)] = PendingOffset(group, stream, int(offset), int(leader_epoch), metadata)
        return self._put(dataclasses.replace(current, offsets=tuple(kept[k] for k in sorted(kept)), update_ms=ts))

    def _end(self, txn: str, ts: int, pid: int, epoch: int, commit: bool, bump: bool,
             new_pid: int | None) -> TxnResult:
        current = self.txns.get(txn)
        moved_retry = current is not None and bump and _retried_move(current, pid, epoch)
        if current is None or (current.producer_id != pid and not moved_retry):
            return TxnResult(int(ErrorCode.INVALID_PRODUCER_ID_MAPPING), current)
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        deciding = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        retried = moved_retry or (bump and current.last_epoch == epoch and current.epoch == epoch + 1)
        if retried or (not bump and current.epoch == epoch and current.state in (done, deciding)):
            # A retried EndTxn of a transaction already ended the same way (the answer was lost).
            if current.state not in (done, deciding):
                # Not a retry after all. Kafka's handleEndTransaction (transaction version 2)
                # wants the current epoch once the next transaction (Ongoing) or epoch (Empty)
                # began: PRODUCER_FENCED. The other outcome of an ended transaction under the
                # epoch its end bumped past is INVALID_TXN_STATE -- a commit after the
                # coordinator's timeout abort too, as Kafka 4.4 answers it (measured).
                if current.state in (TxnState.ONGOING, TxnState.EMPTY):
                    return TxnResult(int(ErrorCode.PRODUCER_FENCED), current)
                return TxnResult(int(ErrorCode.INVALID_TXN_STATE), current)
            if current.state is done and current.epoch >= FENCE_EPOCH and new_pid is not None:
                # The abort of a timeout that exhausted the epoch: the producer moves on to a new
                # id (it must never be handed Short.MaxValue).
                return self._put(_moved(current, new_pid, epoch, done, current.timeout_ms, ts))
            return TxnResult(0, current)
        if current.epoch != epoch:
            return TxnResult(int(ErrorCode.PRODUCER_FENCED), current)
        if current.state.decided:
            # Kafka's handleEndTransaction: the other outcome asked of a decided transaction is
            # INVALID_TXN_STATE (EndTxn answers once decided, so a client can ask it now).
            if (current.state is TxnState.PREPARE_COMMIT) != commit:
                return TxnResult(int(ErrorCode.INVALID_TXN_STATE), current)
            return TxnResult(int(ErrorCode.CONCURRENT_TRANSACTIONS), current)
        exhausted = bump and epoch >= MAX_EPOCH
        if exhausted and new_pid is None:
            raise ValueError(f"epoch {epoch} is exhausted: the command needs new_producer_id")
        if current.state is not TxnState.ONGOING:
            if not commit and not bump and current.state is TxnState.EMPTY:
                # No transaction was ever open under this epoch (Empty follows only
                # InitProducerId), so none can be committed: the abort of one whose
                # AddPartitionsToTxn never landed is done. Kafka answers INVALID_TXN_STATE, which
                # librdkafka makes fatal: it sends this abort once it *sent* an add, whatever the
                # answer (rdkafka_txnmgr.c: txn_req_cnt), e.g. an add lost in a coordinator change.
                return TxnResult(0, current)
            if not commit and bump:
                # KIP-890: an abort with nothing added still bumps, so the producer moves on.
                if exhausted and new_pid is not None:
                    return self._put(_moved(current, new_pid, epoch, TxnState.COMPLETE_ABORT, current.timeout_ms, ts))
                return self._put(dataclasses.replace(current, epoch=epoch + 1, last_epoch=epoch,
                                                     state=TxnState.COMPLETE_ABORT, update_ms=ts))
            return TxnResult(int(ErrorCode.INVALID_TXN_STATE), current)
        # A commit's offsets reach the group with the decision: it is final, and EndTxn answers
        # now, before the markers (Kafka makes them visible when its marker reaches the offsets
        # topic, which does not wait for the data markers either).
        moved = current.offsets if commit else ()
        offsets = () if commit else current.offsets
        if exhausted and new_pid is not None:
            # The markers carry Short.MaxValue under the old id; the completion moves the
            # producer to `new_pid`, epoch 0, which EndTxn answers now (Kafka's
            # prepareAbortOrCommit with a nextProducerId, KIP-890 part 2).
            self._put(dataclasses.replace(current, epoch=FENCE_EPOCH, last_epoch=epoch, state=deciding,
                                          offsets=offsets, update_ms=ts, next_producer_id=new_pid))
        elif bump:
            self._put(dataclasses.replace(current, epoch=epoch + 1, last_epoch=epoch, state=deciding,
                                          offsets=offsets, update_ms=ts))
        else:
            self._put(dataclasses.replace(current, state=deciding, offsets=offsets, update_ms=ts))
        return TxnResult(0, self.txns[txn], moved)

    def _timeout(self, txn: str, ts: int, pid: int, epoch: int) -> TxnResult:
        current = self.txns.get(txn)
        if current is None or current.state is not TxnState.ONGOING or (current.producer_id, current.epoch) != (pid, epoch):
            return TxnResult(int(ErrorCode.INVALID_TXN_STATE), current)
        # The bump fences the producer's late writes and EndTxn; it keeps last_epoch so the
        # producer itself may recover with InitProducerId naming its epoch (KIP-360) -- on a new
        # id if this bump exhausted the epoch.
        bumped = min(epoch + 1, FENCE_EPOCH)
        return self._put(dataclasses.replace(current, epoch=bumped, last_epoch=epoch if bumped != epoch else NO_EPOCH,
                                             state=TxnState.PREPARE_ABORT, update_ms=ts))

    def _complete(self, txn: str, ts: int, pid: int, epoch: int) -> TxnResult:
        current = self.txns.get(txn)
        if current is None or not current.state.decided or (current.producer_id, current.epoch) != (pid, epoch):
            return TxnResult(int(ErrorCode.INVALID_TXN_STATE), current)
        committed = current.state is TxnState.PREPARE_COMMIT
        done = TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT
        after = dataclasses.replace(current, state=done, streams=(), groups=(), offsets=(), start_ms=-1, update_ms=ts)
        if current.next_producer_id != NO_PRODUCER_ID:
            # Kafka's prepareComplete: the producer moves to the new id; a retried EndTxn naming
            # the old id and its last epoch is recognised by prev_producer_id.
            after = dataclasses.replace(after, producer_id=current.next_producer_id, epoch=0,
                                        next_producer_id=NO_PRODUCER_ID, prev_producer_id=current.producer_id)
        self._put(after)
        return TxnResult(0, self.txns[txn], current.offsets if committed else ())


    def drop_stream(self, stream: str) -> None:
        """A deleted stream leaves the transactions it was part of (no marker can reach it)."""
        for txn, meta in list(self.txns.items()):
            if stream in meta.streams:
                self.txns[txn] = dataclasses.replace(meta, streams=tuple(s for s in meta.streams if s != stream))


def _retried_bump(current: TxnMeta, pid: int, epoch: int) -> bool:
    """`pid`/`epoch` name the producer's own last bump: under the same id, or under the id it
    left for `current.producer_id` when that epoch was exhausted."""
    if current.last_epoch == NO_EPOCH or epoch != current.last_epoch:
        return False
    return pid == current.producer_id or _retried_move(current, pid, epoch)


def _retried_move(current: TxnMeta, pid: int, epoch: int) -> bool:
    """`pid`/`epoch` are the exhausted ones the producer left for `current.producer_id`, epoch 0,
    which it has not used yet (Kafka's retryOnOverflow: prevProducerId, epoch exhausted)."""
    return (pid == current.prev_producer_id != NO_PRODUCER_ID and pid != current.producer_id
            and current.epoch == 0 and epoch == current.last_epoch and epoch >= MAX_EPOCH)


def _moved(current: TxnMeta, new_pid: int, last_epoch: int, state: TxnState, timeout_ms: int, ts: int) -> TxnMeta:
    """The producer's own bump of an exhausted epoch: a new id, epoch 0, the old id and the
    epoch it last used kept to recognise a retry."""
    return TxnMeta(current.transactional_id, new_pid, 0, last_epoch, state, (), timeout_ms, -1, ts,
                   prev_producer_id=current.producer_id)


# ---------------------------------------------------------------------------------- commands


def init_producer_command(txn: str, ts_ms: int, timeout_ms: int, new_producer_id: int,
                          expected: tuple[int, int] | None) -> dict[str, Any]:
    return {"op": "txn_init_producer", "txn": txn, "ts": ts_ms, "timeout_ms": timeout_ms,
            "new_producer_id": new_producer_id, "expected": list(expected) if expected is not None else None}


def add_partitions_command(txn: str, ts_ms: int, producer_id: int, epoch: int, streams: list[str]) -> dict[str, Any]:
    return {"op": "txn_add_partitions", "txn": txn, "ts": ts_ms, "producer_id": producer_id, "epoch": epoch,
            "streams": sorted(streams)}


def end_txn_command(txn: str, ts_ms: int, producer_id: int, epoch: int, commit: bool, bump: bool,
                    new_producer_id: int | None = None) -> dict[str, Any]:
    command: dict[str, Any] = {"op": "txn_end", "txn": txn, "ts": ts_ms, "producer_id": producer_id, "epoch": epoch,
                               "commit": commit, "bump": bump}
    if new_producer_id is not None:
        command["new_producer_id"] = new_producer_id
    return command


def needs_new_producer_id(epoch: int, bump: bool) -> bool:
    """An EndTxn whose bump may move the producer to a new id: its command carries one."""
    return bump and epoch >= MAX_EPOCH


def timeout_txn_command(txn: str, ts_ms: int, producer_id: int, epoch: int) -> dict[str, Any]:
    return {"op": "txn_timeout", "txn": txn, "ts": ts_ms, "producer_id": producer_id, "epoch": epoch}


def complete_txn_command(txn: str, ts_ms: int, producer_id: int, epoch: int) -> dict[str, Any]:
    return {"op": "txn_complete", "txn": txn, "ts": ts_ms, "producer_id": producer_id, "epoch": epoch}


def add_offsets_command(txn: str, ts_ms: int, producer_id: int, epoch: int, group: str) -> dict[str, Any]:
    return {"op": "txn_add_offsets", "txn": txn, "ts": ts_ms, "producer_id": producer_id, "epoch": epoch,
            "group": group}


def txn_offset_commit_command(txn: str, ts_ms: int, producer_id: int, epoch: int, group: str,
                              offsets: dict[str, tuple[int, int, str | None]]) -> dict[str, Any]:
    return {"op": "txn_offset_commit", "txn": txn, "ts": ts_ms, "producer_id": producer_id, "epoch": epoch,
            "group": group, "offsets": {stream: list(value) for stream, value in offsets.items()}}


def expire_txns_command(ts_ms: int, expiration_ms: int) -> dict[str, Any]:
    return {"op": "txn_expire", "ts": ts_ms, "expiration_ms": expiration_ms}


TXN_OPS = frozenset({"txn_init_producer", "txn_add_partitions", "txn_end", "txn_timeout", "txn_complete",
                     "txn_add_offsets", "txn_offset_commit", "txn_expire"})

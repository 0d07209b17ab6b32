"""Test-only: a broker started with this directory on PYTHONPATH gives a new transactional id
named `epoch-limit-<E>-...` the starting epoch E instead of 0, so a test reaches the producer
epoch's limit (Short.MaxValue - 1) in a few transactions instead of 32,766. Nothing else
changes: the state machine, the coordinator, the markers and the client are the product's.

It patches the transaction state machine's InitProducerId of an id it has never seen, which every
node applies alike (the epoch comes from the transactional id, which the command carries), so
the replicas stay equal. Production has no such path: it exists only in this test directory.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from vdl_broker.cluster import transactions

PATTERN = re.compile(r"epoch-limit-(\d+)-")
_original_init = transactions.TransactionsState._init


def _init(self: transactions.TransactionsState, txn: str, ts: int, command: dict[str, Any]) -> transactions.TxnResult:
    new = txn not in self.txns
    result = _original_init(self, txn, ts, command)
    match = PATTERN.match(txn)
    if new and match and result.error == 0 and result.meta is not None:
        return self._put(dataclasses.replace(result.meta, epoch=int(match.group(1))))
    return result


transactions.TransactionsState._init = _init  # type: ignore[method-assign]

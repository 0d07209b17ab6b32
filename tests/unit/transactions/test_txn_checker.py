"""The chaos campaign's transaction checker (tests/faults/chaos/transactions.py) on made-up
histories: a clean one passes, and each anomaly it exists for is found."""

from __future__ import annotations

import pytest

from tests.faults.chaos.transactions import Txn, check_transactions

pytestmark = pytest.mark.unit

A, B = "chaos-tx-a", "chaos-tx-b"


def txn(name: str, outcome: str, a: int = 2, b: int = 1) -> Txn:
    return Txn(name, {A: [f"{name}-{A}-{i}".encode() for i in range(a)],
                      B: [f"{name}-{B}-{i}".encode() for i in range(b)]}, outcome, 1.0)


def log_of(*txns: Txn) -> dict[str, list[tuple[int, bytes | None]]]:
    """Each committed transaction's records with a marker's offset after them, per stream."""
    out: dict[str, list[tuple[int, bytes | None]]] = {A: [], B: []}
    for stream in (A, B):
        offset = 0
        for t in txns:
            for value in t.writes[stream]:
                out[stream].append((offset, value))
                offset += 1
            offset += 1
    return out


def kinds(txns: list[Txn], readers: dict[str, dict[str, list[tuple[int, bytes | None]]]],
          final: dict[str, list[tuple[int, bytes | None]]]) -> list[str]:
    return sorted({a.kind for a in check_transactions(txns, readers, final)})


def test_a_clean_history_has_no_anomaly() -> None:
    committed, unknown, aborted = txn("w0-000001", "committed"), txn("w0-000002", "unknown"), txn("w1-000001", "aborted")
    final = log_of(committed, unknown)  # the unknown one committed
    assert kinds([committed, unknown, aborted], {"r": final}, final) == []
    final = log_of(committed)  # or not
    assert kinds([committed, unknown, aborted], {"r": final}, final) == []


def test_each_anomaly_is_found() -> None:
    committed, aborted, unknown = txn("w0-000001", "committed"), txn("w0-000002", "aborted"), txn("w1-000001", "unknown")
    assert kinds([committed, aborted], {}, log_of(committed, aborted)) == ["aborted_read"]
    assert kinds([committed], {}, log_of()) == ["lost_commit"]
    torn = log_of(unknown)
    torn[B] = []
    assert kinds([unknown], {}, torn) == ["torn"]
    final = log_of(committed)
    swapped = {A: [final[A][1], final[A][0]], B: final[B]}
    assert kinds([committed], {"r": swapped}, final) == ["txn_order"]
    assert kinds([committed], {"r": {A: final[A][:1], B: final[B]}}, final) == ["torn", "txn_order"]
    phantom = log_of(committed)
    phantom[B].append((9, b"nobody-000001-chaos-tx-b-0"))
    assert kinds([committed], {}, phantom) == ["txn_phantom"]

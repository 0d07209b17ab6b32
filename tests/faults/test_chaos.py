"""A short fault campaign with a fixed seed (the long one is `make chaos`): every nemesis that
applies to 3 nodes strikes at least once while three producers (idempotent and not) and two
consumers (assign and group) run, then the checker must find nothing: no acknowledged write
lost, no offset seen with two values, no duplicate from an idempotent producer, no consumer
going backwards or skipping, no high watermark served lower than before, no record nobody
sent, no node exiting by itself, every replica byte-identical to the leader's committed log,
and acks=all resuming after every heal. Transactional producers commit and abort across two
more streams meanwhile: no aborted read, no committed transaction lost or torn, every reader
seeing the same records in the same order."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.chaos.campaign import CampaignConfig, run_campaign
from tests.faults.chaos.nemesis import NEMESES

pytestmark = pytest.mark.timeout(900)

SEED = 20261123


def test_short_campaign_finds_no_anomaly(tmp_path: Path) -> None:
    # One fault of each nemesis (21 on 3 nodes), held 1-3 s (past an election timeout, 1-2 s):
    # the long campaign holds them longer. The load is lighter than the long campaign's: 30
    # records/s per producer and a transaction per writer about every 0.8 s still put thousands
    # of acknowledged records and over a hundred transactions across the faults (asserted
    # below), at a fraction of the CPU on the suite's two cores; the quiet between faults is shorter.
    config = CampaignConfig(tmp_path, nodes=3, faults=21, min_duration_s=0, seed=SEED, rate_per_s=30,
                            hold_s=(1.0, 3.0), quiet_s=(0.2, 0.6), txn_pause_s=0.5)
    result = run_campaign(config)
    print(result.table())
    print(result.goals())
    assert result.anomalies == [], "\n".join(f"{a.kind}: {a.detail[:400]}" for a in result.anomalies[:20])
    struck = {name for fault in result.faults for name in fault.nemeses}
    expected = {n.name for n in NEMESES if n.min_nodes <= 3 and (result.disk_faults or not n.needs_tmpfs)}
    assert expected <= struck, f"nemeses that never struck: {sorted(expected - struck)}"
    assert all(fault.after_heal_s is not None for fault in result.faults)
    assert result.acknowledged > 1000
    assert result.transactions["committed"] >= 20 and result.transactions["aborted"] >= 5, result.transactions

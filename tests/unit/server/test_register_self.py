"""A starting node registering itself (server/joining.py): it asks as soon as the cluster's
feature level lets nodes describe themselves, not a retry period later. A forming cluster of one
reaches that level with its first entries, so every start paid the whole period otherwise.

Real ClusterState; the broker and its metadata group are stand-ins with what register_self reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace

import pytest

from vdl_broker.cluster import features
from vdl_broker.cluster.metadata import ClusterState, register_node_command
from vdl_broker.config import NodeAddress
from vdl_broker.server import joining
from vdl_wire.messages.vdl_nodes import VdlNodesRequest, VdlNodesResponse


class FormingGroup:
    """The metadata group of a cluster forming: the first pause sees the level rise."""

    stopped = False

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.woken: list[bool] = []  # for each pause: whether what it waits for came true

    async def wait_for(self, done: Callable[[None], bool], _timeout_s: float) -> bool:
        if self.state.features.level < features.OWN_REGISTRATION_LEVEL:
            self.state.features.level = features.OWN_REGISTRATION_LEVEL
        self.woken.append(done(None))
        return self.woken[-1]


def test_a_node_asks_to_register_once_the_level_allows(monkeypatch: pytest.MonkeyPatch) -> None:
    state = ClusterState()
    state.features.level = features.BASELINE_LEVEL
    group = FormingGroup(state)
    own = NodeAddress(1, "127.0.0.1:9092", "")
    broker = SimpleNamespace(node_id=1, config=SimpleNamespace(own_address=own),
                             metadata=SimpleNamespace(state=state, group=group))
    asked: list[str] = []

    async def run(_broker: object, request: VdlNodesRequest) -> VdlNodesResponse:
        asked.append(request.action)
        state.apply(1, register_node_command(1, own.client, own.raft, own=True))
        return VdlNodesResponse(error_code=0)

    monkeypatch.setattr(joining.vdl_nodes, "run", run)
    asyncio.run(joining.register_self(broker))  # type: ignore[arg-type]
    assert asked == ["register"]
    # The pause before the level rose ended as it rose (not at its timeout).
    assert group.woken[0] is True

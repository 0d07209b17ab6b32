"""Every request handler keeps its typed seam: it sees its node as a NodeView, its request as the
generated class of its own API, and there is exactly one handler per API key we serve."""

from __future__ import annotations

import inspect
import pkgutil
import typing
from types import ModuleType

import pytest

from vdl_broker.server import authorizer, forwarding, handlers, internal, leader_balancer
from vdl_broker.server.connection import RequestContext
from vdl_broker.server.handlers import MODULES, build_handlers
from vdl_broker.server.node_view import NodeView
from vdl_wire.api import API_SPECS
from vdl_wire.errors import ErrorCode

pytestmark = pytest.mark.unit


def _request_class(module: ModuleType) -> type:
    spec = API_SPECS[module.API_KEY]
    return spec.request_class


def _response_class(module: ModuleType) -> type:
    return API_SPECS[module.API_KEY].response_class


def _mentions_any(hint: object) -> bool:
    if hint is typing.Any:
        return True
    return any(_mentions_any(arg) for arg in typing.get_args(hint))


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_handle_takes_a_node_view_a_request_context_and_its_own_request(module: ModuleType) -> None:
    assert list(inspect.signature(module.handle).parameters) == ["node", "context", "request"]
    hints = typing.get_type_hints(module.handle)
    assert hints["node"] is NodeView
    assert hints["context"] is RequestContext
    assert hints["request"] is _request_class(module)
    # Produce acks=0 has no response: None is its only alternative.
    expected = (_response_class(module) | None if module.NAME == "Produce" else _response_class(module))
    assert hints["return"] == expected
    assert not any(_mentions_any(hint) for hint in hints.values())


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_error_response_answers_its_own_request(module: ModuleType) -> None:
    hints = typing.get_type_hints(module.error_response)
    assert hints["request"] is _request_class(module)
    assert hints["version"] is int
    assert hints["code"] is ErrorCode
    assert _response_class(module) in (hints["return"], *typing.get_args(hints["return"]))
    assert not any(_mentions_any(hint) for hint in hints.values())


def test_exactly_one_handler_per_api_key_of_the_protocol_table() -> None:
    keys = [module.API_KEY for module in MODULES]
    assert len(keys) == len(set(keys))
    table = build_handlers()
    assert sorted(table) == sorted(API_SPECS)
    for key, handler in table.items():
        module = next(m for m in MODULES if m.API_KEY == key)
        assert (handler.api_key, handler.name, handler.handle, handler.error_response) == (
            key, module.NAME, module.handle, module.error_response)
        assert handler.is_async == inspect.iscoroutinefunction(module.handle)


def test_every_handler_module_is_in_the_dispatch_table() -> None:
    found = {info.name for info in pkgutil.iter_modules(handlers.__path__)}
    assert found == {module.__name__.rsplit(".", 1)[1] for module in MODULES}


@pytest.mark.parametrize("function", [
    authorizer.authorized, authorizer.authorized_cluster, authorizer.authorized_group,
    forwarding.on_metadata_leader, internal.call, leader_balancer.elect_preferred, leader_balancer.preferred_leader,
], ids=lambda f: f.__name__)
def test_what_handlers_call_with_their_node_takes_a_node_view(function: typing.Callable[..., object]) -> None:
    # Annotations are strings here (the modules import NodeView for the type checker only).
    first = next(iter(inspect.signature(function).parameters.values()))
    assert (first.name, first.annotation) == ("node", "NodeView")

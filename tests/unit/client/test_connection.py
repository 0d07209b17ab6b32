"""vdl_client's connection layer on its own: bootstrap lists and versions from the declarations."""

from __future__ import annotations

import pytest

from vdl_client.connection import BootstrapError, api_spec, default_version, parse_bootstrap, split_address
from vdl_wire.api import API_SPECS
from vdl_wire.messages import MESSAGE_PAIRS, FetchRequest, MetadataRequest, ProduceRequest


def test_bootstrap_lists_keep_their_order() -> None:
    assert parse_bootstrap("b:2, a:1,,c:3 ") == ("b:2", "a:1", "c:3")
    assert parse_bootstrap(["x:1,y:2", "z:3"]) == ("x:1", "y:2", "z:3")
    assert split_address("[::1]:9092") == ("::1", 9092)


@pytest.mark.parametrize("bad", ["", ",", "host", "host:", ":9092", "host:0", "host:65536", "a:1,b"])
def test_bad_bootstrap_lists_are_refused(bad: str) -> None:
    with pytest.raises(BootstrapError):
        parse_bootstrap(bad)


def test_every_request_class_knows_its_api_and_version() -> None:
    for request_class, response_class in MESSAGE_PAIRS:
        spec = api_spec(request_class)
        assert spec.request_class is request_class and spec.response_class is response_class
        expected = API_SPECS[request_class.DECL.api_key].max_version
        if request_class is ProduceRequest:
            # v12 means KIP-890's transaction version 2, which vdl_client's transactional
            # producer (the classic protocol) must not send; v10 is what earlier brokers serve.
            expected = 10
        assert default_version(request_class) == expected, request_class
    assert (api_spec(MetadataRequest).name, api_spec(FetchRequest).name) == ("Metadata", "Fetch")

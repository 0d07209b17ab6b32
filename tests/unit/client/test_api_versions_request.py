"""The client's ApiVersions names it and its release as KIP-511 allows, whatever the release's
spelling: a broker (Kafka's, VDL's) answers names it refuses INVALID_REQUEST, listing no APIs."""

from __future__ import annotations

import pytest

from vdl_broker.server.handlers.api_versions import SOFTWARE_NAME_OR_VERSION
from vdl_client import client

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("release", "sent"), [("0.1.0", "0.1.0"), ("0.2.0.dev3+g1a2b3c", "0.2.0.dev3-g1a2b3c"),
                                               ("1.0+local.", "1.0-local"), ("+", "unknown")])
def test_the_release_is_sent_as_kip_511_allows(monkeypatch: pytest.MonkeyPatch, release: str, sent: str) -> None:
    monkeypatch.setattr(client, "software_version", lambda: release)
    request = client.api_versions_request()
    assert (request.client_software_name, request.client_software_version) == ("vdl-client", sent)
    assert SOFTWARE_NAME_OR_VERSION.fullmatch(request.client_software_name)
    assert SOFTWARE_NAME_OR_VERSION.fullmatch(request.client_software_version)

"""The CLI's --config: a FILE holds client properties; `streams create` also takes stream configs,
on the command line as KEY=VALUE (as kafka-topics takes them). A stream config put in the file is
an unknown client property, and the error says where it goes instead."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from vdl_client.cli.common import CliError, client_properties, config_pairs

pytestmark = pytest.mark.unit


def test_a_stream_config_in_the_properties_file_is_refused_saying_where_it_goes(tmp_path: Path) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text("client.id=tool\nmessage.timestamp.type=CreateTime\n")
    create = argparse.Namespace(config=[str(properties), "retention.ms=1000"], properties=[], config_pairs=True)
    assert config_pairs(create) == ["retention.ms=1000"]
    with pytest.raises(CliError) as caught:
        client_properties(create)
    assert str(caught.value).startswith(
        "unknown client property message.timestamp.type (a stream config goes on the command line: "
        "--config KEY=VALUE); accepted: bootstrap.servers, client.id, ")
    other = argparse.Namespace(config=[str(properties)], properties=[])  # a command without stream configs
    with pytest.raises(CliError) as caught:
        client_properties(other)
    assert str(caught.value).startswith("unknown client property message.timestamp.type; accepted: ")
    properties.write_text("client.id=tool\n")
    assert client_properties(create) == {"client.id": "tool"}

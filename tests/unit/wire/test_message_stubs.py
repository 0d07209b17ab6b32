"""The messages' type stubs are rendered from their declarations and kept current."""

import pytest

from vdl_wire import message_stubs
from vdl_wire.messages import list_offsets

pytestmark = pytest.mark.unit


def test_every_stub_matches_its_declarations():
    stale = [path.name for path, text in message_stubs.stubs().items()
             if not path.exists() or path.read_text() != text]
    assert stale == []


def test_a_stub_names_fields_nested_classes_and_declarations():
    text = message_stubs.render_module(list_offsets)
    assert "LIST_OFFSETS_REQUEST: MessageDecl\n" in text
    assert ("    class ListOffsetsTopic:\n"
            "        name: str\n"
            "        partitions: list[ListOffsetsRequest.ListOffsetsPartition]\n") in text
    assert "        old_style_offsets: list[int]\n" in text
    assert "    topics: list[ListOffsetsResponse.ListOffsetsTopicResponse]\n" in text

"""vdl demo's Ctrl-C: an interrupt Python dropped (a KeyboardInterrupt raised while importlib's
module-lock weakref callback runs is only printed, "Exception ignored in ...") is raised again at
the demo's next check (vdl_dev.session.raise_if_interrupted); without it the demo ran on."""

from __future__ import annotations

import signal

import pytest

from vdl_dev.session import interrupt_handler, raise_if_interrupted, sigterm_as_interrupt

pytestmark = pytest.mark.unit


def test_an_interrupt_swallowed_where_it_was_raised_is_raised_again_at_the_next_check() -> None:
    with sigterm_as_interrupt():
        raise_if_interrupted()  # nothing yet
        try:
            interrupt_handler(signal.SIGINT, None)  # what Python runs on Ctrl-C ...
        except KeyboardInterrupt:
            pass  # ... and a weakref callback's caller drops
        with pytest.raises(KeyboardInterrupt, match=f"signal {int(signal.SIGINT)}"):
            raise_if_interrupted()
    with sigterm_as_interrupt():  # a new run starts without it
        raise_if_interrupted()

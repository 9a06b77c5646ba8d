"""A transaction held open by another thread, for tests of what a thread may do meanwhile."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def held_open(transaction: Callable[[], contextlib.AbstractContextManager[Any]],
              inside: Callable[[], object] = lambda: None) -> Iterator[threading.Event]:
    """Enter ``transaction()`` in another thread, run ``inside()`` in it, and keep it open
    until the block ends or the yielded event is set; the thread is joined before leaving."""
    opened, release = threading.Event(), threading.Event()

    def hold() -> None:
        with transaction():
            inside()
            opened.set()
            release.wait(10)

    holder = threading.Thread(target=hold, name="holder")
    holder.start()
    try:
        assert opened.wait(10), "the other thread's transaction did not open"
        yield release
    finally:
        release.set()
        holder.join(10)
    assert not holder.is_alive()

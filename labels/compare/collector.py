"""Python's cyclic garbage collector paused while a comparison is computed.

A comparison on 20,000 items holds tens of thousands of objects (units, answers)
while it makes many small lists; each of the collector's passes walked all of them
again, and about half of the CPU time of a report went there. What a comparison
makes has no reference cycles to collect (its objects are freed by reference
counting as usual), so the collector is paused for the call and resumed after it.

Threads share the collector: it is paused while any thread is inside, and resumed
when the last one leaves, if it was running before the first came in.
"""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_LOCK = threading.Lock()
_inside = 0
_was_enabled = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (reference counting goes on)."""
    global _inside, _was_enabled
    with _LOCK:
        if _inside == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _inside += 1
    try:
        yield
    finally:
        with _LOCK:
            _inside -= 1
            if _inside == 0 and _was_enabled:
                gc.enable()


def with_collector_paused(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn` run inside :func:`collector_paused`."""

    @functools.wraps(fn)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        with collector_paused():
            return fn(*args, **kwargs)

    return paused

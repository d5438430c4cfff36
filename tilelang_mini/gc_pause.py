"""`collector_paused()`: Python's cyclic garbage collector off for a stretch of work that
allocates many objects which are not garbage or are freed by reference counting (compiling,
unpickling a cached kernel's IR, simulating a block): their allocations would otherwise set off
full collections over every live object of a large process. The collector's state before is
restored after (a caller that turned it off keeps it off)."""
from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def collector_paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()

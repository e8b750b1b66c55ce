"""Keeping CPython's cyclic garbage collector off the caches that live as long as the process.

A training run builds caches that last the whole run and beyond, in a sweep's process: the
compiled games and ALFWorld's per-game memos of the states played, the DRRN's feature lines.
An ALFWorld sweep process held 4.7 GB after nine runs. CPython's collector rescans every
tracked object in each full collection, and its young collections run many times an iteration:
on an ALFWorld DRRN run, 20.6 s of 120 s over 12 iterations went to collections that found
almost nothing. Inside :func:`iterations`, automatic collection is off and :func:`settle`,
called between iterations, collects what the iteration left (no garbage cycle outlives an
iteration) and then freezes the survivors (``gc.freeze``), so a collection scans only what is
new (5.7 s of 106 s, the same 12 iterations). No result depends on when garbage is collected.

Example:
    >>> import gc
    >>> with iterations():
    ...     settle()
    ...     gc.isenabled(), gc.get_freeze_count() > 0
    (False, True)
    >>> gc.isenabled()
    True
    >>> gc.unfreeze()
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def iterations() -> Iterator[None]:
    """Automatic collection off for the block (on again after it, if it was)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def settle() -> None:
    """Collect the garbage made since the last call, then move every object still alive out of
    the collector's view (module docstring)."""
    gc.collect()
    gc.freeze()

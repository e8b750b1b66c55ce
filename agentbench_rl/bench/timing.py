"""A/B timing on a shared machine: each side warmed up once, then run in rounds whose order
alternates (A, B, then B, A, ...), so load from other processes falls on every side alike."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TypeVar

Answer = TypeVar("Answer")


def alternate(
    sides: Mapping[str, Callable[[], Answer]], repeats: int
) -> dict[str, list[tuple[float, Answer]]]:
    """Per side, the seconds and the answer of each of its ``repeats`` timed runs (the warm-up
    runs are not kept).

    Example:
        >>> runs = alternate({"a": lambda: 1, "b": lambda: 2}, repeats=3)
        >>> [answer for _, answer in runs["b"]]
        [2, 2, 2]
    """
    names = list(sides)
    order = [name for k in range(repeats) for name in (names, names[::-1])[k % 2]]
    runs: dict[str, list[tuple[float, Answer]]] = {name: [] for name in names}
    for position, name in enumerate([*names, *order]):
        began = time.perf_counter()
        answer = sides[name]()
        if position >= len(names):  # the first of each side is its warm-up
            runs[name].append((time.perf_counter() - began, answer))
    return runs

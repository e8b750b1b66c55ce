"""A bounded memo of what was worked out from a key: an env keeps what is a pure function of
what it has met (WebShop's pages and searches, TextCraft's admissible actions by inventory),
which group members, repeated episodes and a fidelity run's continuations ask for again.

Example:
    >>> memo: Memo[str, int] = Memo()
    >>> memo.get_or("a", lambda: 1), memo.get_or("a", lambda: 2)
    (1, 1)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

#: Entries a memo keeps (it starts afresh when full).
MEMO_SIZE = 20_000
Key = TypeVar("Key")
Value = TypeVar("Value")


class Memo(dict[Key, Value]):
    """What was worked out from a key, worked out on a miss by :meth:`get_or` (module
    docstring); only for values that are a pure function of their key."""

    def __init__(self, size: int = MEMO_SIZE) -> None:
        super().__init__()
        self.size = size

    def get_or(self, key: Key, work: Callable[[], Value]) -> Value:
        """The value stored for ``key``, worked out now if it is new."""
        if key in self:
            return self[key]
        if len(self) >= self.size:
            self.clear()
        value = self[key] = work()
        return value

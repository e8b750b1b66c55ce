"""The results folder while a run writes it: the episode journal.

The journal (``episodes.partial.jsonl``) is what ``--resume`` reads: one JSON object per finished
episode. Reading it, a torn last line (the process was killed mid-write) is dropped (and cut off
before the run appends again), an episode
recorded twice counts once (the first complete row is kept, with a warning), and any other bad
line is an error naming the file and line: nothing is lost and nothing is counted twice.

While a run writes the folder it holds the folder's lock
(:class:`~agentbench_rl.core.lock.FolderLock`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, cast

from agentbench_rl.core.jsonfile import complete_lines, json_lines
from agentbench_rl.spec.records import EpisodeRow

#: The type every journal field must have (``return`` and ``score`` may be written as ints).
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "task_id": (str,),
    "category": (str,),
    "seed": (int,),
    "success": (bool,),
    "score": (int, float),
    "steps": (int,),
    "return": (int, float),
    "invalid_actions": (int,),
}


@dataclass(frozen=True)
class Journal:
    """The episodes a journal holds, in the order they were recorded.

    Attributes:
        rows: one per (seed, task), the first complete one recorded.
        duplicates: how many later rows repeated a (seed, task) and were dropped.
        torn: whether a torn last line was dropped.
        complete_bytes: length of the file up to its last complete line.
    """

    rows: list[EpisodeRow]
    duplicates: int = 0
    torn: bool = False
    complete_bytes: int = 0

    def append_to(self, path: Path) -> TextIO:
        """Open the journal at ``path`` for appending, after cutting off a torn last line."""
        with open(path, "ab") as stream:
            stream.truncate(self.complete_bytes)
        return open(path, "a", encoding="utf-8")


def _problem(row: Any, columns: Sequence[str]) -> str | None:
    if not isinstance(row, dict):
        return f"is {type(row).__name__}, not a JSON object"
    for column in columns:
        if column not in row:
            return f"lacks field '{column}'"
        kinds = _FIELD_TYPES.get(column, (object,))
        value = row[column]
        if not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)):
            return f"field '{column}' is {json.dumps(value)}"
    return None


def read_journal(path: Path, columns: Sequence[str]) -> Journal:
    """The episodes of a journal (empty if there is none); ``ValueError`` names a bad line.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "episodes.partial.jsonl"
        >>> _ = path.write_text('{"task_id": "a", "seed": 0}\\n{"task_id": "a", "seed": 0}\\n{"ta')
        >>> journal = read_journal(path, ["task_id", "seed"])
        >>> len(journal.rows), journal.duplicates, journal.torn
        (1, 1, True)
    """
    path = Path(path)
    if not path.exists():
        return Journal([])
    if not path.is_file():
        raise ValueError(f"{path} is not a file (the journal of an interrupted run)")
    data = path.read_bytes()
    text, complete_bytes = complete_lines(data, str(path))
    rows: list[EpisodeRow] = []
    seen: set[tuple[int, str]] = set()
    duplicates = 0
    for number, row in json_lines(text, str(path)):
        reason = _problem(row, columns)
        if reason:
            raise ValueError(f"{path} line {number} {reason}")
        key = (row["seed"], row["task_id"])
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        rows.append(cast(EpisodeRow, row))  # its columns were checked above
    # Text after the last newline is a line torn by a kill: its episode is simply run again.
    torn = complete_bytes < len(data)
    return Journal(rows, duplicates, torn, complete_bytes)

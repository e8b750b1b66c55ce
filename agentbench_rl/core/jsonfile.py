"""Strict JSON reading for the files users hand us (results, submissions, curves, journals).

The standard library's ``json`` keeps the last of two equal keys, recurses until Python's stack
runs out on deep nesting, and reports errors without the file; every reader of user files goes
through :func:`loads_strict` / :func:`read_json` instead, which turn each of those into a
``ValueError`` with one line naming the file, the line and the problem.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Deepest nesting accepted; results files nest four levels, so this only stops hostile input.
MAX_DEPTH = 64


class JSONProblem(ValueError):
    """Text that is not acceptable JSON; ``line``, ``column``: where, when the parser knows."""

    def __init__(self, reason: str, line: int | None = None, column: int | None = None) -> None:
        where = f"line {line}, column {column}: " if line is not None else ""
        super().__init__(f"{where}{reason}")
        self.reason, self.line, self.column = reason, line, column


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise JSONProblem(f"key {json.dumps(key)} appears twice")
        result[key] = value
    return result


def _depth(text: str) -> int:
    """Deepest bracket nesting of JSON text (brackets inside strings are skipped)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def loads_strict(text: str) -> Any:
    """Parse JSON text refusing duplicate keys and nesting deeper than :data:`MAX_DEPTH`;
    :class:`JSONProblem` says where and what.

    Example:
        >>> loads_strict('{"a": 1}')
        {'a': 1}
        >>> loads_strict('{"a": 1, "a": 2}')
        Traceback (most recent call last):
        ...
        agentbench_rl.core.jsonfile.JSONProblem: key "a" appears twice
    """
    if ("[" in text or "{" in text) and _depth(text) > MAX_DEPTH:
        raise JSONProblem(f"nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except JSONProblem:
        raise
    except json.JSONDecodeError as error:
        raise JSONProblem(error.msg, error.lineno, error.colno) from None
    except ValueError as error:  # e.g. an integer past Python's digit limit
        raise JSONProblem(str(error).split(";")[0].splitlines()[0]) from None
    except RecursionError:  # unreachable after the depth check; kept as the last guard
        raise JSONProblem("nested too deeply") from None


def json_lines(text: str, name: str) -> Iterator[tuple[int, Any]]:
    r"""``(line number, value)`` of each non-blank line of JSON-lines text, parsed strictly;
    ``ValueError`` names ``name`` and the line.

    Example:
        >>> list(json_lines('{"a": 1}\n\n[2]\n', "x.jsonl"))
        [(1, {'a': 1}), (3, [2])]
    """
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            yield number, loads_strict(line)
        except JSONProblem as problem:
            raise ValueError(f"{name} line {number} is not valid JSON ({problem.reason})") from None


def complete_lines(data: bytes, name: str) -> tuple[str, int]:
    r"""The text of a journal's complete lines and their length in bytes: what follows the last
    newline is a line torn by a kill, left out (the journals' shared rule). ``ValueError``
    naming ``name`` when the text is not UTF-8.

    Example:
        >>> complete_lines(b'{"a": 1}\n{"a"', "j.jsonl")
        ('{"a": 1}\n', 9)
    """
    complete_bytes = data.rfind(b"\n") + 1
    try:
        return data[:complete_bytes].decode("utf-8"), complete_bytes
    except UnicodeDecodeError:
        raise ValueError(f"{name} is not UTF-8 text") from None


def read_json(path: Path, label: str | None = None) -> Any:
    """Parse a JSON file strictly; ``ValueError`` with one line naming the file (``label``, by
    default its name) and where the problem is.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "metadata.json"
        >>> _ = path.write_text("{oops")
        >>> try:
        ...     read_json(path)
        ... except ValueError as error:
        ...     print(error)
        metadata.json is not valid JSON (line 1, column 2: Expecting property name enclosed in double quotes)
    """  # noqa: E501
    path = Path(path)
    name = label or path.name
    if path.is_dir():
        raise ValueError(f"{name} is a folder, not a JSON file")
    try:
        text = path.read_text("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{name} is not valid JSON (not UTF-8 text)") from None
    except OSError as error:
        raise ValueError(f"{name} cannot be read ({error.strerror or error})") from None
    try:
        return loads_strict(text)
    except JSONProblem as problem:
        raise ValueError(f"{name} is not valid JSON ({problem})") from None

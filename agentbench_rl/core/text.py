"""Text from outside (a server's error body, an HTTP reason phrase, a file name) made safe to print.

A terminal obeys the control sequences in what it prints: an escape sequence in an error body can
set the window title, clear the screen or write the clipboard, and a newline can forge a second
``error:`` line. Every message that carries such text goes through :func:`printable` first.
"""

from __future__ import annotations

import os
import re
from typing import Any


def printable(text: str) -> str:
    """``text`` with every non-printable character (controls, line breaks, bidirectional
    overrides; the space stays) written as its ``\\x..``/``\\u....`` escape, so it prints as one
    line of plain characters.

    Example:
        >>> printable("bad\\x1b]0;owned\\x07 title\\nerror: forged")
        'bad\\\\x1b]0;owned\\\\x07 title\\\\x0aerror: forged'
    """
    if text.isprintable():
        return text
    return "".join(
        char
        if char.isprintable()
        else (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")
        for char in text
    )


# not after ">": "<local>/x" is already portable (the function is idempotent)
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~/>-])/(?:[\w.+@-]+/)*[\w.+@-]+")


def without_machine_paths(text: str, root: str | None = None) -> str:
    """``text`` with the absolute paths of the machine that wrote it made portable: one under
    ``root`` (the working directory by default) relative to it, any other ``<local>/`` and its
    last part, which a reader of another machine could not use anyway.

    Example:
        >>> without_machine_paths("--agent hf:/repo/x --env-option data_dir=/tmp/ws", "/repo")
        '--agent hf:x --env-option data_dir=<local>/ws'
        >>> without_machine_paths("hf:<local>/policy")
        'hf:<local>/policy'
    """
    base = (root or os.getcwd()).rstrip("/") + "/"

    def portable(found: re.Match[str]) -> str:
        path = found.group(0)
        if path.startswith(base):
            return path[len(base) :]
        return f"<local>/{path.rsplit('/', 1)[-1]}"

    return _ABSOLUTE_PATH.sub(portable, text)


def portable_values(value: Any) -> Any:
    """``value`` (JSON: a record's settings) with :func:`without_machine_paths` on every string.

    Example:
        >>> portable_values({"data_dir": "/tmp/ws", "k": [1, "a"]})
        {'data_dir': '<local>/ws', 'k': [1, 'a']}
    """
    if isinstance(value, str):
        return without_machine_paths(value)
    if isinstance(value, dict):
        return {key: portable_values(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [portable_values(item) for item in value]
    return value

"""Text from outside (a server's error body, an HTTP reason phrase, a file name) made safe to print.

A terminal obeys the control sequences in what it prints: an escape sequence in an error body can
set the window title, clear the screen or write the clipboard, and a newline can forge a second
``error:`` line. Every message that carries such text goes through :func:`printable` first.
"""

from __future__ import annotations


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

"""The action canonicaliser: from a model's raw text to one canonical action string.

Every environment runs the model's raw output through :func:`canonicalize_action`, so the same
move written two ways (``"<action>Move  Up</action>"``, ``"move up"``) gets one ``action_key``.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

_OPEN_TAG = re.compile(r"<action>", re.IGNORECASE)
_CLOSE_TAG = re.compile(r"</action>", re.IGNORECASE)
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class ParsedAction:
    """What the canonicaliser made of a raw model output.

    Attributes:
        text: the canonical action string (possibly empty).
        tagged: whether an ``<action>...</action>`` block was found.
    """

    text: str
    tagged: bool


def extract_action(raw: str) -> ParsedAction:
    """Take the last ``<action>...</action>`` block if there is one, else the whole string.

    The last block wins because reasoning models often quote the format before answering; the
    block opens at the last ``<action>`` before the last ``</action>``.

    Example:
        >>> extract_action("<think>go</think><action> Up </action>")
        ParsedAction(text=' Up ', tagged=True)
        >>> extract_action("left")
        ParsedAction(text='left', tagged=False)
    """
    # Two linear scans (last closing tag, then the last opening tag before it); a non-greedy
    # regex over the whole text is quadratic on many unclosed tags.
    close = _last(_CLOSE_TAG.finditer(raw))
    if close is not None:
        opening = _last(_OPEN_TAG.finditer(raw, 0, close.start()))
        if opening is not None:
            return ParsedAction(text=raw[opening.end() : close.start()], tagged=True)
    return ParsedAction(text=raw, tagged=False)


def _last(matches: Iterator[re.Match[str]]) -> re.Match[str] | None:
    last = deque(matches, maxlen=1)
    return last[0] if last else None


def normalize_text(text: str) -> str:
    """Lower-case, collapse runs of whitespace to one space, strip the ends.

    Example:
        >>> normalize_text("  Go   To\\tDesk 1 ")
        'go to desk 1'
    """
    return _WHITESPACE.sub(" ", text).strip().lower()


def canonicalize_action(raw: str | bytes, aliases: Mapping[str, str] | None = None) -> str:
    """Canonical form of a raw model output: extract, normalise, resolve aliases.

    Args:
        raw: the model's text (bytes are decoded as UTF-8 with replacement, never raising; a
            lone surrogate, which no encoding can carry, becomes U+FFFD, so a canonical action
            can be hashed, written and sent over any wire as it is).
        aliases: env-specific map from a normalised alias to its canonical action.

    Example:
        >>> canonicalize_action("<action>Move UP</action>", {"move up": "up"})
        'up'
        >>> canonicalize_action("up\\udcff")
        'up\\ufffd'
    """
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    elif not isinstance(raw, str):
        raw = str(raw)
    raw = raw.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    text = normalize_text(extract_action(raw).text)
    if aliases:
        return aliases.get(text, text)
    return text

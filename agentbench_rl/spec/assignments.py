"""``key=value`` as a user types it (``eval --env-option``, ``train`` overrides, an estimator's
``name:key=value,...``), read one way everywhere: the value is JSON where it parses (numbers,
``true``/``false``/``null``, ``["a", "b"]``, ``{"k": 1}``), else the text as typed; ``NaN`` and
``Infinity`` are refused (no setting means "no limit" by them).

Why not YAML: YAML 1.1 reads ``1e-4`` as text and ``yes`` as true, so one value would mean two
things in two places; JSON is in the standard library, and a config file is still YAML.

Example:
    >>> parse_assignments(["width=8", "data_dir=/data/webshop", "tags=[\\"a\\"]"], "--env-option")
    {'width': 8, 'data_dir': '/data/webshop', 'tags': ['a']}
    >>> parse_assignments(["bc.epochs=3"], "override", dotted=True)
    {'bc.epochs': 3}
    >>> parse_assignments(["width"], "--env-option")
    Traceback (most recent call last):
    ...
    ValueError: --env-option 'width': expected key=value
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*")


def parse_value(text: str) -> Any:
    """A value as typed: JSON where it parses, else the text itself; ``ValueError`` for NaN
    and infinity.

    Example:
        >>> parse_value("0.5"), parse_value("null"), parse_value("state"), parse_value("")
        (0.5, None, 'state', '')
    """
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError:
        return text


def parse_assignment(text: str, what: str, *, dotted: bool = False) -> tuple[str, Any]:
    """``key=value`` -> (key, value); the key an identifier (``dotted``: names joined by dots,
    which reach a config's sections and dict entries). ``ValueError`` naming ``what`` and the
    text."""
    key, sep, value = text.partition("=")
    key = key.strip()
    valid = _DOTTED.fullmatch(key) if dotted else key.isidentifier()
    if not sep or not valid:
        raise ValueError(f"{what} '{text}': expected key=value")
    try:
        return key, parse_value(value)
    except ValueError:
        raise ValueError(f"{what} '{text}': {value} is not a finite number") from None


def parse_assignments(items: Iterable[str], what: str, *, dotted: bool = False) -> dict[str, Any]:
    """Every ``key=value`` of ``items`` as a dict (a key given twice: the last value)."""
    return dict(parse_assignment(item, what, dotted=dotted) for item in items)


def parse_named(text: str, what: str = "estimator") -> tuple[str, dict[str, Any]]:
    """``name`` or ``name:key=value,key=value`` (an estimator on the command line) -> (name,
    parameters).

    Example:
        >>> parse_named("gigpo:anchor=state,omega=0.5")
        ('gigpo', {'anchor': 'state', 'omega': 0.5})
    """
    name, _, rest = text.partition(":")
    if not name.strip():
        raise ValueError(f"{what} '{text}': expected name or name:key=value,...")
    items = [item for item in rest.split(",") if item.strip()]
    return name.strip(), parse_assignments(items, f"{what} '{text}'")


def _refuse_constant(name: str) -> Any:
    raise ValueError(name)

"""The doors a declaration comes in by, derived from its fields: every input is declared once, on
a :class:`~agentbench_rl.spec.typed.Spec`'s field (its name, type, default and description), and
the command line's options and the Python facade's keywords are read off it, so an option's
name is the field's name is the record's key.

A :class:`Door` is one such input as a record names it (``EvalConfig``'s flat ``config.json``
calls the env's ``kwargs`` ``env_kwargs``); old spellings stay as its aliases.
:func:`read_inputs` is the one reader both doors use: it takes what a user gave (an option's
``key=value`` texts, or a keyword's mapping), maps old names to the field's, drops what was not
given (so the declaration's own default applies) and refuses an unknown name in one line; the
declaration's own :meth:`~agentbench_rl.spec.typed.Spec.read` checks the values. The command
line builds its options with ``cli.with_doors``; this layer knows no CLI library.

Example:
    >>> from pydantic import Field
    >>> from agentbench_rl.spec.typed import Spec
    >>> class Shape(Spec):
    ...     width: int = Field(3, ge=1, description="Columns.")
    ...     tags: list[str] = Field(default_factory=list, description="Labels (repeat).")
    >>> doors = doors_of(Shape.model_fields, aliases={"tags": ("tag",)})
    >>> [(door.option, door.many, door.help) for door in doors]
    [('--width', False, 'Columns (default: 3).'), ('--tags', True, 'Labels (repeat).')]
    >>> Shape.read(read_inputs(doors, {"tag": ["a"], "width": None}))
    Shape(width=3, tags=['a'])
    >>> read_inputs(doors, {"widht": 4})
    Traceback (most recent call last):
    ...
    ValueError: unknown option 'widht' (did you mean 'width'?)
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from agentbench_rl.spec.assignments import parse_assignments
from agentbench_rl.spec.typed import did_you_mean


@dataclass(frozen=True)
class Door:
    """One input of a declaration: ``name`` is the record's key and the facade's keyword, and
    ``--name`` (dashes for underscores) the option; ``aliases`` its old names (an option
    ``--alias``, a keyword ``alias``). ``value`` is the type one given value has on the command
    line (``int``, ``float``, ``str``, ``bool`` or ``Path``); ``many`` a list (the option repeats);
    ``assignments`` a mapping given as ``key=value`` texts (JSON values, as ``--env-option``
    always took them)."""

    name: str
    description: str
    value: type
    many: bool = False
    assignments: bool = False
    default: Any = None  # the field's default, shown in the help (None: no default to show)
    aliases: tuple[str, ...] = ()

    @property
    def option(self) -> str:
        """The option's name on the command line."""
        return option_of(self.name)

    @property
    def help(self) -> str:
        """The description, with the default where the field has one worth showing."""
        shown = self.default
        if self.value is bool or shown is None or shown in ([], (), {}):
            return self.description
        if isinstance(shown, list | tuple):
            shown = " ".join(str(item) for item in shown)
        return f"{self.description.rstrip('.')} (default: {shown})."

    def given(self, value: Any) -> Any:
        """A value as the declaration takes it: ``key=value`` texts become a mapping (a mapping
        passes), a tuple a list."""
        if self.assignments and not isinstance(value, Mapping):
            if isinstance(value, str) or not isinstance(value, Iterable):
                raise ValueError(
                    f"{self.name}: expected key=value texts or a mapping, got {value!r}"
                )
            return parse_assignments(value, self.option)
        if self.many and isinstance(value, tuple):
            return list(value)
        return value


def doors_of(
    fields: Mapping[str, FieldInfo],
    aliases: Mapping[str, tuple[str, ...]] | None = None,
    names: Mapping[str, str] | None = None,
) -> tuple[Door, ...]:
    """One door per field, in the fields' order: ``names`` maps a field to the record's key
    where the two differ (``kwargs`` -> ``env_kwargs``), ``aliases`` a record key to its old
    names. A field without a description is a programming error (``TypeError``): its option
    would have no help."""
    aliases, names = aliases or {}, names or {}
    doors = []
    for field, info in fields.items():
        name = names.get(field, field)
        if not info.description:
            raise TypeError(f"field '{field}' has no description for its option")
        value, many, assignments = _shape(info.annotation)
        default = info.get_default(call_default_factory=True)
        doors.append(
            Door(
                name=name,
                description=info.description,
                value=value,
                many=many,
                assignments=assignments,
                default=None if default is PydanticUndefined else default,
                aliases=aliases.get(name, ()),
            )
        )
    return tuple(doors)


def read_inputs(doors: Iterable[Door], given: Mapping[str, Any]) -> dict[str, Any]:
    """The record ``given`` holds (a command's options or the facade's keywords): old names
    become the field's, ``None`` (not given) is left out so the declaration's default applies,
    ``key=value`` texts become a mapping; an unknown name, or a name given twice under two
    spellings, is a one-line ``ValueError``."""
    by_name = {name: door for door in doors for name in (door.name, *door.aliases)}
    record: dict[str, Any] = {}
    for key, value in given.items():
        taker = by_name.get(key)
        if taker is None:
            known = {door.name: door for door in by_name.values()}
            raise ValueError(f"unknown option '{key}'{did_you_mean(key, known)}")
        if value is None:
            continue
        if taker.name in record:
            raise ValueError(f"{taker.name} is given twice ('{key}' is another name for it)")
        record[taker.name] = taker.given(value)
    return record


def option_of(name: str) -> str:
    """The command-line option of a field or old name: ``--`` and dashes for underscores.

    Example:
        >>> option_of("env_kwargs")
        '--env-kwargs'
    """
    return "--" + name.replace("_", "-")


def _shape(annotation: Any) -> tuple[type, bool, bool]:
    """(one value's type on the command line, a list, a ``key=value`` mapping) of a field's
    type: ``Annotated`` and ``None`` peeled off, a ``Literal`` read as its values' type."""
    annotation = _bare(annotation)
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, set, frozenset):
        return _scalar(typing.get_args(annotation)[0]), True, False
    if origin in (dict, Mapping) or annotation is dict:
        return str, True, True
    return _scalar(annotation), False, False


def _bare(annotation: Any) -> Any:
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            options = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
            if len(options) != 1:
                raise TypeError(f"a door cannot read {annotation!r}")
            annotation = options[0]
        else:
            return annotation


def _scalar(annotation: Any) -> type:
    annotation = _bare(annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return type(typing.get_args(annotation)[0])
    if annotation in (int, float, str, bool, Path):
        return typing.cast(type, annotation)
    raise TypeError(f"a door cannot read {annotation!r}")

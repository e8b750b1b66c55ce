"""The base of every typed declaration (a run's config and its sections): pydantic models whose
fields carry their types, ranges and choices, and whose errors are one line naming the field.

pydantic's own message is a block of lines per error (``1 validation error for TrainConfig /
clip_ratio / Input should be less than 1 [type=less_than, ...]``); a user who typed
``clip_ratio=1.5`` reads ``clip_ratio must be < 1, got 1.5``. :func:`one_line` writes that line,
and :class:`Spec` raises it where a user's values come in: :meth:`Spec.read` (a mapping from a
file or the command line) and assignment. (Direct construction keeps pydantic's own error, a
``ValueError`` too: pydantic calls an overridden ``__init__`` for every nested section, which
would wrap one section's line in its parent's.)

Example:
    >>> from pydantic import Field
    >>> class Rate(Spec):
    ...     value: Number = Field(0.5, gt=0, lt=1)
    ...     steps: Whole = Field(1, ge=1)
    >>> for bad in ({"value": 1.5}, {"steps": 2.0}, {"stpes": 3}):
    ...     try:
    ...         Rate.read(bad)
    ...     except ValueError as error:
    ...         print(error)
    value must be < 1, got 1.5
    steps: 2.0 is not a whole number
    unknown config key 'stpes' (did you mean 'steps'?)
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict, ValidationError

#: A whole number: ``3``, never ``3.0``, ``"3"`` or ``True`` (a YAML typo stays an error).
Whole = Annotated[int, Strict()]
#: True or false, spelt so: never ``1`` or ``"yes"``.
Flag = Annotated[bool, Strict()]
#: A string, never a number that YAML read from an unquoted value.
Text = Annotated[str, Strict()]


#: A seed: what numpy's and the harness's generators take (0 .. 2**32 - 1).
MAX_SEED = 2**32 - 1
Seed = Annotated[int, Strict(), Field(ge=0, le=MAX_SEED)]


def _no_flag(value: Any) -> Any:
    if isinstance(value, bool):  # pydantic reads True as 1.0; in a config it is a typo
        raise ValueError(f"{value!r} is not a number")
    return value


#: A finite number: ints and number strings (YAML 1.1 reads ``1e-4`` as one) become floats.
Number = Annotated[float, BeforeValidator(_no_flag)]

SpecT = TypeVar("SpecT", bound="Spec")

_BOUNDS = {
    "greater_than_equal": (">=", "ge"),
    "greater_than": (">", "gt"),
    "less_than_equal": ("<=", "le"),
    "less_than": ("<", "lt"),
}


class Spec(BaseModel):
    """A typed declaration: unknown keys, wrong types, out-of-range values, NaN and infinity are
    refused when the value comes in, in one line (:func:`one_line`) from :meth:`read`."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, validate_assignment=True)

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            super().__setattr__(name, value)
        except ValidationError as error:
            raise ValueError(one_line(error, type(self))) from None

    @classmethod
    def read(cls: type[SpecT], values: Any, where: str = "") -> SpecT:
        """The declaration a (possibly nested) mapping holds; ``ValueError`` in one line."""
        if not isinstance(values, Mapping):
            raise ValueError(f"{where.rstrip('.') or 'config'}: expected a mapping, got {values!r}")
        try:
            return cls.model_validate(dict(values))
        except ValidationError as error:
            raise ValueError(one_line(error, cls, where)) from None


def one_line(error: ValidationError, model: type[BaseModel] | None = None, where: str = "") -> str:
    """The first problem of ``error`` as one line naming the field by its dotted name (an
    unknown key gets a suggestion from ``model``'s fields when it is given)."""
    first = error.errors(include_url=False)[0]
    loc = [str(part) for part in first["loc"]]
    name = where + ".".join(loc)
    kind, value, ctx = first["type"], first.get("input"), first.get("ctx") or {}
    if kind == "extra_forbidden":
        known = _known(model, loc[:-1]) if model is not None else {}
        return f"unknown config key '{name}'{did_you_mean(loc[-1], known, name)}"
    if kind in _BOUNDS:
        sign, key = _BOUNDS[kind]
        whole = isinstance(value, int) and not isinstance(value, bool)
        bound = ctx[key]
        shown = int(bound) if isinstance(bound, float) and bound.is_integer() else bound
        return f"{name} must be {'a whole number ' if whole else ''}{sign} {shown}, got {value!r}"
    if kind == "finite_number":
        return f"{name} must be a finite number, got {value!r}"
    if kind == "literal_error":
        return f"{name} {value!r} (choose from {ctx['expected']})"
    if kind.startswith("int_"):
        return f"{name}: {value!r} is not a whole number"
    if kind.startswith("float_"):
        return f"{name}: {value!r} is not a number"
    if kind.startswith("bool_"):
        return f"{name}: {value!r} is not true/false"
    if kind.startswith("string_"):
        return f"{name}: {value!r} is not a string"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"{name or 'config'}: expected a mapping, got {value!r}"
    if kind == "list_type":
        return f"{name}: {value!r} is not a list"
    if kind == "too_short":
        return f"{name}: give at least {ctx['min_length']}, got {value!r}"
    if kind == "value_error":
        return f"{name}: {ctx.get('error', first['msg'])}" if name else str(ctx.get("error"))
    return f"{name}: {first['msg']}, got {value!r}"


def section_of(model: type[BaseModel], name: str) -> type[BaseModel] | None:
    """The model of field ``name`` of ``model`` when that field is a section (a nested model),
    else ``None`` (a plain field, or no such field): how an override's dotted key and an
    unknown key's suggestion walk down the sections (``TrainConfig``'s ``bc``, ``tiny``).
    """
    info = model.model_fields.get(name)
    annotation = info.annotation if info is not None else None
    return (
        annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    )


def _known(model: type[BaseModel], loc: list[str]) -> dict[str, Any]:
    """The field names of the (nested) model at ``loc``."""
    for part in loc:
        section = section_of(model, part)
        if section is None:
            return {}
        model = section
    return dict(model.model_fields)


def did_you_mean(key: str, known: Mapping[str, Any], name: str = "") -> str:
    """`` (did you mean 'x'?)`` for the closest known key, else the list of known keys; ``name``
    is the dotted name of ``key``, whose prefix the suggestion keeps.

    Example:
        >>> did_you_mean("lerning_rate", {"learning_rate": float, "seed": int})
        " (did you mean 'learning_rate'?)"
    """
    close = difflib.get_close_matches(key, list(known), n=1)
    prefix = name[: len(name) - len(key)] if name.endswith(key) else ""
    if close:
        return f" (did you mean '{prefix}{close[0]}'?)"
    return f" (known: {', '.join(sorted(known))})" if known else ""

"""The estimator registry: names, parameter schemas, needs, and ``compute``.

An estimator declares itself once, at registration: the :func:`register` decorator reads its
keyword-only parameters and defaults from its signature, attaches the rule for each parameter
name (``gamma`` means the same thing in every estimator, so it has one rule, with its type, range
and one-line help), records the batch columns it needs (``needs``: ``hidden`` for BiPACE) or
uses when present (``uses``: ``semantic_key`` for ProGPO) and, for an estimator with step-level
sets (anchor sets, clusters), the function that forms them (``step_sets``), so a benchmark can
score those sets without knowing which estimator it is. Everything else reads that
declaration: :func:`compute`, the trainer's config validation and sweep loading (through
:func:`check_params`, before any work), ``agentbench-rl estimators`` and the benchmarks.

Third-party estimators come from the entry-point group ``agentbench_rl.estimators``: each entry
point is a callable ``(batch, *, param=default, ...) -> EstimatorResult``, loaded the first time
its name is asked for and declared exactly like a built-in; rules for parameter names of its own
and its needs come from the callable's ``estimator_rules``, ``estimator_needs`` /
``estimator_uses`` and ``estimator_step_sets`` attributes (set them with :func:`declares`).
"""

from __future__ import annotations

import importlib.metadata
import inspect
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentbench_rl.core.batch import StepBatch
from agentbench_rl.core.plugins import ESTIMATOR_GROUP, installed

ENTRY_POINT_GROUP = ESTIMATOR_GROUP


@dataclass(frozen=True)
class EstimatorResult:
    """What every estimator returns.

    ``advantages`` is a float64 array with one value per row of the batch, in the batch's row
    order; ``diagnostics`` always holds ``n_rows``, ``n_groups``, ``step_groups``,
    ``singleton_rate`` and ``mean_group_size`` (see ``docs/estimators.md``) plus the estimator's
    own figures.

    Example:
        >>> EstimatorResult(np.zeros(2), {"n_rows": 2}).advantages.dtype
        dtype('float64')
    """

    advantages: np.ndarray
    diagnostics: dict[str, Any] = field(default_factory=dict)


Estimator = Callable[..., EstimatorResult]
# (batch, parameters with every default filled in) -> (set code per row, number of sets)
StepSets = Callable[[StepBatch, Mapping[str, Any]], tuple[np.ndarray, int]]


#: An estimator's parameters by name, as given (each value checked at run time by the rule its
#: estimator declares for it, :class:`ParamRule`: a plug-in may declare kinds of its own).
EstimatorParams = Mapping[str, Any]


@dataclass(frozen=True)
class ParamRule:
    """What a parameter accepts: ``check(value)`` is true for an accepted value, ``accepts``
    says it in words for the error message, ``kind`` names its type (``number``, ``integer``,
    ``choice``, or your own word) and ``help`` says in one line what it does."""

    check: Callable[[Any], bool]
    accepts: str
    kind: str = "value"
    help: str = ""

    def described(self, help: str) -> ParamRule:
        """The same rule with a help line.

        Example:
            >>> integer_at_least(1).described("how many").help
            'how many'
        """
        return ParamRule(self.check, self.accepts, self.kind, help)


def _is_number(value: Any) -> bool:
    # bool is an int to Python, but ``gamma=True`` is a mistake, never a discount.
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )


def _is_integer(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def number_in(
    low: float, high: float, *, low_open: bool = False, high_open: bool = False
) -> ParamRule:
    """Rule for a finite number between ``low`` and ``high`` (``math.inf`` for no bound).

    Example:
        >>> number_in(0, 1, high_open=True).check(1.0)
        False
    """

    def check(value: Any) -> bool:
        if not _is_number(value) or not math.isfinite(value):
            return False
        above = value > low if low_open else value >= low
        below = value < high if high_open else value <= high
        return bool(above and below)

    left = "(" if low_open else "["
    right = ")" if high_open or high == math.inf else "]"
    high_text = "inf" if high == math.inf else f"{high:g}"
    return ParamRule(check, f"a finite number in {left}{low:g}, {high_text}{right}", "number")


def integer_at_least(low: int) -> ParamRule:
    """Rule for an integer ``>= low``.

    Example:
        >>> integer_at_least(1).check(0)
        False
    """
    return ParamRule(
        lambda value: _is_integer(value) and value >= low, f"an integer >= {low}", "integer"
    )


def boolean() -> ParamRule:
    """Rule for ``True`` or ``False`` (numpy's bool too; 0 and 1 are refused).

    Example:
        >>> boolean().check(1)
        False
    """
    return ParamRule(lambda value: isinstance(value, bool | np.bool_), "true or false", "boolean")


def one_of(*choices: str) -> ParamRule:
    """Rule for one of a few strings.

    Example:
        >>> one_of("obs", "state").check("state")
        True
    """
    return ParamRule(
        lambda value: isinstance(value, str) and value in choices,
        "one of " + ", ".join(repr(choice) for choice in choices),
        "choice",
    )


# One rule per parameter name, shared by every estimator that takes the parameter.
PARAM_RULES: dict[str, ParamRule] = {
    "gamma": number_in(0, 1).described("discount of the step returns"),
    "lam": number_in(0, 1).described("GAE lambda of the bootstrapped step term"),
    "omega": number_in(0, math.inf).described("weight of the step-level term"),
    "invalid_penalty": number_in(0, math.inf).described(
        "subtracted from the advantage of an invalid action"
    ),
    "epsilon": number_in(0, 1, high_open=True).described(
        "cosine distance under which hidden states share a cluster"
    ),
    "kappa": number_in(0, math.inf).described("strength of the entropy modulation"),
    "tau": number_in(0, math.inf, low_open=True).described("temperature of the entropy weights"),
    "depth": integer_at_least(0).described("levels of the anchor hierarchy"),
    "history_length": integer_at_least(0).described(
        "past observations a context group may share (levels 1 .. history_length + 1)"
    ),
    "alpha": number_in(0, math.inf).described("level weight exponent: w_k = (k + 1)^alpha"),
    "base_group": boolean().described("add the episode advantage as the level-0 item"),
    "min_peers": integer_at_least(1).described(
        "rows with the same action a cluster needs before its own baseline is used"
    ),
    "norm": one_of("mean_std", "mean").described("normalise by mean and std, or mean only"),
    "episode_stats": one_of("rows", "trajectories").described(
        "episode statistics over step rows or over trajectories"
    ),
    "anchor": one_of("obs", "state").described("step groups keyed by observation or by state"),
    "pace": one_of("q", "diff", "state").described("action-side baseline inside a cluster"),
    "mixing": one_of("additive", "replace").described(
        "add the step term to the episode term, or replace it"
    ),
    "step_weight": number_in(0, math.inf).described("weight of the step-level term"),
    "episode_weight": number_in(0, math.inf).described("weight of the episode-level term"),
    "normalize_distance": boolean().described(
        "graph return of the distance gained (d_next - d_now + 1), not of d_next"
    ),
    "power": ParamRule(
        lambda value: value == "inf" or (_is_number(value) and math.isfinite(value) and value >= 1),
        "a finite number >= 1, or 'inf' (the max)",
        "number",
    ).described("exponent of the power-mean backup: 1 the expectation, 'inf' the max"),
    "floor": number_in(0, 1, low_open=True, high_open=True).described(
        "success probability below which the log potential is cut"
    ),
    "hops": integer_at_least(0).described(
        "TD residuals summed along the trajectory (0: all, to its end)"
    ),
    "success_value": number_in(0, math.inf, low_open=True).described(
        "the return at which a trajectory's last step reaches success (G2PO's code: 10)"
    ),
    "lone_row": one_of("zero", "score").described(
        "the episode advantage of a task group of one row: 0, or its score (verl-agent)"
    ),
}

#: Batch columns an estimator can declare in ``needs`` (required) or ``uses`` (read if present).
NEED_COLUMNS: tuple[str, ...] = ("hidden", "semantic_key", "next_obs_key")


@dataclass(frozen=True)
class Param:
    """One declared parameter: name, default and rule.

    Example:
        >>> Param("gamma", 0.95, PARAM_RULES["gamma"]).schema()["accepts"]
        'a finite number in [0, 1]'
    """

    name: str
    default: Any
    rule: ParamRule

    def schema(self) -> dict[str, Any]:
        """The parameter as plain data (what ``agentbench-rl estimators --json`` prints)."""
        return {
            "name": self.name,
            "type": self.rule.kind,
            "default": self.default,
            "accepts": self.rule.accepts,
            "help": self.rule.help,
        }


@dataclass(frozen=True)
class RegisteredEstimator:
    """A declared estimator: its function, parameter schema, the columns it needs or uses and
    the function forming its step-level sets (None for an episode-level estimator)."""

    name: str
    function: Estimator
    params: Mapping[str, Param]
    needs: frozenset[str] = frozenset()
    uses: frozenset[str] = frozenset()
    summary: str = ""
    step_sets: StepSets | None = None

    @property
    def defaults(self) -> dict[str, Any]:
        """Parameter name -> default."""
        return {key: param.default for key, param in self.params.items()}

    def accepted(self) -> str:
        """The accepted parameters with their defaults, for error messages."""
        return ", ".join(f"{key}={value!r}" for key, value in self.defaults.items()) or "none"

    def check_params(self, params: EstimatorParams) -> None:
        """Raise ``ValueError`` for an unknown parameter name or a value out of range."""
        unknown = sorted(set(params) - set(self.params))
        if unknown:
            raise ValueError(
                f"estimator '{self.name}': unknown parameter(s) {', '.join(unknown)}; "
                f"accepted: {self.accepted()}"
            )
        for key, value in params.items():
            rule = self.params[key].rule
            if not rule.check(value):
                raise ValueError(
                    f"estimator '{self.name}': {key}={value!r} is out of range; "
                    f"{key} accepts {rule.accepts}"
                )

    def step_set_codes(
        self, batch: StepBatch, params: EstimatorParams
    ) -> tuple[np.ndarray, int] | None:
        """The step-level sets the estimator forms on ``batch`` with ``params`` (its defaults
        for the rest): a set code per row and the number of sets; None when it has none.

        Example:
            >>> batch = StepBatch.from_records([
            ...     {"group": 0, "traj": traj, "t": 0, "reward": 0.0, "obs_key": "o",
            ...      "state_key": state, "action_key": "a", "valid": True}
            ...     for traj, state in (("x", "s"), ("y", "u"))])
            >>> REGISTRY["gigpo"].step_set_codes(batch, {"anchor": "state"})[1]
            2
            >>> REGISTRY["grpo"].step_set_codes(batch, {}) is None
            True
        """
        if self.step_sets is None:
            return None
        return self.step_sets(batch, {**self.defaults, **params})

    def check_batch(self, batch: StepBatch) -> None:
        """Raise ``ValueError`` when the batch lacks a column the estimator needs."""
        for column in sorted(self.needs):
            if getattr(batch, column) is None:
                raise ValueError(
                    f"estimator '{self.name}' needs column '{column}', which the batch lacks"
                )

    def schema(self) -> dict[str, Any]:
        """The declaration as plain data.

        Example:
            >>> sorted(REGISTRY["rloo"].schema())
            ['name', 'needs', 'params', 'step_sets', 'summary', 'uses']
        """
        step_sets_doc = inspect.getdoc(self.step_sets) if self.step_sets else None
        return {
            "name": self.name,
            "summary": self.summary,
            "needs": sorted(self.needs),
            "uses": sorted(self.uses),
            "step_sets": step_sets_doc.splitlines()[0] if step_sets_doc else None,
            "params": [param.schema() for param in self.params.values()],
        }


REGISTRY: dict[str, RegisteredEstimator] = {}
# Entry-point estimators declared so far (name -> declaration); filled lazily by ``resolve``.
_PLUGINS: dict[str, RegisteredEstimator] = {}


def _check_columns(name: str, kind: str, columns: Collection[str]) -> frozenset[str]:
    unknown = sorted(set(columns) - set(NEED_COLUMNS))
    if unknown:
        raise TypeError(
            f"estimator '{name}': {kind} {', '.join(unknown)} is not a column "
            f"(choose from {', '.join(NEED_COLUMNS)})"
        )
    return frozenset(columns)


def declare(
    name: str,
    function: Estimator,
    rules: Mapping[str, ParamRule] | None = None,
    needs: Collection[str] = (),
    uses: Collection[str] = (),
    step_sets: StepSets | None = None,
) -> RegisteredEstimator:
    """The declaration of ``function(batch, *, param=default, ...)`` under ``name``.

    Every keyword-only parameter needs a default and a rule, either from :data:`PARAM_RULES` or
    from ``rules`` (for a parameter name of your own). Raises ``TypeError`` otherwise.
    ``step_sets(batch, params)`` forms the estimator's step-level sets, if it has any.

    Example:
        >>> def zero(batch: StepBatch, *, gamma: float = 0.9) -> EstimatorResult:
        ...     "All zeros."
        ...     return EstimatorResult(np.zeros(len(batch)), {})
        >>> declare("zero", zero).schema()["params"][0]["default"]
        0.9
    """
    own_rules = dict(rules or {})
    params: dict[str, Param] = {}
    parameters = list(inspect.signature(function).parameters.values())
    for parameter in parameters[1:]:
        if parameter.kind is not inspect.Parameter.KEYWORD_ONLY:
            raise TypeError(f"estimator '{name}': '{parameter.name}' must be keyword-only")
        if parameter.default is inspect.Parameter.empty:
            raise TypeError(f"estimator '{name}': '{parameter.name}' needs a default")
        rule = own_rules.get(parameter.name, PARAM_RULES.get(parameter.name))
        if rule is None:
            raise TypeError(f"estimator '{name}': no rule for parameter '{parameter.name}'")
        params[parameter.name] = Param(parameter.name, parameter.default, rule)
    doc = inspect.getdoc(function) or ""
    return RegisteredEstimator(
        name,
        function,
        params,
        needs=_check_columns(name, "need", needs),
        uses=_check_columns(name, "use", uses),
        summary=doc.splitlines()[0] if doc else "",
        step_sets=step_sets,
    )


def register(
    name: str,
    rules: Mapping[str, ParamRule] | None = None,
    needs: Collection[str] = (),
    uses: Collection[str] = (),
    step_sets: StepSets | None = None,
) -> Callable[[Estimator], Estimator]:
    """Decorator that declares ``function(batch, *, param=default, ...)`` (see :func:`declare`)
    and registers it under ``name``.

    Example:
        >>> @register("zero_doc_example")
        ... def zero(batch: StepBatch, *, invalid_penalty: float = 0.0) -> EstimatorResult:
        ...     return EstimatorResult(np.zeros(len(batch)), {})
        >>> REGISTRY["zero_doc_example"].defaults
        {'invalid_penalty': 0.0}
        >>> del REGISTRY["zero_doc_example"]
    """

    def decorate(function: Estimator) -> Estimator:
        if name in REGISTRY:
            raise ValueError(f"estimator '{name}' is already registered")
        REGISTRY[name] = declare(name, function, rules, needs, uses, step_sets)
        return function

    return decorate


def declares(
    rules: Mapping[str, ParamRule] | None = None,
    needs: Collection[str] = (),
    uses: Collection[str] = (),
    step_sets: StepSets | None = None,
) -> Callable[[Estimator], Estimator]:
    """Decorator for an entry-point estimator: attaches its own rules, needs and step sets, which
    :func:`resolve` reads when it loads the entry point (the name comes from the entry point).

    Example:
        >>> @declares(needs=("hidden",))
        ... def uses_hidden(batch: StepBatch) -> EstimatorResult:
        ...     return EstimatorResult(np.zeros(len(batch)), {})
        >>> uses_hidden.estimator_needs
        ('hidden',)
    """

    def decorate(function: Estimator) -> Estimator:
        function.estimator_rules = dict(rules or {})  # type: ignore[attr-defined]
        function.estimator_needs = tuple(needs)  # type: ignore[attr-defined]
        function.estimator_uses = tuple(uses)  # type: ignore[attr-defined]
        function.estimator_step_sets = step_sets  # type: ignore[attr-defined]
        return function

    return decorate


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    # Looked up through the module attribute at call time, so tests can monkeypatch it.
    return list(installed(ENTRY_POINT_GROUP).values())


def available() -> list[str]:
    """Names ``compute`` accepts: the built-ins, then the installed entry points (not loaded).

    Example:
        >>> available()[:3]
        ['grpo', 'rloo', 'gigpo']
    """
    names = list(REGISTRY)
    names += sorted({point.name for point in _entry_points()} - set(REGISTRY))
    return names


def runnable(columns: Collection[str]) -> list[str]:
    """The available estimators (in :func:`available`'s order) whose needs are all among
    ``columns``, the optional batch columns a caller provides: what a benchmark runs.

    Example:
        >>> "bipace" in runnable(()), "bipace" in runnable(("hidden",))
        (False, True)
    """
    return [name for name in available() if resolve(name).needs <= set(columns)]


def resolve(name: str) -> RegisteredEstimator:
    """The declaration of estimator ``name``: a built-in, else the entry point of that name
    (loaded and declared once).

    Raises ``ValueError`` listing the accepted names when there is neither, and for an entry
    point that is not a callable or whose parameters cannot be declared.

    Example:
        >>> sorted(resolve("bipace").needs)
        ['hidden']
    """
    if name in REGISTRY:
        return REGISTRY[name]
    if name in _PLUGINS:
        return _PLUGINS[name]
    points = [point for point in _entry_points() if point.name == name]
    if not points:
        raise ValueError(f"unknown estimator '{name}'; accepted: {', '.join(available())}")
    loaded = points[0].load()
    if not callable(loaded):
        raise ValueError(
            f"entry point '{name}' in group '{ENTRY_POINT_GROUP}' is not callable: {loaded!r}"
        )
    try:
        declared = declare(
            name,
            loaded,
            getattr(loaded, "estimator_rules", None),
            getattr(loaded, "estimator_needs", ()),
            getattr(loaded, "estimator_uses", ()),
            getattr(loaded, "estimator_step_sets", None),
        )
    except TypeError as problem:
        where = f"entry point '{name}' in group '{ENTRY_POINT_GROUP}'"
        raise ValueError(f"{where}: {problem}") from None
    _PLUGINS[name] = declared
    return declared


def check_params(name: str, params: EstimatorParams) -> RegisteredEstimator:
    """Check an estimator name and its parameters before any work; return its declaration.

    Example:
        >>> check_params("gigpo", {"omgea": 0.5})
        Traceback (most recent call last):
        ...
        ValueError: estimator 'gigpo': unknown parameter(s) omgea; accepted: gamma=0.95, \
omega=1.0, norm='mean_std', episode_stats='rows', anchor='obs', invalid_penalty=0.0, lone_row='zero'
    """
    declared = resolve(name)
    declared.check_params(params)
    return declared


@dataclass(frozen=True)
class EstimatorSpec:
    """An estimator as a run declares it: its name and parameters, checked against the
    registry when built (an unknown name, parameter or value raises ``ValueError`` here, before
    any work).

    Example:
        >>> spec = EstimatorSpec("grpo", {"norm": "mean"})
        >>> spec.declaration.needs, spec.params
        (frozenset(), {'norm': 'mean'})
        >>> EstimatorSpec("gigpo", {"omgea": 0.5})
        Traceback (most recent call last):
        ...
        ValueError: estimator 'gigpo': unknown parameter(s) omgea; accepted: gamma=0.95, \
omega=1.0, norm='mean_std', episode_stats='rows', anchor='obs', invalid_penalty=0.0, lone_row='zero'
    """

    name: str
    params: EstimatorParams = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_params(self.name, self.params)

    @property
    def declaration(self) -> RegisteredEstimator:
        """The registry's declaration of the estimator."""
        return resolve(self.name)

    def compute(self, batch: StepBatch) -> EstimatorResult:
        """Advantages of this estimator on ``batch`` (:func:`compute`)."""
        return compute(self.name, batch, **self.params)


def compute(name: str, batch: StepBatch, **params: Any) -> EstimatorResult:
    """Advantages of estimator ``name`` on ``batch``.

    Example:
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": traj, "t": 0, "reward": reward, "obs_key": "o",
        ...      "state_key": "o", "action_key": "a", "valid": True}
        ...     for traj, reward in (("x", 1.0), ("y", 0.0))])
        >>> compute("grpo", batch, norm="mean").advantages.tolist()
        [0.5, -0.5]
    """
    if not isinstance(batch, StepBatch):
        raise TypeError(f"compute expects a StepBatch, got {type(batch).__name__}")
    estimator = check_params(name, params)
    estimator.check_batch(batch)
    result = estimator.function(batch, **params)
    if not isinstance(result, EstimatorResult):
        raise TypeError(f"estimator '{name}' returned {type(result).__name__}, not EstimatorResult")
    if result.advantages.shape != (len(batch),):
        raise ValueError(
            f"estimator '{name}' returned advantages of shape {result.advantages.shape}, "
            f"expected ({len(batch)},)"
        )
    return result

"""The registry: names, parameter checking, third-party entry points, BiPACE's hidden checks."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest

from agentbench_rl.estimators import (
    NAMES,
    EstimatorResult,
    ParamRule,
    StepBatch,
    available,
    check_params,
    compute,
    declares,
    register,
)
from agentbench_rl.estimators import registry as registry_module
from agentbench_rl.estimators.registry import number_in


def small_batch(hidden: Any = None) -> StepBatch:
    # two one-step trajectories, rewards 1 and 0
    records = [
        {
            "group": 0,
            "traj": traj,
            "t": 0,
            "reward": reward,
            "obs_key": "o",
            "state_key": "o",
            "action_key": "a",
            "valid": True,
        }
        for traj, reward in (("x", 1.0), ("y", 0.0))
    ]
    if hidden is not None:
        for row, vector in zip(records, hidden, strict=True):
            row["hidden"] = vector
    return StepBatch.from_records(records)


def test_names_in_order() -> None:
    expected = ("grpo", "rloo", "gigpo", "bipace", "ecpo", "progpo", "gated_bepo", "hgpo")
    assert (*expected, "graphgpo", "g2po", "crbc", "graphhca", "graft") == NAMES
    assert available() == list(NAMES)


def test_unknown_estimator_lists_the_names() -> None:
    with pytest.raises(ValueError, match="unknown estimator 'ppo'; accepted: grpo, rloo, gigpo"):
        compute("ppo", small_batch())


def test_unknown_parameter_lists_the_accepted_ones() -> None:
    with pytest.raises(
        ValueError,
        match=re.escape(
            "estimator 'grpo': unknown parameter(s) gamma; accepted: norm='mean_std', "
            "episode_stats='rows', invalid_penalty=0.0"
        ),
    ):
        compute("grpo", small_batch(), gamma=0.9)


@pytest.mark.parametrize(
    ("name", "param", "value"),
    [
        ("gigpo", "gamma", 1.5),
        ("gigpo", "gamma", -0.1),
        ("gigpo", "gamma", True),
        ("gigpo", "gamma", "0.9"),
        ("gigpo", "omega", math.nan),
        ("gigpo", "omega", -1.0),
        ("grpo", "invalid_penalty", -0.5),
        ("grpo", "norm", "std"),
        ("grpo", "episode_stats", "steps"),
        ("gigpo", "anchor", "text"),
        ("bipace", "epsilon", 1.0),
        ("bipace", "epsilon", -0.01),
        ("bipace", "pace", "v"),
        ("bipace", "min_peers", 0),
        ("bipace", "min_peers", 2.0),
        ("ecpo", "kappa", math.inf),
        ("ecpo", "kappa", -1.0),
        ("ecpo", "tau", 0.0),
        ("progpo", "depth", -1),
        ("progpo", "depth", 1.5),
        ("gated_bepo", "lam", 1.01),
        ("gated_bepo", "mixing", "multiply"),
        ("hgpo", "history_length", -1),
        ("hgpo", "alpha", -0.5),
        ("hgpo", "base_group", 1),
        ("hgpo", "lone_row", "raw"),
    ],
)
def test_out_of_range_parameters(name: str, param: str, value: Any) -> None:
    with pytest.raises(
        ValueError,
        match=rf"estimator '{name}': {param}=.* is out of range; "
        rf"{param} accepts ",
    ):
        compute(name, small_batch(hidden=[[1.0], [1.0]]), **{param: value})


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("gigpo", {"gamma": 0, "omega": 0}),
        ("gigpo", {"gamma": 1, "anchor": "state"}),
        ("bipace", {"epsilon": 0.0, "min_peers": 1, "pace": "diff"}),
        ("ecpo", {"kappa": 0, "tau": 1e-3}),
        ("progpo", {"depth": 0}),
        ("gated_bepo", {"gamma": 1.0, "lam": 0.0, "mixing": "replace"}),
        ("gated_bepo", {"gamma": np.float64(0.5), "lam": np.float32(1.0)}),
        ("hgpo", {"history_length": 0, "alpha": 0, "base_group": True, "lone_row": "score"}),
        ("hgpo", {"base_group": np.bool_(False)}),
    ],
)
def test_boundary_values_are_accepted(name: str, params: dict[str, Any]) -> None:
    result = compute(name, small_batch(hidden=[[1.0], [1.0]]), **params)
    assert result.advantages.shape == (2,)


def test_compute_wants_a_step_batch() -> None:
    with pytest.raises(TypeError, match="StepBatch"):
        compute("grpo", [{"group": 0}])  # type: ignore[arg-type]


# --------------------------------------------------------------------------- BiPACE's hidden
def test_bipace_without_hidden() -> None:
    with pytest.raises(ValueError, match=r"estimator 'bipace' needs column 'hidden'"):
        compute("bipace", small_batch())


def test_bipace_with_hidden_missing_on_a_row() -> None:
    records = small_batch(hidden=[[1.0, 0.0], [1.0, 0.0]]).to_records()
    del records[1]["hidden"]
    with pytest.raises(ValueError, match=r"column 'hidden', row 1: missing"):
        compute("bipace", StepBatch.from_records(records))


@pytest.mark.parametrize(("bad", "problem"), [(math.inf, "not finite"), (math.nan, "not finite")])
def test_bipace_with_a_non_finite_hidden(bad: float, problem: str) -> None:
    with pytest.raises(ValueError, match=rf"column 'hidden', row 1: {problem}"):
        compute("bipace", small_batch(hidden=[[1.0, 0.0], [bad, 0.0]]))


def test_bipace_with_a_zero_hidden() -> None:
    with pytest.raises(ValueError, match=r"column 'hidden', row 0: zero vector"):
        compute("bipace", small_batch(hidden=[[0.0, 0.0], [1.0, 0.0]]))


def test_bipace_with_hidden_of_mixed_lengths() -> None:
    with pytest.raises(ValueError, match=r"column 'hidden', row 1: has length 3"):
        compute("bipace", small_batch(hidden=[[1.0, 0.0], [1.0, 0.0, 0.0]]))


def test_bipace_accepts_float32_hidden() -> None:
    batch = small_batch()
    columns = {key: [row[key] for row in batch.to_records()] for key in batch.to_records()[0]}
    hidden = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    result = compute("bipace", StepBatch(**columns, hidden=hidden), norm="mean")
    # two clusters of one row: A^S = 0, A^E = ±0.5
    assert result.advantages.tolist() == [0.5, -0.5]
    assert result.diagnostics["n_clusters"] == 2


# ------------------------------------------------------------------------- third-party plugins
class FakeEntryPoint:
    """What ``importlib.metadata.entry_points`` yields: a name and ``load()``."""

    def __init__(self, name: str, target: Any) -> None:
        self.name = name
        self.target = target
        self.loads = 0

    def load(self) -> Any:
        self.loads += 1
        return self.target


@declares(rules={"value": number_in(-10, 10).described("the advantage of every row")})
def constant_estimator(batch: StepBatch, *, value: float = 1.0) -> EstimatorResult:
    return EstimatorResult(np.full(len(batch), value), {"n_rows": len(batch)})


@declares(needs=("hidden",))
def hidden_estimator(batch: StepBatch) -> EstimatorResult:
    return EstimatorResult(np.zeros(len(batch)), {"n_rows": len(batch)})


def undeclarable_estimator(batch: StepBatch, *, value: float) -> EstimatorResult:
    raise AssertionError("never called: the parameter has no default")


@pytest.fixture
def plugins(monkeypatch: pytest.MonkeyPatch) -> list[FakeEntryPoint]:
    points = [
        FakeEntryPoint("constant", constant_estimator),
        FakeEntryPoint("broken", lambda batch: [0.0] * len(batch)),
        FakeEntryPoint("not_callable", 42),
        FakeEntryPoint("needs_hidden", hidden_estimator),
        FakeEntryPoint("undeclarable", undeclarable_estimator),
    ]

    def entry_points(*, group: str) -> list[FakeEntryPoint]:
        assert group == "agentbench_rl.estimators"
        return points

    monkeypatch.setattr("importlib.metadata.entry_points", entry_points)
    monkeypatch.setattr(registry_module, "_PLUGINS", {})
    return points


def test_entry_point_estimators_load_lazily(plugins: list[FakeEntryPoint]) -> None:
    assert available() == [
        *NAMES,
        "broken",
        "constant",
        "needs_hidden",
        "not_callable",
        "undeclarable",
    ]
    assert all(point.loads == 0 for point in plugins)  # listing loads nothing
    result = compute("constant", small_batch(), value=2.5)
    assert result.advantages.tolist() == [2.5, 2.5]
    compute("constant", small_batch())
    assert plugins[0].loads == 1  # loaded once, then cached
    assert plugins[1].loads == 0


def test_built_ins_do_not_touch_entry_points(plugins: list[FakeEntryPoint]) -> None:
    compute("grpo", small_batch())
    assert all(point.loads == 0 for point in plugins)


def test_entry_point_returning_the_wrong_type(plugins: list[FakeEntryPoint]) -> None:
    with pytest.raises(TypeError, match="returned list, not EstimatorResult"):
        compute("broken", small_batch())


def test_entry_point_that_is_not_callable(plugins: list[FakeEntryPoint]) -> None:
    with pytest.raises(ValueError, match="not callable"):
        compute("not_callable", small_batch())


def test_entry_point_estimators_are_declared_like_built_ins(
    plugins: list[FakeEntryPoint],
) -> None:
    # the same schema and the same checks as a built-in, before the estimator runs
    declared = registry_module.resolve("constant")
    assert declared.schema()["params"] == [
        {
            "name": "value",
            "type": "number",
            "default": 1.0,
            "accepts": "a finite number in [-10, 10]",
            "help": "the advantage of every row",
        }
    ]
    with pytest.raises(ValueError, match=r"unknown parameter.*valeu"):
        compute("constant", small_batch(), valeu=2.0)
    with pytest.raises(ValueError, match="value=99 is out of range"):
        check_params("constant", {"value": 99})
    with pytest.raises(ValueError, match="'needs_hidden' needs column 'hidden'"):
        compute("needs_hidden", small_batch())
    assert compute("needs_hidden", small_batch(hidden=[[1.0], [2.0]])).advantages.tolist() == [0, 0]
    with pytest.raises(ValueError, match=r"entry point 'undeclarable'.*needs a default"):
        compute("undeclarable", small_batch())


def test_unknown_name_lists_plugins_too(plugins: list[FakeEntryPoint]) -> None:
    with pytest.raises(ValueError, match=r"accepted: .*graft, broken, constant, needs_hidden"):
        compute("nope", small_batch())


# --------------------------------------------------------------------- in-process registration
def test_register_checks_parameters_with_own_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "REGISTRY", dict(registry_module.REGISTRY))

    @register("scaled_grpo", rules={"scale": ParamRule(lambda v: v > 0, "a positive number")})
    def scaled_grpo(batch: StepBatch, *, scale: float = 2.0, gamma: float = 0.9) -> EstimatorResult:
        return EstimatorResult(scale * compute("grpo", batch).advantages, {})

    assert compute("scaled_grpo", small_batch(), scale=4.0).advantages[0] > 0
    with pytest.raises(ValueError, match="scale=-1 is out of range; scale accepts a positive"):
        compute("scaled_grpo", small_batch(), scale=-1)
    with pytest.raises(ValueError, match="gamma=2 is out of range"):
        compute("scaled_grpo", small_batch(), gamma=2)
    with pytest.raises(ValueError, match="already registered"):
        register("scaled_grpo")(scaled_grpo)


def test_register_refuses_parameters_without_default_or_rule() -> None:
    def no_default(batch: StepBatch, *, gamma: float) -> EstimatorResult:
        raise AssertionError

    def no_rule(batch: StepBatch, *, temperature: float = 1.0) -> EstimatorResult:
        raise AssertionError

    with pytest.raises(TypeError, match="needs a default"):
        register("no_default")(no_default)
    with pytest.raises(TypeError, match="no rule for parameter 'temperature'"):
        register("no_rule")(no_rule)
    assert "no_default" not in available() and "no_rule" not in available()


def test_register_refuses_needs_that_are_not_columns() -> None:
    def zero(batch: StepBatch) -> EstimatorResult:
        raise AssertionError

    with pytest.raises(TypeError, match="need hiddne is not a column"):
        register("bad_needs", needs=("hiddne",))(zero)
    assert "bad_needs" not in available()


@pytest.mark.parametrize("name", NAMES)
def test_every_built_in_declares_a_help_line_per_parameter(name: str) -> None:
    schema = registry_module.REGISTRY[name].schema()
    assert schema["summary"]
    for param in schema["params"]:
        assert param["help"] and param["type"] in ("number", "integer", "choice", "boolean"), param
        assert registry_module.REGISTRY[name].params[param["name"]].rule.check(param["default"])


@pytest.mark.parametrize("name", NAMES)
def test_every_declared_step_set_reads_the_estimators_defaults(name: str) -> None:
    """``bench fidelity``'s purity column asks each estimator for its step-level sets with the
    estimator's own defaults: a declaration that reads a parameter the estimator lacks fails."""
    from agentbench_rl.estimators import resolve

    declaration = resolve(name)
    if declaration.step_sets is None:
        pytest.skip(f"{name} declares no step-level sets")
    hidden = [[1.0, 0.0], [0.0, 1.0]] if "hidden" in declaration.needs else None
    codes, count = declaration.step_set_codes(small_batch(hidden), {})
    assert len(codes) == 2 and count >= 1

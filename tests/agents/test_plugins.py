"""Plugins (#24 point 5): an installed package's entry points add envs, agents and estimators,
each resolved the one way (built-ins first, then the entry point of that name). The package
here is real as far as Python's lookup goes: a ``.dist-info`` folder on ``sys.path``."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentbench_rl.envs as envs
from agentbench_rl.agents import load_agent
from agentbench_rl.core.plugins import installed
from agentbench_rl.estimators import registry
from agentbench_rl.estimators import resolve as resolve_estimator
from agentbench_rl.harness.config import EvalConfig
from agentbench_rl.harness.evaluate import evaluate

ENTRY_POINTS = """\
[agentbench_rl.envs]
sokoban_again = agentbench_rl.envs.sokoban.env:SokobanEnv

[agentbench_rl.agents]
my_random = agentbench_rl.agents.simple:RandomAgent
broken_agent = no_such_module_here:Agent

[agentbench_rl.estimators]
my_grpo = agentbench_rl.estimators.grpo:grpo
"""


@pytest.fixture
def plugin_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = tmp_path / "agentbench_plugin_example-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: agentbench-plugin-example\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(envs, "ENVS", dict(envs.ENVS))  # what resolve registers goes with it
    monkeypatch.setattr(registry, "_PLUGINS", {})  # and the estimator it declares


def test_installed_lists_each_group(plugin_package: None) -> None:
    assert set(installed("agentbench_rl.agents")) == {"my_random", "broken_agent"}
    assert list(installed("agentbench_rl.envs")) == ["sokoban_again"]


def test_an_env_plugin_evaluates_like_a_built_in(plugin_package: None, tmp_path: Path) -> None:
    assert envs.resolve("sokoban_again").gym_id == "agentbench-plugin/sokoban_again"
    summary = evaluate(
        EvalConfig(env="sokoban_again", split="test", agent="my_random", limit=3),
        tmp_path / "run",
    )
    assert summary.n_episodes == 3 and summary.env == "sokoban_again"


def test_an_agent_plugin_is_built_as_python_agents_are(plugin_package: None) -> None:
    agent = load_agent("my_random")
    assert agent.act("", {"admissible_actions": ["up"]}) == "up"
    with pytest.raises(ValueError, match="agent 'broken_agent': loading entry point"):
        load_agent("broken_agent")
    with pytest.raises(ValueError, match=r"choose from random, expert, rule, broken_agent, my_"):
        load_agent("nobody")


def test_an_estimator_plugin_resolves(plugin_package: None) -> None:
    assert resolve_estimator("my_grpo").name == "my_grpo"


def test_unknown_env_names_the_plugins_too(plugin_package: None) -> None:
    with pytest.raises(ValueError, match=r"unknown env 'maze'.*webshop, sokoban_again\)"):
        envs.resolve("maze")

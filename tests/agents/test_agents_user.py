"""A user's own agent (``python:module:callable``): found in the working directory, refused on
``--resume`` once changed, and stopped with one line naming it when it raises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentbench_rl.harness.agent_errors import AgentError
from agentbench_rl.harness.config import EvalConfig, RunOptions
from agentbench_rl.harness.evaluate import evaluate

REPO_ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "agentbench_rl.cli"]

FIRST_ACTION = """
def my_policy(observation, info):
    return "<action>" + info["admissible_actions"][0] + "</action>"
"""

RAISES_ON_THIRD_STEP = """
class Fragile:
    def begin_episode(self, env, seed):
        self.steps = 0
    def act(self, observation, info):
        self.steps += 1
        if self.steps == 3:
            raise KeyError("no move for this board")
        return info["admissible_actions"][0]
"""


def _run_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # Only this checkout on the path: the agent's module must be found through the working
    # directory, as the README promises, not through PYTHONPATH.
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


def test_python_agent_is_imported_from_the_working_directory_in_every_worker(
    tmp_path: Path,
) -> None:
    (tmp_path / "my_module.py").write_text(FIRST_ACTION)
    args = ["eval", "--env", "sokoban", "--split", "val", "--agent", "python:my_module:my_policy"]
    args += ["--limit", "6", "--seeds", "0", "1"]
    one = _run_cli([*args, "--out", "one"], tmp_path)
    assert one.returncode == 0, one.stderr
    two = _run_cli([*args, "--out", "two", "--workers", "2"], tmp_path)
    assert two.returncode == 0, two.stderr
    for name in ("episodes.csv", "summary.json"):
        # summary.json differs only in nothing: same agent, same episodes, any workers.
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


def test_resume_refuses_a_changed_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    module = tmp_path / "changing_agent.py"
    module.write_text(FIRST_ACTION)
    config = EvalConfig(
        env="sokoban", split="val", agent="python:changing_agent:my_policy", limit=2
    )
    summary = evaluate(config, tmp_path / "run")
    assert summary.agent_fingerprint.startswith("source:")
    # The same source resumes (nothing left to do, same fingerprint).
    evaluate(config, tmp_path / "run", RunOptions(resume=True))
    module.write_text(FIRST_ACTION + "\n# edited\n")
    try:
        evaluate(config, tmp_path / "run", RunOptions(resume=True))
    except ValueError as problem:
        assert "changed since" in str(problem) and "changing_agent" in str(problem)
    else:
        raise AssertionError("a resume with an edited agent must be refused")
    stored = json.loads((tmp_path / "run" / "agent.json").read_text())
    assert stored["fingerprint"] == summary.agent_fingerprint


def test_agent_exception_names_agent_task_seed_and_type(tmp_path: Path) -> None:
    (tmp_path / "fragile.py").write_text(RAISES_ON_THIRD_STEP)
    args = ["eval", "--env", "sokoban", "--split", "val", "--agent", "python:fragile:Fragile"]
    args += ["--limit", "2", "--seeds", "4", "--out", "run"]
    plain = _run_cli(args, tmp_path)
    assert plain.returncode == 2
    lines = [line for line in plain.stderr.splitlines() if "error" in line]
    assert len(lines) == 1 and "Traceback" not in plain.stderr, plain.stderr
    # The first task of the --limit 2 sample (in split order); seed 4 as given.
    first = EvalConfig(env="sokoban", split="val", agent="random", limit=2).tasks()[0]
    for part in ("python:fragile:Fragile", "KeyError", first, "seed 4", "no move"):
        assert part in lines[0], (part, lines[0])
    debug = _run_cli([*args[:-1], "run-debug", "--debug"], tmp_path)
    assert debug.returncode == 2
    assert "Traceback" in debug.stderr and 'raise KeyError("no move' in debug.stderr


class _BatchRaisingOnThirdStep:
    """A batched agent whose third ``act_batch`` call raises."""

    name = "batch-fragile"

    def begin_episodes(self, envs: object, seeds: object) -> None:
        self.calls = 0

    def act_batch(self, observations, infos, *, rows, histories):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.calls == 3:
            raise ValueError("batch went wrong")
        return [info["admissible_actions"][0] for info in infos]


@pytest.mark.parametrize("batch_size", [1, 3])
def test_agent_exception_in_a_batch_names_the_row_that_raised(
    batch_size: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "fragile_rows.py").write_text(RAISES_ON_THIRD_STEP)
    config = EvalConfig(
        env="sokoban", split="val", agent="python:fragile_rows:Fragile", limit=3, seeds=[2]
    )
    with pytest.raises(AgentError) as raised:
        evaluate(config, tmp_path / "run", RunOptions(batch_size=batch_size))
    # Every row raises on its third step; row 0 (the first task) answers first.
    assert (raised.value.task_id, raised.value.seed) == (config.tasks()[0], 2)
    assert raised.value.kind == "KeyError" and "no move" in raised.value.detail


def test_batched_agent_exception_names_a_live_task_of_the_batch(tmp_path: Path) -> None:
    config = EvalConfig(env="sokoban", split="val", agent="random", limit=3, seeds=[5])
    with pytest.raises(AgentError) as raised:
        evaluate(
            config, tmp_path / "run", RunOptions(batch_size=3), agent=_BatchRaisingOnThirdStep()
        )  # type: ignore[arg-type]
    assert raised.value.task_id in config.tasks() and raised.value.seed == 5
    assert (raised.value.kind, raised.value.detail) == ("ValueError", "batch went wrong")
    assert "batch went wrong" in raised.value.trace

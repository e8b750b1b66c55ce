"""The episode driver: seeding, history, the validity rule and step records, shared by every
client (harness, group rollouts, scripted episodes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentbench_rl.agents.base import Capabilities
from agentbench_rl.agents.simple import CallableAgent, RandomAgent
from agentbench_rl.core.batch import StepBatch
from agentbench_rl.envs import make
from agentbench_rl.envs.spec import EnvSpec
from agentbench_rl.harness.config import EvalConfig, RunOptions
from agentbench_rl.harness.evaluate import evaluate, run_episode
from agentbench_rl.prompting import HistoryStep, observation_text
from agentbench_rl.rollout.episode import (
    EpisodeSlot,
    Lockstep,
    action_valid,
    episode_seed,
    format_kept,
    play,
)
from agentbench_rl.rollout.group import GroupEnv, rollout_group
from agentbench_rl.rollout.scripted import corpus_texts

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_non_string_action_is_invalid_counted_and_keeps_the_state() -> None:
    # #14 point 10: None used to become the text "none"; now it is an invalid step, counted.
    env = make("sokoban", split="test")
    slot = EpisodeSlot("test-0000", episode_seed(0, "test-0000"))
    lock = Lockstep.of_envs([env], [slot])
    before = lock.episodes[0].info["state_hash"]
    lock.step([None])
    episode = lock.episodes[0]
    assert episode.info["state_hash"] == before
    assert (episode.invalid, episode.non_string, episode.steps) == (1, 1, 1)
    assert lock.records[0]["valid"] is False
    lock.step(["<action>left</action>"])
    assert (episode.invalid, episode.non_string, episode.steps) == (1, 1, 2)


def test_history_is_observation_text_and_canonical_action() -> None:
    # Visual Sokoban's observation is {"image", "text"}: the history keeps the text, and the
    # env's canonical form of the action, not the raw answer.
    env = make("visual_sokoban", split="test")
    lock = Lockstep.of_envs([env], [EpisodeSlot("test-0000", 0)])
    first = lock.episodes[0].observation
    lock.step(["<think>go</think><action>LEFT</action>"])
    assert lock.episodes[0].history == [HistoryStep(observation_text(first), "left")]
    assert "[[" not in lock.episodes[0].history[0].observation


def test_tokenizer_corpus_reads_the_text_the_policy_reads() -> None:
    # #18 point 7: the corpus of visual Sokoban held str() of the image array.
    texts = list(
        corpus_texts(EnvSpec(name="visual_sokoban", split="test"), _prompt(), episodes=2, seed=0)
    )
    assert texts and not any("array(" in text or "[[" in text or "dtype" in text for text in texts)


def _prompt() -> Any:
    from agentbench_rl.prompting import PromptConfig

    return PromptConfig(history=2, history_observations=True)


class _FormatAgent:
    """Answers the right action in a broken generate-mode format."""

    name = "format"
    answer_format = "generate"

    def begin_episode(self, env: Any, seed: int) -> None:
        self.env = env

    def act(self, observation: Any, info: dict[str, Any]) -> str:
        return "<action>" + self.env.expert_action() + "</action>"  # no <think> block


def test_one_validity_rule_for_training_and_evaluation() -> None:
    # #18 point 6: a generate-mode answer that breaks the format is invalid in evaluation too,
    # even when the env accepted (and applied) the action.
    env = make("sokoban", split="test")
    row = run_episode(env, _FormatAgent(), "test-0000", seed=0)
    assert row["success"] and row["invalid_actions"] == row["steps"] == 3
    assert not format_kept(Capabilities.of(_FormatAgent()), "<action>up</action>")
    assert format_kept(Capabilities.of(RandomAgent()), "up")  # agents without a format keep it
    assert action_valid("x", {"action_valid": True}, format_kept=False) is False


def test_harness_episode_equals_a_one_member_lockstep() -> None:
    env = make("sokoban", split="test")
    agent = RandomAgent()
    row = run_episode(env, agent, "test-0004", seed=3)
    slot = EpisodeSlot("test-0004", episode_seed(3, "test-0004"))
    outcome = play([env], [slot], [RandomAgent()], [slot.seed]).episodes[0].outcome()
    assert (row["steps"], row["success"], row["invalid_actions"]) == (
        outcome.steps,
        outcome.success,
        outcome.invalid_actions,
    )


def test_group_members_share_the_env_seed_and_reset_state() -> None:
    group = GroupEnv(EnvSpec(name="sokoban", split="test"), group_size=3)
    rollout = rollout_group(group, RandomAgent(), "test-0002", seed=1)
    first_rows = [r for r in rollout.records if r["t"] == 0]
    assert len({r["state_key"] for r in first_rows}) == 1
    assert [r["traj"] for r in first_rows] == [f"test-0002/member_{i}" for i in range(3)]


def test_non_string_actions_in_the_summary_and_the_output(tmp_path: Path) -> None:
    (tmp_path / "none_agent.py").write_text(
        "def act(observation, info):\n    return None\n", encoding="utf-8"
    )
    out = tmp_path / "run"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentbench_rl.cli",
            "eval",
            "--env",
            "sokoban",
            "--split",
            "test",
            "--agent",
            "python:none_agent:act",
            "--limit",
            "2",
            "--max-steps",
            "3",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env={**_env(), "PYTHONPATH": f"{tmp_path}:{_env().get('PYTHONPATH', '')}"},
        check=True,
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["non_string_actions"] == 6 and summary["invalid_action_rate"] == 1.0
    assert result.stderr.count("were not text") + result.stdout.count("were not text") == 1


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


def test_in_memory_agent_plays_instead_of_loading(tmp_path: Path) -> None:
    # evaluation receives the agent object (the trainer's policy) instead of a global cache
    calls: list[int] = []

    def policy(observation: Any, info: dict[str, Any]) -> str:
        calls.append(1)
        return "up"

    agent = CallableAgent(policy, name="memory")
    config = EvalConfig(env="sokoban", split="test", agent="random", limit=1, max_steps=2)
    evaluate(config, tmp_path / "a", agent=agent)  # type: ignore[arg-type]
    assert len(calls) == 2
    with pytest.raises(ValueError, match="workers=1"):
        evaluate(config, tmp_path / "b", RunOptions(workers=2), agent=agent)  # type: ignore[arg-type]


def test_a_summary_with_the_non_string_count_still_validates(tmp_path: Path) -> None:
    import shutil

    from agentbench_rl.leaderboard.validate import validate_submission

    reference = next((REPO_ROOT / "leaderboards" / "sokoban" / "val").glob("random-*"))
    copy = tmp_path / "submission"
    shutil.copytree(reference, copy)
    summary = json.loads((copy / "summary.json").read_text())
    summary["non_string_actions"] = 0  # what the harness writes now
    (copy / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    assert validate_submission(copy).figures["n_episodes"] == 600


def test_the_driver_keeps_its_records_as_columns_one_chunk_per_step() -> None:
    # What the trainer's batch is built from: the rows written step by step, as records say.
    envs = [make("sokoban", split="test") for _ in range(3)]
    slots = [EpisodeSlot("test-0001", episode_seed(0, "test-0001"), 0, traj) for traj in range(3)]
    lock = play(envs, slots, [RandomAgent() for _ in envs], [0, 1, 2])
    records = lock.records
    assert len(lock.rows) == len(records) == sum(e.steps for e in lock.episodes)
    assert [row["t"] for row in records] == sorted(row["t"] for row in records)  # step-major
    assert all(row["success"] == lock.episodes[row["traj"]].outcome().success for row in records)
    assert [lock.rows.row(i) for i in range(len(records))] == records
    ours, theirs = lock.rows.batch(), StepBatch.from_records(records)
    for name in ("group", "traj", "t", "reward", "obs_key", "state_key", "action_key", "valid"):
        assert getattr(ours, name).tolist() == getattr(theirs, name).tolist(), name

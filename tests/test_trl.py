"""Our envs as TRL environments: the adapter's contract (reset from the dataset row, the env's
command as the tool, the return as the reward) and a real ``GRPOTrainer`` step on it. Runs in
the openenv environment (.ci/openenv), where trl is installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="needs the trl extra (.ci/openenv)")
pytestmark = pytest.mark.openenv

from transformers.utils import get_json_schema  # noqa: E402

from agentbench_rl.envs.spec import EnvSpec  # noqa: E402
from agentbench_rl.integrations.openenv.server import running_server  # noqa: E402
from agentbench_rl.integrations.trl import environment_class, train_dataset  # noqa: E402
from agentbench_rl.rollout.episode import episode_seed  # noqa: E402

SPEC = EnvSpec(name="sokoban", split="train")


def test_the_dataset_holds_train_tasks_with_the_harness_seeds() -> None:
    rows = train_dataset(SPEC, 5, seed=3)
    assert len(rows) == 5 and rows[0]["prompt"][0]["role"] == "user"
    for row in rows:
        assert row["task_id"].startswith("train-")
        assert row["seed"] == episode_seed(3, row["task_id"])
    assert list(train_dataset(SPEC, 5, seed=3)["task_id"]) == list(rows["task_id"])


@pytest.mark.parametrize("served", [False, True])
def test_the_tool_plays_the_env_and_the_reward_is_the_return(served: bool) -> None:
    row = train_dataset(SPEC, 1, seed=0)[0]
    local = SPEC.make()
    _, info = local.reset(seed=row["seed"], options={"task_id": row["task_id"]})
    with running_server(SPEC) as url:
        environment = environment_class(SPEC, url if served else None)()
        first = environment.reset(**row)
        assert first.endswith("Admissible actions: " + ", ".join(info["admissible_actions"]))
        total, answer = 0.0, ""
        for _ in range(local.max_steps + 2):
            if local.episode_over:
                assert environment.act("up") == "The episode is over."
                break
            action = local.expert_action()
            total += local.step(action)[1]
            answer = environment.act(action)
        assert "The episode is over (solved)." in answer
        assert environment.get_reward() == pytest.approx(total)


def test_trl_reads_the_tool_schema_from_the_docstring() -> None:
    schema = get_json_schema(environment_class(SPEC)().act)
    function = schema["function"]
    assert function["name"] == "act"
    assert function["parameters"]["required"] == ["action"]
    assert "admissible" in function["parameters"]["properties"]["action"]["description"]


def test_a_grpo_trainer_step_on_the_env(tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "baselines"))
    from trl import GRPOConfig, GRPOTrainer
    from trl_sokoban_tiny import SETTINGS, tiny_model

    resets: list[tuple[str, int]] = []
    base = environment_class(SPEC)

    class Recorded(base):  # type: ignore[misc, valid-type]
        def reset(self, task_id: str, seed: int, **rest: Any) -> str:
            resets.append((task_id, seed))
            return super().reset(task_id, seed, **rest)

    model, tokenizer = tiny_model(SETTINGS)
    rows = train_dataset(SPEC, 4, seed=0)
    args = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=8,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
    )
    trainer = GRPOTrainer(
        model=model,
        args=args,
        processing_class=tokenizer,
        train_dataset=rows,
        environment_factory=Recorded,
    )
    trainer.train()
    logged = trainer.state.log_history[0]
    assert "loss" in logged and "rewards/Recorded/mean" in logged
    expected = {(row["task_id"], row["seed"]) for row in rows}
    assert resets and set(resets) <= expected

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

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "baselines"))
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


def test_the_token_rule_by_hand() -> None:
    from agentbench_rl.integrations.trl_credit import steps_per_turn, token_advantages

    # turns: tokens 0-1 (one step), 4 (a failed call: none), 6-7 (the closing message: none)
    mask = [1, 1, 0, 0, 1, 0, 1, 1, 0]
    assert token_advantages(mask, [1, 0, 0], [2.0]).tolist() == [2, 2, 0, 0, 0, 0, 0, 0, 0]
    # a turn of two steps carries their mean; the last turn, the steps played out after it
    assert token_advantages([1, 0, 1], [2, 0], [1.0, 3.0]).tolist() == [2, 0, 0]
    assert token_advantages([1, 0, 1], [1, 0], [1.0, -1.0, -2.0]).tolist() == [1, 0, -1.5]
    assert token_advantages([1, 1], [0], [-0.5, -1.5]).tolist() == [-1, -1]  # never called

    def calling(*arguments: dict[str, Any]) -> dict[str, Any]:
        calls = [{"type": "function", "function": {"name": "act", "arguments": a}}
                 for a in arguments]  # fmt: skip
        return {"role": "assistant", "content": "", "tool_calls": calls}

    messages = [
        calling({"action": "up"}),
        {"role": "tool", "name": "act", "content": "#@ #"},
        calling({"move": "up"}),  # TRL cannot make it: act never runs
        {"role": "tool", "name": "act", "content": "{'error': 'unexpected keyword'}"},
        calling({"action": "up"}),  # after the end: act runs, no step
        {"role": "tool", "name": "act", "content": "The episode is over."},
        {"role": "assistant", "content": "done"},
    ]
    assert steps_per_turn(messages, [True, False]) == [1, 0, 0, 0]


def test_each_steps_tokens_carry_its_gigpo_credit_in_a_real_trl_batch(tmp_path: Path) -> None:
    """A warm-started tiny model plays Sokoban through TRL; every token of every ``act`` call
    carries GiGPO's value of that step, computed here from the envs' own records; tool answers,
    prompt and padding carry 0."""
    import sys

    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "baselines"))
    from trl import GRPOConfig
    from trl_sokoban_tiny import SETTINGS, tiny_model, warm_start

    from agentbench_rl.core.batch import StepBatch
    from agentbench_rl.estimators.registry import compute
    from agentbench_rl.integrations.trl_credit import StepCreditGRPOTrainer

    model, tokenizer = tiny_model(SETTINGS)
    warm_start(model, tokenizer, tmp_path, SETTINGS)
    seen: dict[str, Any] = {}

    class Watched(StepCreditGRPOTrainer):  # type: ignore[misc]
        def _generate_and_score_completions(self, inputs: Any) -> Any:
            output = super()._generate_and_score_completions(inputs)
            seen.update(output=output, envs=list(self.environments))
            return output

    size = 4
    args = GRPOConfig(output_dir=str(tmp_path / "grpo"), max_steps=1,
                      per_device_train_batch_size=8, num_generations=size,
                      max_completion_length=96, max_tool_calling_iterations=6, logging_steps=1,
                      use_cpu=True, save_strategy="no", report_to="none", seed=0)  # fmt: skip
    trainer = Watched(model=model, args=args, processing_class=tokenizer,
                      train_dataset=train_dataset(SPEC, 8, seed=0),
                      environment_factory=environment_class(SPEC), estimator="gigpo")  # fmt: skip
    trainer.train()
    output, envs = seen["output"], seen["envs"]
    records = [
        {**step, "group": index // size, "traj": index, "success": env.won}
        for index, env in enumerate(envs)
        for step in env.steps
    ]
    assert any(any(env.calls) for env in envs), "the warm-started model called the tool"
    # our trainer's parameters (TrainConfig's defaults): γ 0.95, an invalid step's penalty 0.1
    batch = StepBatch.from_records(records)
    values = compute("gigpo", batch, gamma=0.95, invalid_penalty=0.1).advantages
    expected: dict[int, list[float]] = {}
    for record, value in zip(records, values, strict=True):
        expected.setdefault(record["traj"], []).append(float(value))
    call = tokenizer.convert_tokens_to_ids("<tool_call>")
    advantages = output["advantages"].numpy()
    model_tokens = (output["completion_mask"] * output["tool_mask"]).numpy()
    ids = output["completion_ids"].numpy()
    checked = 0
    for row, env in enumerate(envs):
        assert np.all(advantages[row][model_tokens[row] == 0] == 0)  # tool answers, padding
        calls = np.flatnonzero((ids[row] == call) & (model_tokens[row] == 1))
        if len(calls) != len(env.calls):
            continue  # a call TRL could not make, or one cut by the length limit
        runs = np.cumsum(
            np.diff(np.concatenate([[0], model_tokens[row]])) == 1
        )  # run of each token
        last = runs[np.flatnonzero(model_tokens[row])[-1]]
        mine = expected[row]
        for k, position in enumerate(calls):  # the k-th call: a step, or one after the end
            step = sum(env.calls[:k])
            if runs[position] == last:  # the last turn also answers for the steps played out
                want = float(np.mean(mine[step:])) if len(mine) > step else 0.0
            else:
                want = mine[step] if env.calls[k] else 0.0
            assert advantages[row, position] == pytest.approx(want, abs=1e-6)
            checked += 1
    assert checked >= 1
    assert len({round(v, 6) for v in values}) > 1  # per-step credit, not one value for all


def test_the_harness_plays_a_trl_model_as_trl_does(tmp_path: Path) -> None:
    """``ToolCallingAgent``: TRL's conversation and parser inside our harness, on a tokenizer
    that GRPOTrainer never saw (its response parser is set by the agent)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "baselines"))
    from trl_sokoban_tiny import SETTINGS, tiny_model

    from agentbench_rl.harness.config import EvalConfig
    from agentbench_rl.harness.evaluate import evaluate
    from agentbench_rl.integrations.trl import ToolCallingAgent

    model, tokenizer = tiny_model(SETTINGS)
    agent = ToolCallingAgent(model, tokenizer, max_new_tokens=8)
    config = EvalConfig(env=EnvSpec(name="sokoban", split="test", max_steps=3),
                        agent="python:agentbench_rl.integrations.trl:ToolCallingAgent",
                        limit=2)  # fmt: skip
    summary = evaluate(config, tmp_path / "eval", agent=agent)
    assert summary.n_episodes == 2
    assert [m["role"] for m in agent.messages][:2] == ["user", "assistant"]
    assert "Admissible actions" in agent.messages[0]["content"]

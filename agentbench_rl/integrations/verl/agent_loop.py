"""The verl agent loop: one group member plays one episode of any of our envs.

verl repeats each task row ``rollout.n`` times (the group) and runs this loop once per member
(session). Every env step becomes one verl sample (verl keys them ``{uid}_{session}_{i}``): its
prompt is built by our one prompt builder (``agentbench_rl/prompting.py``: instruction, the last
``history`` steps, the observation, the admissible actions), so the policy trains on exactly the
prompts the harness evaluates it on; its response is the model's answer, which the env parses
and canonicalises. The step record (t, reward, obs_key, state_key, action_key, valid, success,
steps) travels in the sample's ``extra_fields`` under :data:`~.advantages.RECORD_KEY`; the
advantage step (``trainer.py``) reads it back.

Rules shared with the home trainer (``rollout/batched.py``): every member of a group resets
from the same seed, ``seed_from(seed_from(seed, "env", step), task_id)``, so all start from the
same observation; a step is valid only when the answer kept the ``<think>..</think><action>..
</action>`` format and the env accepted the action.

Why the per-step rewards are not verl's ``reward_score``: verl's storage path copies the last
output's ``reward_score`` (and needs its ``reward_extra_info``) onto every earlier output of the
session, so per-step rewards set there would be overwritten. The last output carries the
episode's training return as ``reward_score`` (what verl's own score metrics show); the
estimators read the step records.
"""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
)

from agentbench_rl.core.hashing import seed_from
from agentbench_rl.integrations.verl.advantages import RECORD_KEY, VerlStepRecord
from agentbench_rl.integrations.verl.config import train_config_of
from agentbench_rl.prompting import HistoryStep, action_choices, build_prompt, format_ok
from agentbench_rl.rollout.batched import training_reward
from agentbench_rl.rollout.episode import action_valid, history_step, step_fields


def reset_seed(seed: int, global_step: int, task_id: str) -> int:
    """The env reset seed of every member of a group (the home trainer's rule).

    Example:
        >>> reset_seed(0, 3, "train-0001") == reset_seed(0, 3, "train-0001")
        True
    """
    return seed_from(seed_from(seed, "env", global_step), task_id) % 2**31


class AgentBenchAgentLoop(AgentLoopBase):
    """Plays one episode of the run's env on the row's task; one output per step.

    The dataset row (``agentbench-rl verl-data``) names the task in ``extra_info``
    (``task_id``, ``split``); ``config``, the run's whole
    :class:`~agentbench_rl.train.config.TrainConfig`, comes from the run's ``agent_loop.yaml``,
    which is also what registers this loop with verl. It is deliberately not decorated with
    verl's ``register``: importing this module (Hydra does, on the first instantiation) would
    replace the file's registry entry by a bare ``_target_`` and lose the config for every later
    one.
    """

    def __init__(self, *args: Any, config: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.train_config = train_config_of(config)
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> list[AgentLoopOutput]:
        """Play the episode; returns its steps as verl outputs."""
        config = self.train_config
        extra = kwargs.get("extra_info") or {}
        task_id = str(extra["task_id"])
        split = str(extra.get("split", config.train_split))
        global_step = int(kwargs.get("global_steps", 0) or 0)
        prompt_config = config.prompt_config()  # generate mode: verl samples free text
        loop = asyncio.get_running_loop()

        env = (config.val_env() if split == config.val_split else config.train_env()).make()
        try:
            observation, info = await loop.run_in_executor(
                None,
                lambda: env.reset(
                    seed=reset_seed(config.seed, global_step, task_id),
                    options={"task_id": task_id},
                ),
            )
            history: list[HistoryStep] = []
            outputs: list[AgentLoopOutput] = []
            done = False
            while not done:
                choices = action_choices(info, prompt_config.mode)
                prompt = build_prompt(env.env_name, observation, history, choices, prompt_config)
                prompt_ids = await self.ct_build_initial_tokens(
                    [{"role": "user", "content": prompt}]
                )
                generated = await self.server_manager.generate(
                    request_id=uuid4().hex, prompt_ids=prompt_ids, sampling_params=sampling_params
                )
                response_ids = list(generated.token_ids[: self.response_length])
                logprobs = (
                    list(generated.log_probs[: self.response_length])
                    if generated.log_probs
                    else None
                )
                answer = self.tokenizer.decode(response_ids, skip_special_tokens=True)
                step = await loop.run_in_executor(None, env.step, answer)
                next_observation, reward, terminated, truncated, next_info = step
                done = bool(terminated or truncated)
                valid = action_valid(answer, next_info, format_ok(answer))
                # the group and trajectory ids come from verl's uids (advantages.py)
                record: VerlStepRecord = {  # success and steps once the episode ends
                    "task_id": task_id,
                    **step_fields(len(outputs), reward, info, next_info, valid),
                    "success": False,
                    "steps": 0,
                }
                outputs.append(
                    AgentLoopOutput(
                        prompt_ids=prompt_ids,
                        response_ids=response_ids,
                        response_mask=[1] * len(response_ids),
                        response_logprobs=logprobs,
                        num_turns=2,
                        metrics=AgentLoopMetrics(),
                        extra_fields={**generated.extra_fields, RECORD_KEY: record},
                    )
                )
                history.append(history_step(observation, next_info))
                observation, info = next_observation, next_info
        finally:
            env.close()
        won = bool(info["won"])
        records = [output.extra_fields[RECORD_KEY] for output in outputs]
        for finished in records:
            finished.update(success=won, steps=len(outputs))
        final = outputs[-1]
        final.reward_score = sum(
            training_reward(finished, config.reward, config.success_reward) for finished in records
        )
        final.extra_fields["reward_extra_info"] = {
            "success": float(won),
            "score": float(info["score"]),
            "steps": float(len(outputs)),
        }
        return outputs

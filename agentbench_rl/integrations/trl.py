"""Our envs as TRL environments: ``GRPOTrainer(environment_factory=environment_class(spec))``.

TRL's ``environment_factory`` (trl >= 1.16, transformers >= 5.2) makes one environment per
rollout and calls, in this order: ``reset(**row)`` with the dataset row (its string is appended
to the prompt), the environment's public methods as tools while the model calls them, and
``get_reward()`` once the rollout ends. Here:

- the dataset (:func:`train_dataset`) holds tasks of the env's fixed train split drawn from a
  seed, one row per task with its ``task_id`` and env ``seed``, so ``reset`` plays
  ``env.reset(seed=seed, options={"task_id": task_id})`` exactly as our trainer would;
- the one tool is ``act(action)``: the env's command (its raw text) as the tool call's
  argument; it answers the next observation and the admissible actions;
- ``get_reward`` is the episode's return, the sum of the env's rewards, the episode played out
  to its end (a rollout that stops early is scored as one that acts no more).

The env may be local or served (``server``: ``agentbench-rl serve-env``'s URL).

Each environment records its episode's steps as our episode driver does (``steps``, ``won``),
so :class:`~agentbench_rl.integrations.trl_credit.StepCreditGRPOTrainer` can give every env
step's tokens the credit a registry estimator gives that step; plain ``GRPOTrainer`` gives the
whole episode one advantage from its return.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agentbench_rl.core.batch import StepFields
from agentbench_rl.envs import env_class
from agentbench_rl.envs.base import StepInfo, TextAgentEnv
from agentbench_rl.envs.spec import EnvSpec
from agentbench_rl.rollout.episode import episode_seed, step_fields

#: What the model is told beside the env's own instruction.
TOOL_INSTRUCTION = "Call the act tool with one action at a time until the episode ends."


def describe(observation_text: str, info: StepInfo) -> str:
    """What a tool call answers: the observation and the actions admissible now.

    Example:
        >>> describe("#@ #", {"admissible_actions": ["up", "down"]})
        '#@ #\\nAdmissible actions: up, down'
    """
    actions = ", ".join(info["admissible_actions"])
    return f"{observation_text}\nAdmissible actions: {actions}"


class AgentEnvironment:
    """One of our envs for TRL (module docstring); :func:`environment_class` binds the env."""

    spec: ClassVar[EnvSpec]
    server: ClassVar[str | None] = None

    def __init__(self) -> None:
        self.env: TextAgentEnv[Any] = self.spec.make(self.server)
        self.episode_return = 0.0
        self.over = True
        self.task: tuple[str, int] | None = None  # the episode's task and seed
        self.won = False
        self.steps: list[StepFields] = []  # as the episode driver records them
        self.calls: list[bool] = []  # whether each act call made a step (not after the end)
        self._info: StepInfo | None = None

    def reset(self, task_id: str, seed: int, **_: Any) -> str:
        """Start the row's episode; returns the first observation (TRL appends it to the
        prompt). The row's other columns (``prompt``) are TRL's."""
        _, info = self.env.reset(seed=seed, options={"task_id": task_id})
        self.episode_return, self.over, self.won = 0.0, False, False
        self.task, self._info = (task_id, seed), info
        self.steps, self.calls = [], []
        return describe(self.env.observation_text(), info)

    def act(self, action: str) -> str:
        """Take one action in the environment.

        Args:
            action: The action, one of the admissible actions listed in the last observation.
        """
        self.calls.append(False)
        if self.over:
            return "The episode is over."
        text = self._step(action)
        self.calls[-1] = True
        return text

    def _step(self, action: str) -> str:
        assert self._info is not None, "act() is refused until reset() (self.over)"
        _, reward, terminated, truncated, info = self.env.step(action)
        self.steps.append(
            step_fields(len(self.steps), reward, self._info, info, bool(info["action_valid"]))
        )
        self._info = info
        self.episode_return += reward
        self.over = terminated or truncated
        self.won = bool(info["won"])
        text = describe(self.env.observation_text(), info)
        if self.over:
            outcome = "solved" if info["won"] else "not solved"
            return f"{text}\nThe episode is over ({outcome})."
        return text

    def get_reward(self) -> float:
        """The episode's return (TRL calls it once the rollout ends). A rollout that ends before
        the episode does (the model stopped calling the tool, or TRL's turn or length limit
        came) is played out as our harness plays a model that answers nothing: every remaining
        step the empty action, which the env counts invalid. The played-out steps are rows of
        the episode (with no tokens), which our estimators charge the invalid penalty
        (``StepCreditGRPOTrainer``); the return is the env's own (Sokoban charges an invalid
        step nothing, a move 0.1)."""
        while not self.over:
            self._step("")
        return self.episode_return


def environment_class(spec: EnvSpec, server: str | None = None) -> type[AgentEnvironment]:
    """The class TRL's ``environment_factory`` takes for ``spec``'s env (TRL lists a class's
    methods as its tools, so each env gets a class of its own)."""
    name = f"{env_class(spec.name).__name__.removesuffix('Env')}Environment"
    return type(name, (AgentEnvironment,), {"spec": spec, "server": server})


def train_dataset(spec: EnvSpec, rows: int, seed: int) -> Any:
    """``rows`` tasks of ``spec``'s split drawn from ``seed`` (as our trainer draws them), each
    with the env seed the harness would give it (``episode_seed``) and the prompt: a
    ``datasets.Dataset`` for ``GRPOTrainer``."""
    from datasets import Dataset

    instruction = f"{env_class(spec.name).prompt_instruction} {TOOL_INSTRUCTION}"
    tasks = spec.draw_tasks(rows, seed)
    return Dataset.from_list(
        [
            {
                "prompt": [{"role": "user", "content": instruction}],
                "task_id": task,
                "seed": episode_seed(seed, task),
            }
            for task in tasks
        ]
    )


class ToolCallingAgent:
    """A model trained through TRL, played by our harness as TRL plays it: the conversation
    TRL builds (the instruction with the first observation, then each turn's ``act`` call and
    its answer, :func:`describe`), the chat template with the ``act`` tool, greedy decoding,
    and TRL's own parser of the answer (``trl.chat_template_utils.parse_response``). A turn
    without a call plays its text as the action (the env counts it invalid).

    ``evaluate(config, out, agent=ToolCallingAgent(model, tokenizer))`` gives the checkpoint
    the harness's seeded tasks and statistics (``baselines/trl_sokoban_tiny.py`` does).
    """

    def __init__(self, model: Any, tokenizer: Any, max_new_tokens: int = 32) -> None:
        from transformers.utils import get_json_schema
        from trl.chat_template_utils import add_response_schema

        if (
            getattr(tokenizer, "response_template", None) is None
            and getattr(tokenizer, "response_schema", None) is None
        ):  # what GRPOTrainer sets on the tokenizer it trains with
            tokenizer = add_response_schema(tokenizer)
        self.model, self.tokenizer, self.max_new_tokens = model, tokenizer, max_new_tokens
        self.tools = [get_json_schema(AgentEnvironment.act)]
        self.messages: list[dict[str, Any]] = []
        self.instruction = ""

    def begin_episode(self, env: TextAgentEnv[Any], seed: int) -> None:
        self.instruction = f"{env.prompt_instruction} {TOOL_INSTRUCTION}"
        self.messages = []

    def act(self, observation: Any, info: StepInfo) -> str:
        import torch
        from trl.chat_template_utils import parse_response

        text = describe(observation if isinstance(observation, str) else observation["text"], info)
        if not self.messages:
            self.messages = [{"role": "user", "content": self.instruction + text}]
        else:
            self.messages.append({"role": "tool", "name": "act", "content": text})
        prompt = self.tokenizer.apply_chat_template(
            self.messages, tools=self.tools, add_generation_prompt=True, tokenize=False
        )
        ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            out = self.model.generate(
                torch.tensor([ids]), max_new_tokens=self.max_new_tokens, do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id,
            )  # fmt: skip
        answer = parse_response(self.tokenizer, out[0, len(ids) :].tolist(), prefix=ids,
                                tools=self.tools)  # fmt: skip
        self.messages.append(answer)
        for call in answer.get("tool_calls") or []:
            arguments = call.get("function", {}).get("arguments", {})
            if isinstance(arguments, dict) and "action" in arguments:
                return str(arguments["action"])
        return str(answer.get("content", ""))

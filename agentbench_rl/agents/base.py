"""The agent protocol: what the harness and the rollouts call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from agentbench_rl.envs.base import StepInfo, TextAgentEnv
from agentbench_rl.prompting import HistoryStep, PromptConfig, action_choices, build_prompt

#: The answer formats an agent may declare: ``generate``, the papers' think-then-act tags.
AnswerFormat = Literal["generate"]


@dataclass(frozen=True)
class Capabilities:
    """What an agent declares to the episode driver (see :class:`Agent`); an attribute it does
    not have takes the default here.

    Example:
        >>> class Model:
        ...     reads_history = True
        ...     answer_format = "generate"
        >>> Capabilities.of(Model())
        Capabilities(reads_history=True, answer_format='generate')
        >>> Capabilities.of(print)
        Capabilities(reads_history=False, answer_format=None)
    """

    reads_history: bool = False
    answer_format: AnswerFormat | None = None

    @classmethod
    def of(cls, agent: object) -> Capabilities:
        """The capabilities ``agent`` declares."""
        answer_format = getattr(agent, "answer_format", None)
        return cls(
            reads_history=bool(getattr(agent, "reads_history", False)),
            answer_format="generate" if answer_format == "generate" else None,
        )


@runtime_checkable
class Agent(Protocol):
    """A policy from (observation, info) to the raw action text an LLM would write.

    ``begin_episode`` is called after every ``env.reset``, with the episode's seed, so an agent
    can reseed its randomness and, if it plays the env's expert, look at the env.

    Two optional attributes tell the episode driver (:mod:`agentbench_rl.rollout.episode`) more;
    :class:`Capabilities` declares them and is the one reader of them: ``reads_history = True``
    makes it call ``act(observation, info, history)`` with the episode's past steps (the driver
    keeps the history, so every prompt-building agent sees the same one); ``answer_format =
    "generate"`` makes a step valid only when the answer keeps the
    ``<think>..</think><action>..</action>`` format (the rule training uses). They are optional
    (a plain callable or a user's object has neither), so they are not members of the protocol.

    An agent that loads something heavy on first use (``hf:`` loads its model) may define
    ``prepare()``: the harness calls it once before the run starts, outside the guard that
    reports an agent's exceptions per episode, so a model that cannot load stops the run with its
    ``ValueError`` (one line naming the model) before any episode or results file.
    """

    name: str

    def begin_episode(self, env: TextAgentEnv[Any], seed: int) -> None:
        """Prepare for a new episode of ``env`` (already reset)."""

    def act(self, observation: Any, info: StepInfo) -> str:
        """The raw action text for this step."""


@runtime_checkable
class BatchAgent(Protocol):
    """An agent that answers a whole batch of episodes per call (``eval --batch-size N``).

    The episode driver calls ``begin_episodes(envs, seeds)`` once per batch, after the resets
    (row ``i`` of the batch plays ``envs[i]`` with episode seed ``seeds[i]``), then, every step,
    ``act_batch(observations, infos, rows=..., histories=...)`` for the rows still running:
    ``rows[k]`` says which episode of the batch ``observations[k]`` belongs to, and
    ``histories[k]`` is that episode's past steps. An episode's answers must depend only on its
    own row (its seed, observations and history), never on its neighbours, so that results are
    the same whatever the batch size. ``reads_history`` and ``answer_format`` mean what they
    mean for :class:`Agent`.
    """

    name: str

    def begin_episodes(self, envs: Sequence[TextAgentEnv[Any]], seeds: Sequence[int]) -> None:
        """Prepare for a batch of new episodes (already reset)."""

    def act_batch(
        self,
        observations: Sequence[Any],
        infos: Sequence[StepInfo],
        *,
        rows: Sequence[int],
        histories: Sequence[Sequence[HistoryStep]],
    ) -> list[Any]:
        """The raw action text of every row."""


class PromptingBatchAgent:
    """What the model-backed batched agents (``hf:``, ``openai:``) share: each row's env and
    episode seed, remembered at ``begin_episodes``; each row's prompt, built by the one prompt
    builder; and ``act``, the batch of one. Subclasses write ``act_batch``.
    """

    name: str
    #: The episode driver passes the history (see :class:`Agent`).
    reads_history = True

    def __init__(self) -> None:
        self._env_names: list[str] = []
        self._seeds: list[int] = []

    def begin_episodes(self, envs: Sequence[TextAgentEnv[Any]], seeds: Sequence[int]) -> None:
        """Remember each row's env and episode seed."""
        self._env_names = [env.env_name for env in envs]
        self._seeds = list(seeds)

    def begin_episode(self, env: TextAgentEnv[Any], seed: int) -> None:
        """One episode: the batch of one."""
        self.begin_episodes([env], [seed])

    def row_seed(self, row: int) -> int:
        """The episode seed of ``row`` (``RuntimeError`` before ``begin_episodes``)."""
        if row >= len(self._seeds):
            raise RuntimeError(f"agent '{self.name}': act called before begin_episode")
        return self._seeds[row]

    def row_prompts(
        self,
        observations: Sequence[Any],
        infos: Sequence[StepInfo],
        rows: Sequence[int],
        histories: Sequence[Sequence[HistoryStep]],
        config: PromptConfig,
    ) -> list[str]:
        """Every row's prompt (:func:`~agentbench_rl.prompting.build_prompt`)."""
        return [
            build_prompt(
                self._env_names[row],
                observation,
                history,
                action_choices(info, config.mode),
                config,
            )
            for row, observation, info, history in zip(
                rows, observations, infos, histories, strict=True
            )
        ]

    def act_batch(
        self,
        observations: Sequence[Any],
        infos: Sequence[StepInfo],
        *,
        rows: Sequence[int],
        histories: Sequence[Sequence[HistoryStep]],
    ) -> list[str]:
        """Every row's answer (the subclass's)."""
        raise NotImplementedError

    def act(self, observation: Any, info: StepInfo, history: Sequence[HistoryStep] = ()) -> str:
        """The answer to this step's prompt (``history``: the driver's past steps)."""
        return self.act_batch([observation], [info], rows=[0], histories=[history])[0]

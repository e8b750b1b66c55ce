"""One rule for an agent that raises: stop, naming the agent, task, seed and the exception.

The agent is user code; whatever it raises (``ValueError``, ``KeyError``, a CUDA error) must not
be mistaken for a harness error nor be reported without saying where it happened. The harness
wraps the agent in :class:`GuardedAgent` (a batched agent in :class:`GuardedBatchAgent`), which
marks anything the agent raises as :class:`AgentRaised`; the batch player
(:class:`~agentbench_rl.harness.evaluate.BatchPlayer`) turns the mark into an :class:`AgentError`
carrying the task and seed of the row that raised (for a batched agent, of a live episode).
Exceptions of the env or the harness pass through unchanged. The traceback travels as text, so
an error raised in a worker process reaches the command intact (``--debug`` prints it).
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from typing import Any, cast

from agentbench_rl.envs.base import StepInfo, TextAgentEnv
from agentbench_rl.prompting import HistoryStep


class AgentError(RuntimeError):
    """The agent raised during an episode.

    Attributes:
        agent: the agent spec.
        task_id: the episode's task.
        seed: the evaluation seed.
        kind: the exception's type name.
        detail: the exception's message.
        trace: the formatted traceback.

    Example:
        >>> print(AgentError("python:m:f", "test-0003", 1, "KeyError", "'x'", ""))
        agent python:m:f raised KeyError on task test-0003, seed 1: 'x' (--debug shows ...)
    """

    def __init__(
        self, agent: str, task_id: str, seed: int, kind: str, detail: str, trace: str
    ) -> None:
        super().__init__(agent, task_id, seed, kind, detail, trace)
        self.agent, self.task_id, self.seed = agent, task_id, seed
        self.kind, self.detail, self.trace = kind, detail, trace

    def __str__(self) -> str:
        return (
            f"agent {self.agent} raised {self.kind} on task {self.task_id}, seed {self.seed}: "
            f"{self.detail} (--debug shows the traceback)"
        )


class AgentRaised(Exception):
    """The mark of a guarded agent: it raised ``original`` (with its traceback text); ``row``
    is the batch row whose agent raised, where one agent plays one row."""

    def __init__(self, original: BaseException, row: int | None = None) -> None:
        super().__init__(original)
        self.original, self.row = original, row
        self.trace = "".join(traceback.format_exception(original))

    def error(self, agent: str, task_id: str, seed: int) -> AgentError:
        """The :class:`AgentError` this mark means for the episode (task, seed)."""
        kind = type(self.original).__name__
        return AgentError(agent, task_id, seed, kind, str(self.original), self.trace)


class GuardedAgent:
    """An agent whose exceptions are marked as the agent's (see the module docstring).

    Example:
        >>> from agentbench_rl.agents.simple import CallableAgent
        >>> agent = GuardedAgent(CallableAgent(lambda obs, info: {}["x"], name="bad"))
        >>> try:
        ...     agent.act("", {})
        ... except AgentRaised as raised:
        ...     error = raised.error("bad", "t-1", 0)
        ...     print(error.kind, error.task_id, error.seed, error.detail)
        KeyError t-1 0 'x'

    """

    def __init__(self, agent: Any, row: int | None = None) -> None:
        self.agent, self.row = agent, row
        self.name = getattr(agent, "name", type(agent).__name__)

    def begin_episode(self, env: TextAgentEnv[Any], seed: int) -> None:
        """The agent's ``begin_episode``, marked."""
        try:
            self.agent.begin_episode(env, seed)
        except Exception as problem:
            raise AgentRaised(problem, self.row) from problem

    def act(self, observation: Any, info: StepInfo, *history: Any) -> Any:
        """The agent's ``act`` (with the history, for agents that read it), marked."""
        try:
            return self.agent.act(observation, info, *history)
        except Exception as problem:
            raise AgentRaised(problem, self.row) from problem

    def __getattr__(self, name: str) -> Any:
        # What the episode driver asks of an agent (answer_format, reads_history, ...).
        return getattr(self.agent, name)


class GuardedBatchAgent:
    """A batched agent (:class:`~agentbench_rl.agents.base.BatchAgent`) whose exceptions are
    marked as the agent's; the mark names no row, since one call answers them all."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.name = getattr(agent, "name", type(agent).__name__)

    def begin_episodes(self, envs: Sequence[TextAgentEnv[Any]], seeds: Sequence[int]) -> None:
        """The agent's ``begin_episodes``, marked."""
        try:
            self.agent.begin_episodes(envs, seeds)
        except Exception as problem:
            raise AgentRaised(problem) from problem

    def act_batch(
        self,
        observations: Sequence[Any],
        infos: Sequence[StepInfo],
        *,
        rows: Sequence[int],
        histories: Sequence[Sequence[HistoryStep]],
    ) -> list[Any]:
        """The agent's ``act_batch``, marked."""
        try:
            return cast(
                list[Any],
                self.agent.act_batch(observations, infos, rows=rows, histories=histories),
            )
        except Exception as problem:
            raise AgentRaised(problem) from problem

    def __getattr__(self, name: str) -> Any:
        return getattr(self.agent, name)

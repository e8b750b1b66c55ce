"""One rule for an agent that raises: stop, naming the agent, task, seed and the exception.

The agent is user code; whatever it raises (``ValueError``, ``KeyError``, a CUDA error) must not
be mistaken for a harness error nor be reported without saying where it happened. The harness
wraps the agent in :class:`GuardedAgent`, which marks anything the agent raises, and runs each
episode through :func:`run_guarded`, which turns the mark into an :class:`AgentError` carrying the
task and seed. Exceptions of the env or the harness pass through unchanged. The traceback travels
as text, so an error raised in a worker process reaches the command intact (``--debug`` prints it).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from agentbench_rl.envs.base import TextAgentEnv

T = TypeVar("T")


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


class _AgentRaised(Exception):
    """Internal mark: the wrapped agent raised ``original`` (with its traceback text)."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(original)
        self.original = original
        self.trace = "".join(traceback.format_exception(original))


class GuardedAgent:
    """An agent whose exceptions are marked as the agent's (see the module docstring).

    Example:
        >>> from agentbench_rl.agents.simple import CallableAgent
        >>> agent = GuardedAgent(CallableAgent(lambda obs, info: {}["x"], name="bad"))
        >>> try:
        ...     run_guarded(lambda: agent.act("", {}), "bad", "t-1", 0)
        ... except AgentError as error:
        ...     print(error.kind, error.task_id, error.seed, error.detail)
        KeyError t-1 0 'x'

    """

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.name = getattr(agent, "name", type(agent).__name__)

    def begin_episode(self, env: TextAgentEnv[Any], seed: int) -> None:
        """The agent's ``begin_episode``, marked."""
        try:
            self.agent.begin_episode(env, seed)
        except Exception as problem:
            raise _AgentRaised(problem) from problem

    def act(self, observation: Any, info: dict[str, Any], *history: Any) -> Any:
        """The agent's ``act`` (with the history, for agents that read it), marked."""
        try:
            return self.agent.act(observation, info, *history)
        except Exception as problem:
            raise _AgentRaised(problem) from problem

    def __getattr__(self, name: str) -> Any:
        # What the episode driver asks of an agent (answer_format, reads_history, ...).
        return getattr(self.agent, name)


def run_guarded(play: Callable[[], T], agent: str, task_id: str, seed: int) -> T:
    """``play()``, with a marked agent exception turned into :class:`AgentError`."""
    try:
        return play()
    except _AgentRaised as raised:
        original = raised.original
        raise AgentError(
            agent, task_id, seed, type(original).__name__, str(original), raised.trace
        ) from None

"""Agents by name: ``random``, ``expert``, ``rule`` (WebShop's rule baseline), ``hf:<model>``,
``openai:<base_url>#<model>``, ``noisy:<ε>:<agent>`` (any single-step agent with ε-noise),
``python:module:callable`` for your own, or the name of an
installed agent plugin (entry point group ``agentbench_rl.agents``:
:mod:`agentbench_rl.core.plugins`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from agentbench_rl.agents.base import Agent
from agentbench_rl.agents.simple import CallableAgent, ExpertAgent, NoisyAgent, RandomAgent
from agentbench_rl.core.plugins import AGENT_GROUP, import_attribute, installed
from agentbench_rl.envs.webshop.baselines import RuleAgent
from agentbench_rl.extras import require

BUILTIN_AGENTS: dict[str, Callable[[], Agent]] = {
    "random": RandomAgent,
    "expert": ExpertAgent,
    "rule": RuleAgent,
}


def load_agent(spec: str) -> Agent:
    """Build the agent a spec names.

    ``python:package.module:attribute`` imports either a callable ``(observation, info) -> str``
    or an object with ``act(observation, info)`` (and optionally ``begin_episode(env, seed)``),
    or a batched agent (``begin_episodes`` and ``act_batch``: see
    :class:`~agentbench_rl.agents.base.BatchAgent`); a class is instantiated without arguments
    first. The working directory is importable, as with ``python -m``, so
    ``python:my_module:my_policy`` finds ``./my_module.py`` in the main process and in every
    worker (workers build their agent through this function too).

    Example:
        >>> load_agent("random").name
        'random'
        >>> agent = load_agent("python:agentbench_rl.agents.simple:RandomAgent")
        >>> agent.act("", {"admissible_actions": ["up"]})
        'up'
    """
    if spec in BUILTIN_AGENTS:
        agent: Agent = BUILTIN_AGENTS[spec]()
        return agent
    if spec.startswith("noisy:"):
        noise, _, inner_spec = spec[len("noisy:") :].partition(":")
        try:
            epsilon = float(noise)
        except ValueError:
            raise ValueError(f"agent '{spec}': expected noisy:<ε in [0, 1]>:<agent>") from None
        if not inner_spec:
            raise ValueError(f"agent '{spec}': expected noisy:<ε in [0, 1]>:<agent>")
        inner = load_agent(inner_spec)
        if not callable(getattr(inner, "act", None)) or not hasattr(inner, "begin_episode"):
            raise ValueError(
                f"agent '{spec}': noise wraps single-step agents; '{inner_spec}' is not"
            )
        return NoisyAgent(inner, epsilon)
    if spec.startswith("hf:"):
        require("hf", f"agent '{spec}'")
        from agentbench_rl.agents.hf import HFAgent  # torch and transformers load only here

        return HFAgent(spec)
    if spec.startswith("openai:"):
        from agentbench_rl.agents.openai_http import OpenAIAgent

        return OpenAIAgent(spec)
    if spec.startswith("python:"):
        parts = spec.split(":")
        if len(parts) != 3 or not all(parts[1:]):
            raise ValueError(f"agent '{spec}': expected python:module:callable")
        _, module_name, attribute = parts
        target = import_attribute(module_name, attribute, f"agent '{spec}'")
        return _as_agent(spec, target, attribute)
    plugins = installed(AGENT_GROUP)
    if spec in plugins:
        try:
            target = plugins[spec].load()
        except Exception as problem:  # the plugin's own code failing at import time
            raise ValueError(
                f"agent '{spec}': loading entry point {plugins[spec].value} raised "
                f"{type(problem).__name__}: {problem}"
            ) from None
        return _as_agent(spec, target, plugins[spec].value)
    choices = ", ".join(
        [
            *BUILTIN_AGENTS,
            *sorted(set(plugins) - set(BUILTIN_AGENTS)),
            "hf:<model>",
            "openai:<url>#<model>",
            "noisy:<ε>:<agent>",
            "python:module:callable",
        ]
    )
    raise ValueError(f"unknown agent '{spec}' (choose from {choices})")


def _as_agent(spec: str, target: Any, attribute: str) -> Agent:
    """The agent a ``python:`` target or an agent plugin is: a class is built without
    arguments; a batched agent plays as it is; anything else is wrapped as a callable."""
    try:
        policy: Any = target() if isinstance(target, type) else target
    except Exception as problem:  # a class that needs arguments, or fails building
        raise ValueError(
            f"agent '{spec}': {attribute}() raised {type(problem).__name__}: {problem} "
            "(a class agent is built without arguments)"
        ) from None
    if callable(getattr(policy, "act_batch", None)) and callable(
        getattr(policy, "begin_episodes", None)
    ):
        if not isinstance(getattr(policy, "name", None), str):
            policy.name = spec
        return cast(Agent, policy)  # a batched agent plays as it is (see BatchAgent)
    act = getattr(policy, "act", None)
    hook = getattr(policy, "begin_episode", None)
    return CallableAgent(act if callable(act) else policy, name=spec, on_episode=hook)

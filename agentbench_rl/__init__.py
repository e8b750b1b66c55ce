"""agentbench-rl: text-agent environments, step-level advantage estimators and a seeded
evaluation harness for LLM-agent reinforcement learning.

Importing the package registers the environments with Gymnasium::

    import gymnasium as gym
    import agentbench_rl  # noqa: F401

    env = gym.make("agentbench/Sokoban-v0", split="test")

and offers the two entry points of ``docs/python-api.md``: :func:`evaluate` (an agent on a
standard split, returning its typed summary) and :func:`run_training` (one training run,
returning its typed metrics rows; not ``train``, which names the trainer's subpackage). Both
import what they run only when called, so ``import agentbench_rl`` stays light.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentbench_rl.core.version import __version__
from agentbench_rl.envs import make, register_all

if TYPE_CHECKING:
    from agentbench_rl.envs.spec import EnvSpec
    from agentbench_rl.spec.records import Evaluation, MetricsRow
    from agentbench_rl.train.config import TrainConfig

register_all()

__all__ = ["__version__", "evaluate", "make", "run_training"]


def evaluate(
    env: str | EnvSpec,
    agent: str | Callable[..., Any],
    *,
    out: str | Path | None = None,
    **inputs: Any,
) -> Evaluation:
    """Evaluate ``agent`` on every task of a split (a seeded sample of ``limit`` of them), once
    per seed, as ``agentbench-rl eval`` does; returns the run's summary, typed
    (:class:`~agentbench_rl.spec.records.Evaluation`: ``.success.mean``, ``.success.ci95``,
    ``.per_category``, ...), and writes the results folder ``out`` (default
    ``results/<env>-<split>-<agent>``).

    ``env`` is a name (``"sokoban"``, or a Gymnasium id) or a whole
    :class:`~agentbench_rl.envs.spec.EnvSpec`. ``agent`` is an agent spec (``"random"``,
    ``"hf:FOLDER"``, ``"openai:URL#MODEL"``, ``"python:module:callable"``) or a module-level
    function ``(observation, info) -> action text`` (recorded as its ``python:`` spec, so the
    results name what played). The keywords are ``eval``'s options, named as its record keys
    (``split``, ``seeds``, ``limit``, ``categories``, ``max_steps``, ``env_kwargs``,
    ``workers``, ...; ``env_options`` is an old name of ``env_kwargs``), read by the same reader
    (:func:`~agentbench_rl.harness.config.read_evaluation`), so a bad one is the same one line.
    Workers, batching, concurrency, a served env and resuming change no number.

    Example:
        >>> import tempfile
        >>> result = evaluate("sokoban", "expert", split="test", limit=3,
        ...                   out=Path(tempfile.mkdtemp()) / "run")
        >>> result.success.mean, result.n_episodes
        (1.0, 3)
        >>> evaluate("sokoban", "expert", limt=3)
        Traceback (most recent call last):
        ...
        ValueError: unknown option 'limt' (did you mean 'limit'?)
    """
    from agentbench_rl.envs.spec import EnvSpec
    from agentbench_rl.harness.config import read_evaluation
    from agentbench_rl.harness.evaluate import evaluate as run_evaluation

    spec = agent if isinstance(agent, str) else _python_spec(agent)
    if isinstance(env, EnvSpec):
        given = [key for key in _env_keys() if inputs.get(key) is not None and key != "env"]
        if given:
            raise ValueError(f"evaluate: give {given[0]} in the EnvSpec, not beside it")
    config, options = read_evaluation({**inputs, "env": env, "agent": spec})
    folder = Path(out) if out is not None else config.default_folder()
    return run_evaluation(config, folder, options)


def _env_keys() -> list[str]:
    """The keywords that declare the env (an ``EnvSpec`` given whole declares them itself)."""
    from agentbench_rl.envs.spec import EnvSpec

    return [name for door in EnvSpec.doors() for name in (door.name, *door.aliases)]


def run_training(
    config: TrainConfig | str | Path,
    out: str | Path,
    *,
    overrides: Sequence[str] = (),
    resume: bool = False,
) -> list[MetricsRow]:
    """One training run (PPO-clip with the config's estimator) into ``out``, as
    ``agentbench-rl train`` runs it; returns its metrics rows (iteration 0, the start's
    validation, then one per iteration). ``config`` is a
    :class:`~agentbench_rl.train.config.TrainConfig` or a config file (a ``train`` config or a
    sweep file's ``base``), with ``key=value`` ``overrides``; ``resume`` continues a run in
    ``out``. ``docs/python-api.md`` has a run that finishes in seconds.
    """
    from agentbench_rl.train.config import TrainConfig, apply_overrides, load_config
    from agentbench_rl.train.ppo import train

    if isinstance(config, TrainConfig):
        config = apply_overrides(config, list(overrides))
    else:
        config = load_config(Path(config), list(overrides))
    return train(config, Path(out), resume=resume)


def _python_spec(function: Callable[..., Any]) -> str:
    """The ``python:module:callable`` spec of a module-level function (what the results record
    as the agent); ``ValueError`` for a function that cannot be named so."""
    module, name = getattr(function, "__module__", None), getattr(function, "__qualname__", "")
    if not module or module == "__main__" or not name.isidentifier():
        raise ValueError(
            "evaluate: give the agent as a spec string, or a function defined at the top of an "
            "importable module (the results name the agent as python:module:function, so they "
            f"can be replayed); got {function!r}"
        )
    return f"python:{module}:{name}"

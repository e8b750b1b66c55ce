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

from collections.abc import Callable, Mapping, Sequence
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
    split: str | None = None,
    seeds: Sequence[int] = (0,),
    limit: int | None = None,
    max_steps: int | None = None,
    env_options: Mapping[str, Any] | None = None,
    categories: Sequence[str] = (),
    out: str | Path | None = None,
    workers: int = 1,
    batch_size: int | None = None,
    concurrency: int = 1,
    resume: bool = False,
    env_server: str | None = None,
    save_trajectories: bool = False,
) -> Evaluation:
    """Evaluate ``agent`` on every task of a split (a seeded sample of ``limit`` of them), once
    per seed, as ``agentbench-rl eval`` does; returns the run's summary, typed
    (:class:`~agentbench_rl.spec.records.Evaluation`: ``.success.mean``, ``.success.ci95``,
    ``.per_category``, ...), and writes the results folder ``out`` (default
    ``results/<env>-<split>-<agent>``).

    ``env`` is a name (``"sokoban"``, or a Gymnasium id) with ``split`` (default: the env's
    evaluation split), ``env_options``, ``categories`` and ``max_steps``, or a whole
    :class:`~agentbench_rl.envs.spec.EnvSpec`. ``agent`` is an agent spec (``"random"``,
    ``"hf:FOLDER"``, ``"openai:URL#MODEL"``, ``"python:module:callable"``) or a module-level
    function ``(observation, info) -> action text`` (recorded as its ``python:`` spec, so the
    results name what played). Workers, batching, concurrency, a served env and resuming change
    no number.

    Example:
        >>> import tempfile
        >>> result = evaluate("sokoban", "expert", split="test", limit=3,
        ...                   out=Path(tempfile.mkdtemp()) / "run")
        >>> result.success.mean, result.n_episodes
        (1.0, 3)
    """
    from agentbench_rl.envs import evaluation_split
    from agentbench_rl.envs.spec import EnvSpec
    from agentbench_rl.harness.config import EvalConfig, RunOptions
    from agentbench_rl.harness.evaluate import evaluate as run_evaluation
    from agentbench_rl.spec.records import Evaluation

    if isinstance(env, str):
        env = EnvSpec(
            name=env,
            split=split if split is not None else evaluation_split(env),
            kwargs=dict(env_options or {}),
            categories=tuple(categories),
            max_steps=max_steps,
        )
    elif split is not None or env_options or categories or max_steps is not None:
        raise ValueError("evaluate: give the split, options and categories in the EnvSpec")
    spec = agent if isinstance(agent, str) else _python_spec(agent)
    config = EvalConfig(
        env=env,
        agent=spec,
        seeds=list(seeds),
        limit=limit,
        save_trajectories=save_trajectories,
    )
    options = RunOptions(
        workers=workers,
        batch_size=batch_size,
        concurrency=concurrency,
        resume=resume,
        env_server=env_server,
    )
    if out is None:
        label = spec.replace(":", "_").replace("/", "_")
        out = Path("results") / f"{env.name}-{env.split}-{label}"
    return Evaluation.of(run_evaluation(config, Path(out), options))


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

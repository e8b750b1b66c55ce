"""An evaluation as it is declared (:class:`EvalConfig`: what is played and kept, the part of a
run its numbers depend on) and how it is run (:class:`RunOptions`: workers, batching,
concurrency, resuming, a served env; none of them changes a number).

The config is stored flat in a results folder's ``config.json`` and in ``summary.json``
(``env``, ``split``, ``agent``, ``seeds``, ``limit``, ``max_steps``, ``episodes_format``,
``save_trajectories``, ``env_kwargs``, ``categories``), as it always has been:
:meth:`EvalConfig.record` writes that form and :meth:`EvalConfig.read` (or the constructor)
takes it, so folders and submissions written before the env became an
:class:`~agentbench_rl.envs.spec.EnvSpec` resume and validate as they were.

Example:
    >>> config = EvalConfig(env="textcraft", split="test", agent="random", categories=["depth-1"])
    >>> config.env.name, config.env.categories, config.record()["categories"]
    ('textcraft', ('depth-1',), ['depth-1'])
    >>> EvalConfig.read({**config.record(), "limit": 0})
    Traceback (most recent call last):
    ...
    ValueError: limit must be a whole number >= 1, got 0
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from agentbench_rl.envs import env_class
from agentbench_rl.envs.base import TextAgentEnv
from agentbench_rl.envs.spec import EnvSpec
from agentbench_rl.harness.sampling import stratified_sample
from agentbench_rl.spec.doors import Door, doors_of, read_inputs
from agentbench_rl.spec.typed import Flag, Seed, Spec, Text, Whole

#: The most worker processes an evaluation starts (each holds its envs and agent, hundreds of
#: MB for a model); fewer where there are fewer batches of jobs than that.
MAX_WORKERS = 64


class EvalConfig(Spec):
    """Everything that defines an evaluation (module docstring): the env (an
    :class:`~agentbench_rl.envs.spec.EnvSpec`: name, split, options, categories, step limit),
    the agent, the seeds, a seeded sample of ``limit`` tasks, and what is written.

    Checked as it is made, in one line naming the field: seeds in range and distinct, a limit
    of at least one, a known episodes format, and everything :class:`EnvSpec` checks. What only
    a made env or a loaded agent can tell is checked by :meth:`checked_env`.
    """

    env: EnvSpec
    agent: Text = Field(
        description="random, expert, rule (WebShop), hf:MODEL, openai:URL#MODEL, "
        "python:module:attr."
    )
    seeds: list[Seed] = Field(
        default_factory=lambda: [0],
        min_length=1,
        description="Seeds; repeat or list: --seeds 0 1 2.",
    )
    limit: Whole | None = Field(  # None: every task
        default=None, ge=1, description="A seeded sample of N tasks, stratified by category."
    )
    episodes_format: Literal["csv", "parquet"] = Field(default="csv", description="csv or parquet.")
    save_trajectories: Flag = Field(
        default=False, description="Write every step to OUT/trajectories (see view)."
    )

    #: Fields no door takes, with the reason (the doors' conformance test reads this).
    INTERNAL: ClassVar[dict[str, str]] = {
        "panel": "a training run's fixed tasks, set by the trainer's validation; "
        "an evaluation a user starts plays a split",
    }

    @classmethod
    def doors(cls) -> tuple[Door, ...]:
        """Its inputs as the flat record names them: the options of ``eval`` and the keywords
        of ``agentbench_rl.evaluate`` (the env's first, then the agent, then the rest).

        Example:
            >>> tuple(door.name for door in EvalConfig.doors()[0:3])
            ('env', 'agent', 'split')
        """
        own = doors_of({name: info for name, info in cls.model_fields.items() if name != "env"})
        env = EnvSpec.doors(without=cls.INTERNAL)
        return (env[0], own[0], *env[1:], *own[1:])

    @model_validator(mode="before")
    @classmethod
    def _from_record(cls, values: Any) -> Any:
        """The flat record (``env`` a name beside ``split``, ``env_kwargs``, ``categories``,
        ``max_steps``) becomes the nested env; a nested ``env`` passes as it is."""
        if not isinstance(values, Mapping) or not isinstance(values.get("env"), str):
            return values
        env, rest = EnvSpec.from_record(values)  # read here: a bad env is one line
        return {**rest, "env": env}

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, seeds: list[int]) -> list[int]:
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"a seed repeats: {seeds}")
        return seeds

    def record(self) -> dict[str, Any]:
        """The flat form ``config.json`` and ``summary.json`` hold, in the file's order
        (``categories`` ``None`` for every category; ``panel`` only where one is played, so
        the record of a split's evaluation is what it always was)."""
        panel = {"panel": list(self.env.panel)} if self.env.panel else {}
        return {
            "env": self.env.name,
            "split": self.env.split,
            "agent": self.agent,
            "seeds": list(self.seeds),
            "limit": self.limit,
            "max_steps": self.env.max_steps,
            "episodes_format": self.episodes_format,
            "save_trajectories": self.save_trajectories,
            "env_kwargs": dict(self.env.kwargs),
            "categories": list(self.env.categories) or None,
            **panel,
        }

    #: Record keys that say how results are written, not what they are: a resume may change
    #: them (the episodes played after it follow the new setting).
    PRESENTATION: ClassVar[frozenset[str]] = frozenset({"episodes_format", "save_trajectories"})

    @classmethod
    def record_defaults(cls) -> dict[str, Any]:
        """The record's value of every field a config may leave out (a folder written before
        a field existed resumes with its default)."""
        return {
            key: value
            for key, value in cls(env=EnvSpec(name="sokoban", split="test"), agent="random")
            .record()
            .items()
            if key not in ("env", "split", "agent")
        }

    def default_folder(self) -> Path:
        """Where an evaluation writes when no folder is given: ``results/ENV-SPLIT-AGENT``.

        Example:
            >>> EvalConfig(env="sokoban", split="test", agent="hf:org/model").default_folder()
            PosixPath('results/sokoban-test-hf_org_model')
        """
        label = self.agent.replace(":", "_").replace("/", "_")
        return Path("results") / f"{self.env.name}-{self.env.split}-{label}"

    def checked_env(self, load: bool = True) -> TextAgentEnv[Any]:
        """The env this evaluation plays, made once to check what only a made env, the split's
        task list and a loaded agent can tell (a split without a fixed task list, an option the
        env refuses, an agent that does not load; ``load=False`` when the agent plays as an
        object already made); ``ValueError`` in one line."""
        from agentbench_rl.agents import load_agent

        if not self.env.panel:
            env_class(self.env.name).task_ids(self.env.split)  # raises for unbounded splits
        if load:
            load_agent(self.agent)
        if self.episodes_format == "parquet":
            from agentbench_rl.extras import require

            require("parquet", "--episodes-format parquet")
        try:
            return self.env.make()
        except TypeError as problem:  # an env option the env does not take
            raise ValueError(f"env '{self.env.name}': {problem}") from None

    def tasks(self, env: TextAgentEnv[Any] | None = None) -> list[str]:
        """The task ids evaluated, in split order: the whole split (its tasks of the env's
        categories when given), or with ``limit`` a seeded sample of those stratified by
        category (see :mod:`agentbench_rl.harness.sampling`), for which ``env`` (made if not
        given) tells each task's category.

        Example:
            >>> config = EvalConfig(
            ...     env="textcraft", split="test", agent="random", categories=["depth-1"], limit=3
            ... )
            >>> len(config.tasks())
            3
        """
        ids = (
            self.env.tasks()
            if self.env.panel
            else env_class(self.env.name).task_ids(self.env.split)
        )
        if not self.env.categories and (not self.limit or self.limit >= len(ids)):
            return ids
        categorised = self.env.categorised(env)
        if not self.limit or self.limit >= len(categorised):
            return list(categorised)
        return stratified_sample(categorised, self.limit)


class RunOptions(Spec):
    """How an evaluation runs; none of it changes a number of the results, so a run may be
    resumed with other values.

    ``batch_size`` episodes play in lockstep per process (one agent call per step of a batch;
    default: the ``concurrency``, else 1); ``concurrency`` caps the requests an ``openai:``
    agent has in flight; ``env_server`` plays on the envs ``agentbench-rl serve-env`` serves
    there (byte for byte the local episodes); ``resume`` continues the run in the folder.

    Example:
        >>> RunOptions(concurrency=4).lockstep
        4
        >>> RunOptions.read({"workers": 0})
        Traceback (most recent call last):
        ...
        ValueError: workers must be a whole number >= 1, got 0
    """

    workers: Whole = Field(default=1, ge=1, le=MAX_WORKERS, description="Episode worker processes.")
    batch_size: Whole | None = Field(
        default=None,
        ge=1,
        description="Episodes stepped in lockstep per worker, one agent call per step "
        "(hf: agents answer them in one forward). Default: the concurrency.",
    )
    concurrency: Whole = Field(
        default=1, ge=1, description="openai: agents: requests in flight at most."
    )
    resume: Flag = Field(default=False, description="Continue an interrupted run in OUT.")
    env_server: Text | None = Field(
        default=None,
        description="Play on the env served at this URL (serve-env); the same results as local.",
    )

    @classmethod
    def doors(cls) -> tuple[Door, ...]:
        """Its inputs: options of ``eval``, keywords of ``agentbench_rl.evaluate``."""
        return doors_of(cls.model_fields)

    @property
    def lockstep(self) -> int:
        """The episodes each process plays in lockstep: ``batch_size``, else the
        ``concurrency``."""
        return self.concurrency if self.batch_size is None else self.batch_size


def read_evaluation(
    given: Mapping[str, Any], env_kwargs: Mapping[str, Any] | None = None
) -> tuple[EvalConfig, RunOptions]:
    """An evaluation and how it runs, from what a door was given (``eval``'s options,
    ``agentbench_rl.evaluate``'s keywords; old names taken, ``None`` not given): the one reader
    of both, so every bad input is the same one line in both. ``env_kwargs`` joins the env
    options given under any of their names (``eval --allow-modified-games``).

    Example:
        >>> given = {"env": "textcraft", "agent": "random", "category": ["depth-1"], "workers": 2}
        >>> config, options = read_evaluation(given)
        >>> config.env.split, config.env.categories, options.workers
        ('test', ('depth-1',), 2)
        >>> read_evaluation({"env": "sokoban", "agent": "random", "seeds": [-1]})
        Traceback (most recent call last):
        ...
        ValueError: seeds.0 must be a whole number >= 0, got -1
    """
    record = read_inputs((*EvalConfig.doors(), *RunOptions.doors()), given)
    if env_kwargs:
        record["env_kwargs"] = {**record.get("env_kwargs", {}), **env_kwargs}
    how = {key: record.pop(key) for key in RunOptions.model_fields if key in record}
    return EvalConfig.read(record), RunOptions.read(how)

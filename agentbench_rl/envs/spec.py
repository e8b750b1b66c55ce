"""An env as a run declares it: which env, with which options, on which split, which of its
task categories, and the step limit. The trainer's rollouts and validation, the harness's
evaluation and verl's agent loop make their envs and list their tasks from one of these.

It lives beside the registry it resolves against (``make``, the category filter), not in
``spec/``: a declaration that makes its thing sits with that thing's layer.

Example:
    >>> spec = EnvSpec(name="textcraft", split="test", categories=("depth-1",), max_steps=5)
    >>> spec.make().max_steps, len(spec.tasks()) > 0
    (5, True)
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, field_validator, model_validator

from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.envs import (
    ENVS,
    env_class,
    evaluation_split,
    make,
    resolve,
    task_categories_of,
    tasks_of_categories,
    unknown_options,
)
from agentbench_rl.envs.base import TextAgentEnv
from agentbench_rl.envs.remote import remote_env
from agentbench_rl.spec.doors import Door, doors_of
from agentbench_rl.spec.typed import Spec

#: The seed a training panel is drawn with (:meth:`EnvSpec.panel_of`): one panel per env,
#: split, categories and size, for every run and seed that names it (a campaign's, its credit
#: sets').
PANEL_SEED = 0


class EnvSpec(Spec):
    """One env of a run (module docstring); immutable, so a run's envs cannot drift apart.

    Checked as it is made, in one line naming the env: the name (a Gymnasium id becomes the
    short name), the split and the options the env's constructor takes.

    Example:
        >>> EnvSpec(name="sokoban", split="test", kwargs={"bogus": 1})
        Traceback (most recent call last):
        ...
        pydantic_core._pydantic_core.ValidationError: 1 validation error for EnvSpec
          Value error, env 'sokoban' takes no option 'bogus' (it takes ...
    """

    model_config = ConfigDict(frozen=True)

    name: str = Field(description=f"Env: {', '.join(ENVS)} (or a Gymnasium id).")
    split: str = Field(description="Standard split; eval's default is the env's evaluation split.")
    kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="Env constructor argument KEY=VALUE (JSON value), repeatable.",
    )
    categories: tuple[str, ...] = Field(  # empty: every task of the split
        default=(), description="Only the split's tasks of this category (repeat for several)."
    )
    max_steps: int | None = Field(  # None: the env's own step limit
        default=None, ge=1, description="Override the env's step limit."
    )
    panel: tuple[str, ...] = Field(
        default=(),
        description="These task ids of the split, played in place of its own list (a "
        "training run's fixed tasks, panel_of); empty: the split's tasks.",
    )

    #: The fields as a run's flat record names them (``config.json``, and so the options of
    #: ``eval`` and ``serve-env`` and the facade's keywords): field -> record key.
    RECORD_NAMES: ClassVar[dict[str, str]] = {"name": "env", "kwargs": "env_kwargs"}
    #: Old names of record keys, still taken by the doors.
    ALIASES: ClassVar[dict[str, tuple[str, ...]]] = {
        "env_kwargs": ("env_option", "env_options"),
        "categories": ("category",),
    }

    @classmethod
    def doors(cls, without: Collection[str] = ()) -> tuple[Door, ...]:
        """The doors of its fields but those ``without`` (what a command or record does not
        take), named as the flat record names them (:data:`RECORD_NAMES`).

        Example:
            >>> tuple(door.option for door in EnvSpec.doors(without=("categories", "panel")))
            ('--env', '--split', '--env-kwargs', '--max-steps')
        """
        chosen = {name: info for name, info in cls.model_fields.items() if name not in without}
        return doors_of(chosen, aliases=cls.ALIASES, names=cls.RECORD_NAMES)

    @classmethod
    def from_record(cls, values: Mapping[str, Any]) -> tuple[EnvSpec, dict[str, Any]]:
        """The env a flat record declares (``env`` a name beside ``split``, ``env_kwargs``,
        ``categories``, ``max_steps``, ``panel``; no split: the env's evaluation split; no
        categories or ``None``: every task), and the record's other keys; ``ValueError`` in one
        line naming the record's key (``max_steps``, not ``env.max_steps``).

        Example:
            >>> spec, rest = EnvSpec.from_record({"env": "alfworld", "agent": "random"})
            >>> spec.split, rest
            ('valid_seen', {'agent': 'random'})
        """
        rest = dict(values)
        fields = {}
        for field in cls.model_fields:
            key = cls.RECORD_NAMES.get(field, field)
            if key in rest:
                fields[field] = rest.pop(key)
        if not isinstance(fields.get("name"), str):
            raise ValueError(f"env: expected an env name, got {fields.get('name')!r}")
        fields["name"] = resolve(fields["name"]).name  # an unknown env: one line
        if fields.get("split") is None:
            fields["split"] = evaluation_split(fields["name"])
        if fields.get("categories") is None:  # the record's "every category"
            fields.pop("categories", None)
        return cls.read(fields), rest

    @field_validator("name")
    @classmethod
    def _registered(cls, name: str) -> str:
        return resolve(name).name

    @model_validator(mode="after")
    def _known(self) -> EnvSpec:
        env = env_class(self.name)
        if self.split not in env.splits():
            raise ValueError(
                f"env '{self.name}' has no split '{self.split}' "
                f"(choose from {', '.join(env.splits())})"
            )
        unknown = unknown_options(env, self.make_kwargs())
        if unknown:
            raise ValueError(f"env '{self.name}' {unknown}")
        if not self.panel:
            return self
        if len(set(self.panel)) != len(self.panel):
            raise ValueError(f"env '{self.name}': a task repeats in the panel")
        try:
            known = set(env.task_ids(self.split))
        except ValueError:  # an unbounded split: a reset tells an id it cannot play
            known = None
        stray = [task for task in self.panel if known is not None and task not in known]
        if stray:
            raise ValueError(f"env '{self.name}': panel task '{stray[0]}' is not in '{self.split}'")
        return self

    def make_kwargs(self) -> dict[str, Any]:
        """The keyword arguments ``make`` takes for this env (the step limit among them)."""
        kwargs = dict(self.kwargs)
        if self.max_steps is not None:
            kwargs["max_steps"] = self.max_steps
        return kwargs

    def make(self, server: str | None = None) -> TextAgentEnv[Any]:
        """A fresh env on this split; with ``server``, the env that server serves
        (``agentbench-rl serve-env``), checked to be this one (:mod:`agentbench_rl.envs.remote`).
        """
        if server is not None:
            local = env_class(self.name)
            return remote_env(local, server, self.split, self.max_steps, dict(self.kwargs))
        return make(self.name, split=self.split, **self.make_kwargs())

    def fixed(self) -> bool:
        """Whether the split has a fixed task list (Sokoban's train split has none: its ids are
        ``train-<n>`` for any n, drawn by :meth:`draw_tasks`), or a panel is given."""
        if self.panel:
            return True
        try:
            env_class(self.name).task_ids(self.split)
        except ValueError:
            return False
        return True

    def tasks(self, env: TextAgentEnv[Any] | None = None, what: str = "categories") -> list[str]:
        """The split's task ids, in split order, of ``categories`` when given (``env``, made
        if not given, tells a category the split does not list); ``what`` names the setting
        in the error when a category is unknown or leaves nothing, or the split has no fixed
        task list."""
        if self.panel:
            return list(self.panel)
        if not self.fixed():
            raise ValueError(
                f"{what}: {self.name}'s split '{self.split}' has no fixed task list"
                if self.categories
                else f"split '{self.split}' of '{self.name}' has no fixed task list"
            )
        if not self.categories:
            return env_class(self.name).task_ids(self.split)
        return list(self.categorised(env, what))

    def categorised(
        self, env: TextAgentEnv[Any] | None = None, what: str = "categories"
    ) -> dict[str, str]:
        """The tasks :meth:`tasks` gives, each with its category, in split order (one look at
        the categories: an evaluation's stratified sample draws from these)."""
        if self.panel:
            return task_categories_of(env or self.make(), self.split, self.panel)
        ids = env_class(self.name).task_ids(self.split)
        known = task_categories_of(env or self.make(), self.split, ids)
        if self.categories:
            ids = tasks_of_categories(known, ids, list(self.categories), what, self.split)
        return {task: known[task] for task in ids}

    def checksum(self, env: TextAgentEnv[Any]) -> str:
        """The checksum of the tasks played: the split's (``env`` is one of this split), or with
        a panel a hash of the panel's ids and, where the split has one, the split's checksum."""
        if not self.panel:
            return env.checksum()
        try:
            split = env.checksum()
        except ValueError:  # an unbounded split: its ids name their levels
            split = None
        return stable_hash({"split": self.split, "checksum": split, "panel": list(self.panel)})

    def panel_of(self, count: int, seed: int = PANEL_SEED, what: str = "panel") -> EnvSpec:
        """This env with a panel of ``count`` distinct tasks drawn from ``seed`` (of its
        categories), in split order; a split without a fixed list gives ``<split>-<n>`` ids.

        Example:
            >>> spec = EnvSpec(name="textcraft", split="train").panel_of(3)
            >>> len(spec.panel), spec.draw_tasks(5, seed=1)[0] in spec.panel
            (3, True)
        """
        rng = random.Random(seed)
        if not self.fixed():
            numbers = rng.sample(range(2**31), count)
            return self.model_copy(update={"panel": tuple(f"{self.split}-{n}" for n in numbers)})
        ids = self.tasks(what=what)
        if count > len(ids):
            raise ValueError(f"{what}: {count} tasks asked, '{self.split}' holds {len(ids)}")
        chosen = set(rng.sample(ids, count))
        return self.model_copy(update={"panel": tuple(task for task in ids if task in chosen)})

    def draw_tasks(self, count: int, seed: int, what: str = "categories") -> list[str]:
        """``count`` task ids drawn from ``seed``: ``<split>-<n>`` for a split without a fixed
        list (which takes no categories), else a seeded draw with replacement from
        :meth:`tasks` (the trainer's tasks of an iteration, behaviour cloning's, a corpus's).

        Example:
            >>> EnvSpec(name="sokoban", split="train").draw_tasks(2, seed=0)[0].startswith("train-")
            True
            >>> spec = EnvSpec(name="textcraft", split="train", categories=("depth-1",))
            >>> set(spec.draw_tasks(20, seed=0)) <= set(spec.tasks())
            True
        """
        rng = random.Random(seed)
        if not self.fixed():
            if self.categories:
                self.tasks(what=what)  # refuses categories, in one line
            return [f"{self.split}-{rng.randrange(2**31)}" for _ in range(count)]
        ids = self.tasks(what=what)
        return [ids[rng.randrange(len(ids))] for _ in range(count)]

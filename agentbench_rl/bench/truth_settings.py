"""The declaration of a Monte-Carlo fidelity run (:class:`TruthSettings`), in a module of its
own so that the command line derives ``bench fidelity``'s options from it without importing the
work (:mod:`agentbench_rl.bench.truth`, which plays and scores it, loads scipy and pandas).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, model_validator

from agentbench_rl.bench.limits import TRUTH_LIMITS
from agentbench_rl.envs.spec import EnvSpec
from agentbench_rl.spec.doors import Door, doors_of
from agentbench_rl.spec.typed import Number, Seed, Spec, Text, Whole


class TruthSettings(Spec):
    """One Monte-Carlo fidelity run: the env (an :class:`~agentbench_rl.envs.spec.EnvSpec`:
    name, split, options, task categories (none: every task), step limit), or a training run's
    panel of its tasks, the policy, the batch shape (``tasks`` x ``group_size``), K
    ``continuations`` per visited prefix, the seed and γ.

    Its record (a journal's header, ``fidelity.json``'s and a credit set's ``settings``) is flat
    as it always was: ``env`` a name beside ``split``, ``categories``, ``max_steps`` and
    ``env_options`` (the record's older name for the env's ``env_kwargs``, which it takes too);
    :meth:`record` writes it and the constructor and :meth:`read` take it.

    Example:
        >>> settings = TruthSettings(env="textcraft", agent="random", categories=["depth-1"])
        >>> settings.env.split, settings.record()["categories"]
        ('train', ['depth-1'])
        >>> TruthSettings.read({"env": "sokoban", "agent": "random", "continuations": 1})
        Traceback (most recent call last):
        ...
        ValueError: continuations must be a whole number >= 2, got 1
    """

    model_config = ConfigDict(frozen=True)

    env: EnvSpec
    agent: Text = Field(description="The policy: any agent spec.")
    tasks: Whole = Field(
        default=8, ge=1, le=TRUTH_LIMITS["tasks"], description="Tasks in the batch."
    )
    group_size: Whole = Field(
        default=8, ge=1, le=TRUTH_LIMITS["group_size"], description="Trajectories per task."
    )
    continuations: Whole = Field(  # >= 2: a standard error needs two
        default=64,
        ge=2,
        le=TRUTH_LIMITS["continuations"],
        description="K: continuations per visited prefix.",
    )
    seed: Seed = Field(default=0, description="Seed of the batch and the truth.")
    gamma: Number = Field(default=0.95, ge=0, le=1, description="The discount of the returns.")
    panel: Whole | None = Field(  # tasks drawn from this training panel (EnvSpec.panel_of)
        default=None,
        ge=1,
        description="Draw the tasks from a training run's panel of this many tasks of the "
        "split (its train_panel).",
    )

    #: The record's key of the env's options (older than ``env_kwargs``; both are read).
    OPTIONS_KEY: ClassVar[str] = "env_options"

    @model_validator(mode="before")
    @classmethod
    def _from_record(cls, values: Any) -> Any:
        """The flat record becomes the nested env (split ``train`` where none is given); a
        nested ``env`` passes as it is."""
        if not isinstance(values, Mapping) or not isinstance(values.get("env"), str):
            return values
        values = dict(values)
        if cls.OPTIONS_KEY in values:
            if "env_kwargs" in values:
                raise ValueError(f"env_kwargs is given twice ('{cls.OPTIONS_KEY}' is its old name)")
            values["env_kwargs"] = values.pop(cls.OPTIONS_KEY)
        values.setdefault("split", "train")
        panel = values.pop("panel", None)  # a panel's size here, not the env's panel of tasks
        env, rest = EnvSpec.from_record(values)  # read here: a bad env is one line
        return {**rest, "env": env, "panel": panel}

    def record(self) -> dict[str, Any]:
        """The flat record, in the order and with the keys it has always had."""
        return {
            "env": self.env.name,
            "agent": self.agent,
            "split": self.env.split,
            "categories": list(self.env.categories),
            "tasks": self.tasks,
            "group_size": self.group_size,
            "continuations": self.continuations,
            "seed": self.seed,
            "gamma": self.gamma,
            "max_steps": self.env.max_steps,
            self.OPTIONS_KEY: dict(self.env.kwargs),
            "panel": self.panel,
        }

    @classmethod
    def doors(cls) -> tuple[Door, ...]:
        """Its inputs: the options of ``bench fidelity --env`` (the env's first)."""
        own = {name: info for name, info in cls.model_fields.items() if name != "env"}
        env = EnvSpec.doors(without=("panel",))  # its own panel is a size: it draws the env's
        return (*env, *doors_of(own))

    def env_spec(self) -> EnvSpec:
        """The env the batch and every continuation play (with ``panel``, a training run's
        panel: the batch's tasks are drawn from it)."""
        return self.env if self.panel is None else self.env.panel_of(self.panel, what="--panel")

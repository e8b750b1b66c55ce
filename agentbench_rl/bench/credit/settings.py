"""The declaration of a ``bench credit`` run (:class:`CreditBench`), in a module of its own so
that the command line derives its options from it without importing the work
(:mod:`agentbench_rl.bench.credit.bench`, which loads the estimators and the plots).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import ConfigDict, Field

from agentbench_rl.spec.doors import Door, doors_of
from agentbench_rl.spec.typed import Flag, Spec, Text

#: Task draws of each standard MDP set (``bench credit-set``'s default): enough for the power
#: goal (:mod:`.power`) on every MDP of the testbed, the hardest (dense anchors) needing about 54.
MDP_SET_TASKS = 64


class CreditBench(Spec):
    """What one ``bench credit`` run scores, on which sets, and what it relates the scores to.

    Example:
        >>> bench = CreditBench.read({"estimators": ["grpo"], "campaigns": {"sokoban": "s.json"}})
        >>> bench.estimators, bench.campaigns["sokoban"].name, bench.speed
        (['grpo'], 's.json', True)
    """

    model_config = ConfigDict(frozen=True)

    estimators: list[Text] = Field(
        default_factory=list,
        description="name, name:key=value,... or python:module:function (repeat; default: every "
        "registered estimator).",
    )
    sets: Path | None = Field(
        default=None, description="A folder of credit sets, or one set (default: the shipped ones)."
    )
    against: Text | None = Field(
        default=None, description="Paired differences against this estimator."
    )
    speed: Flag = Field(
        default=True, description="Also time each estimator on 100,000 synthetic rows."
    )
    learning: Path | None = Field(
        default=None,
        description="A bench learning result (learning.json): does fidelity on the MDP sets "
        "predict the learning AUC?",
    )
    campaigns: dict[str, Path] = Field(
        default_factory=dict,
        description="ENV=summary.json of a sweep: does fidelity on ENV's sets predict the "
        "campaign's paired differences against GRPO? (repeat)",
    )

    #: The options' older names (``--estimator`` and ``--campaign`` took one value each time).
    ALIASES: ClassVar[dict[str, tuple[str, ...]]] = {
        "estimators": ("estimator",),
        "campaigns": ("campaign",),
    }

    @classmethod
    def doors(cls) -> tuple[Door, ...]:
        """Its inputs: the options of ``bench credit``."""
        return doors_of(cls.model_fields, aliases=cls.ALIASES)

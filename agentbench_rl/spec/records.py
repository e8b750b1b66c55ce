"""Records that one module writes and another reads, declared once:

- :class:`EvaluationSummary`: the run fields of ``summary.json`` (the harness writes them, the
  leaderboard's validator reads them; the figures between them are ``harness.stats.summarize``'s,
  which the validator recomputes from the episodes); :class:`Evaluation` is the whole file,
  typed (what ``agentbench_rl.evaluate`` returns).
- :data:`EpisodeRow`: a row of ``episodes.csv`` and of the evaluation journal (the episode
  driver writes it, :mod:`agentbench_rl.spec.journal` and the results folder read it).
- :class:`MetricsRow`: a row of a training run's ``metrics.jsonl`` (the trainer writes it,
  :mod:`agentbench_rl.spec.run_folder` reads it).
- :class:`CreditSetMeta`: a credit set's ``set.json`` (``bench fidelity --export-set`` and
  ``bench credit-set`` write it, ``bench credit`` and the estimators board read it, all through
  :mod:`agentbench_rl.bench.credit.sets`), its settings naming the policy that played the batch
  by one key, :data:`POLICY_KEY`.

The rows are ``TypedDict``s: they are written to files and sent between processes as the dicts
they are, so a typed dict types them where they are born at no cost and leaves the formats on
disk exactly as they were.

Example:
    >>> summary = EvaluationSummary(
    ...     env="sokoban", split="test", agent="random", seeds=[0], split_checksum="ab",
    ...     complete_split=True, config={}, package_version="0.1.0", git_commit=None,
    ... )
    >>> list(summary.to_json({"n_episodes": 3}))[:8]
    ['env', 'split', 'agent', 'seeds', 'split_checksum', 'complete_split', 'n_episodes', 'config']
    >>> EvaluationSummary.optional_fields()
    ('non_string_actions', 'provenance', 'agent_fingerprint', 'data')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, TypedDict, cast

from pydantic import BaseModel, ConfigDict, Field

#: A row of ``episodes.csv`` (and of the journal, which adds ``non_string_actions``): functional
#: syntax, because one column is called ``return``.
EpisodeRow = TypedDict(
    "EpisodeRow",
    {
        "task_id": str,
        "category": str,
        "seed": int,
        "success": bool,
        "score": float,
        "steps": int,
        "return": float,
        "invalid_actions": int,
        "non_string_actions": int,
    },
    total=False,
)
#: The columns of ``episodes.csv``, in the file's order (the journal's rows add
#: ``non_string_actions``, totalled in the summary).
EPISODE_COLUMNS = (
    "task_id",
    "category",
    "seed",
    "success",
    "score",
    "steps",
    "return",
    "invalid_actions",
)


#: One iteration of a training run (``metrics.jsonl``), typed where the trainer writes it: the
#: rollouts' figures (``train/...``), the advantages (``adv/...``), times (``time/...``), the
#: warm start's (``bc/...``, iteration 0) and, on iterations that validate, the harness's figures
#: (``val_...``, and ``panel_...`` on a run's training panel). Keys that the estimator, the loss
#: or an engine name (``est/<name>``, ``ppo/<name>``, ``engine/<name>``) are added by
#: :func:`with_figures`. Functional syntax: the keys hold slashes.
MetricsRow = TypedDict(
    "MetricsRow",
    {
        "iteration": int,
        "train/success": float,
        "train/uniform_groups": float,
        "train/return": float,
        "train/episode_length": float,
        "train/invalid_rate": float,
        "train/rows": float,
        "train/response_tokens": float,
        "adv/raw_mean": float,
        "adv/raw_std": float,
        "adv/raw_abs_mean": float,
        "adv/dose": float,
        "adv/trained_dose": float,
        "adv/mean": float,
        "adv/std": float,
        "adv/min": float,
        "adv/max": float,
        "bc/loss": float,
        "bc/rows": float,
        "time/rollout_s": float,
        "time/estimator_s": float,
        "time/update_s": float,
        "time/val_s": float,
        "time/iteration_s": float,
        "val_success": float,
        "val_score": float,
        "val_return": float,
        "val_steps": float,
        "val_invalid_rate": float,
        "val_weights": str,
        "val_greedy": bool,
        "val_seed_count": int,
        "panel_success": float,
        "panel_score": float,
        "panel_return": float,
        "panel_steps": float,
        "panel_invalid_rate": float,
        "panel_weights": str,
        "panel_greedy": bool,
        "panel_seed_count": int,
    },
    total=False,
)


class HiddenSource(TypedDict, total=False):
    """Where a credit set's hidden states come from (BiPACE's input): the layer or generator
    in words, their width and the dtype stored."""

    source: str
    dim: int
    dtype: str


class CreditSetMeta(TypedDict):
    """A credit set's ``set.json`` (:mod:`agentbench_rl.bench.credit.sets` documents each
    field): what the set is, how it was made and the checksum of its arrays."""

    schema: int
    name: str
    kind: str  # "monte-carlo" or "exact"
    rows: int
    tasks: int
    trajectories: int
    success_rate: float
    noise_share: float
    columns: list[str]
    settings: dict[str, Any]  # env, split, tasks, group size, POLICY_KEY, seed, K, gamma, ...
    hidden: HiddenSource | None
    made: dict[str, Any]
    sha256: str


#: The key of a credit set's settings that names the policy that played its batch (a real env's
#: agent spec, or the MDP testbed's initial policy); sets made before it was one key say
#: ``policy`` for the MDP sets (:func:`set_settings` reads them so).
POLICY_KEY = "agent"


def set_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A credit set's settings with its policy under :data:`POLICY_KEY`.

    Example:
        >>> set_settings({"env": "mdp:detours", "policy": "π₀", "gamma": 0.95})
        {'env': 'mdp:detours', 'agent': 'π₀', 'gamma': 0.95}
    """
    return {("agent" if key == "policy" else key): value for key, value in settings.items()}


def with_figures(row: MetricsRow, figures: Mapping[str, Any]) -> MetricsRow:
    """``row`` with ``figures`` added: keys the estimator, the loss or an engine names
    (``est/<name>``, ``ppo/<name>``, ``engine/<name>``), which the row's type cannot list.

    Example:
        >>> with_figures({"iteration": 3}, {"est/singleton_rate": 0.5})
        {'iteration': 3, 'est/singleton_rate': 0.5}
    """
    return cast(MetricsRow, {**row, **figures})


class MetricBlock(BaseModel):
    """A figure's mean with its intervals (``harness.stats.metric_block``)."""

    model_config = ConfigDict(extra="forbid")

    mean: float
    std_over_seeds: float | None = None
    ci95: tuple[float, float]
    ci95_method: str
    bootstrap_ci95: tuple[float, float]
    per_seed: dict[str, SeedFigure] | None = None


class SeedFigure(BaseModel):
    """One seed's mean of a 0/1 figure, with its Wilson interval."""

    model_config = ConfigDict(extra="forbid")

    mean: float
    n: int
    ci95: tuple[float, float]


class CategoryFigures(BaseModel):
    """The figures of one task category."""

    model_config = ConfigDict(extra="forbid")

    n_tasks: int
    success: MetricBlock
    score: MetricBlock


class Threshold(BaseModel):
    """Whether each seed's success reached the threshold (the 95% criterion)."""

    model_config = ConfigDict(extra="forbid")

    threshold: float
    per_seed: dict[str, bool]
    all_seeds: bool


class EvaluationSummary(BaseModel):
    """The run fields of ``summary.json``: what was evaluated, on which data, by which code.

    The figures (``n_episodes``, ``success``, ...) sit between ``complete_split`` and the fields
    after it in the file, where the harness has always written them.
    """

    model_config = ConfigDict(extra="forbid")

    env: str
    split: str
    agent: str
    seeds: list[int]
    split_checksum: str
    complete_split: bool
    # actions that were not text (an agent returning None): invalid, counted apart
    non_string_actions: int | None = None
    config: dict[str, Any]
    package_version: str
    git_commit: str | None
    provenance: dict[str, Any] | None = None
    agent_fingerprint: str | None = None
    # ALFWorld and WebShop: the fingerprint of the external data played and whether it is pinned
    data: dict[str, Any] | None = None

    #: The last run field before the figures in the file.
    FIGURES_AFTER: ClassVar[str] = "complete_split"

    @classmethod
    def required_fields(cls) -> tuple[str, ...]:
        """The run fields every summary holds (the validator refuses one without them)."""
        return tuple(name for name, info in cls.model_fields.items() if info.is_required())

    @classmethod
    def optional_fields(cls) -> tuple[str, ...]:
        """The run fields newer harness versions add, absent from older summaries."""
        return tuple(name for name, info in cls.model_fields.items() if not info.is_required())

    def to_json(self, figures: dict[str, Any]) -> dict[str, Any]:
        """The whole summary in the file's order (an optional field left unset stays out)."""
        record: dict[str, Any] = {}
        for name, value in self.model_dump(exclude_unset=True).items():
            record[name] = value
            if name == self.FIGURES_AFTER:
                record.update(figures)
        return record


class Evaluation(EvaluationSummary):
    """A whole ``summary.json``, typed: the run fields and the figures.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from agentbench_rl.envs.spec import EnvSpec
        >>> from agentbench_rl.harness.config import EvalConfig
        >>> from agentbench_rl.harness.evaluate import evaluate
        >>> config = EvalConfig(env=EnvSpec(name="sokoban", split="test"), agent="expert", limit=2)
        >>> result = evaluate(config, Path(tempfile.mkdtemp()) / "run")
        >>> result.success.mean, result.n_episodes, result.complete_split
        (1.0, 2, False)
    """

    n_episodes: int
    n_tasks: int
    success: MetricBlock
    pass_at_k: dict[str, float] = Field(default_factory=dict)
    score: MetricBlock
    mean_steps: float
    mean_return: float
    invalid_action_rate: float
    per_category: dict[str, CategoryFigures]
    threshold_95: Threshold | None = None

    @classmethod
    def of(cls, summary: dict[str, Any]) -> Evaluation:
        """The typed form of a summary as the harness writes it (``summary.json``)."""
        return cls.model_validate(summary)

    def validation_figures(self, greedy: bool, prefix: str = "val") -> MetricsRow:
        """The ``val_...`` figures of a training run's metrics row (``prefix``: ``panel`` for
        the training panel's); ``val_weights`` only where the agent's weights were fingerprinted
        (an ``hf:`` policy).

        Example:
            >>> import tempfile
            >>> from pathlib import Path
            >>> from agentbench_rl.envs.spec import EnvSpec
            >>> from agentbench_rl.harness.config import EvalConfig
            >>> from agentbench_rl.harness.evaluate import evaluate
            >>> config = EvalConfig(env=EnvSpec(name="sokoban", split="test"), agent="expert",
            ...                     limit=2)
            >>> row = evaluate(config, Path(tempfile.mkdtemp()) / "run").validation_figures(True)
            >>> sorted(row)  # doctest: +NORMALIZE_WHITESPACE
            ['val_greedy', 'val_invalid_rate', 'val_return', 'val_score', 'val_seed_count',
             'val_steps', 'val_success']
        """
        figures: dict[str, float | bool | int | str] = {
            "success": self.success.mean,
            "score": self.score.mean,
            "return": self.mean_return,
            "steps": self.mean_steps,
            "invalid_rate": self.invalid_action_rate,
            "greedy": greedy,
            "seed_count": len(self.seeds),
        }
        weights = (self.provenance or {}).get("agent_weights")
        if weights is not None:
            figures["weights"] = weights
        return cast(MetricsRow, {f"{prefix}_{name}": value for name, value in figures.items()})

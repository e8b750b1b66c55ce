"""``agentbench-rl bench credit``: any estimator's credit against the truth of every credit set,
in seconds, with no env and no model.

An estimator is a registry name with parameters (``gigpo``, ``gigpo:anchor=state``, an
installed entry point) or a plain function over a :class:`~agentbench_rl.core.batch.StepBatch`
(``python:module:function``, returning one advantage per row, as an array or an
``EstimatorResult``). On each set it is scored like ``bench fidelity`` scores (the functions of
:mod:`agentbench_rl.bench.truth`): Pearson and Spearman correlation with the true advantage,
sign agreement on the rows whose truth is clear of its noise, the relative error after the best
scale, each with a 95% bootstrap interval over tasks; overall and by part (rows of singleton
anchor sets, failed trajectories, first and second half of each trajectory). Registry
estimators that discount get the set's γ; a function gets the batch alone.

Beside the estimators, two reference rows that are labels, not estimators, so a reader sees
where the gap lies:

- the **ceiling**: the highest correlation the truth's own Monte-Carlo noise allows,
  sqrt(1 − noise share), the noise share being mean(se(Â)²) / var(Â) (an estimate equal to
  the noise-free advantage correlates with the noisy truth at about that); 1 on an exact set;
- the **perfect baseline**: the step's own discounted return minus the true value V of its
  prefix, what a critic that knew V would give, with the single-sample return's noise left in.
  On a Monte-Carlo set V is the truth's own estimate V̂(h_t), which the truth subtracts too,
  so the two would correlate through V̂'s noise; that shared term (the value's squared
  standard error per row) is subtracted from the row's covariance with the truth, which makes
  it noise-fair at no cost (the same figure, in expectation, as a V drawn from independent
  continuations; tested on an exact set with synthetic noise). Its Spearman and sign
  agreement cannot be corrected so and are left out.

Every row also keeps its Pearson on each of the set's bootstrap resamples and with each task
left out, so any two rows of a set pair (:mod:`.power`).

A function that raises, returns the wrong length, NaN or infinity, or runs past the time limit
gets one line naming the set and the problem; nothing is recorded for it, and the others still
score. Code that is not the package's runs in a child process that never holds the truth, under
limits (:mod:`.runner`), so it can neither read the truth nor hang or take down the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from agentbench_rl.bench.credit.runner import Candidate, estimate_all
from agentbench_rl.bench.credit.sets import CreditSet
from agentbench_rl.bench.truth import METRICS, percentile_interval, resample_counts, task_metrics
from agentbench_rl.core.batch import StepBatch
from agentbench_rl.core.hashing import seed_from
from agentbench_rl.estimators.common import combine_codes, dose, effective_share

#: The reference rows (labels, not estimators).
CEILING = "ceiling (truth's noise)"
PERFECT_BASELINE = "perfect baseline (G_t − V)"
#: The rows the speed figure is timed on (``bench estimators``' synthetic rollout).
SPEED_ROWS = 100_000
PARTS = ("all", "singleton anchor rows", "failed trajectories", "first half", "second half")


# ------------------------------------------------------------------------------ the scores
def return_to_go(batch: StepBatch, gamma: float) -> np.ndarray:
    """Σ_{u ≥ t} γ^(u−t) r_u of every row: the step's own discounted return.

    Example:
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": 0, "t": t, "reward": r, "obs_key": t, "state_key": t,
        ...      "action_key": "a", "valid": True} for t, r in ((0, 1.0), (1, 2.0))])
        >>> return_to_go(batch, 0.5).tolist()
        [2.0, 2.0]
    """
    order = np.lexsort((-np.asarray(batch.t), batch.codes("traj")[0]))
    returns = np.zeros(len(batch))
    codes = batch.codes("traj")[0]
    running, previous = 0.0, -1
    for row in order:
        if codes[row] != previous:
            running, previous = 0.0, codes[row]
        running = float(batch.reward[row]) + gamma * running
        returns[row] = running
    return returns


def part_masks(credit: CreditSet) -> dict[str, np.ndarray]:
    """The rows of each part (:data:`PARTS`); a part without rows is left out."""
    batch = credit.batch
    anchors, _ = combine_codes(batch.codes("group")[0], batch.codes("obs_key")[0])
    sizes = np.bincount(anchors)[anchors]  # GiGPO's anchor set: (group, observation)
    traj = batch.codes("traj")[0]
    length = np.bincount(traj, minlength=traj.max() + 1) if len(traj) else np.zeros(0)
    t = np.asarray(batch.t)
    masks = {
        "all": np.ones(len(batch), dtype=bool),
        "singleton anchor rows": sizes == 1,
        "failed trajectories": ~np.asarray(batch.success, dtype=bool),
        "first half": 2 * t < length[traj],
        "second half": 2 * t >= length[traj],
    }
    return {name: mask for name, mask in masks.items() if mask.any()}


@dataclass
class Score:
    """One estimator (or reference row) on one set: each metric's value and 95% interval,
    overall and by part, and the paired differences against ``--against``."""

    estimator: str
    set: str
    parts: dict[str, dict[str, Any]] = field(default_factory=dict)
    against: dict[str, Any] | None = None
    #: The share of the set's rows the estimator gives a non-zero advantage (its dose), and the
    #: effective sample size of its |A| weights as a share of the rows (``None``: a reference).
    dose: float | None = None
    effective: float | None = None
    #: Pearson over all rows on each of the set's bootstrap resamples (the same resamples for
    #: every row of the set, so two rows' draws pair), and with each task left out in turn (in
    #: the set's task order: two rows' pair too).
    draws: np.ndarray | None = field(default=None, repr=False)
    left_out: np.ndarray | None = field(default=None, repr=False)

    @property
    def pearson(self) -> float:
        """Pearson correlation with the truth over all rows."""
        return float(self.parts["all"]["pearson"]["value"])

    @property
    def drop_one(self) -> tuple[float, float] | None:
        """The lowest and highest Pearson with any one task left out (``None``: one task)."""
        if self.left_out is None:
            return None
        return float(np.min(self.left_out)), float(np.max(self.left_out))

    def record(self) -> dict[str, Any]:
        """The JSON record (``{"estimator", "set", "pearson": {"value", "ci"}, ...}``)."""
        overall = self.parts.get("all", {})
        return {
            "estimator": self.estimator,
            "set": self.set,
            **{name: overall.get(name) for name in METRICS},
            "rows": overall.get("rows"),
            "dose": self.dose,
            "effective_share": self.effective,
            "pearson_drop_one_task": self.drop_one,
            "parts": {part: figures for part, figures in self.parts.items() if part != "all"},
            **({"against": self.against} if self.against is not None else {}),
        }


def score(
    label: str,
    estimate: np.ndarray,
    credit: CreditSet,
    base: np.ndarray | None = None,
    shared: np.ndarray | None = None,
) -> Score:
    """``estimate`` against the set's truth on every part, with 95% intervals from resampling
    the set's tasks (the same resamples for every estimator of the set: seeded by the set and
    the part) and, overall, the range of Pearson with any one task left out; with ``base``
    (another estimator's advantages), the paired differences (this minus base) on the same
    resamples; ``shared``: the covariance of each row's noise with the truth's, for a row that
    reads the truth's own estimates (:func:`~agentbench_rl.bench.truth.task_metrics`)."""
    result = Score(label, credit.name, dose=dose(estimate), effective=effective_share(estimate))
    for part, mask in part_masks(credit).items():
        codes = pd.factorize(credit.tasks[mask])[0]
        n_tasks = int(codes.max()) + 1
        drawn = resample_counts(credit.tasks[mask], seed_from("credit", credit.name, part) % 2**32)

        def figures(
            values: np.ndarray,
            counts: np.ndarray,
            mask: np.ndarray = mask,
            codes: np.ndarray = codes,
        ) -> Any:
            return task_metrics(
                values[mask],
                credit.true_advantage[mask],
                credit.standard_error[mask],
                codes,
                counts,
                shared[mask] if shared is not None else None,
            )

        point = figures(estimate, np.ones((1, n_tasks)))
        spread = figures(estimate, drawn[1]) if drawn is not None else None
        result.parts[part] = {
            "rows": int(mask.sum()),
            **{
                name: {
                    "value": float(point[name][0]),
                    "ci": percentile_interval(spread[name])
                    if spread is not None
                    else (math.nan, math.nan),
                }
                for name in METRICS
            },
        }
        if part != "all":
            continue
        result.draws = spread["pearson"] if spread is not None else None
        if n_tasks > 1:
            result.left_out = figures(estimate, 1.0 - np.eye(n_tasks))["pearson"]
        if base is not None:
            other = figures(base, np.ones((1, n_tasks)))
            other_spread = figures(base, drawn[1]) if drawn is not None else None
            result.against = {
                name: {
                    "value": float(point[name][0] - other[name][0]),
                    "ci": percentile_interval(spread[name] - other_spread[name])
                    if spread is not None and other_spread is not None
                    else (math.nan, math.nan),
                }
                for name in METRICS
            }
    return result


def reference_scores(credit: CreditSet) -> list[Score]:
    """The two reference rows of a set (module docstring)."""
    ceiling = Score(CEILING, credit.name)
    share = credit.noise_share
    bound = math.sqrt(max(0.0, 1.0 - share)) if not math.isnan(share) else math.nan
    ceiling.parts["all"] = {
        "rows": len(credit.batch),
        "pearson": {"value": bound, "ci": (math.nan, math.nan)},
        **{name: None for name in METRICS if name != "pearson"},
    }
    perfect = return_to_go(credit.batch, credit.gamma) - credit.value
    # G_t − V̂(h_t) and the truth r_t + γ·V̂(h_{t+1}) − V̂(h_t) share V̂(h_t)'s noise, whose
    # variance is the value's squared standard error: subtracted, the row is noise-fair.
    shared = credit.value_standard_error**2
    return [ceiling, score(PERFECT_BASELINE, perfect, credit, shared=shared)]


#: The width of the synthetic hidden states an estimator that needs them is timed with (the
#: tiny models' sets carry 128; Qwen2.5-1.5B's would be 1536: ``bench estimators`` times that).
SPEED_HIDDEN_SIZE = 128


def speed(candidate: Candidate, rows: int = SPEED_ROWS) -> float | None:
    """Seconds the candidate takes on ``bench estimators``' synthetic batch of ``rows`` rows
    (best of two), with synthetic hidden states of :data:`SPEED_HIDDEN_SIZE` for one that needs
    them."""
    from agentbench_rl.bench.estimators import synthetic_hidden, synthetic_rollout

    rollout = synthetic_rollout(rows, seed=rows)
    # code run in a child is not loaded here to ask: it gets hidden states, read or not
    wants = candidate.needs_hidden if candidate.runs_here() else True
    hidden = synthetic_hidden(rollout.latent, SPEED_HIDDEN_SIZE) if wants else None
    batch = rollout.batch(hidden)
    probe = CreditSet(
        name=f"synthetic-{rows}",
        kind="exact",
        batch=batch,
        category=np.zeros(rows, dtype=object),
        true_advantage=np.zeros(rows),
        standard_error=np.zeros(rows),
        value=np.zeros(rows),
        value_standard_error=np.zeros(rows),
        settings={"gamma": 0.95},
        hidden={"source": "synthetic", "dim": SPEED_HIDDEN_SIZE} if hidden is not None else None,
    )
    times = [estimate_all(candidate, [probe]).seconds.get(probe.name) for _ in range(2)]
    return min((s for s in times if s is not None), default=None)


#: Variants scored beside the registered estimators: GRPO normalised over its group's
#: trajectories (one vote each, textbook GRPO) beside the default over its group's rows (the
#: GiGPO code's, where a long trajectory weighs more), so readers see what the choice moves.
VARIANTS = ("grpo:episode_stats=trajectories",)


def default_candidates() -> list[Candidate]:
    """Every registered estimator at its defaults (entry points included), and
    :data:`VARIANTS`."""
    from agentbench_rl.estimators import available

    return [Candidate.parse(name) for name in (*available(), *VARIANTS)]

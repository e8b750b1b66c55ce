"""A fresh draw of a shipped credit set ranks the estimators as the set does (issue 64, point 4).

A set's verdicts are only as good as its draw: this plays one cheap standard set again on a new
seed (its recorded settings, the seed changed: the same policy, env, panel, batch shape and K;
``bench fidelity``'s work, 15 minutes of wall time and 10 of CPU on two busy cores) and
compares the estimators' Pearson ranking on the two draws (Spearman, printed). A set whose
ranking does not hold on a new draw is seen here, in CI's slow run (``.ci/run``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from scipy.stats import spearmanr

from agentbench_rl.bench.credit.bench import run
from agentbench_rl.bench.credit.score import CEILING, PERFECT_BASELINE
from agentbench_rl.bench.credit.sets import STANDARD_SETS, read_set
from agentbench_rl.bench.credit.settings import CreditBench
from agentbench_rl.bench.truth import run as run_truth
from agentbench_rl.bench.truth_settings import TruthSettings
from agentbench_rl.progress import console_for

SET = "sokoban-drrn-mid"
#: The lowest Spearman correlation of the two rankings that passes: the sets' ranking held at
#: +0.90 and +0.93 on two fresh TextCraft draws (issue 64) and +0.91 on this set's seed 1;
#: below this a verdict is a draw's.
AGREEMENT = 0.5


@pytest.mark.slow
def test_a_fresh_draw_ranks_the_estimators_as_the_shipped_set(tmp_path: Path) -> None:
    shipped = read_set(STANDARD_SETS / SET)
    settings = TruthSettings(**shipped.settings)
    fresh = settings.model_copy(update={"seed": settings.seed + 1})
    export = tmp_path / "fresh" / SET
    run_truth(fresh, tmp_path / "fidelity", console_for(), parallel=256, export_set=export)
    shutil.copytree(STANDARD_SETS / SET, tmp_path / "shipped" / SET)
    scores = {}
    for draw in ("shipped", "fresh"):
        report = run(CreditBench(sets=tmp_path / draw, speed=False))
        scores[draw] = {
            entry.estimator: entry.pearson
            for entry in report.scores
            if entry.estimator not in (CEILING, PERFECT_BASELINE)
        }
    names = sorted(set(scores["shipped"]) & set(scores["fresh"]))
    agreement = spearmanr(
        [scores["shipped"][n] for n in names], [scores["fresh"][n] for n in names]
    )
    print(f"{SET}: seed {settings.seed} against seed {fresh.seed}, {len(names)} estimators, "
          f"Spearman {agreement.statistic:+.2f}")  # fmt: skip
    assert agreement.statistic >= AGREEMENT

"""The recorded TRL runs side by side: GiGPO's and GRPO's credit through TRL, seeds paired.

    python baselines/trl_sokoban_summary.py --record runs   # copy runs/trl-<est>/seed<N> here
    python baselines/trl_sokoban_summary.py                 # summarise the recorded runs

Reads ``baselines/results/trl-sokoban-<estimator>/seed<N>/`` (what ``trl_sokoban_tiny.py``
writes, without the weights) and writes ``baselines/results/trl-sokoban/``: ``comparison.json``
(per estimator: the harness's test success before and after GRPO, TRL's reward and tool-call
frequency over the first and last five optimiser steps, each a mean over seeds with its 95%
t-interval; GiGPO minus GRPO paired by seed), ``comparison.md`` (the same as a table) and
``reward.png`` (TRL's logged reward, a trailing mean of five optimiser steps, mean over seeds
with its band).
``--record DIR`` first copies every finished run under ``DIR`` (its ``eval/`` written) into
``baselines/results/``, leaving ``model/`` out, with its ``metrics.jsonl`` (written again from
TRL's log and the evaluations, for runs made before the script wrote it).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

from trl_sokoban_tiny import metrics_rows  # beside this file: python puts its folder on the path

from agentbench_rl.core.atomic import atomic_write_text
from agentbench_rl.harness.stats import paired_difference, t_interval
from agentbench_rl.spec.run_folder import RunFolder
from agentbench_rl.train.sweep import plot_curves

RESULTS = Path(__file__).resolve().parent / "results"
ESTIMATORS = ("gigpo", "grpo")
OUT = RESULTS / "trl-sokoban"
EDGE_STEPS = 5  # the first and last optimiser steps a run's start and end are read from
CALLS = "engine/tools/call_frequency"  # TRL's tool calls per rollout, as metrics_rows keeps it


def record(runs: Path) -> list[Path]:
    """Copy every finished ``runs/trl-<estimator>/seed<N>`` into the results, weights left out."""
    copied = []
    for estimator in ESTIMATORS:
        for run in sorted((runs / f"trl-{estimator}").glob("seed*")):
            if not (run / "eval" / "summary.json").is_file():
                continue  # unfinished
            target = RESULTS / f"trl-sokoban-{estimator}" / run.name
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(run, target, ignore=shutil.ignore_patterns("model"))
            RunFolder(target).write_metrics(metrics_rows(target))  # runs made before it wrote them
            copied.append(target)
    return copied


def run_figures(run: Path) -> dict[str, Any]:
    """One run's figures, from its ``metrics.jsonl``: success before and after, reward and tool
    calls at start and end."""
    rows = RunFolder(run).read_metrics().rows
    steps = rows[1:]  # iteration 0 is the warm start

    def mean_of(key: str, part: list[Any]) -> float:
        return sum(float(row[key]) for row in part) / len(part)

    return {
        "success_start": float(rows[0]["val_success"]),
        "success_end": float(rows[-1]["val_success"]),
        "reward_first": mean_of("train/return", steps[:EDGE_STEPS]),
        "reward_last": mean_of("train/return", steps[-EDGE_STEPS:]),
        "tool_calls_first": mean_of(CALLS, steps[:EDGE_STEPS]),
        "tool_calls_last": mean_of(CALLS, steps[-EDGE_STEPS:]),
        # one optimiser step is 8 rollouts, a solved level +10 among them: a trailing mean reads
        "reward_curve": {
            int(row["iteration"]): mean_of(
                "train/return", steps[max(0, index + 1 - EDGE_STEPS) : index + 1]
            )
            for index, row in enumerate(steps)
        },
    }


def _mean_block(values: list[float]) -> dict[str, Any]:
    interval = [round(x, 4) for x in t_interval(values)] if len(values) > 1 else None
    return {"mean": round(sum(values) / len(values), 4), "ci95": interval, "n": len(values)}


def summarise() -> dict[str, Any]:
    """The summary of every recorded run (written to ``OUT``); raises naming a missing run."""
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    for estimator in ESTIMATORS:
        folders = sorted((RESULTS / f"trl-sokoban-{estimator}").glob("seed*"))
        if not folders:
            raise SystemExit(f"error: no recorded run under {RESULTS}/trl-sokoban-{estimator}/")
        runs[estimator] = {int(f.name.removeprefix("seed")): run_figures(f) for f in folders}
    figures = [key for key in next(iter(runs["gigpo"].values())) if key != "reward_curve"]
    summary: dict[str, Any] = {"estimators": {}, "gigpo_minus_grpo": {}}
    for estimator, by_seed in runs.items():
        summary["estimators"][estimator] = {
            "seeds": sorted(by_seed),
            **{key: _mean_block([run[key] for run in by_seed.values()]) for key in figures},
        }
    paired = sorted(set(runs["gigpo"]) & set(runs["grpo"]))
    for key in figures:
        difference = paired_difference(
            [runs["gigpo"][s][key] for s in paired], [runs["grpo"][s][key] for s in paired]
        )
        summary["gigpo_minus_grpo"][key] = difference.to_dict()
    OUT.mkdir(parents=True, exist_ok=True)
    atomic_write_text(OUT / "comparison.json", json.dumps(summary, indent=1) + "\n")
    atomic_write_text(OUT / "comparison.md", markdown(summary, figures))
    curves = {
        f"trl-sokoban-{estimator}": {seed: run["reward_curve"] for seed, run in by_seed.items()}
        for estimator, by_seed in runs.items()
    }
    labels = ("TRL optimiser step", f"reward, mean of the last {EDGE_STEPS} steps")
    plot_curves(curves, OUT / "reward.png", "trl-sokoban", axis_labels=labels)
    return summary


def markdown(summary: dict[str, Any], figures: list[str]) -> str:
    """The summary as a Markdown table: a row per figure, a column per estimator and the
    paired difference."""

    def cell(block: dict[str, Any]) -> str:
        interval = block.get("ci95")
        return f"{block['mean']:+.3f}" + (
            f" [{interval[0]:+.3f}, {interval[1]:+.3f}]" if interval else ""
        )

    header = ["figure", *summary["estimators"], "GiGPO - GRPO (paired by seed)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key in figures:
        row = [key, *(cell(block[key]) for block in summary["estimators"].values())]
        row.append(cell(summary["gigpo_minus_grpo"][key]))
        lines.append("| " + " | ".join(row) + " |")
    seeds = {name: block["seeds"] for name, block in summary["estimators"].items()}
    return (
        "# TRL on Sokoban: our GiGPO and GRPO credit through StepCreditGRPOTrainer\n\n"
        f"Seeds: {seeds}. Means over seeds with 95% t-intervals; success is the harness's on "
        "20 test levels (greedy); reward and tool calls are TRL's logged means over the first "
        f"and last {EDGE_STEPS} optimiser steps. "
        "Made by `python baselines/trl_sokoban_summary.py`.\n\n" + "\n".join(lines) + "\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", type=Path, default=None, help="copy finished runs from DIR")
    options = parser.parse_args()
    if options.record is not None:
        for target in record(options.record):
            print(f"recorded {target.relative_to(RESULTS.parent.parent)}")
    summarise()
    print((OUT / "comparison.md").read_text())
    written = "comparison.json, comparison.md, reward.png"
    print(f"wrote {OUT.relative_to(RESULTS.parent.parent)}/ ({written})")


if __name__ == "__main__":
    main()

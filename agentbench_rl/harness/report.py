"""Terminal rendering of an evaluation summary."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agentbench_rl.spec.records import Evaluation


def _percent(value: float) -> str:
    return f"{100 * value:.1f}"


def _interval(pair: tuple[float, float]) -> str:
    return f"{_percent(pair[0])}-{_percent(pair[1])}"


def print_summary(summary: Evaluation, console: Console) -> None:
    """Overall success and score with intervals (the t-interval over seeds, or Wilson for one
    seed, and the bootstrap interval over tasks), then one row per category."""
    title = (
        f"{summary.env} / {summary.split} / {summary.agent}: "
        f"{summary.n_episodes} episodes, seeds {summary.seeds} (figures in %)"
    )
    # Light borders and no wrapping of names: the longest ALFWorld category (30 characters) and
    # every figure fit in 80 columns.
    console.print(escape(title), highlight=False)
    table = Table(box=None, pad_edge=False, header_style="bold underline")
    names = ["all", *summary.per_category]
    table.add_column("", no_wrap=True, min_width=max(len(name) for name in names))
    for column in ("tasks", "success", "95% CI", "bootstrap", "score"):
        table.add_column(column, justify="right", no_wrap=True)
    success, score = summary.success, summary.score
    table.add_row(
        "all",
        str(summary.n_tasks),
        _percent(success.mean),
        _interval(success.ci95),
        _interval(success.bootstrap_ci95),
        _percent(score.mean),
        style="bold",
    )
    for category, block in summary.per_category.items():
        table.add_row(
            category,
            str(block.n_tasks),
            _percent(block.success.mean),
            _interval(block.success.ci95),
            _interval(block.success.bootstrap_ci95),
            _percent(block.score.mean),
        )
    console.print(table)
    method = success.ci95_method
    console.print(f"95% CI: {method}; bootstrap: 95% interval over tasks", highlight=False)
    passes = summary.pass_at_k
    if len(passes) > 1:  # with one seed pass@1 is the success rate above
        shown = ", ".join(f"pass@{k} {_percent(value)}" for k, value in passes.items())
        console.print(f"over seeds (unbiased estimator): {shown}", highlight=False)
    threshold = summary.threshold_95
    verdict = "every seed" if threshold is not None and threshold.all_seeds else "not every seed"
    console.print(
        f"95% threshold: {verdict} reaches 95% success; "
        f"mean steps {summary.mean_steps:.2f}, "
        f"invalid actions {_percent(summary.invalid_action_rate)}%"
    )
    non_string = summary.non_string_actions or 0
    if non_string:
        console.print(
            f"{non_string} action(s) were not text (the agent returned another type); "
            "each counted as an invalid action"
        )

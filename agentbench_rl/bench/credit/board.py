"""The estimators board: one row per built-in estimator and per submitted one, every figure
recomputed from the standard credit sets when the board is rendered.

A submission is a folder with the estimator's source and its card::

    estimator.py   defines the function (``(batch: StepBatch) -> one advantage per row``)
    card.json      {"name", "function", "authors", "url", "description"}

or, for an installed package, a card whose ``entry_point`` names the estimator (the
``agentbench_rl.estimators`` entry point group). ``leaderboard validate DIR`` reads the card
and scores the estimator on every standard set in a child process under the time and memory
limits of :mod:`.score` (a function that raises, returns the wrong length, NaN or infinity, or
runs past the limit is refused, naming the set); ``leaderboard submit DIR`` files it under
``leaderboards/estimators/<slug>/``; ``leaderboard render`` scores every row again and writes
``leaderboards/estimators/README.md``.
"""

from __future__ import annotations

import math
import re
import shutil
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agentbench_rl.bench.credit.bench import Report
from agentbench_rl.bench.credit.bench import run as run_credit
from agentbench_rl.bench.credit.runner import Candidate, estimate_all
from agentbench_rl.bench.credit.score import (
    CEILING,
    PERFECT_BASELINE,
    VARIANTS,
)
from agentbench_rl.bench.credit.sets import STANDARD_SETS, read_sets
from agentbench_rl.bench.credit.settings import CreditBench
from agentbench_rl.bench.truth import BOOTSTRAP, percentile_interval
from agentbench_rl.core.atomic import atomic_write_text
from agentbench_rl.core.jsonfile import read_json

CARD = "card.json"
SOURCE = "estimator.py"
BOARD_FOLDER = "estimators"
_CARD_KEYS = {"name", "function", "entry_point", "authors", "url", "description"}
#: The row groups of the board: the sets whose names start so.
ENV_PREFIXES = ("mdp", "sokoban", "textcraft", "webshop", "alfworld")


class EstimatorSubmissionError(ValueError):
    """A submission that cannot go on the board: one line naming the file and the problem."""


@dataclass(frozen=True)
class EstimatorCard:
    """What a submission says of itself."""

    name: str
    authors: str
    description: str
    url: str | None
    function: str | None  # in estimator.py
    entry_point: str | None  # an installed estimator


def read_card(folder: Path) -> EstimatorCard:
    """The card of a submission folder, checked; :class:`EstimatorSubmissionError` in one line."""
    path = Path(folder) / CARD
    if not path.is_file():
        raise EstimatorSubmissionError(f"{path}: no such file (an estimator submission's card)")
    try:
        card = read_json(path, str(path))
    except ValueError as problem:
        raise EstimatorSubmissionError(str(problem)) from None
    if not isinstance(card, dict):
        raise EstimatorSubmissionError(f"{path}: expected a JSON object")
    unknown = sorted(set(card) - _CARD_KEYS)
    if unknown:
        raise EstimatorSubmissionError(f"{path}: unknown key(s) {', '.join(unknown)}")
    for key in ("name", "authors", "description"):
        value = card.get(key)
        if not isinstance(value, str) or not value.strip() or len(value) > 200 or "\n" in value:
            raise EstimatorSubmissionError(f"{path}: '{key}' must be one line of text")
    if card["name"].strip().lower() in reserved_names():
        raise EstimatorSubmissionError(
            f"{path}: the name '{card['name']}' is a built-in estimator's or a reference row's"
        )
    function, entry = card.get("function"), card.get("entry_point")
    if (function is None) == (entry is None):
        raise EstimatorSubmissionError(f"{path}: give 'function' (in {SOURCE}) or 'entry_point'")
    for key, value in (("function", function), ("entry_point", entry)):
        if value is not None and (not isinstance(value, str) or not value.isidentifier()):
            raise EstimatorSubmissionError(f"{path}: '{key}' must be a Python name")
    if function is not None and not (Path(folder) / SOURCE).is_file():
        raise EstimatorSubmissionError(f"{Path(folder) / SOURCE}: no such file")
    url = card.get("url")
    if url is not None and not (isinstance(url, str) and re.match(r"^https?://\S+$", url)):
        raise EstimatorSubmissionError(f"{path}: 'url' must be an http(s) address or null")
    return EstimatorCard(card["name"], card["authors"], card["description"], url, function, entry)


def reserved_names() -> frozenset[str]:
    """The names no submission may take (lower-cased): the registered estimators, the scored
    variants and the reference rows."""
    from agentbench_rl.estimators import available

    return frozenset(n.lower() for n in (*available(), *VARIANTS, CEILING, PERFECT_BASELINE))


def submission_label(folder: Path) -> str:
    """The row key of a filed submission: its folder's name (unique on the board), never its
    card's name, which is only shown."""
    return f"submission:{Path(folder).name}"


def escaped(text: str) -> str:
    """A table cell's text, safe in Markdown and HTML: ``|`` cannot end the cell, and ``<``,
    ``>`` and ``&`` show as themselves.

    Example:
        >>> print(escaped("a | <b>"))
        a \\| &lt;b&gt;
    """
    text = " ".join(text.split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|")


@contextmanager
def importable(folder: Path) -> Iterator[None]:
    """The submission's folder on ``sys.path`` while it is scored (a child process started
    meanwhile inherits it)."""
    entry = str(Path(folder).resolve())
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        sys.path.remove(entry)
        sys.modules.pop("estimator", None)


def candidate_of(folder: Path, card: EstimatorCard) -> Candidate:
    """What the board scores for a submission (labelled by :func:`submission_label`)."""
    label = submission_label(folder)
    if card.entry_point is not None:
        return Candidate.parse(card.entry_point, label=label)
    return Candidate(label=label, function=f"python:estimator:{card.function}")


def validate_estimator(folder: Path, sets_root: Path = STANDARD_SETS) -> dict[str, float]:
    """Score a submission on every standard set (in a child, under the limits); the rows it
    scored by set name; :class:`EstimatorSubmissionError` naming the first problem."""
    card = read_card(folder)
    with importable(folder):
        found = estimate_all(candidate_of(folder, card), read_sets(sets_root))
    if found.problems:
        name, problem = next(iter(found.problems.items()))
        if "needs hidden states" not in problem:
            raise EstimatorSubmissionError(f"{folder}: on the set {name}: {problem}")
    return {name: len(values) for name, values in found.values.items()}  # rows scored


def submit_estimator(folder: Path, root: Path, sets_root: Path = STANDARD_SETS) -> Path:
    """Validate and file a submission under ``root/estimators/<slug>/`` (never overwriting)."""
    card = read_card(folder)
    validate_estimator(folder, sets_root)
    slug = re.sub(r"[^a-z0-9]+", "-", card.name.lower()).strip("-")[:40] or "estimator"
    target = Path(root) / BOARD_FOLDER / slug
    if target.exists():
        raise EstimatorSubmissionError(f"{target} exists: an estimator of that name is filed")
    target.mkdir(parents=True)
    for name in (CARD, SOURCE):
        if (Path(folder) / name).is_file():
            shutil.copy2(Path(folder) / name, target / name)
    return target


def submissions(root: Path) -> list[tuple[Path, EstimatorCard]]:
    """The filed submissions, by folder name."""
    board = Path(root) / BOARD_FOLDER
    return [
        (folder, read_card(folder))
        for folder in sorted(board.glob("*"))
        if folder.is_dir() and (folder / CARD).is_file()
    ]


def render_board(root: Path, sets_root: Path = STANDARD_SETS, out: Path | None = None) -> Path:
    """Score every built-in estimator and every filed submission under ``root`` on the standard
    sets and write ``estimators/README.md`` under ``out`` (default: ``root``); returns its
    path."""
    filed = submissions(root)
    bench = CreditBench(sets=sets_root, speed=False)
    report = run_credit(bench)
    for folder, card in filed:  # one at a time: each is a module called "estimator"
        with importable(folder):
            extra = run_credit(bench, candidates=[candidate_of(folder, card)])
        label = submission_label(folder)
        report.scores.extend(s for s in extra.scores if s.estimator == label)
        report.problems.update(extra.problems)
    path = Path(root if out is None else out) / BOARD_FOLDER / "README.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    shown = {submission_label(folder): (folder, card) for folder, card in filed}
    atomic_write_text(path, board_markdown(report, shown))
    return path


def _group_scores(report: Report, estimator: str, prefix: str) -> list[float]:
    """The estimator's Pearson correlation on each set of the group it is scored on."""
    values = []
    for credit in report.sets:
        if not credit.name.startswith(prefix):
            continue
        entry = report.find(estimator, credit.name)
        if entry is not None:
            value = entry.parts["all"]["pearson"]["value"]
            if not math.isnan(value):
                values.append(value)
    return values


def _dose_cell(report: Report, estimator: str, prefixes: Sequence[str]) -> str:
    """The estimator's mean dose / effective sample share over the sets of ``prefixes`` (the
    real envs'), '–' where it has none (a label without advantages of its own)."""
    found = [
        (entry.dose, entry.effective)
        for credit in report.sets
        if credit.name.startswith(tuple(prefixes))
        for entry in [report.find(estimator, credit.name)]
        if entry is not None and entry.dose is not None and entry.effective is not None
    ]
    if not found:
        return "–"
    doses, shares = zip(*found, strict=True)
    return f"{np.mean(doses):.2f} / {np.mean(shares):.2f}"


def _cell(values: Sequence[float], of: int) -> str:
    """A group's mean, with the count of its sets where the row is scored on fewer.

    Example:
        >>> _cell([0.5, 0.25], 2), _cell([0.57], 4), _cell([], 3)
        ('0.38', '0.57 (1 of 4)', '–')
    """
    if not values:
        return "–"
    shown = f"{np.mean(values):.2f}"
    return shown if len(values) == of else f"{shown} ({len(values)} of {of})"


def _real_env_draws(report: Report, estimator: str, real_envs: Sequence[str]) -> np.ndarray:
    """The row's real-env mean (the rank's figure) on each bootstrap resample: each set's
    Pearson on its resample (its point value on a set too small for resamples), averaged as
    the rank averages. Every row of a set is scored on the same resamples, so two rows' draws
    pair."""
    means = []
    for prefix in real_envs:
        draws = [
            entry.draws if entry.draws is not None else np.full(BOOTSTRAP, entry.pearson)
            for credit in report.sets
            if credit.name.startswith(prefix)
            for entry in [report.find(estimator, credit.name)]
            if entry is not None
        ]
        if draws:
            means.append(np.mean(draws, axis=0))
    return np.mean(means, axis=0) if means else np.full(BOOTSTRAP, math.nan)


def board_markdown(report: Report, filed: dict[str, tuple[Path, EstimatorCard]]) -> str:
    """The board: an estimator per row, its mean Pearson correlation with the truth on each
    group of sets, ranked by the mean of its real envs' means; a row scored on fewer sets
    (BiPACE where a set has no hidden states) ranks after every row scored on more, whatever its
    mean, since a mean over other sets (the few with a model's hidden states) is not comparable
    with the rest's. A row whose real-env mean the bootstrap does not tell from the row above
    (the paired 95% interval of the difference holds 0) shares its rank: a tie."""
    groups = [p for p in ENV_PREFIXES if any(s.name.startswith(p) for s in report.sets)]
    sizes = {p: sum(s.name.startswith(p) for s in report.sets) for p in groups}
    real_envs = [p for p in groups if p != "mdp"]
    rows = []
    for estimator in report.estimators():
        if estimator.startswith("ceiling"):
            continue
        scores = {prefix: _group_scores(report, estimator, prefix) for prefix in groups}
        env_means = [float(np.mean(scores[p])) for p in real_envs if scores[p]]
        real = float(np.mean(env_means)) if env_means else math.nan
        rows.append((estimator, scores, real, sum(map(len, scores.values()))))
    rows.sort(key=lambda row: (-row[3], -row[2] if not math.isnan(row[2]) else 0.0))
    lines = [
        "# Estimators board",
        "",
        "Generated by `agentbench-rl leaderboard render`: every figure is recomputed from the "
        "standard credit sets (`agentbench_rl/bench/credit/standard/`: the learning testbed's "
        "eight MDPs with exact truth, and Monte-Carlo truth on Sokoban, TextCraft, WebShop and "
        "ALFWorld) each time the board is rendered; do not edit by hand. Cells: the mean "
        "Pearson correlation with the true advantage over each group's sets (each set's "
        "figure, with its 95% interval over tasks, is in `agentbench-rl bench credit`'s card). "
        f"`{PERFECT_BASELINE}` is a label, not an estimator: the step's own discounted return "
        "minus the true value of its prefix. Submit an estimator with `agentbench-rl "
        "leaderboard submit DIR` (a folder with `estimator.py` and `card.json`; see "
        "docs/leaderboards.md). Rank: the mean of a row's real-env means; a row scored on "
        "fewer sets (the count shown where a group lacks some) ranks after every row scored "
        "on more. Dose: over the real envs' sets, the mean share of rows the estimator gives a "
        "non-zero advantage / the mean effective sample size of its |A| weights, (Σ|A|)² / "
        "(n·ΣA²), as a share of the rows (per set in `bench credit`'s card): credit rules that "
        "train different numbers of rows are not compared like for like (arXiv 2608.19760). "
        "Above: the row above's real-env mean minus this row's, with its 95% interval "
        "(bootstrap over each set's tasks, paired: the same resamples for every row); a row "
        "the interval does not tell from the row above shares its rank (=). `grpo` "
        "normalises over its group's rows (the GiGPO code's choice), "
        "`grpo:episode_stats=trajectories` over its trajectories (textbook GRPO); the "
        "perfect baseline is noise-fair (`bench credit`'s card says how). A higher rank here "
        "is truer credit, not shown to be faster learning: across the estimators, fidelity on "
        "the real envs' DRRN sets against the paired learning gains of their campaigns is "
        "measured by `bench credit --campaigns` (the reading, with its interval: "
        "docs/benchmarks.md, 'Learning on the real envs').",
        "",
        "| rank | estimator | source | " + " | ".join(groups) + " | real envs | above | dose |",
        "|---" * (len(groups) + 6) + "|",
    ]
    total = sum(sizes.values())
    shown_rank, previous = 0, None
    for place, (estimator, scores, real, covered) in enumerate(rows, start=1):
        draws = _real_env_draws(report, estimator, real_envs)
        above, tied = "–", False
        if previous is not None and previous[1] == covered:
            difference = previous[2] - real
            low, high = percentile_interval(previous[0] - draws)
            above = f"{difference:+.3f} [{low:+.3f}, {high:+.3f}]"
            tied = low <= 0 <= high
        shown_rank = shown_rank if tied else place
        rank = f"{shown_rank}=" if tied else str(shown_rank)
        previous = (draws, covered, real)
        shown_name = escaped(estimator)
        if estimator in filed:
            folder, card = filed[estimator]
            source, shown_name = f"[submission]({folder.name}/)", escaped(card.name)
        elif estimator == PERFECT_BASELINE:
            source = "label"
        else:
            source = "built-in"
        cells = [_cell(scores[p], sizes[p]) for p in groups]
        shown = "–" if math.isnan(real) else f"{real:.2f}"
        if 0 < covered < total:
            shown += f" ({covered} of {total} sets)"
        dose_cell = _dose_cell(report, estimator, real_envs)
        lines.append(
            f"| {rank} | {shown_name} | {source} | "
            + " | ".join(cells)
            + f" | {shown} | {above} | {dose_cell} |"
        )
    return "\n".join(lines) + "\n"

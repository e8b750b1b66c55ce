"""The plots of a board, as PNG bytes that depend only on the board.

Each plot is drawn on its own ``Figure`` with the Agg canvas (no pyplot state), under matplotlib's
default style plus fixed settings (font, size, dpi), whatever the user's matplotlibrc says; the PNG
carries no software tag or timestamp. The same board therefore gives byte-identical files with the
same matplotlib. Names are drawn as plain text (no mathtext), so a ``$`` in a name is harmless.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from agentbench_rl.extras import install_hint
from agentbench_rl.leaderboard.board import Board

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 100
WIDTH_INCHES = 5.8
THRESHOLD_PERCENT = 95.0
_FIXED_STYLE: dict[Any, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 9.0,
    "text.parse_math": False,
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
}
#: matplotlib's tab10, fixed here so a style change upstream cannot recolour the boards.
COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
_LABEL_LENGTH = 32


def _label(name: str) -> str:
    """A name cut to :data:`_LABEL_LENGTH` in the middle: run names share their heads (the sweep
    and cell) and differ at the end (estimator, seed), so the end is kept.

    Example:
        >>> _label("sokoban-tiny-cpu-campaign-gated_bepo seed 3")
        'sokoban-ti…ign-gated_bepo seed 3'
    """
    if len(name) <= _LABEL_LENGTH:
        return name
    head = _LABEL_LENGTH // 3
    return name[:head] + "…" + name[-(_LABEL_LENGTH - head - 1) :]


@contextmanager
def _fixed_style() -> Iterator[None]:
    try:
        import matplotlib
        from matplotlib import style
    except ImportError:
        raise ValueError(f"rendering the boards needs matplotlib: {install_hint('plot')}") from None
    with style.context("default"), matplotlib.rc_context(_FIXED_STYLE):
        yield


def _figure(height_inches: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(WIDTH_INCHES, height_inches), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def success_plot(board: Board) -> bytes:
    """Success (%) of each entry with its 95% interval as error bars, best at the top."""
    with _fixed_style():
        entries = board.entries
        figure = _figure(1.2 + 0.32 * len(entries))
        axes = figure.add_subplot()
        positions = list(range(len(entries)))[::-1]
        means = [100 * entry.success for entry in entries]
        below = [100 * (entry.success - entry.ci95[0]) for entry in entries]
        above = [100 * (entry.ci95[1] - entry.success) for entry in entries]
        axes.errorbar(
            means,
            positions,
            xerr=[below, above],
            fmt="o",
            color=COLOURS[0],
            ecolor="#333333",
            capsize=3,
        )
        # a deterministic agent scores the same on every seed: its interval has no width, which
        # the error bar alone cannot show, so it gets its own marker and a legend line
        exact = [i for i, entry in enumerate(entries) if entry.ci95[0] == entry.ci95[1]]
        if exact:
            axes.plot(
                [means[i] for i in exact],
                [positions[i] for i in exact],
                linestyle="none",
                marker="D",
                markersize=7,
                markerfacecolor="white",
                markeredgecolor=COLOURS[0],
                label="zero-width interval (the same success on every seed)",
            )
            axes.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.04), frameon=False)
        axes.set_yticks(positions, [_label(entry.metadata.name) for entry in entries])
        lows = [100 * entry.ci95[0] for entry in entries]
        highs = [100 * entry.ci95[1] for entry in entries]
        axes.set_xlim(min([0.0, *lows]) - 2, max([100.0, *highs]) + 2)
        axes.set_ylim(-0.6, len(entries) - 0.4)
        axes.axvline(THRESHOLD_PERCENT, color="#999999", linestyle=":", linewidth=1)
        axes.set_xlabel("success (%), 95% interval")
        axes.set_title(f"{board.env} / {board.split}: success")
        axes.grid(axis="x", color="#dddddd", linewidth=0.6)
        return _png(figure)


def category_plot(board: Board) -> bytes | None:
    """Success (%) per category, one bar per entry in rank order (the entries trained here have
    their own plot, :func:`trained_plot`); ``None`` when no other entry is on the board."""
    entries = board.submitted
    if not entries:
        return None
    with _fixed_style():
        categories = board.categories
        figure = _figure(3.0 + (1.2 if max(map(len, categories)) > 12 else 0.0))
        axes = figure.add_subplot()
        width = 0.8 / len(entries)
        for index, entry in enumerate(entries):
            offsets = [c - 0.4 + width * (index + 0.5) for c in range(len(categories))]
            heights = [100 * entry.per_category.get(category, 0.0) for category in categories]
            axes.bar(
                offsets,
                heights,
                width=width,
                color=COLOURS[index % len(COLOURS)],
                label=_label(entry.metadata.name),
            )
        # long category names (ALFWorld's run to 30 characters) slant instead of overlapping
        slanted = max(len(category) for category in categories) * len(categories) > 60
        axes.set_xticks(
            range(len(categories)),
            categories,
            rotation=30 if slanted else 0,
            ha="right" if slanted else "center",
            rotation_mode="anchor",
        )
        axes.set_ylim(0, 105)
        axes.set_ylabel("success (%)")
        axes.set_title(f"{board.env} / {board.split}: success per category")
        axes.grid(axis="y", color="#dddddd", linewidth=0.6)
        axes.set_axisbelow(True)
        axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        return _png(figure)


def curves_plot(board: Board) -> bytes | None:
    """Validation success over training iterations, one panel per entry with curves (else None;
    the entries trained here are drawn together by :func:`trained_plot`).

    Each seed is a line; the dashed line is the 95% threshold and the dotted one the budget.
    """
    entries = [entry for entry in board.submitted if entry.curves]
    if not entries:
        return None
    from matplotlib.ticker import MaxNLocator

    with _fixed_style():
        figure = _figure(0.4 + 2.4 * len(entries))
        panels = figure.subplots(len(entries), 1, squeeze=False)[:, 0]
        for axes, entry in zip(panels, entries, strict=True):
            assert entry.curves is not None and entry.metadata.training is not None
            for index, (seed, curve) in enumerate(sorted(entry.curves.items())):
                iterations = sorted(curve)
                axes.plot(
                    iterations,
                    [100 * curve[iteration] for iteration in iterations],
                    marker="o",
                    markersize=3,
                    color=COLOURS[index % len(COLOURS)],
                    label=f"seed {seed}",
                )
            axes.axhline(THRESHOLD_PERCENT, color="#999999", linestyle="--", linewidth=1)
            axes.axvline(entry.metadata.training.iterations, color="#999999", linestyle=":")
            axes.set_ylim(0, 105)
            axes.set_ylabel("val success (%)")
            axes.set_title(_label(entry.metadata.name))
            axes.grid(color="#eeeeee", linewidth=0.6)
            axes.legend(fontsize=8, loc="lower right")
            axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        panels[-1].set_xlabel("training iteration")
        return _png(figure)


def trained_plot(board: Board) -> bytes | None:
    """The validation curves of the runs trained here, one colour per estimator: a thin line per
    run, a thick one for the mean over the runs at each iteration (``None`` without such runs)."""
    by_estimator: dict[str, list[dict[int, float]]] = {}
    for entry in board.trained_here:
        for curve in (entry.curves or {}).values():
            by_estimator.setdefault(entry.metadata.estimator or "", []).append(curve)
    if not by_estimator:
        return None
    from matplotlib.ticker import MaxNLocator

    with _fixed_style():
        figure = _figure(3.6)
        axes = figure.add_subplot()
        for index, estimator in enumerate(sorted(by_estimator)):
            colour = COLOURS[index % len(COLOURS)]
            curves = by_estimator[estimator]
            for curve in curves:
                iterations = sorted(curve)
                values = [100 * curve[i] for i in iterations]
                axes.plot(iterations, values, color=colour, linewidth=0.7, alpha=0.4)
            points = sorted({i for curve in curves for i in curve})
            means = [
                100 * sum(c[i] for c in curves if i in c) / sum(i in c for c in curves)
                for i in points
            ]
            label = f"{_label(estimator)} ({len(curves)} run{'s' * (len(curves) > 1)})"
            axes.plot(points, means, color=colour, linewidth=2.0, label=label)
        axes.axhline(THRESHOLD_PERCENT, color="#999999", linestyle="--", linewidth=1)
        axes.set_ylim(0, 105)
        axes.set_xlabel("training iteration")
        axes.set_ylabel("val success (%)")
        axes.set_title(f"{board.env} / {board.split}: trained here, validation during training")
        axes.grid(color="#eeeeee", linewidth=0.6)
        axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        return _png(figure)

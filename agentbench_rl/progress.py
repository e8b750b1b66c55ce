"""Progress of long work: a live bar on a terminal, plain lines in a log file.

Rich's bar redraws one line in place, which a log file (``eval ... 2> log``, a batch job, ``nohup``)
receives as nothing until the end. :func:`progress_display` gives the bar on a terminal and, when
the output is not one, a :class:`LineProgress` with the same calls that writes one plain line each
time a task moves on by its ``every`` (each iteration of a training run, a twentieth of an
evaluation's episodes), with the elapsed time and an estimate of what is left.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TimeRemainingColumn

#: The width of a console that is not a terminal: wide enough that tables are never cut.
LOG_WIDTH = 250


def console_for(stderr: bool = False) -> Console:
    """A console for the command line: a terminal's own width, else :data:`LOG_WIDTH` (rich
    would cut a table at 80 columns in a file)."""
    made = Console(stderr=stderr)
    return made if made.is_terminal else Console(stderr=stderr, width=LOG_WIDTH)


def duration(seconds: float) -> str:
    """Seconds as a short duration.

    Example:
        >>> duration(5.2), duration(125), duration(7300)
        ('5 s', '2 min 5 s', '2 h 1 min')
    """
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


@dataclass
class _Task:
    description: str
    total: float | None
    completed: float
    every: float | None
    started: float = field(default_factory=time.monotonic)
    start_completed: float = 0.0
    reported: float = 0.0


class LineProgress:
    """Rich's ``Progress`` calls (``add_task``, ``update``, ``advance``, ``remove_task``) as plain
    lines, for output that is not a terminal.

    Example:
        >>> import io
        >>> out = io.StringIO()
        >>> with LineProgress(Console(file=out, width=120)) as progress:
        ...     task = progress.add_task("train", total=2, every=1)
        ...     progress.update(task, completed=1)
        ...     progress.update(task, completed=2)
        >>> [line.split(",")[0] for line in out.getvalue().splitlines()]
        ['train: 1/2 (50%)', 'train: 2/2 (100%)']
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self._tasks: dict[TaskID, _Task] = {}

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._tasks.clear()

    def add_task(
        self,
        description: str,
        total: float | None = None,
        completed: float = 0,
        every: float | None = None,
        **fields: Any,
    ) -> TaskID:
        """Start a task; a line is written each time it moves on by ``every`` (default: a
        twentieth of ``total``) and when it completes."""
        number = TaskID(len(self._tasks))
        self._tasks[number] = _Task(description, total, completed, every)
        self._tasks[number].start_completed = self._tasks[number].reported = completed
        return number

    def update(
        self,
        task: TaskID,
        *,
        completed: float | None = None,
        total: float | None = None,
        advance: float | None = None,
        description: str | None = None,
        **fields: Any,
    ) -> None:
        """Move a task on (as rich's ``update``) and write a line when it is due."""
        state = self._tasks[task]
        if total is not None:
            state.total = total
        if description is not None:
            state.description = description
        if advance is not None:
            state.completed += advance
        if completed is not None:
            state.completed = completed
        step = state.every or max(1.0, (state.total or 20) / 20)
        due = state.completed - state.reported >= step or state.completed == state.total
        if due and state.completed != state.reported:
            self._write(state)
            state.reported = state.completed

    def advance(self, task: TaskID, advance: float = 1) -> None:
        """Move a task on by ``advance``."""
        self.update(task, advance=advance)

    def remove_task(self, task: TaskID) -> None:
        """Forget a task."""
        self._tasks.pop(task, None)

    def _write(self, state: _Task) -> None:
        elapsed = time.monotonic() - state.started
        done = state.completed - state.start_completed
        parts = [f"{state.description}: {state.completed:g}"]
        if state.total:
            parts[0] += f"/{state.total:g} ({100 * state.completed / state.total:.0f}%)"
        parts.append(f"{duration(elapsed)} elapsed")
        if state.total and done > 0 and state.completed < state.total:
            left = elapsed / done * (state.total - state.completed)
            parts.append(f"ETA {duration(left)}")
        # descriptions are rich markup, as rich's bar takes them (callers escape user text)
        self.console.print(", ".join(parts), highlight=False, soft_wrap=True)


def progress_display(console: Console | None) -> Progress | LineProgress:
    """A live bar on a terminal, :class:`LineProgress` on other output, nothing for ``None``."""
    if console is not None and not console.is_terminal:
        return LineProgress(console)
    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console or Console(stderr=True),
        disable=console is None,
    )

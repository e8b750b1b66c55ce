"""Records that one module writes and another reads, declared once: the harness writes an
:class:`EvaluationSummary` as ``summary.json``, and the leaderboard's validator reads its run
fields by this declaration (the figures between them are ``harness.stats.summarize``'s, which
the validator recomputes from the episodes).

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

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict


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

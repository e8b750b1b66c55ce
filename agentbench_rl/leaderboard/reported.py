"""Numbers that papers report, shown on the boards apart from validated rows as "reported".

They live in ``reported.json`` beside this module (package data). Nothing here is recomputed: a
paper ran its own setup (its own splits, prompts, step limits), so a reported row is a pointer to
a claim, never a rank among validated submissions.

Example:
    >>> rows = load_reported().rows_for("alfworld")
    >>> [(row.method_label, row.success) for row in rows if row.model == "Qwen2.5-7B-Instruct"][:3]
    [('GRAFT', 98.4), ('HiPER', 97.4), ('BiPACE_Q', 97.1)]
"""

from __future__ import annotations

from importlib import resources
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

REPORTED_FILE = "reported.json"
Percent = Annotated[float, Field(ge=0.0, le=100.0)]


class Paper(BaseModel):
    """A paper reported rows come from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str = Field(min_length=1, description="How the boards cite it, e.g. 'Feng et al. 2025'.")
    title: str | None
    url: str | None

    @property
    def named(self) -> bool:
        """Whether the paper is identified (a title and a link); the boards mark it otherwise."""
        return bool(self.title and self.url)


class ReportedRow(BaseModel):
    """One number a paper reports (percent, as papers print them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    env: str = Field(min_length=1, description="The env short name whose board shows the row.")
    paper: str = Field(description="Key into the file's papers.")
    attribution: Literal["stated", "inferred"] = Field(
        description="'stated' where the source names the paper, 'inferred' where it was deduced."
    )
    table: str | None = Field(description="The paper's table, where known.")
    model: str = Field(min_length=1)
    method: str = Field(min_length=1, description="The method as the paper names it.")
    estimator: str = Field(min_length=1, description="Our estimator name for the method.")
    variant: str | None = Field(
        min_length=1,
        description="The paper's variant of the method, shown in brackets after it, e.g. "
        "'w/ std' (with std normalisation); null for the method as named.",
    )
    setting: str = Field(min_length=1, description="What was measured, in the paper's words.")
    success: Percent | None = Field(description="Success; null where only the score is known.")
    success_std: Percent | None
    score: Percent | None
    tags: tuple[str, ...] = Field(
        default=(),
        description="What sets the method apart from the critic-free group estimators, e.g. "
        "'critic-based', 'hierarchical' (shown as badges).",
    )
    note: str | None = Field(
        default=None, min_length=1, description="A caveat the board shows beside the row."
    )

    @model_validator(mode="after")
    def _has_a_number(self) -> ReportedRow:
        if self.success is None and self.score is None:
            raise ValueError(f"{self.method} on {self.env}: neither success nor score")
        return self

    @property
    def method_label(self) -> str:
        """The method with its variant, e.g. ``GiGPO (w/o std)``."""
        return self.method if self.variant is None else f"{self.method} ({self.variant})"


class ReportedNumbers(BaseModel):
    """The whole data file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    about: str
    papers: dict[str, Paper]
    rows: list[ReportedRow]

    @model_validator(mode="after")
    def _papers_known(self) -> ReportedNumbers:
        for index, row in enumerate(self.rows):
            if row.paper not in self.papers:
                raise ValueError(f"rows.{index}: unknown paper '{row.paper}'")
        return self

    def envs(self) -> list[str]:
        """Envs with reported rows, sorted."""
        return sorted({row.env for row in self.rows})

    def rows_for(self, env: str) -> list[ReportedRow]:
        """The rows of one env in a fixed order: model, then success (best first), then method."""
        rows = [row for row in self.rows if row.env == env]

        def best_first(row: ReportedRow) -> tuple[str, bool, float, str, str]:
            known = row.success is not None
            return (row.model, not known, -(row.success or 0.0), row.method_label, row.paper)

        return sorted(rows, key=best_first)


def load_reported() -> ReportedNumbers:
    """Read the reported numbers shipped with the package."""
    text = resources.files("agentbench_rl.leaderboard").joinpath(REPORTED_FILE).read_text("utf-8")
    return ReportedNumbers.model_validate_json(text)

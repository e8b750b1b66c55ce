"""The metadata file of a submission (``metadata.json``): who and what produced the results.

Every field is required (``null`` where it does not apply, e.g. no estimator for an untrained
agent), unknown fields are refused, and types are strict (``"3"`` is not a number), so a typo never
slips onto a board. The one optional field, ``training_run``, came later (submissions filed before
it lack it): it names the training run of this package's trainer that produced the evaluated
weights, and such submissions are shown in the boards' "Trained here" section.

Example:
    >>> metadata = SubmissionMetadata.model_validate(
    ...     {
    ...         "name": "Qwen2.5-1.5B GiGPO",
    ...         "estimator": "gigpo",
    ...         "training": {"iterations": 150, "rollouts": 153600},
    ...         "parameters": 1_543_714_304,
    ...         "seeds": [0, 1, 2],
    ...         "code_version": "my-trainer@4f2a9c1",
    ...         "contact": "someone@example.org",
    ...         "url": "https://example.org/paper",
    ...     }
    ... )
    >>> metadata.training.iterations
    150
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agentbench_rl.core.jsonfile import read_json
from agentbench_rl.spec.typed import MAX_SEED

METADATA_FILE = "metadata.json"
#: Start of the placeholder values ``leaderboard init`` writes; validation refuses them.
FILL_IN = "FILL IN"
#: Bounds of the numbers a board shows: far beyond any real run, small enough that every one
#: renders (10**400 parameters would overflow the float a count is shown as).
MAX_PARAMETERS = 10**15
MAX_ITERATIONS = 10**9
MAX_ROLLOUTS = 10**15
MAX_SEEDS = 10_000

#: One line of printable text (no control characters, so it cannot break a table row).
_LINE = r"^[^\x00-\x1f\x7f]+$"
Line = Annotated[str, Field(min_length=1, max_length=200, pattern=_LINE)]
Rate = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
Url = Annotated[str, Field(max_length=500, pattern=r"^https?://[^\s<>\"'()|\\`\x00-\x1f]+$")]


class TrainingBudget(BaseModel):
    """What training cost: policy-update iterations and trajectories sampled in all."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    iterations: int = Field(ge=0, le=MAX_ITERATIONS, description="Policy-update iterations.")
    rollouts: int = Field(
        ge=0, le=MAX_ROLLOUTS, description="Trajectories sampled over the whole training run."
    )


class TrainingRun(BaseModel):
    """The training run whose final checkpoint was evaluated (``agentbench-rl leaderboard
    file-runs``): the sweep cell and seed, the run's config, the weights and the code.

    ``weights`` is :func:`~agentbench_rl.core.hashing.weights_fingerprint` of the evaluated
    folder; validation checks it against the fingerprint ``summary.json`` recorded when the
    episodes were played. ``val_success`` is the run's own final validation as the trainer
    recorded it, ``val_success_harness`` the same validation replayed through the harness from
    the checkpoint when the submission was filed (they agree when evaluation plays the policy
    exactly as the trainer validated it).
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    sweep: Line = Field(description="The sweep file the run belongs to, as given when filing.")
    overrides: list[Line] = Field(
        max_length=100, description="Config overrides given with the sweep (key=value)."
    )
    cell: Line = Field(description="The sweep cell (the run folder's parent).")
    seed: int = Field(ge=0, le=MAX_SEED, description="The training seed.")
    config_sha256: str = Field(
        pattern=r"^[0-9a-f]{64}$", description="sha256 of the run's config.yaml bytes."
    )
    iterations: int = Field(ge=0, le=MAX_ITERATIONS, description="Iteration of the checkpoint.")
    weights: str = Field(pattern=r"^[0-9a-f]{16}$", description="Weights fingerprint.")
    git_commit: str | None = Field(
        pattern=r"^([0-9a-f]{40}|[0-9a-f]{64})$",
        description="The package commit the checkpoint was trained with; null if unknown.",
    )
    git_dirty: bool | None = Field(description="Whether that tree had uncommitted changes.")
    val_success: Rate = Field(description="The run's final validation success (trainer).")
    val_success_harness: Rate = Field(description="The same validation replayed by the harness.")


class SubmissionMetadata(BaseModel):
    """``metadata.json`` of a submission."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: Annotated[str, Field(min_length=1, max_length=80, pattern=_LINE)] = Field(
        description="Agent or model name shown on the board."
    )
    estimator: Line | None = Field(
        description="Advantage estimator used in training (grpo, gigpo, ...); null if untrained."
    )
    training: TrainingBudget | None = Field(description="Training budget; null if untrained.")
    parameters: Annotated[int, Field(ge=0, le=MAX_PARAMETERS)] | None = Field(
        description="Number of model parameters; null for agents that are not a model."
    )
    seeds: list[Annotated[int, Field(ge=0, le=MAX_SEED)]] = Field(
        min_length=1,
        max_length=MAX_SEEDS,
        description="The evaluation seeds; the episodes must hold exactly these.",
    )
    code_version: Line = Field(description="Version or commit of the code that produced the run.")
    contact: Line = Field(description="Who answers questions about the submission.")
    url: Url | None = Field(description="Paper, model card or code; null if none.")
    training_run: TrainingRun | None = Field(
        default=None, description="The training run of this package that gave the weights."
    )

    @model_validator(mode="after")
    def _completed(self) -> SubmissionMetadata:
        for name in ("name", "estimator", "code_version", "contact"):
            value = getattr(self, name)
            if isinstance(value, str) and value.startswith(FILL_IN):
                raise ValueError(f"field '{name}' still holds the placeholder: {value}")
        if self.training_run is not None and (self.training is None or self.estimator is None):
            raise ValueError("a training_run needs the estimator and the training budget")
        return self

    @field_validator("seeds")
    @classmethod
    def _seeds_unique(cls, seeds: list[int]) -> list[int]:
        repeated = sorted(seed for seed, times in Counter(seeds).items() if times > 1)
        if repeated:
            raise ValueError(f"seeds repeat: {repeated}")
        return seeds


def seed_list(seeds: Sequence[int]) -> str:
    """Seeds for a message, sorted: ``0, 1, 2`` (``none`` when empty).

    Example:
        >>> seed_list([2, 0, 1])
        '0, 1, 2'
    """
    return ", ".join(str(seed) for seed in sorted(seeds)) or "none"


def describe_validation_error(error: ValidationError, file_name: str = METADATA_FILE) -> str:
    """One line naming the first problem pydantic found (fields are checked in schema order).

    Example:
        >>> try:
        ...     TrainingBudget.model_validate({"iterations": 3})
        ... except ValidationError as error:
        ...     describe_validation_error(error)
        "metadata.json: field 'rollouts' is missing"
    """
    first = error.errors()[0]
    location = ".".join(str(part) for part in first["loc"])
    if not location:  # a rule over several fields (model validator)
        return f"{file_name}: {first['msg'].removeprefix('Value error, ')}"
    if first["type"] == "missing":
        return f"{file_name}: field '{location}' is missing"
    if first["type"] == "extra_forbidden":
        return f"{file_name}: unknown field '{location}'"
    if first["type"] == "string_pattern_mismatch":
        rule = "an http:// or https:// URL" if location == "url" else "one line of printable text"
        return f"{file_name}: field '{location}' must be {rule}"
    return f"{file_name}: field '{location}': {first['msg']}"


def load_metadata(path: Path) -> SubmissionMetadata:
    """Read and check ``metadata.json``; ``ValueError`` names the first problem."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise ValueError(f"{Path(path).name} must hold a JSON object")
    try:
        return SubmissionMetadata.model_validate(data)
    except ValidationError as error:
        raise ValueError(describe_validation_error(error, Path(path).name)) from None


def metadata_template(summary: dict[str, Any]) -> dict[str, Any]:
    """A ``metadata.json`` for an eval's ``summary.json``: what the run says, placeholders for
    what only the user knows (``FILL IN: ...``, refused by validation until replaced).

    Example:
        >>> template = metadata_template({"agent": "expert", "seeds": [0, 1],
        ...                               "package_version": "0.1.0", "git_commit": None})
        >>> template["name"], template["seeds"], template["code_version"]
        ('expert', [0, 1], 'agentbench-rl 0.1.0')
    """
    commit = summary.get("git_commit")
    version = f"agentbench-rl {summary.get('package_version')}"
    return {
        "name": str(summary["agent"])[:80],
        "estimator": None,
        "training": None,
        "parameters": None,
        "seeds": sorted(summary["seeds"]),
        "code_version": f"{version}@{commit[:12]}" if commit else version,
        "contact": f"{FILL_IN}: who answers questions about this submission",
        "url": None,
    }


@dataclass(frozen=True)
class Drafted:
    """What :func:`draft_metadata` wrote: the file, the fields left for the user to fill in,
    and whether the run is a sample (``eval --limit``), which no board takes."""

    path: Path
    to_fill: list[str]
    sample: bool


def draft_metadata(folder: Path, given: dict[str, str | None]) -> Drafted:
    """Write ``FOLDER/metadata.json`` from the eval run there (:func:`metadata_template`), with
    the ``given`` fields (``name``, ``contact``, ``url``; ``None``: the template's); one-line
    ``ValueError`` where the file exists or the folder holds no eval summary."""
    from agentbench_rl.core.atomic import atomic_write_text
    from agentbench_rl.spec.results_folder import ResultsFolder

    target = folder / METADATA_FILE
    if target.exists():
        raise ValueError(f"{target} exists already; edit it instead")
    summary_file = ResultsFolder(folder).summary_file
    summary = read_json(summary_file)
    if not isinstance(summary, dict) or "agent" not in summary or "seeds" not in summary:
        raise ValueError(f"{summary_file} is not an eval summary")
    metadata = metadata_template(summary)
    metadata |= {key: value for key, value in given.items() if value is not None}
    atomic_write_text(target, json.dumps(metadata, indent=1) + "\n")
    to_fill = [key for key, value in metadata.items() if str(value).startswith(FILL_IN)]
    return Drafted(target, to_fill, sample=summary.get("complete_split") is False)

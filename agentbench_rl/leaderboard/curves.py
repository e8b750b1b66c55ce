"""Training curves a submission may carry: validation success per iteration, per seed.

Two forms, one per submission:

- ``curves.json``: ``{"<seed>": {"<iteration>": success, ...}, ...}``;
- ``curves/seed-<N>/metrics.jsonl``: the trainer's own ``metrics.jsonl`` of seed N, copied as it
  is; every line is a JSON object with an integer ``iteration``, and the lines of validation
  iterations also carry ``val_success`` (the other lines are training metrics and are skipped).

Curves cannot be recomputed from the episodes, so they are checked for form only: the seeds are
the declared ones, iterations are whole numbers within the declared training budget, each
validation iteration appears once and every success is a number in [0, 1].
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from agentbench_rl.core.jsonfile import json_lines, read_json
from agentbench_rl.leaderboard.schema import SubmissionMetadata, seed_list
from agentbench_rl.spec.run_folder import METRICS_FILE

CURVES_FILE = "curves.json"
CURVES_DIR = "curves"
# ASCII digits only (int() would also read other scripts' digits), at most 12 of them.
_SEED_DIR = re.compile(r"seed-(0|[1-9][0-9]{0,11})")
_WHOLE = re.compile(r"0|[1-9][0-9]{0,11}")

#: Per seed, validation iteration -> success rate (the input of ``threshold_crossing``).
Curves = dict[int, dict[int, float]]


def curve_files(folder: Path) -> list[Path]:
    """The curve files present in a submission folder (empty when it carries none), sorted."""
    folder = Path(folder)
    files = [folder / CURVES_FILE] if (folder / CURVES_FILE).is_file() else []
    if (folder / CURVES_DIR).is_dir():
        files += sorted((folder / CURVES_DIR).glob(f"seed-*/{METRICS_FILE}"))
    return files


def _success(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{where}: success {value!r} is not a number")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{where}: success {value!r} is outside [0, 1]")
    return float(value)


def _read_curves_json(path: Path) -> Curves:
    data = read_json(path)
    if not isinstance(data, dict):
        raise ValueError(f"{CURVES_FILE} must hold an object: seed -> {{iteration: success}}")
    curves: Curves = {}
    for seed_key, curve in data.items():
        if not _WHOLE.fullmatch(seed_key):
            raise ValueError(f"{CURVES_FILE}: seed '{seed_key}' is not a whole number")
        if not isinstance(curve, dict):
            raise ValueError(f"{CURVES_FILE}: seed {seed_key} must map iteration -> success")
        points: dict[int, float] = {}
        for iteration_key, value in curve.items():
            if not _WHOLE.fullmatch(iteration_key):
                raise ValueError(
                    f"{CURVES_FILE}: seed {seed_key}: iteration '{iteration_key}' "
                    "is not a whole number"
                )
            where = f"{CURVES_FILE}: seed {seed_key}, iteration {iteration_key}"
            iteration = int(iteration_key)
            if iteration in points:
                raise ValueError(f"{where} appears twice")
            points[iteration] = _success(value, where)
        curves[int(seed_key)] = points
    return curves


def _read_metrics_jsonl(path: Path, name: str) -> dict[int, float]:
    # Not the run folder's journal reader (spec/run_folder.py): a submission may carry the
    # validation rows of its own trainer only, so iterations may skip here.
    points: dict[int, float] = {}
    try:
        text = path.read_text("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{name} is not UTF-8 text") from None
    for number, row in json_lines(text, name):
        if not isinstance(row, dict):
            raise ValueError(f"{name} line {number} is not a JSON object")
        iteration = row.get("iteration")
        if isinstance(iteration, bool) or not isinstance(iteration, int) or iteration < 0:
            raise ValueError(f"{name} line {number}: 'iteration' must be a whole number")
        if "val_success" not in row:
            continue
        where = f"{name} line {number}"
        if iteration in points:
            raise ValueError(f"{where}: validation iteration {iteration} appears twice")
        points[iteration] = _success(row["val_success"], where)
    return points


def _read_curves_dir(folder: Path) -> Curves:
    if not (folder / CURVES_DIR).is_dir():
        raise ValueError(f"{CURVES_DIR} must be a folder of seed-<N>/{METRICS_FILE}")
    curves: Curves = {}
    for entry in sorted((folder / CURVES_DIR).iterdir()):
        match = _SEED_DIR.fullmatch(entry.name)
        if not match or not (entry / METRICS_FILE).is_file():
            raise ValueError(
                f"{CURVES_DIR}/ holds '{entry.name}'; expected seed-<N>/{METRICS_FILE} only"
            )
        name = f"{CURVES_DIR}/{entry.name}/{METRICS_FILE}"
        curves[int(match.group(1))] = _read_metrics_jsonl(entry / METRICS_FILE, name)
    return curves


def read_curves(folder: Path, metadata: SubmissionMetadata) -> Curves | None:
    """The submission's training curves, checked against its metadata; ``None`` if it has none.

    Raises ``ValueError`` naming the first problem.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "curves.json").write_text('{"0": {"10": 0.5, "20": 0.97}}')
        >>> metadata = SubmissionMetadata.model_validate({
        ...     "name": "x", "estimator": "grpo", "training": {"iterations": 20, "rollouts": 80},
        ...     "parameters": 10, "seeds": [0], "code_version": "1", "contact": "me", "url": None})
        >>> read_curves(folder, metadata)
        {0: {10: 0.5, 20: 0.97}}
    """
    folder = Path(folder)
    has_json, has_dir = (folder / CURVES_FILE).exists(), (folder / CURVES_DIR).exists()
    if not has_json and not has_dir:
        return None
    if has_json and has_dir:
        raise ValueError(f"the submission holds both {CURVES_FILE} and {CURVES_DIR}/; keep one")
    curves = _read_curves_json(folder / CURVES_FILE) if has_json else _read_curves_dir(folder)
    _check_against_metadata(curves, metadata)
    return {seed: dict(sorted(curves[seed].items())) for seed in sorted(curves)}


def _check_against_metadata(curves: Curves, metadata: SubmissionMetadata) -> None:
    if metadata.training is None:
        raise ValueError(
            "the submission carries training curves but metadata.json declares no training"
        )
    if sorted(curves) != sorted(metadata.seeds):
        raise ValueError(
            f"training curves cover seeds {seed_list(list(curves))} "
            f"but metadata.json declares seeds {seed_list(metadata.seeds)}"
        )
    budget = metadata.training.iterations
    for seed in sorted(curves):
        if not curves[seed]:
            raise ValueError(f"the training curve of seed {seed} has no validation iteration")
        last = max(curves[seed])
        if last > budget:
            raise ValueError(
                f"the training curve of seed {seed} reaches iteration {last}, "
                f"past the declared budget of {budget} iterations"
            )

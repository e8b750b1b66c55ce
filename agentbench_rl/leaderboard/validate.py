"""Validation of a submission: accept only what can be recomputed from the episodes.

A submission is a results folder of ``agentbench-rl eval`` on a standard evaluation split plus a
``metadata.json`` (see :mod:`agentbench_rl.leaderboard.schema`)::

    metadata.json  config.json  summary.json  episodes.csv (or episodes.parquet)
    [curves.json | curves/seed-<N>/metrics.jsonl]   (optional training curves)

:func:`validate_submission` checks, in this order, and raises :class:`SubmissionError` naming the
first problem: the files are there and parse; the metadata fits the schema; the summary names a
registered env and an evaluation split, and the run was a standard one (no ``--limit``,
``--max-steps`` or env options); the seeds of the summary and the config are the declared ones;
the split checksum is the installed package's for this env (it covers the env id, so a run of one
env never passes for another on the same levels); the package version and git commit have their
forms; the episodes table has the harness's columns and types, holds no undeclared seed, and every
task of the split exactly once per declared seed; every episode's category is the env's own for
its task and its numbers are ones the env can produce (at least one step, within the step limit,
a return its reward rule gives for that outcome); every figure of ``summary.json`` equals the one
recomputed from the episodes (after the harness's rounding to 6 decimals); the training curves, if
any, fit the metadata; a ``training_run`` in the metadata names the weights the summary recorded.

The board is built from the recomputed figures, never from the stored ones.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.core.jsonfile import read_json
from agentbench_rl.envs import ENVS, env_class
from agentbench_rl.extras import install_hint
from agentbench_rl.harness.stats import ThresholdResult, summarize, threshold_crossing
from agentbench_rl.leaderboard.curves import Curves, curve_files, read_curves
from agentbench_rl.leaderboard.schema import (
    METADATA_FILE,
    SubmissionMetadata,
    load_metadata,
    seed_list,
)
from agentbench_rl.spec.records import EPISODE_COLUMNS, EvaluationSummary
from agentbench_rl.spec.results_folder import CONFIG_FILE as CONFIG
from agentbench_rl.spec.results_folder import SUMMARY_FILE as SUMMARY

EPISODE_FILES = ("episodes.csv", "episodes.parquet")
#: Splits that train agents; a board ranks agents on held-out splits only.
TRAINING_SPLITS = ("train",)
THRESHOLD = 0.95
#: A package version as pip writes it (PEP 440 public version, optionally a local part).
PACKAGE_VERSION = re.compile(r"[0-9]+(\.[0-9]+){0,4}((a|b|rc|\.post|\.dev)[0-9]+)*(\+[a-z0-9.]+)?")
#: A git commit id: SHA-1 (40 hex digits) or SHA-256 (64).
GIT_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
#: A category or agent name: one line of printable text (it becomes a table header or cell).
_ONE_LINE = re.compile(r"[^\x00-\x1f\x7f]{1,100}")
#: An agent spec: one line, long enough for an ``hf:`` path to a checkpoint deep in a folder tree.
MAX_AGENT_LENGTH = 500
_AGENT = re.compile(rf"[^\x00-\x1f\x7f]{{1,{MAX_AGENT_LENGTH}}}")
#: Bound on an episode's return where the env has no reward rule to check it against.
MAX_RETURN = 1e9
#: The most episodes a submission may hold (e.g. 500 tasks x 2,000 seeds), and the most bytes
#: a row may take in ``episodes.csv`` or, uncompressed, in ``episodes.parquet``. Both are checked
#: before the table is loaded (the Parquet footer counts its rows), with the tighter bound of
#: the split's tasks times the declared seeds: a small file cannot make validation take gigabytes.
MAX_EPISODES = 1_000_000
MAX_ROW_BYTES = 1024
#: Fields of summary.json that the harness writes besides the figures ``summarize`` recomputes,
#: and those newer harness versions add (not recomputed from episodes).
RUN_FIELDS = EvaluationSummary.required_fields()
OPTIONAL_RUN_FIELDS = EvaluationSummary.optional_fields()
#: Figures ``summary.json`` gained after submissions were filed: checked where present.
LATER_FIGURES = ("pass_at_k",)


class SubmissionError(ValueError):
    """A submission was refused; the message names the first problem in one line."""


@dataclass(frozen=True)
class ValidatedSubmission:
    """A submission that passed :func:`validate_submission`.

    Attributes:
        folder: where it was read from.
        metadata: its ``metadata.json``.
        env, split, agent: what was evaluated (from ``summary.json``).
        figures: every figure of the summary, recomputed from the episodes.
        curves: training curves (seed -> iteration -> validation success), if it carries them.
        threshold: the 95%-threshold criterion over the curves within the training budget.
        files: the files that make up the submission, relative to ``folder``, sorted.
        data: the fingerprint of the external data played and whether it is the pinned one
            (``summary.json`` ``data``; ALFWorld and WebShop runs of newer harness versions).
        episodes_digest: :func:`episodes_digest` of the episodes (the same episodes give the
            same digest whatever their file's format, name or metadata).
        claimed: what the submission states and nothing here can check: the package version
            and commit its ``summary.json`` names.
    """

    folder: Path
    metadata: SubmissionMetadata
    env: str
    split: str
    agent: str
    figures: dict[str, Any]
    curves: Curves | None
    threshold: ThresholdResult | None
    files: tuple[str, ...]
    data: dict[str, Any] | None = None
    episodes_digest: str = ""
    claimed: dict[str, Any] = field(default_factory=dict)


def evaluation_splits(env: str) -> list[str]:
    """The splits of ``env`` a board ranks on: fixed task lists that are not training splits.

    Example:
        >>> evaluation_splits("sokoban")
        ['val', 'test']
    """
    cls = env_class(env)
    splits = []
    for split in cls.splits():
        if split in TRAINING_SPLITS:
            continue
        try:
            cls.task_ids(split)
        except ValueError:  # unbounded split
            continue
        splits.append(split)
    return splits


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def first_difference(expected: Any, stored: Any, path: str = "") -> str | None:
    """Where ``stored`` first differs from ``expected`` (in ``expected``'s order), or ``None``.

    Numbers compare by value (``1`` equals ``1.0``), booleans only with booleans.

    Example:
        >>> first_difference({"a": 1.0, "b": [0.2, 0.3]}, {"a": 1, "b": [0.2, 0.4]})
        'b.1 is 0.4 but the episodes give 0.3'
    """
    label = path or "the summary"
    if isinstance(expected, dict):
        if not isinstance(stored, dict):
            return f"{label} is {json.dumps(stored)} but the episodes give an object"
        for key, value in expected.items():
            where = f"{path}.{key}" if path else str(key)
            if key not in stored:
                return f"{where} is missing"
            difference = first_difference(value, stored[key], where)
            if difference:
                return difference
        extra = [key for key in stored if key not in expected]
        if extra:
            where = f"{path}.{extra[0]}" if path else str(extra[0])
            return f"{where} is not a figure the episodes give"
        return None
    if isinstance(expected, list):
        if not isinstance(stored, list) or len(stored) != len(expected):
            return f"{label} is {json.dumps(stored)} but the episodes give {json.dumps(expected)}"
        for index, (value, other) in enumerate(zip(expected, stored, strict=True)):
            difference = first_difference(value, other, f"{path}.{index}")
            if difference:
                return difference
        return None
    if _is_number(expected) and _is_number(stored):
        both_nan = math.isnan(expected) and math.isnan(stored)
        same = both_nan or expected == stored
    else:
        same = type(expected) is type(stored) and expected == stored
    if same:
        return None
    return f"{label} is {json.dumps(stored)} but the episodes give {json.dumps(expected)}"


def _require_files(folder: Path) -> str:
    """Check the fixed files are there; return the episodes file's name."""
    if not folder.is_dir():
        raise SubmissionError(f"{folder} is not a folder")
    for name in (METADATA_FILE, CONFIG, SUMMARY):
        if not (folder / name).is_file():
            raise SubmissionError(f"{name} is missing from {folder}")
    present = [name for name in EPISODE_FILES if (folder / name).is_file()]
    if not present:
        raise SubmissionError(f"episodes.csv (or episodes.parquet) is missing from {folder}")
    if len(present) > 1:
        raise SubmissionError("the submission holds both episodes.csv and episodes.parquet")
    return present[0]


def _read_object(path: Path) -> dict[str, Any]:
    try:
        data = read_json(path)
    except ValueError as error:
        raise SubmissionError(str(error)) from None
    if not isinstance(data, dict):
        raise SubmissionError(f"{path.name} must hold a JSON object")
    return data


def _check_run(
    summary: dict[str, Any], config: dict[str, Any], metadata: SubmissionMetadata, episodes: str
) -> None:
    """The summary describes a standard run of a registered env on an evaluation split."""
    for name in RUN_FIELDS:
        if name not in summary:
            raise SubmissionError(f"{SUMMARY}: field '{name}' is missing")
    env, split = summary["env"], summary["split"]
    if not isinstance(env, str) or env not in ENVS:
        raise SubmissionError(
            f"{SUMMARY}: unknown env {json.dumps(env)} (choose from {', '.join(sorted(ENVS))})"
        )
    try:
        splits = evaluation_splits(env)
    except ImportError as error:
        raise SubmissionError(f"env {env} cannot be loaded here ({error})") from None
    if split not in splits:
        raise SubmissionError(
            f"{SUMMARY}: {json.dumps(split)} is not an evaluation split of {env} "
            f"(choose from {', '.join(splits)})"
        )
    seeds = summary["seeds"]
    whole = isinstance(seeds, list) and all(
        isinstance(seed, int) and not isinstance(seed, bool) for seed in seeds
    )
    if not whole or sorted(seeds) != sorted(metadata.seeds):
        raise SubmissionError(
            f"{SUMMARY}: seeds {json.dumps(seeds)} differ from the seeds declared in "
            f"{METADATA_FILE} ({seed_list(metadata.seeds)})"
        )
    for key in ("env", "split", "agent", "seeds"):
        if config.get(key) != summary[key]:
            raise SubmissionError(
                f"{CONFIG}: {key} is {json.dumps(config.get(key))} "
                f"but {SUMMARY} has {json.dumps(summary[key])}"
            )
    for key, standard in (("limit", None), ("max_steps", None), ("env_kwargs", {})):
        if config.get(key, standard) != standard:
            raise SubmissionError(
                f"{CONFIG}: {key} is {json.dumps(config[key])}; a submission needs the "
                f"standard evaluation ({key} {json.dumps(standard)})"
            )
    if config.get("episodes_format") != episodes.removeprefix("episodes."):
        raise SubmissionError(
            f"{CONFIG}: episodes_format is {json.dumps(config.get('episodes_format'))} "
            f"but the submission holds {episodes}"
        )
    if summary["config"] != config:
        raise SubmissionError(f"{SUMMARY}: config differs from {CONFIG}")
    _check_formats(summary)
    cls = env_class(env)
    installed = cls.results_checksum(cls.split_checksum(split))
    if summary["split_checksum"] != installed:
        raise SubmissionError(
            f"{SUMMARY}: split_checksum {json.dumps(summary['split_checksum'])} differs from "
            f"the installed package's {json.dumps(installed)} for {env}/{split}"
        )


def _check_training_run(metadata: SubmissionMetadata, summary: dict[str, Any]) -> None:
    """A submission that names its training run played exactly that run's weights."""
    if metadata.training_run is None:
        return
    record = summary.get("provenance")
    played = record.get("agent_weights") if isinstance(record, dict) else None
    if played is None:
        raise SubmissionError(
            f"{METADATA_FILE}: training_run names weights {metadata.training_run.weights} but "
            f"{SUMMARY} records no weights fingerprint (provenance.agent_weights) to check them"
        )
    if played != metadata.training_run.weights:
        raise SubmissionError(
            f"{METADATA_FILE}: training_run.weights {metadata.training_run.weights} differ from "
            f"the weights the episodes were played with ({json.dumps(played)[:40]})"
        )


def _check_data(data: Any) -> dict[str, Any] | None:
    """``summary.json`` ``data``: absent, or a hex fingerprint and whether it is pinned."""
    if data is None:
        return None
    fingerprint = data.get("fingerprint") if isinstance(data, dict) else None
    if (
        not isinstance(data, dict)
        or set(data) != {"fingerprint", "pinned"}
        or not isinstance(fingerprint, str)
        or not re.fullmatch(r"[0-9a-f]{8,64}", fingerprint)
        or not isinstance(data["pinned"], bool)
    ):
        raise SubmissionError(
            f'{SUMMARY}: data must be {{"fingerprint": hex, "pinned": true|false}}'
        )
    return {"fingerprint": fingerprint, "pinned": data["pinned"]}


def _check_formats(summary: dict[str, Any]) -> None:
    """The text fields of the summary that the harness writes have the harness's forms."""
    agent, version, commit = summary["agent"], summary["package_version"], summary["git_commit"]
    if not isinstance(agent, str) or not _AGENT.fullmatch(agent):
        raise SubmissionError(
            f"{SUMMARY}: agent must be one line of printable text "
            f"(at most {MAX_AGENT_LENGTH} characters)"
        )
    if not isinstance(version, str) or not PACKAGE_VERSION.fullmatch(version):
        raise SubmissionError(
            f"{SUMMARY}: package_version {json.dumps(version)[:60]} is not a package version "
            "(e.g. 0.3.0)"
        )
    if commit is not None and (not isinstance(commit, str) or not GIT_COMMIT.fullmatch(commit)):
        raise SubmissionError(
            f"{SUMMARY}: git_commit {json.dumps(commit)[:60]} is not a git commit id "
            "(40 hexadecimal digits) or null"
        )


def read_episode_table(path: Path) -> pd.DataFrame:
    """Read an episodes file as the harness wrote it, ids and categories kept as text.

    Raises :class:`SubmissionError` when the file cannot be read as a table.
    """
    path = Path(path)
    try:
        if path.suffix == ".csv":
            return pd.read_csv(path, dtype={"task_id": str, "category": str}, keep_default_na=False)
        return pd.read_parquet(path)
    except ImportError:
        raise SubmissionError(
            f"episodes.parquet needs pyarrow: {install_hint('parquet')}"
        ) from None
    except (ValueError, UnicodeDecodeError, OSError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise SubmissionError(f"{path.name} cannot be read as a table ({reason})") from None


def check_table_size(path: Path, expected_rows: int) -> None:
    """Refuse, before loading it, an episodes file with more rows than ``expected_rows`` (the
    split's tasks times the declared seeds) or than :data:`MAX_EPISODES`, or more bytes than
    :data:`MAX_ROW_BYTES` per allowed row (a CSV's bytes; a Parquet file's uncompressed ones)."""
    path = Path(path)
    allowed = min(expected_rows, MAX_EPISODES)
    limit = (
        "the split's tasks x the declared seeds"
        if expected_rows <= MAX_EPISODES
        else (f"the limit of {MAX_EPISODES:,} episodes")
    )
    if path.suffix == ".csv":
        size = path.stat().st_size
        if size > (allowed + 1) * MAX_ROW_BYTES:
            raise SubmissionError(
                f"{path.name} is {size:,} bytes, more than {allowed:,} episodes of at most "
                f"{MAX_ROW_BYTES} bytes can take ({limit}); refused before loading"
            )
        return
    try:
        import pyarrow.parquet as parquet
    except ImportError:
        raise SubmissionError(
            f"episodes.parquet needs pyarrow: {install_hint('parquet')}"
        ) from None
    try:
        footer = parquet.ParquetFile(path).metadata
    except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise SubmissionError(f"{path.name} cannot be read as a table ({reason})") from None
    if footer.num_rows > allowed:
        raise SubmissionError(
            f"{path.name} holds {footer.num_rows:,} rows, more than {allowed:,} ({limit}); "
            "refused before loading"
        )
    size = sum(footer.row_group(k).total_byte_size for k in range(footer.num_row_groups))
    if size > (allowed + 1) * MAX_ROW_BYTES:
        raise SubmissionError(
            f"{path.name} unpacks to {size:,} bytes, more than {allowed:,} episodes of at most "
            f"{MAX_ROW_BYTES} bytes can take; refused before loading"
        )


def _row(name: str, index: int) -> str:
    """How a user finds row ``index`` of the table: the CSV line (header is line 1)."""
    return f"{name} line {index + 2}" if name.endswith(".csv") else f"{name} row {index}"


def _check_columns(episodes: pd.DataFrame, name: str) -> None:
    for column in EPISODE_COLUMNS:
        if column not in episodes.columns:
            raise SubmissionError(f"{name}: column '{column}' is missing")
    for column in episodes.columns:
        if column not in EPISODE_COLUMNS:
            raise SubmissionError(f"{name}: unexpected column '{column}'")
    if episodes.empty:
        raise SubmissionError(f"{name} holds no episodes")
    for column in ("task_id", "category"):
        values = episodes[column]
        if not pd.api.types.is_string_dtype(values) and not pd.api.types.is_object_dtype(values):
            raise SubmissionError(f"{name}: column '{column}' must hold text")
        bad = ~values.map(lambda value: isinstance(value, str) and value != "")
        if bad.any():
            raise SubmissionError(f"{_row(name, int(bad.to_numpy().argmax()))}: empty {column}")
    if not pd.api.types.is_bool_dtype(episodes["success"]):
        raise SubmissionError(f"{name}: column 'success' must hold True or False only")
    for column in ("seed", "steps", "invalid_actions"):
        values = episodes[column]
        if pd.api.types.is_bool_dtype(values) or not pd.api.types.is_integer_dtype(values):
            raise SubmissionError(f"{name}: column '{column}' must hold whole numbers only")
        if (values < 0).any():
            index = int((values < 0).to_numpy().argmax())
            raise SubmissionError(f"{_row(name, index)}: {column} is negative")
    for column in ("score", "return"):
        values = episodes[column]
        if pd.api.types.is_bool_dtype(values) or not pd.api.types.is_numeric_dtype(values):
            raise SubmissionError(f"{name}: column '{column}' must hold numbers only")
        finite = values.map(math.isfinite)
        if not finite.all():
            index = int((~finite).to_numpy().argmax())
            raise SubmissionError(f"{_row(name, index)}: {column} is not a finite number")
    huge = episodes["return"].abs() > MAX_RETURN
    if huge.any():
        index = int(huge.to_numpy().argmax())
        raise SubmissionError(f"{_row(name, index)}: return is beyond ±{MAX_RETURN:g}")
    outside = (episodes["score"] < 0) | (episodes["score"] > 1)
    if outside.any():
        index = int(outside.to_numpy().argmax())
        raise SubmissionError(f"{_row(name, index)}: score is outside [0, 1]")
    too_many = episodes["invalid_actions"] > episodes["steps"]
    if too_many.any():
        raise SubmissionError(
            f"{_row(name, int(too_many.to_numpy().argmax()))}: more invalid actions than steps"
        )


def _check_coverage(
    episodes: pd.DataFrame, name: str, env: str, split: str, seeds: Sequence[int]
) -> None:
    """No undeclared seed, and every task of the split exactly once per declared seed."""
    declared = sorted(seeds)
    declared_set = set(declared)
    present = sorted(int(seed) for seed in episodes["seed"].unique())
    for seed in present:
        if seed not in declared_set:
            raise SubmissionError(
                f"{name}: seed {seed} is not declared in {METADATA_FILE} "
                f"(declared: {seed_list(declared)})"
            )
    if len(present) < len(declared):
        present_set = set(present)
        seed = next(seed for seed in declared if seed not in present_set)
        raise SubmissionError(f"{name}: declared seed {seed} has no episodes")
    tasks = env_class(env).task_ids(split)
    known = set(tasks)
    unknown = ~episodes["task_id"].isin(known)
    if unknown.any():
        index = int(unknown.to_numpy().argmax())
        raise SubmissionError(
            f"{_row(name, index)}: task '{episodes['task_id'].iloc[index]}' is not in {env}/{split}"
        )
    # Grouped once (linear in the rows), not filtered once per seed.
    counts = episodes.groupby(["seed", "task_id"], sort=False).size()
    repeated = counts[counts > 1]
    if not repeated.empty:
        order = {task: position for position, task in enumerate(tasks)}
        seed, task = min(repeated.index, key=lambda key: (key[0], order[key[1]]))
        raise SubmissionError(
            f"{name}: task {task} appears {repeated[(seed, task)]} times for seed {seed}"
        )
    per_seed = counts.groupby(level=0).size()
    short = per_seed[per_seed < len(tasks)]
    if not short.empty:
        seed = int(short.index.min())
        have = set(episodes.loc[episodes["seed"] == seed, "task_id"])
        task = next(task for task in tasks if task not in have)
        raise SubmissionError(
            f"{name}: task {task} is missing for seed {seed} "
            "(every task of the split must appear once per seed)"
        )
    categories = episodes.groupby("task_id", sort=True)["category"].unique()
    for task_id, values in categories.items():
        if len(values) > 1:
            shown = " and ".join(repr(value) for value in sorted(values))
            raise SubmissionError(
                f"{name}: task {task_id} has categories {shown} in different seeds"
            )


def _check_episodes(episodes: pd.DataFrame, name: str, env: str, split: str) -> None:
    """Every category is the env's own for its task; every row is an outcome the env can give."""
    cls = env_class(env)
    own = cls.task_categories(split)
    for index, (task, category) in enumerate(
        zip(episodes["task_id"], episodes["category"], strict=True)
    ):
        if own is not None and own.get(task) != category:
            raise SubmissionError(
                f"{_row(name, index)}: category {json.dumps(category)[:60]} of task {task} "
                f"is not the env's ({json.dumps(own.get(task))})"
            )
        if own is None and not _ONE_LINE.fullmatch(category):
            raise SubmissionError(
                f"{_row(name, index)}: category must be one line of printable text"
            )
    columns = zip(
        episodes["success"], episodes["score"], episodes["steps"], episodes["return"], strict=True
    )
    for index, (success, score, steps, episode_return) in enumerate(columns):
        reason = cls.implausible_episode(
            bool(success), float(score), int(steps), float(episode_return)
        )
        if reason:
            raise SubmissionError(f"{_row(name, index)}: implausible episode: {reason}")


def episodes_digest(episodes: pd.DataFrame) -> str:
    """A digest of the episodes themselves: their rows sorted by seed and task, as CSV. Two
    submissions with the same episodes share it, in CSV or Parquet, under any name.

    Example:
        >>> rows = {"task_id": ["b", "a"], "category": ["x", "x"], "seed": [0, 0],
        ...         "success": [True, False], "score": [1.0, 0.0], "steps": [3, 5],
        ...         "return": [1.0, 0.0], "invalid_actions": [0, 1]}
        >>> table = pd.DataFrame(rows)
        >>> episodes_digest(table) == episodes_digest(table.iloc[::-1])
        True
    """
    ordered = episodes[list(EPISODE_COLUMNS)].sort_values(["seed", "task_id"], kind="stable")
    return stable_hash(ordered.to_csv(index=False, lineterminator="\n"))


def recompute_figures(episodes: pd.DataFrame) -> dict[str, Any]:
    """The summary figures of ``episodes`` as ``summary.json`` stores them (JSON round trip)."""
    figures: dict[str, Any] = json.loads(json.dumps(summarize(episodes)))
    return figures


def validate_submission(folder: Path) -> ValidatedSubmission:
    """Check a submission folder and return it with its recomputed figures.

    Raises :class:`SubmissionError` whose message names the first problem.

    Example:
        >>> validate_submission(Path("no/such/folder"))
        Traceback (most recent call last):
        ...
        agentbench_rl.leaderboard.validate.SubmissionError: no/such/folder is not a folder
    """
    folder = Path(folder)
    episodes_name = _require_files(folder)
    try:
        metadata = load_metadata(folder / METADATA_FILE)
    except ValueError as error:
        raise SubmissionError(str(error)) from None
    config = _read_object(folder / CONFIG)
    summary = _read_object(folder / SUMMARY)
    _check_run(summary, config, metadata, episodes_name)
    _check_training_run(metadata, summary)
    env, split = summary["env"], summary["split"]

    tasks = len(env_class(env).task_ids(split))
    check_table_size(folder / episodes_name, tasks * len(metadata.seeds))
    episodes = read_episode_table(folder / episodes_name)
    _check_columns(episodes, episodes_name)
    _check_coverage(episodes, episodes_name, env, split, metadata.seeds)
    _check_episodes(episodes, episodes_name, env, split)

    figures = recompute_figures(episodes)
    checked = {k: v for k, v in figures.items() if k in summary or k not in LATER_FIGURES}
    expected = {"complete_split": True, **checked}
    stored = {"complete_split": summary["complete_split"]}
    stored |= {
        key: value
        for key, value in summary.items()
        if key not in RUN_FIELDS and key not in OPTIONAL_RUN_FIELDS
    }
    difference = first_difference(expected, stored)
    if difference:
        raise SubmissionError(f"{SUMMARY}: {difference}")

    try:
        curves = read_curves(folder, metadata)
    except ValueError as error:
        raise SubmissionError(str(error)) from None
    threshold = None
    if curves is not None:
        assert metadata.training is not None  # read_curves refuses curves without training
        threshold = threshold_crossing(curves, THRESHOLD, budget=metadata.training.iterations)
    data = _check_data(summary.get("data"))
    claimed = {key: summary[key] for key in ("package_version", "git_commit")}
    files = [METADATA_FILE, CONFIG, SUMMARY, episodes_name]
    files += [path.relative_to(folder).as_posix() for path in curve_files(folder)]
    return ValidatedSubmission(
        folder=folder,
        metadata=metadata,
        env=env,
        split=split,
        agent=str(summary["agent"]),
        figures=figures,
        curves=curves,
        threshold=threshold,
        files=tuple(sorted(files)),
        data=data,
        episodes_digest=episodes_digest(episodes),
        claimed=claimed,
    )

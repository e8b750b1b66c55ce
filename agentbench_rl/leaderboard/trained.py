"""Trained here: the final checkpoint of every finished run of a sweep, filed as a submission.

``agentbench-rl leaderboard file-runs SWEEP --runs-root DIR`` goes through the runs of a sweep's
grid (``DIR/<cell>/seed<k>/``, as ``agentbench-rl sweep SWEEP --out DIR`` lays them out),
seed-major like the sweep (every cell of seed 0 first), and, for each finished one
(``done.json``) not yet on the board:

1. checks the folder is that run: its ``config.yaml`` is the config the sweep and overrides give
   the cell (where BC results are cached aside, which changes no number), the checkpoint is of
   the last iteration and its weights have the fingerprint ``state.json`` recorded;
2. replays the run's final validation through the harness from the checkpoint (the run's own
   val split, seeds, limit, step limit and greedy setting, :meth:`TrainConfig.validation_eval`)
   and compares it with the ``val_success`` and the episodes the trainer recorded;
3. evaluates the checkpoint on the env's evaluation split (Sokoban: the 500 test levels) in the
   policy's own action mode, greedy when the run validated greedily, with the training seed as
   the evaluation seed (with greedy play the seed changes no move; it names the run and keys its
   curve), in lockstep batches of the run's ``forward_batch_size``;
4. files it (:func:`~agentbench_rl.leaderboard.store.submit`) with metadata naming the estimator,
   training budget, parameter count, seed, the run's config (sweep file, overrides, sha256 of
   ``config.yaml``), the weights fingerprint and the training commit (``training_run``), and the
   run's validation curve (``curves.json``).

It is idempotent and resumable: a run whose weights are already filed on the board (and still
validate) is skipped; an evaluation killed part way resumes from its journal under
``ROOT/.file-runs/`` (removed once the run is filed). Several ``file-runs`` may run at once: a
run another one is evaluating (its results folder is locked) is passed over. Run folders are
only read.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentbench_rl.core.atomic import atomic_write_text
from agentbench_rl.core.hashing import WEIGHT_SUFFIXES, weights_fingerprint
from agentbench_rl.core.version import __version__
from agentbench_rl.envs import evaluation_split
from agentbench_rl.leaderboard.curves import CURVES_FILE
from agentbench_rl.leaderboard.schema import METADATA_FILE, load_metadata
from agentbench_rl.leaderboard.store import board_folder, submit
from agentbench_rl.leaderboard.validate import (
    SubmissionError,
    read_episode_table,
    validate_submission,
)
from agentbench_rl.spec.results_folder import ResultsFolder
from agentbench_rl.spec.run_folder import POLICY, STATE, RunFolder
from agentbench_rl.train.config import config_from_dict, read_run_config
from agentbench_rl.train.sweep import load_sweep

#: The contact of the submissions this module files.
TRAINED_CONTACT = "agentbench-rl maintainers (trained here: agentbench-rl leaderboard file-runs)"
#: Scratch folder under the leaderboards root for evaluations in progress (hidden: never a board).
WORK = ".file-runs"
#: Episode columns the replayed validation must reproduce (those a policy's moves decide).
COMPARED = ["task_id", "seed", "success", "steps", "return", "invalid_actions"]


class RunError(ValueError):
    """A run folder cannot be filed; the message names the run and the first problem."""


@dataclass(frozen=True)
class FiledRun:
    """What ``file_runs`` did with one finished run.

    Attributes:
        run: the run folder.
        submission: the filed submission folder (or the one already on the board).
        filed: ``True`` when filed now, ``False`` when it was already on the board.
        val_success: the run's final validation success as the trainer recorded it.
        val_success_harness: the same validation replayed by the harness.
        val_episodes_differing: replayed validation episodes whose outcome differs from the
            recorded ones (``None``: not compared, as for a run already on the board).
        test_success: success on the evaluation split.
    """

    run: Path
    submission: Path
    filed: bool
    val_success: float
    val_success_harness: float
    val_episodes_differing: int | None
    test_success: float


def parameter_count(policy: Path) -> int:
    """The number of parameters of a saved policy: from its weight files' headers, or, for a
    DRRN (whose weights file holds only the table rows training moved), from its config.

    Example:
        >>> parameter_count(Path("no-such-folder"))
        0
    """
    from safetensors import safe_open

    from agentbench_rl.models.drrn import saved_parameter_count

    drrn = saved_parameter_count(policy)
    if drrn is not None:
        return drrn
    total = 0
    for path in sorted(Path(policy).glob(f"*{WEIGHT_SUFFIXES[0]}")):
        with safe_open(str(path), framework="np") as weights:
            for name in weights.keys():  # noqa: SIM118 (safe_open is not a mapping)
                total += math.prod(int(size) for size in weights.get_slice(name).get_shape())
    return total


def _setting(values: dict[str, Any], dotted: str) -> Any:
    found: Any = values
    for part in dotted.split("."):
        found = found.get(part) if isinstance(found, dict) else None
    return found


def check_run(run: Path, expected: dict[str, Any]) -> dict[str, Any]:
    """Check a finished run folder against the config its sweep gives it; return its record.

    The record holds the run's ``config`` (as stored), ``config_sha256``, the checkpoint's
    ``iterations``, ``weights``, ``git_commit`` and ``git_dirty``, and its final ``validation``
    metrics row. Raises :class:`RunError` naming the first problem: a setting that changes the
    numbers (:meth:`TrainConfig.identity`) or the iteration count differs from the sweep's, the
    metrics journal breaks its rules (a gap, a repeated row) or disagrees with ``done.json``, or
    the checkpoint is not the last iteration's or its weights are not those it records.
    """
    run = Path(run)
    folder = RunFolder(run)
    checkpoint = folder.checkpoint()
    for path in (folder.config_file, checkpoint / STATE, checkpoint / POLICY):
        if not path.exists():
            raise RunError(f"{run}: {path.relative_to(run)} is missing")
    try:
        stored = read_run_config(folder.config_file)
        metrics = folder.check_finished()
        state = folder.read_state(checkpoint)
    except ValueError as problem:
        raise RunError(f"{run}: {problem}") from None
    sweep_config = config_from_dict(expected)
    changed = stored.identity_changes(sweep_config, with_iterations=True)
    if changed:
        key = changed[0]
        mine, theirs = stored.to_dict(), sweep_config.to_dict()
        raise RunError(
            f"{run}: trained with {key} {json.dumps(_setting(mine, key))} but the sweep gives "
            f"{json.dumps(_setting(theirs, key))} (pass the overrides the sweep ran with)"
        )
    weights = weights_fingerprint(checkpoint / POLICY)
    if state.weights != weights:
        raise RunError(
            f"{run}: checkpoint/policy has weights {weights} but state.json records {state.weights}"
        )
    if state.iteration != stored.iterations:
        raise RunError(
            f"{run}: the checkpoint is of iteration {state.iteration}, "
            f"not the last ({stored.iterations})"
        )
    validation = metrics.rows[state.iteration]
    if "val_success" not in validation:
        raise RunError(
            f"{run}: metrics.jsonl has no validation of the last iteration {state.iteration}"
        )
    if validation.get("val_weights", weights) != weights:
        raise RunError(
            f"{run}: the final validation played weights {validation['val_weights']}, "
            f"not the checkpoint's {weights}"
        )
    return {
        "config": stored.to_dict(),
        "config_sha256": hashlib.sha256(folder.config_file.read_bytes()).hexdigest(),
        "iterations": state.iteration,
        "weights": weights,
        "git_commit": state.record.get("git_commit"),
        "git_dirty": state.record.get("git_dirty"),
        "validation": validation,
        "metrics": metrics.rows,
    }


def filed_submission(root: Path, env: str, split: str, weights: str) -> Path | None:
    """The submission on the board that holds these weights and still validates, if any."""
    for metadata_file in sorted(board_folder(root, env, split).glob(f"*/{METADATA_FILE}")):
        try:
            metadata = load_metadata(metadata_file)
        except ValueError:
            continue
        if metadata.training_run is None or metadata.training_run.weights != weights:
            continue
        try:
            validate_submission(metadata_file.parent)
        except SubmissionError:
            continue
        return metadata_file.parent
    return None


def _differing_episodes(replayed: Path, recorded: Path) -> int | None:
    """How many episodes of the replay differ from the recorded ones (``None``: none recorded)."""
    if not ResultsFolder(recorded).episodes_file("csv").is_file():
        return None
    ours, theirs = (
        read_episode_table(ResultsFolder(folder).episodes_file("csv"))[COMPARED].sort_values(
            ["seed", "task_id"], ignore_index=True
        )
        for folder in (replayed, recorded)
    )
    keys = ["task_id", "seed"]
    if len(ours) != len(theirs) or not ours[keys].equals(theirs[keys]):
        return max(len(ours), len(theirs))
    return int((~(ours == theirs).all(axis=1)).sum())


def file_run(
    run: Path,
    cell: str,
    expected: dict[str, Any],
    sweep: str,
    overrides: Sequence[str],
    root: Path,
    split: str | None = None,
    on_step: Callable[[str], None] = lambda message: None,
) -> FiledRun:
    """Check, replay the validation of, evaluate and file one finished run (see the module)."""
    from agentbench_rl.envs.spec import EnvSpec
    from agentbench_rl.harness.config import EvalConfig, RunOptions
    from agentbench_rl.harness.evaluate import evaluate

    record = check_run(run, expected)
    config = config_from_dict(record["config"])
    split = split or evaluation_split(config.env)
    policy = Path(run) / "checkpoint" / "policy"
    recorded_val = float(record["validation"]["val_success"])
    existing = filed_submission(root, config.env, split, record["weights"])
    if existing is not None:
        filed_run = load_metadata(existing / METADATA_FILE).training_run
        assert filed_run is not None  # filed_submission finds only submissions with one
        return FiledRun(
            run=Path(run),
            submission=existing,
            filed=False,
            val_success=recorded_val,
            val_success_harness=filed_run.val_success_harness,
            val_episodes_differing=None,
            test_success=float(validate_submission(existing).figures["success"]["mean"]),
        )
    config.use_torch_threads()  # as the run validated (and a thread each is fastest here)
    work = Path(root) / WORK / cell / f"seed{config.seed}-{record['weights']}"
    on_step(f"{run}: replaying the final validation ({config.val_split})")
    val_config = config.validation_eval(policy)
    val_summary = evaluate(
        val_config, work / "val", RunOptions(resume=True, batch_size=config.forward_batch_size)
    )
    harness_val = val_summary.success.mean
    recorded_folder = RunFolder(run).validation(record["iterations"])
    differing = _differing_episodes(work / "val", recorded_folder)

    on_step(f"{run}: evaluating on {config.env}/{split}")
    # the standard evaluation of the split: the env's own options and step limit
    test_config = EvalConfig(
        env=EnvSpec(name=config.env, split=split), agent=val_config.agent, seeds=[config.seed]
    )
    test = work / "test"
    summary = evaluate(
        test_config, test, RunOptions(resume=True, batch_size=config.forward_batch_size)
    )
    curve = {
        str(row["iteration"]): float(row["val_success"])
        for row in record["metrics"]
        if "val_success" in row
    }
    commit = record["git_commit"]
    version = f"agentbench-rl {__version__}"
    metadata = {
        "name": f"{cell} seed {config.seed}"[:80],
        "estimator": config.estimator,
        "training": {
            "iterations": record["iterations"],
            "rollouts": record["iterations"] * config.n_tasks * config.group_size,
        },
        "parameters": parameter_count(policy),
        "seeds": [config.seed],
        "code_version": f"{version}@{commit[:12]}" if commit else version,
        "contact": TRAINED_CONTACT,
        "url": None,
        "training_run": {
            "sweep": sweep,
            "overrides": list(overrides),
            "cell": cell,
            "seed": config.seed,
            "config_sha256": record["config_sha256"],
            "iterations": record["iterations"],
            "weights": record["weights"],
            "git_commit": commit,
            "git_dirty": record["git_dirty"],
            "val_success": recorded_val,
            "val_success_harness": harness_val,
        },
    }
    atomic_write_text(test / METADATA_FILE, json.dumps(metadata, indent=1) + "\n")
    atomic_write_text(test / CURVES_FILE, json.dumps({str(config.seed): curve}, indent=1) + "\n")
    try:
        filed = submit(test, root)
    except SubmissionError as refused:
        # Filed meanwhile by another file-runs (the same files give the same id): keep that one.
        if (found := filed_submission(root, config.env, split, record["weights"])) is None:
            # Another run played the very same episodes (two collapsed policies can): the board
            # files those once, so this run is named, not filed, and the others go on.
            _clear(work)
            raise RunError(f"{run}: not filed: {refused}") from None
        filed = found
    _clear(work)
    return FiledRun(
        run=Path(run),
        submission=filed,
        filed=True,
        val_success=recorded_val,
        val_success_harness=harness_val,
        val_episodes_differing=differing,
        test_success=summary.success.mean,
    )


def _clear(work: Path) -> None:
    """Remove a run's scratch evaluation, and its cell's and the scratch folder once empty."""
    shutil.rmtree(work, ignore_errors=True)
    for emptied in (work.parent, work.parent.parent):
        try:
            emptied.rmdir()
        except OSError:  # not empty: other runs are in progress there
            break


def file_runs(
    sweep_file: Path,
    runs_root: Path,
    root: Path,
    overrides: Sequence[str] = (),
    split: str | None = None,
    on_step: Callable[[str], None] = lambda message: None,
) -> tuple[list[FiledRun], list[str]]:
    """File every finished run of the sweep under ``runs_root``; return what was filed and
    one line per run that could not be (unfinished runs are passed over silently)."""
    from agentbench_rl.core.lock import FolderInUseError

    if not Path(runs_root).is_dir():
        raise ValueError(f"--runs-root {runs_root} is not a folder (give the sweep's --out)")
    sweep = load_sweep(Path(sweep_file), out=Path(runs_root))
    done, problems = [], []
    # Seed-major, as the sweep trains: stopped part way, the board holds whole seeds.
    for run in sorted(sweep.runs(overrides), key=lambda run: run.seed):
        if not run.finished:
            continue
        try:
            done.append(
                file_run(
                    run.folder,
                    run.cell,
                    run.config.to_dict(),
                    str(sweep_file),
                    overrides,
                    root,
                    split,
                    on_step,
                )
            )
        except RunError as problem:
            problems.append(str(problem))
        except FolderInUseError as busy:  # another file-runs is evaluating it: leave it to that
            on_step(f"{run.folder}: passed over, {busy}")
    return done, problems

"""The folder of one training run: its layout, lock, metrics journal, checkpoint record and finish.

Layout (spelled here and nowhere else)::

    config.yaml          the run's config
    metrics.jsonl        the metrics journal: one JSON object per iteration, 0, 1, 2, ...
    checkpoint/          the last checkpoint: policy/, optimizer.pt, rng.pt, state.json
    reference/           the frozen KL reference policy
    val/iter-NNNN/       the harness's results of each validation
    val/panel-NNNN/      the same on the training panel (runs with ``train_panel``)
    val-policy/          the weights the last validation played (its hf: agent's folder)
    tensorboard/         TensorBoard's copy of the metrics, when TensorBoard is installed
    done.json            written last, once the run finished
    .lock                held while a process trains the run

Rules, as the evaluation journal's (``spec/journal.py``), so that nothing is lost and nothing is
counted twice:

1. One process at a time: the trainer holds the folder's lock (:class:`FolderLock`) from before
   its first check to its last write; a second one stops with one line naming the holder.
2. A folder *holds a run* once it has a metrics row or a checkpoint. A folder with only a
   ``config.yaml`` (a start that failed before its first row) holds none: a new start may reuse it.
3. Reading ``metrics.jsonl``, a torn last line (text after the last newline: the process was killed
   while writing it) is dropped, and cut off before the run appends again. Every other line must be
   a JSON object whose ``iteration`` is the next whole number (0, 1, 2, ...): a repeated, missing or
   malformed row is an error naming the file and line, never skipped.
4. A checkpoint's ``state.json`` records its iteration, the fingerprint of its weights, the sha256
   of its optimiser and RNG files, the run's identity (the hash of what changes the numbers) and
   the reference's fingerprint; resuming checks each of them before anything is rewritten.
5. ``done.json`` is written last and agrees with the metrics: its ``iterations`` is the last
   metrics row's iteration.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from agentbench_rl.core.atomic import atomic_write_text, remove_path
from agentbench_rl.core.hashing import sha256_file, weights_fingerprint
from agentbench_rl.core.jsonfile import complete_lines, json_lines, read_json
from agentbench_rl.core.lock import FolderLock
from agentbench_rl.spec.records import MetricsRow

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
DONE_FILE = "done.json"
CHECKPOINT = "checkpoint"
REFERENCE = "reference"
VALIDATION = "val"
VALIDATIONS = ("iter", "panel")  # a validation's folder: val/<of>-NNNN
VALIDATION_POLICY = "val-policy"
TENSORBOARD = "tensorboard"
_LAYOUT = (
    CONFIG_FILE,
    METRICS_FILE,
    DONE_FILE,
    CHECKPOINT,
    REFERENCE,
    VALIDATION,
    VALIDATION_POLICY,
    TENSORBOARD,
)
#: A checkpoint folder: the policy's weights, the optimiser, every RNG state, the record.
POLICY, OPTIMIZER, RNG, STATE = "policy", "optimizer.pt", "rng.pt", "state.json"
#: Where a checkpoint is written before it is swapped in, and where the old one waits meanwhile.
NEW_CHECKPOINT, OLD_CHECKPOINT = ".checkpoint-new", ".checkpoint-old"


class RunFolderError(ValueError):
    """A run folder's file breaks its rules; the message names the file and what is wrong."""


#: A shipped policy folder (a behaviour-cloning start of ``bc.cache_dir`` and the starts a
#: campaign ships, with its statistics in :data:`DONE_FILE`; a credit set's model) holds this
#: record of what it is: the fingerprint of its weights and the machine that made it, since
#: trained weights are bitwise only on the same CPU (``docs/training.md``, "Reproducibility").
START_RECORD = "start.json"


def record_start(folder: Path, made_on: Mapping[str, object]) -> None:
    """Write ``folder``'s start record: its weights' fingerprint and ``made_on``."""
    record = {"weights": weights_fingerprint(folder), "made_on": made_on}
    atomic_write_text(folder / START_RECORD, json.dumps(record, indent=1, sort_keys=True) + "\n")


def check_start(folder: Path) -> dict[str, Any] | None:
    """``folder``'s start record (``None`` for a start written before records were), refused in
    one line when its weights are not the ones it records (damaged or replaced)."""
    path = folder / START_RECORD
    if not path.is_file():
        return None
    record = read_json(path)
    recorded = record.get("weights") if isinstance(record, dict) else None
    found = weights_fingerprint(folder)
    if not isinstance(recorded, str) or found != recorded:
        raise RunFolderError(
            f"{folder}: the behaviour-cloning start's weights have fingerprint {found}, its "
            f"record says {recorded}: damaged or replaced (delete the folder to clone again)"
        )
    return dict(record)


@dataclass(frozen=True)
class Metrics:
    """The rows of a metrics journal (rule 3).

    Attributes:
        rows: one per iteration, in order, iteration ``i`` at index ``i``.
        torn: whether a torn last line was dropped.
    """

    rows: list[MetricsRow]
    torn: bool = False

    @property
    def last_iteration(self) -> int | None:
        """The iteration of the last row (``None``: no row)."""
        return len(self.rows) - 1 if self.rows else None


def parse_metrics(data: bytes, name: str) -> Metrics:
    """The rows of metrics-journal bytes by rule 3; :class:`RunFolderError` names ``name``'s line.

    Example:
        >>> parse_metrics(b'{"iteration": 0}\\n{"iteration": 1}\\n{"itera', "m.jsonl").torn
        True
        >>> parse_metrics(b'{"iteration": 0}\\n{"iteration": 2}\\n', "m.jsonl")
        Traceback (most recent call last):
        ...
        agentbench_rl.spec.run_folder.RunFolderError: m.jsonl line 2 is iteration 2, but iteration 1 is missing before it
    """  # noqa: E501
    rows: list[MetricsRow] = []
    try:
        text, complete_bytes = complete_lines(data, name)
        for number, row in json_lines(text, name):
            iteration = row.get("iteration") if isinstance(row, dict) else None
            if not isinstance(row, dict):
                raise RunFolderError(f"{name} line {number} is not a JSON object")
            if isinstance(iteration, bool) or not isinstance(iteration, int):
                raise RunFolderError(
                    f"{name} line {number} has no whole-number 'iteration' "
                    f"(got {json.dumps(iteration)})"
                )
            expected = len(rows)
            if iteration < expected:
                raise RunFolderError(
                    f"{name} line {number} repeats iteration {iteration} (a row is recorded once)"
                )
            if iteration > expected:
                raise RunFolderError(
                    f"{name} line {number} is iteration {iteration}, but iteration {expected} is "
                    "missing before it"
                )
            rows.append(cast(MetricsRow, row))  # its iteration was checked above
    except RunFolderError:
        raise
    except ValueError as problem:  # not UTF-8, or a line that is not JSON
        raise RunFolderError(str(problem)) from None
    return Metrics(rows, torn=complete_bytes < len(data))


@dataclass(frozen=True)
class CheckpointState:
    """What a checkpoint's ``state.json`` records (rule 4).

    Attributes:
        iteration: the iteration the checkpoint was taken after.
        weights: fingerprint of ``policy/``'s weight files.
        files: sha256 of the optimiser and RNG files, by name (empty in checkpoints written
            before it was recorded).
        run: the identity hash of the run's config (``None`` in older checkpoints).
        reference: fingerprint of the run's ``reference/`` (``None``: older, or no KL).
        record: the whole ``state.json`` (provenance included).
    """

    iteration: int
    weights: str | None
    files: dict[str, str]
    run: str | None
    reference: str | None
    record: dict[str, Any]


class RunFolder:
    """The folder of one training run (module docstring).

    Example:
        >>> import tempfile
        >>> folder = RunFolder(Path(tempfile.mkdtemp()) / "run")
        >>> folder.holds_run(), folder.is_finished()
        (False, False)
        >>> with folder.lock():
        ...     folder.write_metrics([{"iteration": 0, "val_success": 0.5}])
        >>> folder.holds_run(), folder.read_metrics().last_iteration
        (True, 0)
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.config_file = self.path / CONFIG_FILE
        self.metrics_file = self.path / METRICS_FILE
        self.done_file = self.path / DONE_FILE
        self.reference = self.path / REFERENCE
        self.validation_policy = self.path / VALIDATION_POLICY
        self.tensorboard = self.path / TENSORBOARD

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    def lock(self) -> FolderLock:
        """The folder's lock (rule 1), creating the folder; use it as a ``with`` block."""
        try:
            return FolderLock.making(self.path, "run folder")
        except ValueError as problem:
            raise RunFolderError(str(problem)) from None

    # ------------------------------------------------------------------ what the folder holds
    def holds_run(self) -> bool:
        """Whether the folder holds a run (rule 2): a metrics row or a checkpoint."""
        has_rows = self.metrics_file.is_file() and self.metrics_file.stat().st_size > 0
        return has_rows or self.latest_checkpoint() is not None

    def check_continuation(
        self, resume: bool, changes: Callable[[], Sequence[str]], held: bool | None = None
    ) -> None:
        """Refuse to start over a run (rule 2): ``FileExistsError`` for a folder that holds one
        (``held``: the trainer's own test, :meth:`holds_run` by default) without ``resume``;
        ``ValueError`` naming the fields ``changes()`` finds changed against the stored config
        with it."""
        if not (self.holds_run() if held is None else held):
            return
        if not resume:
            raise FileExistsError(
                f"{self.path} already holds a training run; pass --resume to continue it "
                "or choose another --out"
            )
        changed = changes()
        if changed:
            raise ValueError(
                f"--resume: {self.path} was trained with a different {', '.join(changed)}"
            )

    def is_finished(self) -> bool:
        """Whether the run finished (``done.json`` is written last)."""
        return self.done_file.is_file()

    def validation(self, iteration: int, of: str = "iter") -> Path:
        """The results folder of the validation after ``iteration`` (``of="panel"``: the
        evaluation of the run's training panel then)."""
        return self.path / VALIDATION / f"{of}-{iteration:04d}"

    def remove_start(self, made_folder: bool) -> None:
        """Remove what a start that failed before its first metrics row wrote (rule 2: such a
        folder holds no run): the whole folder when the start made it, else the layout's files
        in it (never a file the layout does not name)."""
        if not self.path.is_dir() or self.holds_run():
            return
        if made_folder:
            shutil.rmtree(self.path, ignore_errors=True)
            return
        for name in (*_LAYOUT, NEW_CHECKPOINT, OLD_CHECKPOINT):
            remove_path(self.path / name, ignore_errors=True)

    def restart(self, checkpoint_kept: bool, iteration: int) -> None:
        """Clear what a run that starts again after ``iteration`` must not keep: ``done.json``
        (written again at the end), the validations of later iterations (they are done again)
        and, on a fresh start (``checkpoint_kept`` false), every checkpoint, the reference and
        every validation of an earlier attempt."""
        remove_path(self.done_file)
        if not checkpoint_kept:
            for name in (CHECKPOINT, OLD_CHECKPOINT, NEW_CHECKPOINT, REFERENCE, VALIDATION):
                remove_path(self.path / name)
        for folder in sorted((self.path / VALIDATION).glob("*-*")):
            of, _, number = folder.name.partition("-")
            if of in VALIDATIONS and number.isdigit() and int(number) > iteration:
                remove_path(folder)

    # ------------------------------------------------------------------ the metrics journal
    def read_metrics(self) -> Metrics:
        """The metrics rows by rule 3 (none when there is no file)."""
        if not self.metrics_file.exists():
            return Metrics([])
        if not self.metrics_file.is_file():
            raise RunFolderError(f"{self.metrics_file} is not a file")
        return parse_metrics(self.metrics_file.read_bytes(), str(self.metrics_file))

    def write_metrics(self, rows: list[MetricsRow]) -> None:
        """Replace the metrics journal by ``rows`` (atomically)."""
        text = "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows)
        atomic_write_text(self.metrics_file, text)

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self) -> Path:
        """Where the last checkpoint lives."""
        return self.path / CHECKPOINT

    def latest_checkpoint(self) -> Path | None:
        """The run's latest complete checkpoint folder, if any (between the two renames of a
        checkpoint swap, the old one waits in ``.checkpoint-old``)."""
        for name in (CHECKPOINT, OLD_CHECKPOINT):
            folder = self.path / name
            if (folder / STATE).is_file():
                return folder
        return None

    def read_state(self, checkpoint: Path) -> CheckpointState:
        """A checkpoint's ``state.json``; :class:`RunFolderError` names a bad file or field."""
        path = checkpoint / STATE
        try:
            record = read_json(path, str(path))
        except ValueError as problem:
            raise RunFolderError(str(problem)) from None
        if not isinstance(record, dict):
            raise RunFolderError(f"{path} must hold a JSON object")
        iteration = record.get("iteration")
        if isinstance(iteration, bool) or not isinstance(iteration, int) or iteration < 0:
            raise RunFolderError(f"{path}: 'iteration' must be a whole number, got {iteration!r}")
        optional = {key: record.get(key) for key in ("weights", "run", "reference")}
        for key, value in optional.items():
            if value is not None and not isinstance(value, str):
                raise RunFolderError(f"{path}: '{key}' must be a string, got {value!r}")
        files = record.get("files", {})
        if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
            raise RunFolderError(f"{path}: 'files' must map file names to sha256 digests")
        return CheckpointState(
            iteration=iteration,
            weights=optional["weights"],
            files=files,
            run=optional["run"],
            reference=optional["reference"],
            record=record,
        )

    def check_checkpoint(
        self, checkpoint: Path, identity: str, reference: str | None
    ) -> CheckpointState:
        """The state of a checkpoint whose files are those it records, of the run whose identity
        hash is ``identity`` and whose ``reference/`` has fingerprint ``reference``; else
        :class:`RunFolderError` naming the first file that does not fit."""
        state = self.read_state(checkpoint)
        where = checkpoint.relative_to(self.path)
        if state.run is not None and state.run != identity:
            raise RunFolderError(
                f"{checkpoint}: the checkpoint is of another run (identity {state.run}, this "
                f"config's is {identity}): it was copied from a run with other settings"
            )
        policy = checkpoint / POLICY
        found = weights_fingerprint(policy)
        if found is None:
            raise RunFolderError(f"{policy} holds no weight files (model.safetensors is missing)")
        if found != state.weights:
            raise RunFolderError(
                f"{policy}: its weights have fingerprint {found} but {where}/{STATE} records "
                f"{state.weights} (damaged or replaced weights)"
            )
        for name in (OPTIMIZER, RNG):
            path = checkpoint / name
            if not path.is_file():
                raise RunFolderError(f"{path} is missing")
            if name in state.files and sha256_file(path) != state.files[name]:
                raise RunFolderError(
                    f"{path} differs from what {where}/{STATE} records (damaged or replaced)"
                )
        if state.reference is not None and state.reference != reference:
            raise RunFolderError(
                f"{self.reference} has fingerprint {reference} but the checkpoint was trained "
                f"against {state.reference} (a foreign or damaged reference)"
            )
        return state

    # ------------------------------------------------------------------ the finish record
    def write_done(self, iterations: int, last_checkpoint: int | None) -> None:
        """Mark the run finished (rule 5), last of all its writes."""
        done = {"iterations": iterations, "last_checkpoint": last_checkpoint}
        atomic_write_text(self.done_file, json.dumps(done) + "\n")

    def check_finished(self) -> Metrics:
        """The metrics of a finished run whose ``done.json`` agrees with them (rule 5); else
        :class:`RunFolderError` naming what disagrees."""
        if not self.is_finished():
            raise RunFolderError(f"{self.path}: the run has not finished (no {DONE_FILE})")
        try:
            done = read_json(self.done_file, str(self.done_file))
        except ValueError as problem:
            raise RunFolderError(str(problem)) from None
        iterations = done.get("iterations") if isinstance(done, dict) else None
        if isinstance(iterations, bool) or not isinstance(iterations, int):
            raise RunFolderError(f"{self.done_file} has no whole-number 'iterations'")
        metrics = self.read_metrics()
        if metrics.last_iteration != iterations:
            raise RunFolderError(
                f"{self.done_file} says {iterations} iterations but {self.metrics_file} ends at "
                f"iteration {metrics.last_iteration}"
            )
        return metrics

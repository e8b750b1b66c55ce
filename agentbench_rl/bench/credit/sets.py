"""Credit sets: a frozen rollout batch with the true advantage of every row, as data.

A set is what ``bench fidelity --export-set`` (the Monte-Carlo truth of a real env) and
``bench credit-set`` (an exact MDP of the learning testbed) write, and what ``bench credit``
scores any estimator on in seconds, with no env and no model. One folder per set::

    set.json   schema, name, kind ("monte-carlo" | "exact"), the settings it was made with
               (env, split, tasks, group size, policy, seed, K, γ, ...), its hidden states'
               source, layer and dtype, the commit and command that made it, and the sha256
               of set.npz
    set.npz    one array per column: every StepBatch column an estimator may read (group,
               traj, t, reward, obs_key, state_key, action_key, valid, success, next_obs_key,
               hidden where the policy handed them over), the row's category, and the truth:
               true_advantage, standard_error, value, value_standard_error (0 for an exact set)

Strings are stored as fixed-width Unicode arrays, so loading never unpickles (``allow_pickle``
stays off); the checksum and the schema are checked first, so a tampered, truncated or foreign
file is refused in one line naming it.

Example:
    >>> import tempfile
    >>> made = mdp_set("lucky_rare", tasks=2, group_size=3, seed=0)
    >>> folder = Path(tempfile.mkdtemp()) / made.name
    >>> write_set(made, folder)
    >>> loaded = read_set(folder)
    >>> len(loaded.batch) == len(made.batch), loaded.kind, loaded.settings["gamma"]
    (True, 'exact', 0.95)
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from agentbench_rl.bench.credit.settings import MDP_SET_TASKS
from agentbench_rl.core.atomic import atomic_write_bytes, atomic_write_text
from agentbench_rl.core.batch import StepBatch
from agentbench_rl.core.hashing import seed_from
from agentbench_rl.core.jsonfile import read_json
from agentbench_rl.core.text import portable_values
from agentbench_rl.spec.records import POLICY_KEY, CreditSetMeta, HiddenSource, set_settings

SCHEMA = 1
META_FILE = "set.json"
ARRAYS_FILE = "set.npz"
#: The batch columns a set always holds, and those it holds when it has them.
BATCH_COLUMNS = (
    *("group", "traj", "t", "reward", "obs_key", "state_key", "action_key", "valid"),
    *("success", "next_obs_key"),
)
OPTIONAL_BATCH_COLUMNS = ("hidden",)
TRUTH_COLUMNS = ("true_advantage", "standard_error", "value", "value_standard_error")
_STRING_COLUMNS = ("group", "traj", "obs_key", "state_key", "action_key", "next_obs_key")
#: γ of every standard set (the estimators' default, and the fidelity runs').
GAMMA = 0.95
#: The sets shipped with the package (``bench credit`` reads them unless told otherwise).
STANDARD_SETS = Path(__file__).resolve().parent / "standard"
#: The most a set's arrays may take once decompressed (read from the zip's directory before
#: any array loads; the largest standard set takes 2 MB): a small file that would decompress
#: to gigabytes is refused at once.
MAX_ARRAY_BYTES = 512 * 2**20
#: The columns that must hold numbers (finite ones), booleans or text.
_NUMBER_COLUMNS = ("t", "reward", *TRUTH_COLUMNS, "hidden")
_BOOLEAN_COLUMNS = ("valid", "success")


class CreditSetError(ValueError):
    """A set that cannot be read: one line naming the file and the problem."""


@dataclass(frozen=True)
class CreditSet:
    """One frozen batch and its truth (module docstring).

    ``settings`` say how the set was made; ``hidden`` where its hidden states come from (``None``:
    the set has none, and BiPACE is not scored on it); ``made`` the commit, date and command.
    """

    name: str
    kind: str  # "monte-carlo" or "exact"
    batch: StepBatch
    category: np.ndarray
    true_advantage: np.ndarray
    standard_error: np.ndarray
    value: np.ndarray
    value_standard_error: np.ndarray
    settings: dict[str, Any]
    hidden: HiddenSource | None = None
    made: dict[str, Any] = field(default_factory=dict)
    #: Whether its arrays are a standard set's pinned ones (:mod:`.pins`); a set of one's own is
    #: read unpinned.
    pinned: bool = False

    @property
    def gamma(self) -> float:
        """The discount of the truth (and of the estimators that discount, when scored)."""
        return float(self.settings["gamma"])

    @property
    def tasks(self) -> np.ndarray:
        """Each row's task draw (its group): what the bootstrap resamples."""
        return np.asarray(self.batch.group).astype(str)

    @property
    def success_rate(self) -> float:
        """The share of the set's trajectories that succeeded."""
        return float(np.mean(_trajectory_success(self.batch)))

    @property
    def noise_share(self) -> float:
        """The share of the true advantages' variance that is Monte-Carlo noise (0: exact)."""
        spread = float(np.var(self.true_advantage))
        noise = float(np.mean(self.standard_error**2))
        return noise / spread if spread > 0 else float("nan")


def batch_arrays(batch: StepBatch) -> dict[str, np.ndarray]:
    """The batch's columns as a set stores them (text as fixed-width Unicode, hidden states as
    float16), those it has: what :func:`batch_of` reads back; no truth."""
    arrays: dict[str, np.ndarray] = {}
    for column in (*BATCH_COLUMNS, *OPTIONAL_BATCH_COLUMNS):
        values = getattr(batch, column)
        if values is None:
            continue
        if column in _STRING_COLUMNS:
            arrays[column] = np.asarray([str(v) for v in values])
        else:
            arrays[column] = np.asarray(values, dtype=np.float16 if column == "hidden" else None)
    return arrays


def batch_of(arrays: Any) -> StepBatch:
    """The :class:`StepBatch` of stored columns (:func:`batch_arrays`' or a set's);
    ``ValueError`` for a malformed one."""
    columns = {
        name: arrays[name].astype(object) if name in _STRING_COLUMNS else arrays[name]
        for name in BATCH_COLUMNS
        if name in arrays
    }
    if "hidden" in arrays:
        columns["hidden"] = arrays["hidden"].astype(np.float32)
    return StepBatch(**columns)


def _arrays(credit: CreditSet) -> dict[str, np.ndarray]:
    arrays = batch_arrays(credit.batch)
    for column in BATCH_COLUMNS:
        if column not in arrays:
            raise CreditSetError(f"credit set {credit.name}: the batch has no '{column}' column")
    arrays["category"] = np.asarray([str(v) for v in credit.category])
    for name in TRUTH_COLUMNS:
        arrays[name] = np.asarray(getattr(credit, name), dtype=np.float64)
    return arrays


def write_set(credit: CreditSet, folder: Path) -> None:
    """Write ``credit`` to ``folder`` (both files atomically, the arrays first)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    arrays = _arrays(credit)
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]
    data = buffer.getvalue()
    atomic_write_bytes(folder / ARRAYS_FILE, data)
    meta = CreditSetMeta(
        schema=SCHEMA,
        name=credit.name,
        kind=credit.kind,
        rows=len(credit.batch),
        tasks=int(credit.batch.n_groups),
        trajectories=int(credit.batch.n_trajs),
        success_rate=credit.success_rate,
        noise_share=credit.noise_share,
        columns=sorted(arrays),
        # what a reader needs: no path of the machine that made it
        settings=portable_values(credit.settings),
        hidden=credit.hidden,
        made=portable_values(credit.made),
        sha256=hashlib.sha256(data).hexdigest(),
    )
    atomic_write_text(
        folder / META_FILE, json.dumps(meta, indent=1, allow_nan=True, ensure_ascii=False) + "\n"
    )


def _trajectory_success(batch: StepBatch) -> np.ndarray:
    """One success flag per trajectory."""
    assert batch.success is not None
    codes, n_trajs = batch.codes("traj")
    success = np.zeros(n_trajs, dtype=bool)
    success[codes] = batch.success
    return success


def read_set(folder: Path) -> CreditSet:
    """The set in ``folder``; :class:`CreditSetError` in one line for a missing, foreign,
    tampered or malformed set."""
    folder = Path(folder)
    meta_path, arrays_path = folder / META_FILE, folder / ARRAYS_FILE
    for path in (meta_path, arrays_path):
        if not path.is_file():
            raise CreditSetError(
                f"{path}: no such file (a credit set is {META_FILE} + {ARRAYS_FILE})"
            )
    try:
        meta = read_json(meta_path, str(meta_path))
    except ValueError as problem:
        raise CreditSetError(str(problem)) from None
    if not isinstance(meta, dict) or "schema" not in meta:
        raise CreditSetError(f"{meta_path}: not a credit set (no schema)")
    if meta["schema"] != SCHEMA:
        raise CreditSetError(
            f"{meta_path}: schema {meta['schema']!r}, this version reads schema {SCHEMA}"
        )
    data = arrays_path.read_bytes()
    sha256 = hashlib.sha256(data).hexdigest()
    if sha256 != meta.get("sha256"):
        raise CreditSetError(
            f"{arrays_path}: its sha256 differs from {META_FILE}'s: the file was changed or "
            "belongs to another set"
        )
    name = str(meta.get("name", folder.name))
    pinned = _check_pin(folder, name, sha256)
    arrays = _read_arrays(arrays_path, data)
    settings = meta.get("settings") or {}
    if not isinstance(settings, dict):
        raise CreditSetError(f"{meta_path}: 'settings' must be an object")
    settings = set_settings(settings)
    gamma = settings.get("gamma")
    if not isinstance(gamma, int | float) or not 0.0 <= gamma <= 1.0:  # NaN fails too
        raise CreditSetError(f"{meta_path}: settings.gamma must be a number in [0, 1]")
    try:
        batch = batch_of(arrays)
    except ValueError as problem:
        raise CreditSetError(f"{arrays_path}: {problem}") from None
    return CreditSet(
        name=name,
        kind=str(meta.get("kind")),
        batch=batch,
        category=arrays["category"].astype(object),
        **{column: arrays[column].astype(np.float64) for column in TRUTH_COLUMNS},
        settings=dict(settings),
        hidden=meta.get("hidden"),
        made=dict(meta.get("made") or {}),
        pinned=pinned,
    )


def _check_pin(folder: Path, name: str, sha256: str) -> bool:
    """Whether the set is a pinned standard set; :class:`CreditSetError` for a standard set
    whose arrays are not its pin (changed and sealed again)."""
    from agentbench_rl.bench.credit.pins import PINS

    pin = PINS.get(name)
    if folder.resolve().parent != STANDARD_SETS or pin is None:
        return False
    if sha256 != pin:
        raise CreditSetError(
            f"{folder}: the standard set's arrays are not the pinned ones (sha256 {sha256[:16]}, "
            f"pinned {pin[:16]}): changed and sealed again"
        )
    return True


def _read_arrays(path: Path, data: bytes) -> dict[str, np.ndarray]:
    """The columns of ``set.npz``, checked: the decompressed size (from the zip's directory,
    before any array loads), every column present, of one length and of its kind, numbers
    finite; :class:`CreditSetError` in one line naming the file and the column."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            size = sum(member.file_size for member in archive.infolist())
    except (zipfile.BadZipFile, ValueError) as problem:
        raise CreditSetError(f"{path}: not readable ({problem})") from None
    if size > MAX_ARRAY_BYTES:
        raise CreditSetError(
            f"{path}: its arrays would take {size / 2**20:,.0f} MB decompressed, over the "
            f"{MAX_ARRAY_BYTES / 2**20:.0f} MB a credit set may take"
        )
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except (ValueError, OSError, zipfile.BadZipFile) as problem:
        raise CreditSetError(f"{path}: not readable ({problem})") from None
    required = (*BATCH_COLUMNS, "category", *TRUTH_COLUMNS)
    missing = [name for name in required if name not in arrays]
    if missing:
        raise CreditSetError(f"{path}: lacks the column(s) {', '.join(missing)}")
    rows = len(arrays["t"]) if arrays["t"].ndim else -1
    for name, values in arrays.items():
        if values.ndim != (2 if name == "hidden" else 1) or len(values) != rows:
            raise CreditSetError(f"{path}: column {name} is not one value per row ({rows} rows)")
        if name in _NUMBER_COLUMNS and values.dtype.kind not in "iuf":
            raise CreditSetError(f"{path}: column {name} holds {values.dtype}, not numbers")
        if name in _NUMBER_COLUMNS and not np.all(np.isfinite(values)):
            raise CreditSetError(f"{path}: column {name} holds NaN or infinity")
        if name in _BOOLEAN_COLUMNS and values.dtype.kind != "b":
            raise CreditSetError(f"{path}: column {name} holds {values.dtype}, not booleans")
        if name in (*_STRING_COLUMNS, "category") and values.dtype.kind != "U":
            raise CreditSetError(f"{path}: column {name} holds {values.dtype}, not text")
    return arrays


def read_sets(root: Path) -> list[CreditSet]:
    """Every set under ``root`` (a folder of set folders, or one set), by name."""
    root = Path(root)
    if (root / META_FILE).is_file():
        return [read_set(root)]
    folders = sorted(path.parent for path in root.glob(f"*/{META_FILE}"))
    if not folders:
        raise CreditSetError(f"{root}: no credit set here (no */{META_FILE})")
    return [read_set(folder) for folder in folders]


# ------------------------------------------------------------------------------ exact MDP sets
def mdp_set_name(mdp_name: str) -> str:
    """The set name of an MDP of the learning testbed (``mdp-lucky-rare``)."""
    return f"mdp-{mdp_name.replace('_', '-')}"


def mdp_of(set_name: str) -> str:
    """The MDP a set name stands for; ``ValueError`` naming the choices.

    Example:
        >>> mdp_of("mdp-lucky-rare")
        'lucky_rare'
    """
    from agentbench_rl.bench.learning.family import FAMILY

    name = set_name.removeprefix("mdp-").replace("-", "_")
    if not set_name.startswith("mdp-") or name not in FAMILY:
        choices = ", ".join(mdp_set_name(known) for known in FAMILY)
        raise ValueError(f"no exact credit set '{set_name}' (choose from {choices})")
    return name


def mdp_set(
    mdp_name: str,
    tasks: int = MDP_SET_TASKS,
    group_size: int = 8,
    seed: int = 0,
    gamma: float = GAMMA,
) -> CreditSet:
    """A batch of the learning testbed's MDP ``mdp_name`` played by its initial policy π₀ (the
    policy every learning run starts from): ``tasks`` task draws x ``group_size`` trajectories,
    drawn as the testbed draws an iteration (its seeded draws of iteration 0), with the exact
    ``A_t(s, a)``, ``V_t(s)`` of π₀ by backward induction at discount ``gamma`` and the
    testbed's synthetic hidden states (BiPACE's input)."""
    from agentbench_rl.bench.learning.family import FAMILY
    from agentbench_rl.bench.learning.loop import LearningConfig, SeedDraws, play, step_batch
    from agentbench_rl.bench.learning.mdp import exact_tables, softmax

    mdp = FAMILY[mdp_name]()
    config = LearningConfig(tasks=tasks, group_size=group_size)
    policies = softmax(mdp.initial_logits)[None]
    played = play(mdp, policies, [SeedDraws.draw(mdp, seed, 0, config)], group_size)
    steps = step_batch(mdp, played, group_size, config.hidden)
    advantages, values = exact_tables(mdp, policies, gamma)
    won = played.reward >= mdp.success_reward  # the step that collected a win
    success_by_traj = np.zeros(played.traj.max() + 1, dtype=bool)
    np.logical_or.at(success_by_traj, played.traj, won)
    batch = replace(
        steps,
        group=np.array([f"{mdp_name}:{g}" for g in steps.group], dtype=object),
        traj=np.array([f"{mdp_name}:{t}" for t in steps.traj], dtype=object),
        success=success_by_traj[played.traj],
    )
    return CreditSet(
        name=mdp_set_name(mdp_name),
        kind="exact",
        batch=batch,
        category=np.full(len(batch), mdp_name, dtype=object),
        true_advantage=advantages[0, played.t, played.state, played.action],
        standard_error=np.zeros(len(batch)),
        value=values[0, played.t, played.state],
        value_standard_error=np.zeros(len(batch)),
        settings={
            "env": f"mdp:{mdp_name}",
            POLICY_KEY: "π₀ (the testbed's initial policy)",
            "tasks": tasks,
            "group_size": group_size,
            "seed": seed,
            "seed_stream": seed_from("learning", mdp_name, seed, 0),
            "continuations": "exact",
            "gamma": gamma,
        },
        hidden={
            "source": "bench learning's synthetic hidden states (HiddenFeatures: a random "
            "projection of the true state's factors and the last action, plus noise)",
            "dim": int(config.hidden.dim),
            "dtype": "float16",
        },
    )

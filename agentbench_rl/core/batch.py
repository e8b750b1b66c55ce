"""``StepBatch``: one row per environment step, the input of every advantage estimator.

The columns and the rules a batch must obey are fixed by ``docs/estimators.md``; a batch that
breaks them raises ``ValueError`` naming the column and the row, at construction, so estimators
can trust what they get.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from operator import itemgetter
from typing import Any, TypedDict, cast

import numpy as np
import pandas as pd
from typing_extensions import NotRequired

REQUIRED_COLUMNS = ("group", "traj", "t", "reward", "obs_key", "state_key", "action_key", "valid")
OPTIONAL_COLUMNS = ("hidden", "semantic_key", "success", "next_obs_key")
KEY_COLUMNS = (
    *("group", "traj", "obs_key", "state_key", "action_key", "semantic_key", "next_obs_key"),
)
#: The optional columns that hold keys (compared exactly, as objects).
OPTIONAL_KEYS = ("semantic_key", "next_obs_key")


class StepFields(TypedDict):
    """What one env step contributes to its estimator row, whoever plays it (the episode
    driver, verl's agent loop): :func:`agentbench_rl.rollout.episode.step_fields` writes it."""

    t: int
    reward: float
    obs_key: Any
    state_key: Any
    action_key: Any
    valid: bool
    next_obs_key: NotRequired[Any]  # the observation the step led to (GraphGPO's graph edge)


class StepRecord(StepFields):
    """One step as a row of a :class:`StepBatch`: typed where the episode driver writes it
    (:func:`agentbench_rl.rollout.episode.step_record`), read by :class:`StepColumns` and
    :meth:`StepBatch.from_records`. A ``TypedDict``: records travel as the dicts they are
    (between processes, to verl's workers, into trajectory files), so the type costs nothing
    where a step is played on every step.

    Example:
        >>> record: StepRecord = {"group": 0, "traj": 0, "t": 0, "reward": 1.0, "obs_key": "o",
        ...                       "state_key": "s", "action_key": "up", "valid": True}
        >>> StepBatch.from_records([record]).n_trajs
        1
    """

    group: Any
    traj: Any
    success: NotRequired[bool]  # set when the episode ends
    semantic_key: NotRequired[Any]
    hidden: NotRequired[np.ndarray]


def _fail(column: str, row: int | None, message: str) -> ValueError:
    where = f"column '{column}'" + (f", row {row}" if row is not None else "")
    return ValueError(f"StepBatch: {where}: {message}")


def _as_object(values: Any, column: str) -> np.ndarray:
    array = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
    if array.ndim != 1:
        raise _fail(column, None, f"expected a 1-d column, got shape {array.shape}")
    return array


def factorize(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Integer codes 0..k-1 for the distinct values of ``values``, compared exactly as given.

    ``1`` and ``"1"`` get different codes (ids are compared as given). Hash-based, so it costs
    about as much as one pass over the column.

    Example:
        >>> codes, k = factorize(np.array(["b", "a", "b"], dtype=object))
        >>> codes.tolist(), k
        ([0, 1, 0], 2)
    """
    codes, uniques = pd.factorize(values, sort=False)
    if codes.size and codes.min() < 0:
        # None or NaN among the values: pandas codes them -1 unless asked not to; asking always
        # costs an extra pass over the column (a third of the time), so only these columns pay.
        codes, uniques = pd.factorize(values, sort=False, use_na_sentinel=False)
    return codes.astype(np.int64, copy=False), len(uniques)


@dataclass(frozen=True, eq=False)
class StepBatch:
    """Columnar batch of environment steps (see ``docs/estimators.md`` for each column).

    Build it with :meth:`from_records` or directly from arrays; either way it is validated.

    Example:
        >>> batch = StepBatch.from_records([
        ...     {"group": 0, "traj": "a", "t": 0, "reward": 0.0, "obs_key": "o0",
        ...      "state_key": "s0", "action_key": "up", "valid": True},
        ...     {"group": 0, "traj": "a", "t": 1, "reward": 1.0, "obs_key": "o1",
        ...      "state_key": "s1", "action_key": "left", "valid": True},
        ... ])
        >>> len(batch), batch.n_groups, batch.n_trajs
        (2, 1, 1)
    """

    group: np.ndarray
    traj: np.ndarray
    t: np.ndarray
    reward: np.ndarray
    obs_key: np.ndarray
    state_key: np.ndarray
    action_key: np.ndarray
    valid: np.ndarray
    hidden: np.ndarray | None = None
    semantic_key: np.ndarray | None = None
    success: np.ndarray | None = None
    next_obs_key: np.ndarray | None = None
    # Derived once at validation, shared by every estimator run on this batch.
    group_codes: np.ndarray = field(init=False, repr=False)
    traj_codes: np.ndarray = field(init=False, repr=False)
    n_groups: int = field(init=False)
    n_trajs: int = field(init=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen dataclass: normalise the columns in place once
        n = None
        for name in REQUIRED_COLUMNS:
            column = getattr(self, name)
            if column is None:
                raise _fail(name, None, "missing")
            length = len(column)
            if n is None:
                n = length
            elif length != n:
                # the first row that one of the two columns lacks
                raise _fail(name, min(length, n), f"has {length} rows, column 'group' has {n}")
        assert n is not None
        if n == 0:
            raise _fail("group", None, "the batch is empty")
        for name in OPTIONAL_COLUMNS:
            column = getattr(self, name)
            if column is not None and len(column) != n:
                raise _fail(
                    name, min(len(column), n), f"has {len(column)} rows, column 'group' has {n}"
                )

        for name in ("group", "traj", "obs_key", "state_key", "action_key"):
            set_(self, name, _as_object(getattr(self, name), name))
        for name in OPTIONAL_KEYS:
            if getattr(self, name) is not None:
                set_(self, name, _as_object(getattr(self, name), name))

        reward = np.asarray(self.reward, dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(reward))
        if bad.size:
            raise _fail("reward", int(bad[0]), f"reward {reward[bad[0]]!r} is not finite")
        set_(self, "reward", reward)

        set_(self, "t", self._integer_t(self.t))
        set_(self, "valid", self._bools(self.valid, "valid"))
        if self.success is not None:
            set_(self, "success", self._bools(self.success, "success"))
        if self.hidden is not None:
            set_(self, "hidden", _hidden_matrix(self.hidden))

        group_codes, n_groups = factorize(self.group)
        traj_codes, n_trajs = factorize(self.traj)
        set_(self, "group_codes", group_codes)
        set_(self, "traj_codes", traj_codes)
        set_(self, "n_groups", n_groups)
        set_(self, "n_trajs", n_trajs)
        self._check_trajectories()

    @staticmethod
    def _integer_t(values: Any) -> np.ndarray:
        t = np.asarray(values)
        if t.dtype.kind in "iu":
            return t.astype(np.int64, copy=False)
        if t.dtype.kind == "b" or t.dtype.kind not in "f":
            for row, value in enumerate(t.tolist()):
                if isinstance(value, bool) or not isinstance(value, int | np.integer):
                    raise _fail("t", row, f"step index {value!r} is not an integer")
            return t.astype(np.int64)
        bad = np.flatnonzero(~np.isfinite(t) | (t != np.round(t)))
        if bad.size:
            raise _fail("t", int(bad[0]), f"step index {t[bad[0]]!r} is not an integer")
        return t.astype(np.int64)

    @staticmethod
    def _bools(values: Any, column: str) -> np.ndarray:
        array = np.asarray(values)
        if array.dtype == np.bool_:
            return array
        # Check the values as given: asarray would turn [True, "yes"] into strings.
        items = values.tolist() if isinstance(values, np.ndarray) else list(values)
        for row, value in enumerate(items):
            if not isinstance(value, bool | np.bool_) and value not in (0, 1):
                raise _fail(column, row, f"{value!r} is not a boolean")
        return array.astype(bool)

    def _check_trajectories(self) -> None:
        order = self.traj_order
        traj = self.traj_codes[order]
        t = self.t[order]
        starts = np.ones(len(order), dtype=bool)
        starts[1:] = traj[1:] != traj[:-1]
        bad_start = np.flatnonzero(starts & (t != 0))
        if bad_start.size:
            row = int(order[bad_start[0]])
            traj_id = _python(self.traj[row])
            raise _fail("t", row, f"trajectory {traj_id!r} starts at t={self.t[row]}, not 0")
        step = np.diff(t)
        broken = np.flatnonzero(~starts[1:] & (step != 1))
        if broken.size:
            k = broken[0] + 1
            row = int(order[k])
            kind = "repeats" if step[k - 1] == 0 else "has a gap at"
            raise _fail("t", row, f"trajectory {_python(self.traj[row])!r} {kind} t={self.t[row]}")
        group = self.group_codes[order]
        split = np.flatnonzero(~starts[1:] & (group[1:] != group[:-1]))
        if split.size:
            row = int(order[split[0] + 1])
            traj_id = _python(self.traj[row])
            raise _fail("group", row, f"trajectory {traj_id!r} appears in two groups")

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]], **replaced: Any) -> StepBatch:
        """Build a batch from one dict per step (keys as the column names).

        ``hidden`` may be given on some rows only; rows without it hold NaN, which the estimators
        that need it reject with the row number. ``replaced`` columns (e.g. ``reward=`` shaped
        rewards, ``hidden=`` a matrix) are taken as given instead of from the records.

        The records are read one column at a time (one C-level pass each), and integer ids are
        kept as int64, which factorises four times faster than the same ids as objects: at 100k
        rows the build costs about as much as the dict lookups themselves (``bench estimators``).

        Example:
            >>> StepBatch.from_records([{"group": 0, "traj": 0, "t": 0, "reward": 1.0,
            ...     "obs_key": "o", "state_key": "s", "action_key": "a", "valid": True}]).n_trajs
            1
        """
        rows = records if isinstance(records, list) else list(records)
        if not rows:
            raise _fail("group", None, "the batch is empty")
        _check_replaced(replaced)
        columns: dict[str, Any] = dict(replaced)
        for name in REQUIRED_COLUMNS:
            if name not in columns:
                columns[name] = _column(rows, name)
        for name in _optional_keys(rows) - set(columns):
            if name == "hidden":
                hidden = [record.get("hidden") for record in rows]
                if any(vector is not None for vector in hidden):
                    columns["hidden"] = _stack_hidden(hidden)
            else:
                columns[name] = _column(rows, name, "missing (given on other rows)")
        for name, values in columns.items():
            if isinstance(values, list):
                columns[name] = _record_values(name, values)
        return cls(**columns)

    def to_records(self) -> list[dict[str, Any]]:
        """The batch as one dict per row (inverse of :meth:`from_records`)."""
        names = [*REQUIRED_COLUMNS] + [
            name for name in (*OPTIONAL_KEYS, "success") if getattr(self, name) is not None
        ]
        records = [
            {name: _python(getattr(self, name)[i]) for name in names} for i in range(len(self))
        ]
        if self.hidden is not None:
            for i, record in enumerate(records):
                record["hidden"] = self.hidden[i].tolist()
        return records

    def take(self, rows: Sequence[int] | np.ndarray) -> StepBatch:
        """A new batch holding ``rows`` in the given order (e.g. a permutation or a subset)."""
        index = np.asarray(rows, dtype=np.int64)

        def pick(column: np.ndarray | None) -> np.ndarray | None:
            return None if column is None else column[index]

        return StepBatch(
            group=self.group[index],
            traj=self.traj[index],
            t=self.t[index],
            reward=self.reward[index],
            obs_key=self.obs_key[index],
            state_key=self.state_key[index],
            action_key=self.action_key[index],
            valid=self.valid[index],
            hidden=pick(self.hidden),
            semantic_key=pick(self.semantic_key),
            success=pick(self.success),
            next_obs_key=pick(self.next_obs_key),
        )

    # ------------------------------------------------------------------ derived structure
    def __len__(self) -> int:
        return len(self.reward)

    @cached_property
    def traj_order(self) -> np.ndarray:
        """Row indices sorted by (trajectory code, t): each trajectory contiguous, in time order."""
        return np.lexsort((self.t, self.traj_codes))

    @cached_property
    def next_row(self) -> np.ndarray:
        """For each row, the row of the same trajectory at t+1, or -1 after the last step."""
        order = self.traj_order
        following = np.full(len(self), -1, dtype=np.int64)
        same = self.traj_codes[order[1:]] == self.traj_codes[order[:-1]]
        following[order[:-1][same]] = order[1:][same]
        return following

    @cached_property
    def prev_row(self) -> np.ndarray:
        """For each row, the row of the same trajectory at t-1, or -1 at t = 0."""
        following = self.next_row
        previous = np.full(len(self), -1, dtype=np.int64)
        has_next = following >= 0
        previous[following[has_next]] = np.flatnonzero(has_next)
        return previous

    @cached_property
    def step_order(self) -> tuple[np.ndarray, np.ndarray]:
        """Rows sorted by t (ties in row order) and the offsets where each t starts.

        The rows at step ``k`` are ``order[starts[k]:starts[k + 1]]``; walking k downwards runs a
        backward recursion over every trajectory at once.
        """
        order = np.argsort(self.t, kind="stable")
        starts = np.zeros(int(self.t.max()) + 2, dtype=np.int64)
        np.cumsum(np.bincount(self.t), out=starts[1:])
        return order, starts

    def codes(self, column: str) -> tuple[np.ndarray, int]:
        """Integer codes of a key column (cached), e.g. ``batch.codes("obs_key")``."""
        if column not in KEY_COLUMNS:
            raise ValueError(f"StepBatch: no key column '{column}' (have {', '.join(KEY_COLUMNS)})")
        cache: dict[str, tuple[np.ndarray, int]] = self.__dict__.setdefault("_codes", {})
        if column not in cache:
            values = getattr(self, column)
            if values is None:
                raise _fail(column, None, "missing")
            cache[column] = factorize(values)
        return cache[column]


class StepColumns:
    """Step records kept as columns: the episode driver's store
    (:class:`~agentbench_rl.rollout.episode.Lockstep`).

    Records are appended as they are written (one lockstep step's rows at a time) and turned
    into one array per column in blocks of ``BLOCK_ROWS``, while the rollout runs; what
    :meth:`batch` has left to do is the last block and a concatenation, with no pass over
    Python objects for the rows before it (``bench estimators``: "build" against "from
    records"). Appending stays a list append per step, which an episode played alone pays on
    every step. Columns set whole once the rows are written (``success`` when the episodes
    end, ``hidden``) are :meth:`set_column`'s. Records read back (:meth:`row`, :meth:`records`)
    are copies; a record is read when its block is converted, so it must not change after
    :meth:`extend`.

    Example:
        >>> rows = StepColumns()
        >>> rows.extend([{"group": 0, "traj": traj, "t": 0, "reward": 0.0, "obs_key": "o",
        ...     "state_key": "s", "action_key": "a", "valid": True} for traj in (0, 1)])
        >>> rows.set_column("success", np.array([True, False]))
        >>> len(rows), rows.batch().n_trajs, rows.row(1)["traj"], rows.row(1)["success"]
        (2, 2, 1, False)
    """

    #: Records held as dicts before they become arrays: large enough that a block's conversion
    #: costs little per row, small enough that the last block adds well under 1 ms to :meth:`batch`.
    BLOCK_ROWS = 1024

    def __init__(self) -> None:
        self._blocks: dict[str, list[np.ndarray]] = {name: [] for name in REQUIRED_COLUMNS}
        # The columns the records carry: the required ones, and the optional keys of the first
        # record (the driver writes ``next_obs_key``); every later record must carry them too.
        self._names: tuple[str, ...] = REQUIRED_COLUMNS
        self._converted = 0  # rows held in the blocks
        self._pending: list[Mapping[str, Any]] = []  # the rows after them, as written
        self._whole: dict[str, np.ndarray] = {}  # columns set whole (set_column)

    @classmethod
    def of(cls, records: Sequence[Mapping[str, Any]]) -> StepColumns:
        """The records, optional columns (``success``, ``hidden``) included when every record
        holds them."""
        rows = cls()
        rows.extend(records)
        for name in OPTIONAL_COLUMNS:
            if records and all(name in record for record in records):
                values = _column(list(records), name)
                rows.set_column(name, np.stack(values) if name == "hidden" else np.array(values))
        return rows

    def __len__(self) -> int:
        return self._converted + len(self._pending)

    def _record_names(self) -> tuple[str, ...]:
        """The columns the records carry: fixed by the first one written."""
        if self._converted or not self._pending:
            return self._names
        first = self._pending[0]
        return (*REQUIRED_COLUMNS, *(name for name in OPTIONAL_KEYS if name in first))

    def extend(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Append records, each holding every required column (a record that lacks one is
        named, by its row, when its block is converted)."""
        self._pending.extend(records)
        if len(self._pending) >= self.BLOCK_ROWS:
            self._convert()

    def _convert(self) -> None:
        """The pending records as one block of arrays: ids as :meth:`StepBatch.from_records`
        keeps them, keys as objects."""
        if not self._pending:
            return
        if not self._converted:
            self._names = self._record_names()
            self._blocks.update({name: [] for name in self._names if name not in self._blocks})
        for name in self._names:
            missing = "missing" if name in REQUIRED_COLUMNS else "missing (given on other rows)"
            values = _column(self._pending, name, missing, first_row=self._converted)
            column = _record_values(name, values)
            if isinstance(column, list):  # t, reward, valid: numbers, or their values as given
                numbers = np.asarray(column)
                # for the batch's checks, which name the row and value of what is not a number
                column = numbers if numbers.dtype.kind in "biuf" else _object_array(column)
            self._blocks[name].append(column)
        self._converted += len(self._pending)
        self._pending = []

    def set_column(self, name: str, values: np.ndarray) -> None:
        """Set an optional column (``success``, ``hidden``, ``semantic_key``) for every row."""
        if name not in OPTIONAL_COLUMNS:
            raise _fail(name, None, f"is not an optional column ({', '.join(OPTIONAL_COLUMNS)})")
        if len(values) != len(self):
            raise _fail(name, None, f"has {len(values)} rows, the records have {len(self)}")
        self._whole[name] = values

    def column(self, name: str) -> np.ndarray:
        """One column over every row (its blocks joined once, then kept joined)."""
        if name in self._whole:
            return self._whole[name]
        if name not in self._blocks:
            raise _fail(name, None, "is not a column of these records")
        self._convert()
        blocks = self._blocks[name]
        if not blocks:
            raise _fail(name, None, "the records are empty")
        if len(blocks) > 1:
            blocks[:] = [np.concatenate(blocks)]
        return blocks[0]

    def row(self, index: int) -> StepRecord:
        """The record of row ``index`` (its required and optional columns)."""
        if not 0 <= index < len(self):
            raise IndexError(f"StepColumns: row {index} of {len(self)}")
        if index >= self._converted:
            pending = self._pending[index - self._converted]
            record = {name: pending[name] for name in self._record_names()}
        else:
            record = {name: _python(self.column(name)[index]) for name in self._names}
        for name, values in self._whole.items():
            record[name] = _python(values[index])
        return cast(StepRecord, record)  # the columns are StepRecord's keys (extend checks)

    def records(self) -> list[StepRecord]:
        """Every row as a record (a list of new dicts)."""
        if not len(self):
            return []
        self._convert()
        names = [*self._names, *self._whole]
        columns = [
            list(self._whole[name]) if name == "hidden" else self.column(name).tolist()
            for name in names
        ]
        return [
            cast(StepRecord, dict(zip(names, values, strict=True)))
            for values in zip(*columns, strict=True)
        ]

    def batch(self, **replaced: Any) -> StepBatch:
        """The rows as a ``StepBatch``; ``replaced`` columns are taken as given, as in
        :meth:`StepBatch.from_records`."""
        if not len(self):
            raise _fail("group", None, "the batch is empty")
        _check_replaced(replaced)
        self._convert()
        columns = {name: self.column(name) for name in [*self._names, *self._whole]}
        columns.update(replaced)
        return StepBatch(**columns)


def _column(
    rows: list[Mapping[str, Any]], name: str, missing: str = "missing", first_row: int = 0
) -> list[Any]:
    """One column of records as a list (``map`` over an ``itemgetter``, the fastest pass
    CPython has: the hot path of ``from_records``), naming the first record that lacks it
    (``rows[0]`` is row ``first_row``)."""
    try:
        return list(map(itemgetter(name), rows))
    except KeyError:
        lacking = next((row for row, record in enumerate(rows) if name not in record), None)
        if lacking is None:
            raise
        raise _fail(name, first_row + lacking, missing) from None


def _check_replaced(replaced: Mapping[str, Any]) -> None:
    """Columns given in place of the records' must be batch columns."""
    unknown = set(replaced) - {*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS}
    if unknown:
        raise _fail(sorted(unknown)[0], None, "is not a StepBatch column")


def _record_values(name: str, values: list[Any]) -> Any:
    """A column read from records, as a batch takes it: ``group`` and ``traj`` through
    :func:`_id_array`, keys as objects; the other columns as given, for the batch to check."""
    if name in ("group", "traj"):
        return _id_array(values)
    if name in ("obs_key", "state_key", "action_key", *OPTIONAL_KEYS):
        return _object_array(values)
    return values


def _optional_keys(rows: list[Mapping[str, Any]]) -> set[str]:
    """The optional columns some record has.

    Every record holds the required columns (their reading checked it), so records that all
    have exactly that many keys have nothing else: one pass over the lengths, not over the keys.
    """
    if set(map(len, rows)) == {len(REQUIRED_COLUMNS)}:
        return set()
    return set().union(*rows) & set(OPTIONAL_COLUMNS)


def _id_array(values: list[Any]) -> np.ndarray:
    """A ``group`` or ``traj`` column: int64 when every id is an int, else objects (compared
    as given: an int64 array is only kept when numpy found nothing but integers)."""
    if isinstance(values[0], int) and not isinstance(values[0], bool):
        try:
            array = np.array(values)
        except (OverflowError, ValueError):  # ints past int64, or ragged ids
            array = None
        if array is not None and array.dtype == np.int64:
            return array
    return _object_array(values)


def _object_array(values: list[Any]) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


def _hidden_matrix(values: Any) -> np.ndarray:
    """The ``hidden`` column as an (n, d) float array.

    float32 stays float32 (a 7B model's hidden states take half the memory) and float64 stays
    float64; anything else becomes float64. A list of per-row vectors goes through
    :func:`_stack_hidden`, so a row of another length is named.
    """
    if isinstance(values, np.ndarray) and values.dtype != object:
        hidden = values if values.dtype in (np.float32, np.float64) else values.astype(np.float64)
    else:
        hidden = _stack_hidden(list(values))
    if hidden.ndim != 2:
        raise _fail("hidden", None, f"expected shape (n, d), got {hidden.shape}")
    return hidden


def _stack_hidden(values: list[Any]) -> np.ndarray:
    width = None
    for row, value in enumerate(values):
        if value is None:
            continue
        length = len(value)
        if width is None:
            width = length
        elif length != width:
            raise _fail("hidden", row, f"has length {length}, earlier rows have {width}")
    if width is None:
        raise _fail("hidden", 0, "missing on every row")
    hidden = np.full((len(values), width), np.nan)
    for row, value in enumerate(values):
        if value is not None:
            hidden[row] = value
    return hidden


def _python(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value

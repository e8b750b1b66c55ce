"""ALFWorld game files: where they live, which games make each split, and how to install them.

The games are the official TextWorld files ``json_2.1.1/<split>/<task>/<trial>/game.tw-pddl``
under ``$ALFWORLD_DATA`` (the layout ``alfworld-download`` produces). Each split is a manifest
shipped with the package (``manifest_<split>.json``): the game folders and the sha256 of each
game file. Only ``game.tw-pddl`` is needed: games are found by that file name (not by
``traj_data.json``, which our data do not have) and the task type is the part of the task
folder name before the first ``-``.

Nothing here imports TextWorld or ALFWorld, so the manifests and the installer work on a core
install.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import tarfile
import zipfile
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import IO, Any, BinaryIO, Generic, TypeVar

from agentbench_rl.core.hashing import sha256_file, stable_hash
from agentbench_rl.envs.install import (
    DEFAULT_MAX_BYTES,
    ByteBudget,
    DownloadError,
    SizeLimitError,
    copy_capped,
    download,
    install_target,
    staging_folder,
    swap_in,
)

#: The standard splits: ``valid_seen`` is ALFWorld's in-distribution evaluation set,
#: ``valid_unseen`` the out-of-distribution one (rooms never seen in training). Their games are
#: installed under the data folder (``data install alfworld``).
SPLITS: tuple[str, ...] = ("train", "valid_seen", "valid_unseen")
#: Splits whose games ship inside the package, so the env plays with nothing installed:
#: ``demo`` is six small games of our own, one per task type (``envs/alfworld/build_demo.py``
#: writes them; not ALFWorld's games), for trying the env and for the benchmarks of machines
#: without the data.
SHIPPED_SPLITS: tuple[str, ...] = ("demo",)
#: The six ALFWorld task types (``category`` of every episode).
TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
#: The top folder of the official layout, relative to the data folder.
DATA_ROOT = "json_2.1.1"
GAME_FILE = "game.tw-pddl"
INSTALL_HINT = "agentbench-rl data install alfworld"
#: The game files as ``alfworld-download`` fetches them (ALFWorld 0.4.x release assets).
OFFICIAL_URL = "https://github.com/alfworld/alfworld/releases/download/0.4.0/json_2.1.2_tw-pddl.zip"

_MANIFEST_FORMAT = 1
_CHUNK = 1 << 20

#: ``progress(phase, done, total)``: called while installing (phase "unpack" or "check").
ProgressCallback = Callable[[str, int, int], None]


class DataMissingError(FileNotFoundError):
    """The ALFWorld game files are not where the env looks for them."""


class ModifiedGameError(ValueError):
    """A game file's sha256 differs from the split manifest."""


class InstallError(ValueError):
    """An archive could not be installed, or what it installed does not match the manifests."""


def default_data_dir() -> Path:
    """``$ALFWORLD_DATA``, else ``~/.cache/alfworld`` (where ALFWorld itself looks).

    Example:
        >>> fallback = Path("~/.cache/alfworld").expanduser()
        >>> default_data_dir() == Path(os.environ.get("ALFWORLD_DATA", fallback))
        True
    """
    return Path(os.environ.get("ALFWORLD_DATA") or Path("~/.cache/alfworld")).expanduser()


def shipped_data_dir() -> Path:
    """The folder, inside the package, that holds the games of :data:`SHIPPED_SPLITS` (in the
    ``json_2.1.1/<split>/<task>/<trial>/game.tw-pddl`` layout).

    Example:
        >>> (shipped_data_dir() / DATA_ROOT / "demo").is_dir()
        True
    """
    return Path(str(resources.files(__package__) / "shipped"))


def split_data_dir(split: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where a split's games are read from: the package for a shipped split, else
    :func:`resolve_data_dir`.

    Example:
        >>> split_data_dir("demo") == shipped_data_dir()
        True
        >>> str(split_data_dir("valid_seen", "/tmp/alf"))
        '/tmp/alf'
    """
    return shipped_data_dir() if split in SHIPPED_SPLITS else resolve_data_dir(data_dir)


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The data folder: ``data_dir`` if given, else :func:`default_data_dir`.

    Example:
        >>> str(resolve_data_dir("/tmp/alf"))
        '/tmp/alf'
    """
    return Path(data_dir).expanduser() if data_dir is not None else default_data_dir()


def task_type_of(game_path: str) -> str:
    """The task type of a game: its task folder name up to the first ``-``.

    Example:
        >>> task_type_of("json_2.1.1/valid_seen/pick_two_obj_and_place-CD-None-Drawer-302/"
        ...              "trial_T20190908_060155_196282/game.tw-pddl")
        'pick_two_obj_and_place'
    """
    parts = PurePosixPath(game_path).parts
    return parts[-3].split("-", 1)[0]


@dataclass(frozen=True)
class GameRecord:
    """One game of a split manifest.

    Attributes:
        split: the split the game belongs to.
        task_id: ``<task folder>/<trial folder>``, unique within the split.
        sha256: hex sha256 of the ``game.tw-pddl`` file.
    """

    split: str
    task_id: str
    sha256: str

    @property
    def path(self) -> str:
        """The game file relative to the data folder (``json_2.1.1/<split>/<task_id>/...``).

        Example:
            >>> GameRecord("valid_seen", "look_at_obj_in_light-Pen-1/trial_1", "0").path
            'json_2.1.1/valid_seen/look_at_obj_in_light-Pen-1/trial_1/game.tw-pddl'
        """
        return f"{DATA_ROOT}/{self.split}/{self.task_id}/{GAME_FILE}"

    @functools.cached_property  # read at every step's info
    def task_type(self) -> str:
        """One of :data:`TASK_TYPES`.

        Example:
            >>> GameRecord("train", "pick_and_place_simple-Pen-None-Desk-1/trial_1", "0").task_type
            'pick_and_place_simple'
        """
        return task_type_of(self.path)


@dataclass(frozen=True)
class SplitManifest:
    """The fixed list of games of one split, in manifest order (sorted by path).

    Example:
        >>> manifest = load_manifest("valid_seen")
        >>> len(manifest.games), manifest.games[0].task_type
        (140, 'look_at_obj_in_light')
    """

    split: str
    games: tuple[GameRecord, ...]
    _by_task_id: dict[str, GameRecord] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_task_id", {game.task_id: game for game in self.games})

    @property
    def checksum(self) -> str:
        """Hash of the split name and every (task id, sha256) pair, in order.

        Example:
            >>> len(load_manifest("valid_unseen").checksum)
            32
        """
        return stable_hash(
            {"split": self.split, "games": [[game.task_id, game.sha256] for game in self.games]}
        )

    def task_ids(self) -> list[str]:
        """Every task id, in manifest order.

        Example:
            >>> len(load_manifest("valid_unseen").task_ids())
            134
        """
        return [game.task_id for game in self.games]

    def get(self, task_id: str) -> GameRecord:
        """The game of ``task_id`` (``ValueError`` naming the split if it is not in it).

        Example:
            >>> load_manifest("valid_seen").get("no-such-task")
            Traceback (most recent call last):
            ...
            ValueError: alfworld: task 'no-such-task' is not in split valid_seen
        """
        try:
            return self._by_task_id[task_id]
        except KeyError:
            raise ValueError(f"alfworld: task '{task_id}' is not in split {self.split}") from None

    def to_json(self) -> str:
        """The manifest file's text: one game per line, so diffs stay readable.

        Example:
            >>> text = SplitManifest("train", (GameRecord("train", "t/1", "ab"),)).to_json()
            >>> text.splitlines()[1:]
            ['  ["t/1", "ab"]', ']}']
        """
        header = json.dumps({"env": "alfworld", "format": _MANIFEST_FORMAT, "split": self.split})
        lines = ",\n".join(f"  {json.dumps([game.task_id, game.sha256])}" for game in self.games)
        return f'{header[:-1]}, "games": [\n{lines}\n]}}\n'

    @classmethod
    def from_json(cls, text: str) -> SplitManifest:
        """Parse :meth:`to_json` output.

        Example:
            >>> manifest = SplitManifest("train", (GameRecord("train", "t/1", "ab"),))
            >>> SplitManifest.from_json(manifest.to_json()) == manifest
            True
        """
        data = json.loads(text)
        if data.get("env") != "alfworld" or data.get("format") != _MANIFEST_FORMAT:
            raise ValueError("alfworld: not an ALFWorld split manifest (format 1)")
        split = data["split"]
        return cls(split, tuple(GameRecord(split, task_id, sha) for task_id, sha in data["games"]))


def manifest_filename(split: str) -> str:
    """The package-data file of a split's manifest.

    Example:
        >>> manifest_filename("valid_seen")
        'manifest_valid_seen.json'
    """
    return f"manifest_{split}.json"


@functools.cache
def load_manifest(split: str) -> SplitManifest:
    """The shipped manifest of a standard or shipped split (read once per process).

    Example:
        >>> load_manifest("train").games[0].split
        'train'
    """
    if split not in SPLITS + SHIPPED_SPLITS:
        known = ", ".join(SPLITS + SHIPPED_SPLITS)
        raise ValueError(f"alfworld: unknown split '{split}' (choose from {known})")
    text = resources.files(__package__).joinpath(manifest_filename(split)).read_text("utf-8")
    return SplitManifest.from_json(text)


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of ``data``.

    Example:
        >>> sha256_bytes(b"")[:12]
        'e3b0c44298fc'
    """
    return hashlib.sha256(data).hexdigest()


def find_games(data_dir: Path, split: str | None = None) -> list[str]:
    """Every ``game.tw-pddl`` under ``data_dir/json_2.1.1[/split]``, as sorted relative paths.

    Example:
        >>> find_games(Path("/nonexistent"))
        []
    """
    root = data_dir / DATA_ROOT
    if split is not None:
        root = root / split
    if not root.is_dir():
        return []
    return sorted(path.relative_to(data_dir).as_posix() for path in root.rglob(GAME_FILE))


def require_split_data(data_dir: Path, split: str) -> None:
    """Raise :class:`DataMissingError` (one line: what to run) if a split's folder is missing.

    Example:
        >>> try:
        ...     require_split_data(Path("/nowhere"), "valid_seen")
        ... except DataMissingError as problem:
        ...     print(str(problem).split(";")[0])
        alfworld: no game files at /nowhere/json_2.1.1/valid_seen
    """
    folder = data_dir / DATA_ROOT / split
    if not folder.is_dir():
        raise DataMissingError(
            f"alfworld: no game files at {folder}; run `{INSTALL_HINT}` "
            f"(or set ALFWORLD_DATA to the folder that holds {DATA_ROOT})"
        )


def read_game(data_dir: Path, game: GameRecord, allow_modified: bool = False) -> bytes:
    """The bytes of a game file, refused if missing or if its sha256 differs from the manifest.

    Args:
        data_dir: the data folder.
        game: the manifest entry.
        allow_modified: accept a file whose checksum differs (the caller records that).

    Example:
        >>> try:
        ...     read_game(Path("/nowhere"), load_manifest("valid_seen").games[0])
        ... except DataMissingError as problem:
        ...     print(str(problem)[:50])
        alfworld: game file missing: /nowhere/json_2.1.1/v
    """
    path = data_dir / game.path
    try:
        data = path.read_bytes()
    except OSError:
        raise DataMissingError(
            f"alfworld: game file missing: {path}; run `{INSTALL_HINT}`"
        ) from None
    if not allow_modified and sha256_bytes(data) != game.sha256:
        raise ModifiedGameError(
            f"alfworld: {path} differs from the {game.split} manifest (sha256 "
            f"{sha256_bytes(data)[:12]}..., expected {game.sha256[:12]}...); reinstall with "
            f"`{INSTALL_HINT}` or pass allow_modified_games=True (recorded in results)"
        )
    return data


# ---------------------------------------------------------------------- installing an archive
@dataclass(frozen=True)
class SplitCheck:
    """How the installed files of one split compare with its manifest.

    Attributes:
        split: the split.
        expected: games in the manifest.
        ok: games present with the manifest's sha256.
        missing: task ids whose file is absent.
        modified: task ids whose file's sha256 differs.
    """

    split: str
    expected: int
    ok: int
    missing: tuple[str, ...]
    modified: tuple[str, ...]

    @property
    def complete(self) -> bool:
        """Every game present and unmodified.

        Example:
            >>> SplitCheck("valid_seen", 140, 140, (), ()).complete
            True
        """
        return self.ok == self.expected


@dataclass(frozen=True)
class InstallReport:
    """What :func:`install_archive` did.

    Attributes:
        data_dir: where the files went.
        extracted: game files written from the archive.
        checks: one :class:`SplitCheck` per split checked.
    """

    data_dir: Path
    extracted: int
    checks: tuple[SplitCheck, ...]

    def summary(self) -> str:
        """One line per split, e.g. ``valid_seen: 140/140 games ok``.

        Example:
            >>> check = SplitCheck("valid_seen", 140, 139, ("a/1",), ())
            >>> InstallReport(Path("/d"), 1, (check,)).summary()
            'valid_seen: 139/140 games ok (1 missing, 0 modified)'
        """
        lines = []
        for check in self.checks:
            line = f"{check.split}: {check.ok}/{check.expected} games ok"
            if not check.complete:
                line += f" ({len(check.missing)} missing, {len(check.modified)} modified)"
            lines.append(line)
        return "\n".join(lines)


def check_data(
    data_dir: Path,
    splits: Sequence[str] = SPLITS,
    progress: ProgressCallback | None = None,
) -> tuple[SplitCheck, ...]:
    """Compare every game of ``splits`` under ``data_dir`` with the shipped manifests.

    Example:
        >>> check_data(Path("/nonexistent"), ["valid_seen"])[0].missing[:1]
        ('look_at_obj_in_light-AlarmClock-None-DeskLamp-323/trial_T20190909_044715_250790',)
    """
    manifests = [load_manifest(split) for split in splits]
    total = sum(len(manifest.games) for manifest in manifests)
    done = 0
    checks = []
    for manifest in manifests:
        missing: list[str] = []
        modified: list[str] = []
        for game in manifest.games:
            path = data_dir / game.path
            if not path.is_file():
                missing.append(game.task_id)
            elif sha256_file(path) != game.sha256:
                modified.append(game.task_id)
            done += 1
            if progress is not None:
                progress("check", done, total)
        ok = len(manifest.games) - len(missing) - len(modified)
        checks.append(
            SplitCheck(manifest.split, len(manifest.games), ok, tuple(missing), tuple(modified))
        )
    return tuple(checks)


@dataclass(frozen=True)
class _Member:
    """A regular file of an archive, with its path inside the data folder.

    ``done`` and ``total`` measure how far through the archive this member is (bytes).
    """

    target: str
    open: Callable[[], IO[bytes]]
    done: int
    total: int


class _CountingReader(io.RawIOBase):
    """A read-only file that counts the bytes read, so a streamed tar shows its progress."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        self.count += len(data)
        return len(data)


def _target_path(name: str) -> str | None:
    """Where an archive member goes: its path from the ``json_2.1.1`` folder on, or ``None``.

    Archives may wrap the layout in a top folder; members outside ``json_2.1.1`` and any
    path that would leave the data folder are skipped.
    """
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if DATA_ROOT not in parts or ".." in parts:
        return None
    return "/".join(parts[parts.index(DATA_ROOT) :])


def _archive_members(archive: Path) -> Iterator[_Member]:
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zip_file:
            infos = [info for info in zip_file.infolist() if not info.is_dir()]
            total = sum(info.compress_size for info in infos)
            done = 0
            for info in infos:
                done += info.compress_size
                target = _target_path(info.filename)
                if target is not None:
                    yield _Member(target, functools.partial(zip_file.open, info), done, total)
        return
    if not tarfile.is_tarfile(archive):
        raise InstallError(f"alfworld: {archive} is neither a zip nor a tar archive")
    total = archive.stat().st_size
    with archive.open("rb") as raw:
        counter = _CountingReader(raw)
        stream = io.BufferedReader(counter, _CHUNK)
        with tarfile.open(fileobj=stream, mode="r|*") as tar_file:
            for tar_info in tar_file:
                target = _target_path(tar_info.name)
                if target is not None and tar_info.isfile():
                    opener = functools.partial(_open_tar_member, tar_file, tar_info)
                    yield _Member(target, opener, min(counter.count, total), total)


def _open_tar_member(tar_file: tarfile.TarFile, tar_info: tarfile.TarInfo) -> IO[bytes]:
    stream = tar_file.extractfile(tar_info)
    assert stream is not None  # regular files always have a stream
    return stream


def install_archive(
    archive: str | os.PathLike[str],
    data_dir: str | os.PathLike[str] | None = None,
    splits: Sequence[str] = SPLITS,
    progress: ProgressCallback | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    allow_modified: bool = False,
) -> InstallReport:
    """Install an archive of the ``json_2.1.1/...`` layout as ``data_dir/json_2.1.1``.

    Accepts the official zip (``json_2.1.2_tw-pddl.zip``, whose files sit under
    ``json_2.1.1/``) or a tar(.gz). Members are unpacked into a staging folder beside the data
    folder, at most ``max_bytes`` in all, checked there against the manifests, and only then
    swapped in for the previous ``json_2.1.1`` (see :mod:`agentbench_rl.envs.install`): a
    truncated, corrupt, oversized or wrong archive leaves the previous install as it was.

    Args:
        archive: the archive file.
        data_dir: target folder (default: :func:`default_data_dir`).
        splits: the splits that must then match their manifests.
        progress: called as ``progress(phase, done, total)``: phase ``unpack`` counts archive
            bytes, phase ``check`` counts games.
        max_bytes: cap on the unpacked size.
        allow_modified: install even if games differ from the manifests (never if missing).

    Raises:
        InstallError: the archive cannot be read, is too big, or a game of ``splits`` is missing
            or (unless ``allow_modified``) differs; the message names the files.

    Example:
        >>> install_archive("/no.tgz")
        Traceback (most recent call last):
        ...
        agentbench_rl.envs.alfworld.data.InstallError: alfworld: archive not found: /no.tgz
    """
    archive_path = Path(archive).expanduser()
    if not archive_path.is_file():
        raise InstallError(f"alfworld: archive not found: {archive_path}")
    target_dir = _install_dir(data_dir)
    budget = ByteBudget(
        max_bytes, f"alfworld: {archive_path} unpacks to", archive_path.stat().st_size
    )
    extracted = 0
    try:
        with staging_folder(target_dir / DATA_ROOT) as staged:
            try:
                for member in _archive_members(archive_path):
                    _write_capped(staged / member.target, member.open, budget)
                    extracted += 1
                    if progress is not None:
                        progress("unpack", member.done, member.total)
            except (OSError, EOFError, zlib.error, tarfile.TarError, zipfile.BadZipFile) as problem:
                raise InstallError(
                    f"alfworld: could not unpack {archive_path} (truncated or corrupt?): "
                    f"{problem}; the previous install is untouched"
                ) from None
            if progress is not None:
                progress("unpack", 1, 1)
            checks = check_data(staged, splits, progress)
            report = InstallReport(target_dir, extracted, checks)
            _refuse_mismatch(archive_path, report, allow_modified)
            swap_in(staged / DATA_ROOT, target_dir / DATA_ROOT)
    except SizeLimitError as problem:
        raise InstallError(str(problem)) from None
    except OSError as problem:
        raise InstallError(
            f"alfworld: cannot write {target_dir} ({problem.strerror or problem})"
        ) from None
    return report


def _install_dir(data_dir: str | os.PathLike[str] | None) -> Path:
    """The data folder an install writes (a folder, or a symlink to one; never a file)."""
    target_dir = resolve_data_dir(data_dir)
    try:
        target_dir = install_target(target_dir, "--data-dir")
        install_target(target_dir / DATA_ROOT, "the data folder's")
    except ValueError as problem:
        raise InstallError(f"alfworld: {problem}") from None
    return target_dir


def _refuse_mismatch(archive: Path, report: InstallReport, allow_modified: bool) -> None:
    """Raise :class:`InstallError` naming the games that are missing or (unless allowed) differ."""
    missing = [f"{c.split}/{task}" for c in report.checks for task in c.missing]
    modified = [f"{c.split}/{task}" for c in report.checks for task in c.modified]
    if missing:
        raise InstallError(
            f"alfworld: {archive} does not hold the standard games "
            f"({'; '.join(report.summary().splitlines())}); e.g. {missing[0]}; "
            "the previous install is untouched"
        )
    if modified and not allow_modified:
        shown = ", ".join(modified[:3]) + (
            f" and {len(modified) - 3} more" if len(modified) > 3 else ""
        )
        raise InstallError(
            f"alfworld: {len(modified)} game file(s) of {archive} differ from the shipped "
            f"manifests ({shown}). The manifests pin a copy that could not be compared with "
            "the official zip offline; if this archive is the official one, install it with "
            "--allow-modified-games (results then record the games' fingerprint as not "
            "pinned) and report the difference; the previous install is untouched"
        )


def install_from_url(
    url: str = OFFICIAL_URL,
    data_dir: str | os.PathLike[str] | None = None,
    splits: Sequence[str] = SPLITS,
    progress: ProgressCallback | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    allow_modified: bool = False,
) -> InstallReport:
    """Download the official zip (or ``url``) beside the data folder and install it.

    The download is capped by ``max_bytes`` too and removed afterwards, whatever happens.

    Example:
        >>> install_from_url("http://127.0.0.1:9/x.zip", "/tmp/alfworld-doc")
        Traceback (most recent call last):
        ...
        agentbench_rl.envs.alfworld.data.InstallError: alfworld: could not download ...
    """
    target_dir = _install_dir(data_dir)
    name = PurePosixPath(url.split("?", 1)[0]).name or "archive.zip"
    try:
        with staging_folder(target_dir / name) as staged:
            budget = ByteBudget(max_bytes, f"alfworld: {url} is")
            show = None if progress is None else functools.partial(progress, "download")
            archive = download(url, staged / name, budget, show)
            return install_archive(archive, target_dir, splits, progress, max_bytes, allow_modified)
    except (DownloadError, SizeLimitError) as problem:
        raise InstallError(f"alfworld: {problem}") from None
    except OSError as problem:
        raise InstallError(
            f"alfworld: cannot write {target_dir} ({problem.strerror or problem})"
        ) from None


def _write_capped(path: Path, open_source: Callable[[], IO[bytes]], budget: ByteBudget) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as target, open_source() as source:
        copy_capped(source, target, budget)


#: Compiled games kept per process (about 1.3 MB each in TextWorld's form): enough for a whole
#: valid split, so a second seed of an evaluation finds every game compiled.
COMPILED_CACHE_SIZE = 160
Compiled = TypeVar("Compiled")


class GameCache(Generic[Compiled]):
    """A per-process LRU cache of games made ready to play by ``compile``, keyed by file sha256.

    Example:
        >>> cache = GameCache(lambda data, sha256: (sha256, len(data)), maxsize=2)
        >>> cache.get("ab", lambda: {"walkthrough": []})
        ('ab', 1)
        >>> len(cache)
        1
    """

    def __init__(
        self, compile: Callable[[dict[str, Any], str], Compiled], maxsize: int = COMPILED_CACHE_SIZE
    ) -> None:
        self.compile = compile
        self.maxsize = maxsize
        self._games: OrderedDict[str, Compiled] = OrderedDict()

    def __len__(self) -> int:
        return len(self._games)

    def get(self, sha256: str, load: Callable[[], dict[str, Any]]) -> Compiled:
        """The compiled game of ``sha256``; ``load()`` gives its JSON dict on a miss."""
        game = self._games.get(sha256)
        if game is None:
            game = self.compile(load(), sha256)
            self._games[sha256] = game
            while len(self._games) > self.maxsize:
                self._games.popitem(last=False)
        else:
            self._games.move_to_end(sha256)
        return game

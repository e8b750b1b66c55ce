"""Filing submissions under ``leaderboards/<env>/<split>/<id>/``, never overwriting one.

A submission's id is a slug of its name plus a digest of its files, so the same files always get
the same id and different files never share one. Filing copies the files into a hidden staging
folder beside the board, validates the copy, then renames it into place in one step: a reader
never sees half a submission, and a rename onto an existing submission fails instead of
replacing it.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from agentbench_rl.core.atomic import current_umask
from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.leaderboard.schema import METADATA_FILE
from agentbench_rl.leaderboard.validate import (
    EPISODE_FILES,
    SubmissionError,
    ValidatedSubmission,
    episodes_digest,
    read_episode_table,
    validate_submission,
)

DEFAULT_ROOT = Path("leaderboards")
ID_DIGEST_LENGTH = 12
_SLUG_LENGTH = 40


def slugify(name: str) -> str:
    """A folder-safe form of a name: lower-case ASCII letters and digits joined by dashes.

    Example:
        >>> slugify("Qwen2.5-1.5B + GiGPO (w/o std)")
        'qwen2-5-1-5b-gigpo-w-o-std'
    """
    slug = "-".join(re.findall(r"[a-z0-9]+", name.lower()))[:_SLUG_LENGTH].strip("-")
    return slug or "submission"


def content_digest(folder: Path, files: tuple[str, ...]) -> str:
    """Digest of a submission's files: their relative paths and exact bytes, in sorted order."""
    parts = [[name, stable_hash((Path(folder) / name).read_bytes())] for name in sorted(files)]
    return stable_hash(parts)


def submission_id(submission: ValidatedSubmission) -> str:
    """``<slug of the name>-<digest of the files>``, e.g. ``expert-3f9a0c2b71de``."""
    digest = content_digest(submission.folder, submission.files)[:ID_DIGEST_LENGTH]
    return f"{slugify(submission.metadata.name)}-{digest}"


def check_root(root: Path) -> Path:
    """``root`` as a leaderboards folder; ``ValueError`` if something else has its name.

    Example:
        >>> check_root(Path("README.md"))
        Traceback (most recent call last):
        ...
        ValueError: --root README.md is a file, not a leaderboards folder
    """
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise ValueError(f"--root {root} is a file, not a leaderboards folder")
    return root


def board_folder(root: Path, env: str, split: str) -> Path:
    """Where the submissions of one board live."""
    return Path(root) / env / split


def stored_submissions(root: Path) -> list[Path]:
    """Every filed submission folder under ``root``, sorted (staging folders are skipped)."""
    root = Path(root)
    if not root.is_dir():
        return []
    folders = [path.parent for path in root.glob(f"*/*/*/{METADATA_FILE}")]
    return sorted(
        folder
        for folder in folders
        if not any(part.startswith(".") for part in folder.relative_to(root).parts)
    )


def filed_with_episodes(board: Path, digest: str) -> Path | None:
    """The submission filed on ``board`` whose episodes have ``digest``, if any."""
    for folder in sorted(board.glob(f"*/{METADATA_FILE}")):
        folder = folder.parent
        if folder.name.startswith("."):
            continue
        name = next((name for name in EPISODE_FILES if (folder / name).is_file()), None)
        if name is None:
            continue
        try:
            if episodes_digest(read_episode_table(folder / name)) == digest:
                return folder
        except (SubmissionError, KeyError):  # a damaged entry: render names it
            continue
    return None


def _copy_durably(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(source, "rb") as reader, open(target, "wb") as writer:
        shutil.copyfileobj(reader, writer)
        writer.flush()
        os.fsync(writer.fileno())


def submit(folder: Path, root: Path = DEFAULT_ROOT) -> Path:
    """Validate ``folder`` and file it on its board; return the new submission's folder.

    Only the files that make up the submission are copied (see
    :class:`~agentbench_rl.leaderboard.validate.ValidatedSubmission`). Raises
    :class:`SubmissionError` when the submission is invalid or already on the board (its files,
    or its episodes under another name).
    """
    root = check_root(root)
    submission = validate_submission(Path(folder))
    identifier = submission_id(submission)
    board = board_folder(root, submission.env, submission.split)
    target = board / identifier
    if target.exists():
        raise SubmissionError(f"this submission is already on the board as {target}")
    same = filed_with_episodes(board, submission.episodes_digest)
    if same is not None:
        raise SubmissionError(
            f"these episodes are on the board already as {same}: the same episodes are filed "
            "once, under one name"
        )
    board.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=board, prefix=f".incoming-{identifier}-"))
    try:
        os.chmod(staging, 0o777 & ~current_umask())  # mkdtemp's 0700 would hide it from readers
        for name in submission.files:
            _copy_durably(submission.folder / name, staging / name)
        filed = validate_submission(staging)
        if submission_id(filed) != identifier:
            raise SubmissionError(f"the copy of {folder} differs from the original; try again")
        try:
            # rename(2) replaces only an empty folder: a submission filed meanwhile is kept.
            os.rename(staging, target)
        except OSError:
            raise SubmissionError(f"this submission is already on the board as {target}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target

"""Build the ALFWorld split manifests shipped in ``agentbench_rl/envs/alfworld/``.

A manifest lists, for one split, every game folder (``<task>/<trial>``, the task id) and the
sha256 of its ``game.tw-pddl``, sorted by path. Two sources give the same output:

    python envs/alfworld/build_splits.py --tsv ../shared/data/alfworld/MANIFEST.tsv
    python envs/alfworld/build_splits.py --data-dir $ALFWORLD_DATA

``--tsv`` reads the data set's MANIFEST.tsv (columns split, task_type, path, sha256);
``--data-dir`` hashes the files of an installed data folder (``json_2.1.1/<split>/...``).
Only the standard splits are written (``valid_train`` is not one; the shipped ``demo`` split is
written by ``build_demo.py``). ``--check`` compares with the files already there instead of
writing, and exits 1 if any differs.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from agentbench_rl.core.hashing import sha256_file
from agentbench_rl.envs.alfworld.data import (
    DATA_ROOT,
    GAME_FILE,
    SPLITS,
    GameRecord,
    SplitManifest,
    find_games,
    manifest_filename,
)

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "agentbench_rl" / "envs" / "alfworld"


def record_from_path(path: str, sha256: str) -> GameRecord | None:
    """The record of a game at ``json_2.1.1/<split>/<task>/<trial>/game.tw-pddl``.

    Returns ``None`` for a path outside the standard splits.

    Example:
        >>> record_from_path("json_2.1.1/valid_seen/look-A-1/trial_1/game.tw-pddl", "ab")
        GameRecord(split='valid_seen', task_id='look-A-1/trial_1', sha256='ab')
    """
    parts = PurePosixPath(path).parts
    if len(parts) != 5 or parts[0] != DATA_ROOT or parts[4] != GAME_FILE:
        raise ValueError(f"not a game path of the {DATA_ROOT} layout: {path}")
    split = parts[1]
    if split not in SPLITS:
        return None
    return GameRecord(split, f"{parts[2]}/{parts[3]}", sha256)


def manifests_from_records(records: Iterable[GameRecord]) -> dict[str, SplitManifest]:
    """One manifest per standard split, games sorted by path.

    Example:
        >>> manifests = manifests_from_records([GameRecord("train", "b/1", "x")])
        >>> [len(manifests[split].games) for split in ("train", "valid_seen", "valid_unseen")]
        [1, 0, 0]
    """
    by_split: dict[str, list[GameRecord]] = {split: [] for split in SPLITS}
    for record in records:
        by_split[record.split].append(record)
    return {
        split: SplitManifest(split, tuple(sorted(games, key=lambda game: game.path)))
        for split, games in by_split.items()
    }


def records_from_tsv(tsv: Path) -> list[GameRecord]:
    """Records from the data set's MANIFEST.tsv (header: split, task_type, path, sha256).

    Example:
        >>> import tempfile
        >>> tsv = Path(tempfile.mkdtemp()) / "MANIFEST.tsv"
        >>> _ = tsv.write_text("split\\ttask_type\\tpath\\tsha256\\n"
        ...     "train\\tlook\\tjson_2.1.1/train/look-A-1/trial_1/game.tw-pddl\\tab\\n")
        >>> records_from_tsv(tsv)
        [GameRecord(split='train', task_id='look-A-1/trial_1', sha256='ab')]
    """
    with tsv.open(newline="", encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream, delimiter="\t"))
    records = []
    for row in rows:
        record = record_from_path(row["path"], row["sha256"])
        if record is not None:
            if record.split != row["split"]:
                raise ValueError(
                    f"{tsv}: split column '{row['split']}' disagrees with {row['path']}"
                )
            records.append(record)
    return records


def records_from_data_dir(data_dir: Path) -> list[GameRecord]:
    """Records from the game files of an installed data folder (hashes every file).

    Example:
        >>> records_from_data_dir(Path("/nonexistent"))
        []
    """
    records = []
    for path in find_games(data_dir):
        record = record_from_path(path, "")
        if record is not None:
            records.append(GameRecord(record.split, record.task_id, sha256_file(data_dir / path)))
    return records


def main(argv: Sequence[str] | None = None) -> int:
    """Write (or ``--check``) the manifests; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--tsv", type=Path, help="the data set's MANIFEST.tsv")
    source.add_argument("--data-dir", type=Path, help="an installed data folder")
    parser.add_argument("--out", type=Path, default=PACKAGE_DIR, help="where the manifests go")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)

    if args.tsv is not None:
        records = records_from_tsv(args.tsv)
    else:
        records = records_from_data_dir(args.data_dir)
    manifests = manifests_from_records(records)
    if not any(manifest.games for manifest in manifests.values()):
        print("error: no games found", file=sys.stderr)
        return 1
    status = 0
    for split, manifest in manifests.items():
        path = args.out / manifest_filename(split)
        text = manifest.to_json()
        if args.check:
            same = path.is_file() and path.read_text(encoding="utf-8") == text
            print(f"{split}: {len(manifest.games)} games, {'same' if same else 'DIFFERS'}")
            status |= not same
        else:
            path.write_text(text, encoding="utf-8")
            print(f"{split}: {len(manifest.games)} games -> {path} (checksum {manifest.checksum})")
    return status


if __name__ == "__main__":
    sys.exit(main())

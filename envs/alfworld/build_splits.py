"""Build the ALFWorld split manifests shipped in ``agentbench_rl/envs/alfworld/``.

A manifest lists, for one split, every game folder (``<task>/<trial>``, the task id) and the
sha256 of its ``game.tw-pddl``, sorted by path. Two sources give the same output:

    python envs/alfworld/build_splits.py --tsv ../shared/data/alfworld/MANIFEST.tsv
    python envs/alfworld/build_splits.py --data-dir $ALFWORLD_DATA

``--tsv`` reads the data set's MANIFEST.tsv (columns split, task_type, path, sha256);
``--data-dir`` hashes the files of an installed data folder (``json_2.1.1/<split>/...``).
Only the standard splits are written (``valid_train`` is not one), and the shipped ``demo``
split: the train games :data:`DEMO_GAMES` (the smallest train game file of each task type, by
bytes, chosen once), whose manifest comes from the train records and whose files are copied
into the package from ``--data-dir`` (with ``--tsv`` only the manifest is written). ``--check``
compares with the files already there instead of writing, and exits 1 if any differs.
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
#: The ``demo`` split's games: the smallest ``game.tw-pddl`` of each task type in the train
#: split (53,962 to 84,736 bytes; 388,309 in all), task ids of the train split.
DEMO_GAMES: tuple[str, ...] = (
    "look_at_obj_in_light-Pillow-None-DeskLamp-316/trial_T20190908_232351_848868",
    "pick_and_place_simple-Book-None-Sofa-202/trial_T20190907_043708_054006",
    "pick_clean_then_place_in_recep-Cloth-None-Toilet-406/trial_T20190908_102552_835735",
    "pick_cool_then_place_in_recep-Apple-None-SideTable-21/trial_T20190907_180711_700359",
    "pick_heat_then_place_in_recep-Mug-None-CoffeeMachine-14/trial_T20190907_012116_449794",
    "pick_two_obj_and_place-ToiletPaper-None-SideTable-420/trial_T20190909_114817_260394",
)
DEMO_SPLIT = "demo"


def demo_manifest(train: SplitManifest) -> SplitManifest:
    """The ``demo`` split: :data:`DEMO_GAMES` with their train sha256, in manifest order.

    Example:
        >>> records = tuple(GameRecord("train", task_id, "ab") for task_id in DEMO_GAMES)
        >>> demo = demo_manifest(SplitManifest("train", records))
        >>> demo.split, len(demo.games), demo.games[0].sha256
        ('demo', 6, 'ab')
    """
    games = [train.get(task_id) for task_id in sorted(DEMO_GAMES)]
    return SplitManifest(
        DEMO_SPLIT, tuple(GameRecord(DEMO_SPLIT, game.task_id, game.sha256) for game in games)
    )


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


def copy_demo_games(data_dir: Path, demo: SplitManifest, out: Path, check: bool) -> int:
    """Copy (or, with ``check``, compare) the demo games into ``out/shipped``; returns 1 when a
    shipped file differs."""
    status = 0
    for game in demo.games:
        source = data_dir / DATA_ROOT / "train" / game.task_id / GAME_FILE
        target = out / "shipped" / game.path
        data = source.read_bytes()
        if check:
            same = target.is_file() and target.read_bytes() == data
            status |= not same
            if not same:
                print(f"demo: {target} DIFFERS")
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    return status


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
    manifests[DEMO_SPLIT] = demo_manifest(manifests["train"])
    if args.data_dir is not None:
        status = copy_demo_games(args.data_dir, manifests[DEMO_SPLIT], args.out, args.check)
    else:
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

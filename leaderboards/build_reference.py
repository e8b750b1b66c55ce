"""(Re)create the reference submissions: the expert and random agents on every evaluation split.

For every registered env whose data is available here (an env that cannot make and reset its
first task is skipped, with the reason), and every evaluation split of it, this evaluates the
``expert`` and ``random`` agents (and an env's own baselines, such as WebShop's ``rule``) with
seeds 0 1 2, files each run as a submission under this folder, and renders the boards. A
reference submission already on the board that still validates is kept (so rerunning changes
nothing); one that no longer validates, e.g. after a split changed, is replaced. ``--refresh``
replaces them all.

    python leaderboards/build_reference.py                  # every env with data
    python leaderboards/build_reference.py --env sokoban    # one env
    ALFWORLD_DATA=... python leaderboards/build_reference.py --env alfworld --workers 2

``--migrate-checksums`` instead re-files every submission (anyone's) whose ``summary.json`` still
carries a split checksum of the form before it covered the env id (0.1.0 and earlier): the
checksum is rebound to the env (:meth:`TextAgentEnv.results_checksum`), nothing else changes, and
the submission moves to the id its files now give. The episodes are not rerun: they came from the
same tasks, which is exactly what the old checksum certified.

    python leaderboards/build_reference.py --migrate-checksums
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from rich.console import Console

import agentbench_rl
from agentbench_rl.envs import ENVS, env_class, make
from agentbench_rl.harness.config import EvalConfig, RunOptions
from agentbench_rl.harness.evaluate import SUMMARY, evaluate
from agentbench_rl.leaderboard.render import render
from agentbench_rl.leaderboard.schema import METADATA_FILE, load_metadata
from agentbench_rl.leaderboard.store import (
    board_folder,
    stored_submissions,
    submission_id,
    submit,
)
from agentbench_rl.leaderboard.validate import (
    SubmissionError,
    evaluation_splits,
    validate_submission,
)

ROOT = Path(__file__).resolve().parent
AGENTS = ("expert", "random")
#: Baselines that only some envs have (WebShop's rule baseline from the WebShop paper).
ENV_AGENTS = {"webshop": ("rule",)}
SEEDS = [0, 1, 2]
#: Marks our own reference submissions, so a rebuild never touches anyone else's.
REFERENCE_CONTACT = "agentbench-rl maintainers (reference run, leaderboards/build_reference.py)"


def unavailable(env: str, split: str) -> str | None:
    """Why ``env`` cannot run ``split`` here (missing data or backend), or ``None``."""
    try:
        instance = make(env, split=split)
        instance.reset(seed=0, options={"task_id": env_class(env).task_ids(split)[0]})
    except Exception as problem:  # any failure to start means the env is not usable here
        return f"{type(problem).__name__}: {problem}".splitlines()[0]
    return None


def reference_folders(root: Path, env: str, split: str, agent: str) -> list[Path]:
    """Our reference submissions of ``agent`` on one board (anyone else's are never listed)."""
    board = board_folder(root, env, split)
    found = []
    for metadata_file in sorted(board.glob(f"*/{METADATA_FILE}")):
        try:
            metadata = load_metadata(metadata_file)
        except ValueError:
            continue
        if metadata.contact == REFERENCE_CONTACT and metadata.name == agent:
            found.append(metadata_file.parent)
    return found


def _still_valid(folder: Path) -> bool:
    try:
        validate_submission(folder)
    except SubmissionError:
        return False
    return True


def build(
    root: Path, env: str, split: str, agent: str, workers: int, refresh: bool, console: Console
) -> Path | None:
    """Evaluate one agent on one split and file it, unless a valid reference is already there."""
    existing = reference_folders(root, env, split, agent)
    if existing and not refresh and all(_still_valid(folder) for folder in existing):
        console.print(f"kept {', '.join(str(folder) for folder in existing)}")
        return None
    with tempfile.TemporaryDirectory() as scratch:
        run = Path(scratch) / f"{env}-{split}-{agent}"
        evaluate(
            EvalConfig(env=env, split=split, agent=agent, seeds=SEEDS),
            run,
            RunOptions(workers=workers),
        )
        metadata = {
            "name": agent,
            "estimator": None,
            "training": None,
            "parameters": None,
            "seeds": SEEDS,
            "code_version": f"agentbench-rl {agentbench_rl.__version__}",
            "contact": REFERENCE_CONTACT,
            "url": None,
        }
        (run / METADATA_FILE).write_text(json.dumps(metadata, indent=1) + "\n", "utf-8")
        filed = board_folder(root, env, split) / submission_id(validate_submission(run))
        if not filed.exists():  # the same files may already be on the board
            filed = submit(run, root)
    # Filed first, removed after: a failed run leaves the old reference in place.
    for folder in existing:
        if folder != filed:
            shutil.rmtree(folder)
    console.print(f"filed {filed}")
    return filed


def migrate_checksums(root: Path, console: Console) -> list[Path]:
    """Rebind old-form split checksums to their env and re-file those submissions."""
    moved = []
    for folder in stored_submissions(root):
        summary_path = folder / SUMMARY
        summary = json.loads(summary_path.read_text("utf-8"))
        env, split = summary.get("env"), summary.get("split")
        if env not in ENVS:
            continue
        cls = env_class(env)
        if summary.get("split_checksum") != cls.split_checksum(split):
            continue  # already bound, or not this package's split at all
        summary["split_checksum"] = cls.results_checksum(cls.split_checksum(split))
        with tempfile.TemporaryDirectory() as scratch:
            copy = Path(scratch) / folder.name
            shutil.copytree(folder, copy)
            (copy / SUMMARY).write_text(json.dumps(summary, indent=1) + "\n", "utf-8")
            filed = submit(copy, root)
        shutil.rmtree(folder)
        console.print(f"re-filed {folder} as {filed}")
        moved.append(filed)
    return moved


def main(argv: list[str] | None = None) -> int:
    """Build the reference submissions and render the boards."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", action="append", help="Only these envs (repeatable).")
    parser.add_argument("--workers", type=int, default=1, help="Episode worker processes.")
    parser.add_argument("--refresh", action="store_true", help="Replace every reference run.")
    parser.add_argument("--root", type=Path, default=ROOT, help="The leaderboards folder.")
    parser.add_argument(
        "--migrate-checksums",
        action="store_true",
        help="Only rebind old-form split checksums to their env and re-file (see above).",
    )
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    if args.migrate_checksums:
        migrate_checksums(args.root, console)
        written = render(args.root)
        console.print(f"rendered {written[0]} and {written[1]}")
        return 0
    for env in args.env or sorted(ENVS):
        try:
            splits = evaluation_splits(env)
        except Exception as problem:  # an env whose backend is not installed here
            console.print(f"skipped {env}: {type(problem).__name__}: {problem}")
            continue
        for split in splits:
            reason = unavailable(env, split)
            if reason:
                console.print(f"skipped {env}/{split}: {reason}")
                continue
            for agent in (*AGENTS, *ENV_AGENTS.get(env, ())):
                build(args.root, env, split, agent, args.workers, args.refresh, console)
    written = render(args.root)
    console.print(f"rendered {written[0]} and {written[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

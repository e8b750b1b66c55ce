"""Build WebShop's split manifest for the standard setting (1k catalogue, synthetic goals).

Usage: python envs/webshop/build_splits.py [--data-dir DIR] [--check]

Reads the data folder (--data-dir, else $WEBSHOP_DATA, else ../shared/data/webshop beside the
checkout), builds the goals as the original does (seeded: the output is the same on every
machine) and writes agentbench_rl/envs/webshop/splits.json: every task id with its goal's hash
and category (the goal product's top-level category, what the leaderboard validator checks
episodes against), and each split's checksum (over the ids and hashes only). With --check,
only verifies that the shipped file equals what the data give now (exit 1 if not).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

from agentbench_rl.envs.webshop.data import DATA_ENV_VAR, load_catalogue
from agentbench_rl.envs.webshop.goals import build_goals
from agentbench_rl.envs.webshop.world import (
    PRICE_SEED,
    STANDARD,
    manifest_payload,
    manifest_text,
)

REPO = Path(__file__).resolve().parents[2]
MANIFEST_PATH = REPO / "agentbench_rl/envs/webshop/splits.json"
SHARED_DATA = REPO.parent / "shared" / "data" / "webshop"


def build_manifest_text(data_dir: Path) -> str:
    """The manifest the data in ``data_dir`` give."""
    rng = random.Random(PRICE_SEED)
    catalogue = load_catalogue(data_dir, STANDARD.catalogue, STANDARD.num_products, False, rng)
    goals = build_goals(catalogue, human=False, rng=rng)
    return manifest_text(manifest_payload(STANDARD, goals, dict(catalogue.files)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=None, help="the WebShop data folder")
    parser.add_argument("--check", action="store_true", help="verify instead of writing")
    args = parser.parse_args()
    data_dir = args.data_dir or Path(os.environ.get(DATA_ENV_VAR) or SHARED_DATA)
    text = build_manifest_text(data_dir)
    if args.check:
        same = MANIFEST_PATH.read_text("utf-8") == text
        print("splits.json is up to date" if same else "splits.json differs from the data")
        return 0 if same else 1
    MANIFEST_PATH.write_text(text, "utf-8")
    print(f"wrote {MANIFEST_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

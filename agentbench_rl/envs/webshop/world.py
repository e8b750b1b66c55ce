"""Everything an env needs besides its session: catalogue, goals, splits, search index, nouns.

A :class:`World` is built once per process and setting (envs of the same setting share it). The
standard setting (the 1k catalogue with synthetic goals) is pinned by the split manifest shipped
with the package (``splits.json``, built by ``envs/webshop/build_splits.py``): every goal's hash
must match it, else the data are refused. Other settings (the full catalogue, human goals, a
``num_products`` cut) build their splits by the same rule and get their own checksums.
"""

from __future__ import annotations

import importlib.util
import json
import random
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.core.memo import Memo
from agentbench_rl.envs.webshop.data import (
    Catalogue,
    CatalogueName,
    load_catalogue,
)
from agentbench_rl.envs.webshop.goals import (
    PRICE_SEED,
    SHUFFLE_SEED,
    TEST_SIZE,
    Goal,
    build_goals,
    split_ids,
)
from agentbench_rl.envs.webshop.nouns import PRECOMPUTE_LIMIT, TitleNouns, installed_model
from agentbench_rl.envs.webshop.pages import Page
from agentbench_rl.envs.webshop.search import SearchIndex, default_cache_dir, product_document
from agentbench_rl.extras import install_hint

MANIFEST = "splits.json"
#: 2: each split row is (task id, goal hash, category); 1 had no category.
MANIFEST_FORMAT = 2
EXTRA_HINT = install_hint("webshop")
#: Modules the env needs (the ``webshop`` extra), besides a spaCy English pipeline.
REQUIRED_MODULES = ("nltk", "regex", "rapidfuzz", "spacy")


@dataclass(frozen=True)
class Setting:
    """Which data a world is built from.

    Attributes:
        catalogue: ``"1k"`` or ``"full"``.
        human_goals: human instead of synthetic goals.
        num_products: the original's cut to the first N products (``None``: all of them).
    """

    catalogue: CatalogueName = "1k"
    human_goals: bool = False
    num_products: int | None = None

    def payload(self) -> dict[str, Any]:
        """The setting as the manifest records it (with the seeds and the test size)."""
        return {
            **asdict(self),
            "price_seed": PRICE_SEED,
            "shuffle_seed": SHUFFLE_SEED,
            "test_size": TEST_SIZE,
        }


STANDARD = Setting()


def require_extras() -> None:
    """Raise a one-line ``ModuleNotFoundError`` when the ``webshop`` extra is not installed.

    Example:
        >>> require_extras()  # the extra is installed here
    """
    missing = [name for name in REQUIRED_MODULES if importlib.util.find_spec(name) is None]
    if installed_model() is None:
        missing.append("a spaCy English pipeline")
    if missing:
        raise ModuleNotFoundError(f"webshop needs {', '.join(missing)}: {EXTRA_HINT}")


def split_checksum_of(setting: Setting, rows: list[list[str]]) -> str:
    """Checksum of one split: its setting and the (task id, goal hash) of each of its rows.

    A row's category is left out: the goal hash already covers it, and leaving it out keeps the
    checksums that results files pinned before the manifest recorded categories.

    Example:
        >>> checksum = split_checksum_of(STANDARD, [["test-00000", "ab", "garden"]])
        >>> len(checksum), checksum == split_checksum_of(STANDARD, [["test-00000", "ab"]])
        (32, True)
    """
    return stable_hash({"setting": setting.payload(), "goals": [row[:2] for row in rows]})


def manifest_payload(setting: Setting, goals: list[Goal], files: dict[str, str]) -> dict[str, Any]:
    """The split manifest of ``setting``'s goals (what ``splits.json`` holds for the standard
    setting).

    Example:
        >>> payload = manifest_payload(STANDARD, [], {})
        >>> payload["splits"], payload["num_goals"]
        ({'test': [], 'train': []}, 0)
    """
    splits: dict[str, list[list[str]]] = {}
    for split, ids in split_ids(goals).items():
        offset = 0 if split == "test" else TEST_SIZE
        split_goals = zip(ids, goals[offset : offset + len(ids)], strict=True)
        splits[split] = [[task, goal.digest(), goal.category] for task, goal in split_goals]
    return {
        "env": "webshop",
        "format": MANIFEST_FORMAT,
        "setting": setting.payload(),
        "data_sha256": dict(sorted(files.items())),
        "num_goals": len(goals),
        "checksums": {split: split_checksum_of(setting, rows) for split, rows in splits.items()},
        "splits": splits,
    }


def manifest_text(payload: dict[str, Any]) -> str:
    """The manifest as written to disk: JSON with one (task id, goal hash, category) row per line.

    Example:
        >>> payload = manifest_payload(STANDARD, [], {})
        >>> json.loads(manifest_text(payload)) == payload
        True
    """
    lines = ["{"]
    for position, (key, value) in enumerate(payload.items()):
        comma = "," if position < len(payload) - 1 else ""
        if key != "splits":
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}{comma}")
            continue
        lines.append(f" {json.dumps(key)}: {{")
        for split_position, (split, split_rows) in enumerate(value.items()):
            rows = ",\n".join(f"   {json.dumps(row)}" for row in split_rows)
            split_comma = "," if split_position < len(value) - 1 else ""
            lines.append(f"  {json.dumps(split)}: [\n{rows}\n  ]{split_comma}")
        lines.append(f" }}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


@lru_cache(maxsize=1)
def shipped_manifest() -> dict[str, Any]:
    """The standard setting's split manifest shipped with the package.

    Example:
        >>> shipped_manifest()["num_goals"]
        6910
    """
    text = resources.files("agentbench_rl.envs.webshop").joinpath(MANIFEST).read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    if data.get("env") != "webshop" or data.get("format") != MANIFEST_FORMAT:
        raise ValueError(f"webshop: {MANIFEST} is not a webshop split manifest")
    return data


@dataclass(frozen=True)
class World:
    """A loaded setting.

    Attributes:
        setting: what it was built from.
        catalogue: the products and their prices.
        goals: every goal in session order.
        splits: split -> its (task id, goal hash, category) rows.
        checksums: split -> checksum.
        index: the BM25 search index.
        nouns: title -> nouns for the type reward.
        pages: the pages rendered so far, searches: the results of each query searched so
            far, state_hashes: the state hash of each session state met so far (:class:`Memo`).
    """

    setting: Setting
    catalogue: Catalogue
    goals: tuple[Goal, ...]
    splits: dict[str, list[list[str]]]
    checksums: dict[str, str]
    index: SearchIndex
    nouns: TitleNouns
    pages: Memo[tuple[Any, ...], Page] = field(default_factory=Memo, compare=False)
    searches: Memo[str, tuple[str, ...]] = field(default_factory=Memo, compare=False)
    state_hashes: Memo[tuple[Any, ...], str] = field(default_factory=Memo, compare=False)


def _check_standard(payload: dict[str, Any], data_dir: Path) -> None:
    shipped = shipped_manifest()
    if payload["splits"] == shipped["splits"]:
        return
    ours = [row for rows in payload["splits"].values() for row in rows]
    theirs = [row for rows in shipped["splits"].values() for row in rows]
    differing = [mine[0] for mine, pinned in zip(ours, theirs, strict=False) if mine != pinned]
    first = differing[0] if differing else "the goal count"
    raise ValueError(
        f"webshop: the goals built from {data_dir} differ from the shipped split manifest "
        f"({len(ours)} goals vs {len(theirs)}, first difference at {first}); these are not the "
        f"standard 1k files (expected sha256 {shipped['data_sha256']})"
    )


_WORLDS: dict[tuple[Any, ...], World] = {}


def load_world(data_dir: Path, setting: Setting, cache_dir: Path | None = None) -> World:
    """The world of ``setting`` from ``data_dir`` (built once per process, then shared).

    Raises ``ValueError`` when the standard setting's goals differ from the shipped manifest.
    """
    cache_dir = cache_dir or default_cache_dir()
    key = (data_dir.resolve(), setting, cache_dir.resolve())
    if key in _WORLDS:
        return _WORLDS[key]
    rng = random.Random(PRICE_SEED)
    catalogue = load_catalogue(
        data_dir, setting.catalogue, setting.num_products, setting.human_goals, rng
    )
    if catalogue.complete:
        setting = replace(setting, num_products=None)  # a cut that keeps every product
    goals = build_goals(catalogue, setting.human_goals, rng)
    payload = manifest_payload(setting, goals, dict(catalogue.files))
    if setting == STANDARD:
        _check_standard(payload, data_dir)
    documents = [(product.asin, product_document(product)) for product in catalogue.products]
    index = SearchIndex.load_or_build(documents, cache_dir)
    nouns = TitleNouns(cache_dir / f"webshop-nouns-{index.key}-{TitleNouns.model_key()}.json")
    if len(catalogue) <= PRECOMPUTE_LIMIT:
        nouns.precompute(product.name for product in catalogue.products)
    world = World(
        setting=setting,
        catalogue=catalogue,
        goals=tuple(goals),
        splits=payload["splits"],
        checksums=payload["checksums"],
        index=index,
        nouns=nouns,
    )
    _WORLDS[key] = world
    return world

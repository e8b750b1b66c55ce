"""WebShop data: product cleaning, goals and their count, the fixed shuffle, splits, the shipped
manifest, and refusal of data that do not give the pinned goals."""

from __future__ import annotations

import importlib.util
import json
import math
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.envs.webshop.data import (
    DataFormatError,
    DataMissingError,
    clean_product,
    load_catalogue,
    parse_pricing,
    resolve_data_dir,
)
from agentbench_rl.envs.webshop.goals import (
    PRICE_SEED,
    build_goals,
    parse_task_id,
    price_cap,
    split_ids,
    synthetic_goals,
    task_id,
)
from agentbench_rl.envs.webshop.world import (
    STANDARD,
    Setting,
    load_world,
    manifest_payload,
    shipped_manifest,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def data_dir(shared_data_dir: Path) -> Path:
    return shared_data_dir / "webshop"


@pytest.fixture(scope="module")
def raw(data_dir: Path) -> dict[str, Any]:
    return {
        "products": json.loads((data_dir / "items_shuffle_1000.json").read_text("utf-8")),
        "instructions": json.loads((data_dir / "items_ins_v2_1000.json").read_text("utf-8")),
    }


def standard_goals(data_dir: Path) -> list[Any]:
    rng = random.Random(PRICE_SEED)
    return build_goals(load_catalogue(data_dir, rng=rng), human=False, rng=rng)


def test_pricing_is_parsed_as_the_original() -> None:
    assert parse_pricing("$1,299.00") == ((1299.0,), "$1299.0")
    assert parse_pricing("$10.99 to $15.99 to $20") == ((10.99, 15.99), "$10.99 to $15.99")
    assert parse_pricing(None) == ((100.0,), "$100.0")
    with pytest.raises(DataFormatError):
        parse_pricing("free")


def test_cleaning_keeps_what_the_original_keeps() -> None:
    product = clean_product(
        {
            "asin": "B0X",
            "name": "Lamp",
            "small_description": "One bullet",
            "query": "  Desk Lamps ",
            "customization_options": {"Color": [{"value": " Black/White "}], "Style": None},
        },
        {"B0X": {"instruction": "a lamp", "instruction_attributes": ["dimmable"]}},
        None,
    )
    assert product.bullet_points == ("One bullet",)
    assert product.query == "desk lamps"
    assert dict(product.options) == {"color": ("black | white",)}
    # No "attributes" key for this asin: the original's placeholder.
    assert product.attributes == ("DUMMY_ATTR",)
    assert product.instruction_text == "a lamp"


def test_catalogue_skips_bad_and_repeated_asins(tmp_path: Path) -> None:
    products = [
        {"asin": "B01", "name": "one"},
        {"asin": "nan", "name": "no asin"},
        {"asin": "B0123456789", "name": "too long"},
        {"asin": "B01", "name": "repeat"},
        {"asin": "B02", "name": "two", "pricing": "$10 to $20"},
    ]
    (tmp_path / "items_shuffle_1000.json").write_text(json.dumps(products), "utf-8")
    (tmp_path / "items_ins_v2_1000.json").write_text("{}", "utf-8")
    catalogue = load_catalogue(tmp_path, rng=random.Random(0))
    assert [product.name for product in catalogue.products] == ["one", "two"]
    # A range sells at one price drawn inside it; a single price as is.
    assert catalogue.prices["B01"] == 100.0 and 10.0 <= catalogue.prices["B02"] <= 20.0
    assert load_catalogue(tmp_path, num_products=1).complete is False


def test_missing_data_gives_one_line_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WEBSHOP_DATA", raising=False)
    with pytest.raises(DataMissingError, match=r"\$WEBSHOP_DATA") as caught:
        resolve_data_dir(None)
    assert "\n" not in str(caught.value)
    with pytest.raises(DataMissingError, match="not found"):
        resolve_data_dir("/nonexistent/webshop")


def test_price_cap_rule() -> None:
    # Price 15.5: the first four multiples of $10 above it are 20, 30, 40, 50; the cap is the
    # larger of two drawn from them, so 30, 40 or 50.
    caps = {price_cap(15.5, random.Random(seed))[0] for seed in range(50)}
    assert caps == {30.0, 40.0, 50.0}
    assert price_cap(15.5, random.Random(1))[1].startswith(", and price lower than ")
    # At $985 only 990 is above: fewer than two candidates, no cap and no price text.
    assert price_cap(985.0, random.Random(0)) == (1_000_000.0, "")


def test_goal_count_of_the_1k_setting(data_dir: Path, raw: dict[str, Any]) -> None:
    # Counted straight from the files: one goal per option combination of every product with a
    # synthetic instruction (option lists as the loader cleans them).
    expected = 0
    for product in raw["products"]:
        if raw["instructions"].get(product["asin"], {}).get("instruction") is None:
            continue
        options = {
            name.lower(): values
            for name, values in (product["customization_options"] or {}).items()
            if values is not None
        }
        expected += math.prod(len(values) for values in options.values())
    goals = standard_goals(data_dir)
    assert len(goals) == expected == 6910
    with_instruction = {goal.asin for goal in goals}
    assert len(with_instruction) == 415
    assert {split: len(ids) for split, ids in split_ids(goals).items()} == {
        "test": 500,
        "train": 6410,
    }


def test_goals_follow_the_seed_233_shuffle(data_dir: Path) -> None:
    rng = random.Random(PRICE_SEED)
    catalogue = load_catalogue(data_dir, rng=rng)
    shuffled = build_goals(catalogue, human=False, rng=rng)
    # Build the goals in catalogue order again and shuffle them as the original does.
    rng = random.Random(PRICE_SEED)
    catalogue = load_catalogue(data_dir, rng=rng)
    in_order = synthetic_goals(catalogue, rng)
    saved = random.getstate()
    try:
        random.seed(233)  # exactly what the original's SimServer does
        random.shuffle(in_order)
    finally:
        random.setstate(saved)
    assert [goal.digest() for goal in in_order] == [goal.digest() for goal in shuffled]
    # The instruction carries the options and the cap, as the original writes them.
    goal = shuffled[0]
    options = ", and ".join(f"{name}: {value}" for name, value in goal.goal_options.items())
    assert goal.instruction_text.endswith(
        f" with {options}, and price lower than {goal.price_upper:.2f} dollars"
    )


def test_goals_are_the_same_in_every_process_and_worker(data_dir: Path) -> None:
    first, second = standard_goals(data_dir), standard_goals(data_dir)
    assert [goal.digest() for goal in first] == [goal.digest() for goal in second]


def test_task_ids_carry_the_session_index() -> None:
    assert [task_id(index) for index in (0, 499, 500, 6909)] == [
        "test-00000",
        "test-00499",
        "train-00500",
        "train-06909",
    ]
    assert parse_task_id("train-06909") == 6909
    for bad in ("test-00500", "train-00007", "test-7", "val-00001", ""):
        with pytest.raises(ValueError, match="bad task id"):
            parse_task_id(bad)


def test_shipped_manifest_is_what_build_splits_writes(data_dir: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "webshop_build_splits", REPO / "envs" / "webshop" / "build_splits.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shipped = (REPO / "agentbench_rl" / "envs" / "webshop" / "splits.json").read_text("utf-8")
    assert module.build_manifest_text(data_dir) == shipped


def test_manifest_pins_goal_hashes_and_checksums(data_dir: Path) -> None:
    manifest = shipped_manifest()
    goals = standard_goals(data_dir)
    assert manifest["num_goals"] == len(goals)
    first, last = goals[0], goals[-1]
    assert manifest["splits"]["test"][0] == ["test-00000", first.digest(), first.category]
    assert manifest["splits"]["train"][-1] == ["train-06909", last.digest(), last.category]
    # The checksums cover the (task id, goal hash) pairs only: recording the categories (format
    # 2) left them as results files have pinned them since format 1.
    pairs = {split: [row[:2] for row in rows] for split, rows in manifest["splits"].items()}
    assert manifest["checksums"] == {
        split: stable_hash({"setting": STANDARD.payload(), "goals": split_pairs})
        for split, split_pairs in pairs.items()
    }
    assert manifest["checksums"]["test"] == "3851fab33f63428268ee1c0573639f00"
    assert manifest["data_sha256"]["items_shuffle_1000.json"].startswith("3ab3874c")
    assert manifest == json.loads(json.dumps(manifest_payload(STANDARD, goals, manifest_files())))


def manifest_files() -> dict[str, str]:
    files: dict[str, str] = shipped_manifest()["data_sha256"]
    return files


def test_data_whose_goals_differ_are_refused(data_dir: Path, tmp_path: Path) -> None:
    for name in ("items_shuffle_1000.json", "items_ins_v2_1000.json"):
        shutil.copy(data_dir / name, tmp_path / name)
    instructions = json.loads((tmp_path / "items_ins_v2_1000.json").read_text("utf-8"))
    asin = next(asin for asin, entry in instructions.items() if entry.get("instruction"))
    instructions[asin]["instruction"] += " please"
    (tmp_path / "items_ins_v2_1000.json").write_text(json.dumps(instructions), "utf-8")
    with pytest.raises(ValueError, match="differ from the shipped split manifest") as caught:
        load_world(tmp_path, STANDARD, tmp_path / "cache")
    assert "\n" not in str(caught.value)


def test_human_goals_read_the_subset_file(data_dir: Path) -> None:
    rng = random.Random(PRICE_SEED)
    catalogue = load_catalogue(data_dir, human_goals=True, rng=rng)
    goals = build_goals(catalogue, human=True, rng=rng)
    # 13 human instructions for catalogue products, each with attributes: all are test goals.
    assert len(goals) == 13
    assert {split: len(ids) for split, ids in split_ids(goals).items()} == {
        "test": 13,
        "train": 0,
    }
    assert all(isinstance(goal.goal_options, tuple) for goal in goals)
    assert "items_human_ins_1k_subset.json" in catalogue.files


def test_other_settings_get_their_own_checksums(data_dir: Path) -> None:
    rng = random.Random(PRICE_SEED)
    catalogue = load_catalogue(data_dir, num_products=100, rng=rng)
    goals = build_goals(catalogue, False, rng)
    payload = manifest_payload(Setting(num_products=100), goals, {})
    assert len(catalogue) == 100 and len(goals) < 6910
    assert payload["checksums"]["test"] != shipped_manifest()["checksums"]["test"]
    # Cutting at or past the file's length keeps every product: the standard setting.
    assert load_catalogue(data_dir, num_products=5000).complete

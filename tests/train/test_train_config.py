"""The typed run declaration (#24 point 1): types, ranges and choices refused on the way in, in
one line; one identity for resume, comparison and the BC cache; every committed config loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentbench_rl.train.config import (
    CONFIG_VERSION,
    RUN_OPTION,
    SECTIONS,
    WARM_START,
    TrainConfig,
    apply_overrides,
    config_from_dict,
    dump_config,
    load_config,
    read_run_config,
    show_config,
)

REPO = Path(__file__).resolve().parents[2]
COMMITTED = sorted((REPO / "baselines").rglob("*.yaml"))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("clip_ratio=1.5", "clip_ratio must be < 1, got 1.5"),
        ("gamma=-0.1", "gamma must be >= 0, got -0.1"),
        ("n_tasks=0", "n_tasks must be a whole number >= 1, got 0"),
        ("seed=1.0", "seed: 1.0 is not a whole number"),
        ("seed=true", "seed: True is not a whole number"),
        ("val_greedy=1", "val_greedy: 1 is not true/false"),
        ("kl_coef=true", "kl_coef: True is not a number"),
        ("reward=won", "reward 'won' (choose from 'success' or 'env')"),
        ("engine=sglang", "engine 'sglang' (choose from 'hf' or 'vllm')"),
        ("learning_rate=NaN", "override 'learning_rate=NaN': NaN is not a finite number"),
        ("val_seeds=[]", "val_seeds: give at least 1, got []"),
        ("bc.epocs=2", "unknown config key 'bc.epocs' (did you mean 'bc.epochs'?)"),
        ("tiny.heads=3", "tiny: hidden_size 128 must split into heads 3 heads of an even size"),
        ("config_version=2", "config_version 2 (choose from 1)"),
        ("seed.x=1", "unknown config key 'seed.x' (seed is not a section)"),
    ],
)
def test_a_bad_value_is_refused_in_one_line_naming_it(override: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        apply_overrides(TrainConfig(), [override])
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_overrides_leave_the_given_config_as_it_was() -> None:
    base = TrainConfig()
    changed = apply_overrides(base, ["seed=4", "env_kwargs.size.width=6"])
    assert (changed.seed, changed.env_kwargs) == (4, {"size": {"width": 6}})
    assert (base.seed, base.env_kwargs) == (0, {})


def test_assignment_is_checked_too() -> None:
    config = TrainConfig()
    with pytest.raises(ValueError, match=r"^clip_ratio must be > 0, got 0\.0$"):
        config.clip_ratio = 0.0


def test_identity_leaves_out_exactly_the_run_options() -> None:
    options = {
        name
        for name, info in TrainConfig.model_fields.items()
        if info.json_schema_extra == RUN_OPTION
    }
    assert options == {
        "config_version",
        "iterations",
        "backend",
        "ray_address",
        "env_workers",
        "env_server",  # a served env gives the local numbers (tests/integrations/test_openenv.py)
        "vllm_gpu_memory_utilization",
    }
    identity = TrainConfig().identity()
    assert not options & set(identity)
    assert "cache_dir" not in identity["bc"] and "epochs" in identity["bc"]
    flipped = TrainConfig(backend="ray", env_workers=7, iterations=9, bc={"cache_dir": "/x"})
    assert flipped.identity_hash() == TrainConfig().identity_hash()
    assert TrainConfig(top_p=0.9).identity_hash() != TrainConfig().identity_hash()


def test_warm_start_identity_follows_the_marks() -> None:
    marked = {
        name
        for name, info in TrainConfig.model_fields.items()
        if info.json_schema_extra == WARM_START
    }
    warm = TrainConfig(train_categories=["a"]).warm_start_identity()
    # the marked fields (the unused model section left out), BC's settings, the warm-start seed
    assert set(warm) == (marked - {"tiny_vl"}) | {"bc", "seed"}
    assert "cache_dir" not in warm["bc"]
    # RL settings and the run's own seed (when BC fixes one) leave the warm start alone
    a = TrainConfig(seed=1, learning_rate=1e-3, bc={"enabled": True, "seed": 0})
    b = TrainConfig(seed=2, kl_coef=0.5, bc={"enabled": True, "seed": 0, "cache_dir": "/c"})
    assert a.warm_start_identity() == b.warm_start_identity()
    assert (
        a.warm_start_identity() != TrainConfig(seed=1, max_prompt_tokens=99).warm_start_identity()
    )


def test_a_setting_added_later_is_in_the_identity_only_away_from_its_default() -> None:
    # bc.loss came after runs were recorded: at "tokens" (what they did) their identity hashes,
    # resumes and BC cache keys stay; "choice" is a new identity and a new warm start.
    plain, by_choice = TrainConfig(), TrainConfig(action_mode="choose", bc={"loss": "choice"})
    assert "loss" not in plain.identity()["bc"] and "loss" not in plain.warm_start_identity()["bc"]
    assert TrainConfig(bc={"loss": "tokens"}).identity_hash() == plain.identity_hash()
    assert by_choice.identity()["bc"]["loss"] == "choice"
    assert by_choice.warm_start_identity()["bc"]["loss"] == "choice"
    assert plain.identity_changes(by_choice) == ["action_mode", "bc.loss"]
    with pytest.raises(ValueError, match=r"^bc.loss: 'choice' needs action_mode: choose$"):
        TrainConfig(action_mode="generate", bc={"loss": "choice"}).check()


@pytest.mark.parametrize("path", COMMITTED, ids=lambda path: str(path.relative_to(REPO)))
def test_every_committed_config_loads_checks_and_round_trips(path: Path, tmp_path: Path) -> None:
    # run folders' config.yaml (version 1, written before the field existed), sweep files, the
    # baselines: each loads, passes the registry checks, and reads back from its dump unchanged
    config = read_run_config(path) if path.name == "config.yaml" else load_config(path)
    assert config.config_version == CONFIG_VERSION
    config.check()
    again = tmp_path / "config.yaml"
    again.write_text(dump_config(config), "utf-8")
    reread = read_run_config(again)
    assert reread == config and reread.identity_hash() == config.identity_hash()


def test_config_from_dict_refuses_a_non_mapping() -> None:
    with pytest.raises(ValueError, match=r"^config: expected a mapping, got 3$"):
        config_from_dict(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^bc: expected a mapping, got 'on'$"):
        config_from_dict({"bc": "on"})


def test_the_sections_cover_the_fields_in_the_order_the_class_declares_them() -> None:
    listed = [name for names in SECTIONS.values() for name in names]
    assert listed == list(TrainConfig.model_fields)  # each once, in declaration order


def test_the_sectioned_view_reads_back_as_the_flat_config() -> None:
    import yaml

    config = apply_overrides(TrainConfig(), ["seed=3", "bc.epochs=4"])
    shown = show_config(config)
    assert [line for line in shown.splitlines() if line.startswith("# ")] == [
        f"# {heading}" for heading in SECTIONS
    ]
    assert config_from_dict(yaml.safe_load(shown)) == config


def test_command_line_flags_are_set_as_typed_values_not_reread_as_yaml(tmp_path: Path) -> None:
    import subprocess
    import sys

    import yaml

    shown = subprocess.run(
        [sys.executable, "-m", "agentbench_rl.cli", "train", "--show-config", "--model", "2024"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    assert yaml.safe_load(shown.stdout)["model"] == "2024"  # a folder name, not the number

"""``agentbench/ALFWorld-v0``: data and manifests, the episode contract, bad input, the expert.

Game facts asserted here were read off the game files by hand (walkthroughs, intro text, the
objects on a desk); the TextWorld comparison plays the same commands on TextWorld's own
``PddlEnv`` with ALFWorld's ``AlfredDemangler``, the set-up of ALFWorld's ``AlfredTWEnv``.
"""

from __future__ import annotations

import doctest
import importlib.util
import json
import os
import random
import subprocess
import sys
import tarfile
import time
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from typer.testing import CliRunner

import agentbench_rl  # noqa: F401  (registers the envs with Gymnasium)
from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.envs import env_class, make
from agentbench_rl.envs.alfworld.data import (
    SPLITS,
    TASK_TYPES,
    DataMissingError,
    InstallError,
    ModifiedGameError,
    install_archive,
    load_manifest,
)
from agentbench_rl.envs.alfworld.env import ALFWorldEnv, canonical_command
from agentbench_rl.envs.base import EpisodeEndedError

REPO_ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = Path("alfworld") / "json_2.1.1.tar.gz"
VALID_SPLITS = ("valid_seen", "valid_unseen")

# valid_seen's first game (hand-read from its game.tw-pddl): a bedroom, task "look at alarmclock".
LAMP_TASK = "look_at_obj_in_light-AlarmClock-None-DeskLamp-323/trial_T20190909_044715_250790"
LAMP_WALKTHROUGH = ["go to desk 1", "use desklamp 1", "take alarmclock 2 from desk 1"]
BREAD_TASK = "pick_cool_then_place_in_recep-Bread-None-CounterTop-10/trial_T20190908_091811_414150"
# valid_seen's 14th game: pick a book from the bed, put it on side table 1.
BOOK_TASK = "pick_and_place_simple-Book-None-SideTable-329/trial_T20190908_050633_745514"
BOOK_WALKTHROUGH = ["go to bed 1", "take book 2 from bed 1", "go to sidetable 1",
                    "move book 2 to sidetable 1"]  # fmt: skip

HAS_BACKEND = all(importlib.util.find_spec(name) for name in ("textworld", "alfworld"))
needs_backend = pytest.mark.skipif(
    not HAS_BACKEND and not os.environ.get("CI"),
    reason='needs the alfworld extra: pip install -e ".[alfworld]"',
)


# ---------------------------------------------------------------------- fixtures
def _require_textworld() -> None:
    if not HAS_BACKEND:
        message = 'needs the alfworld extra: pip install -e ".[alfworld]"'
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session", params=["native", "textworld"])
def seen_env(alfworld_data: Path, request: pytest.FixtureRequest) -> ALFWorldEnv:
    """One warm valid_seen env per engine, shared by the tests (each test resets it)."""
    if request.param == "textworld":
        _require_textworld()
    return ALFWorldEnv(split="valid_seen", data_dir=alfworld_data, backend=request.param)


@pytest.fixture(scope="session")
def textworld_env(alfworld_data: Path) -> ALFWorldEnv:
    """A valid_seen env on TextWorld's engine, for the tests that reach into it."""
    _require_textworld()
    return ALFWorldEnv(split="valid_seen", data_dir=alfworld_data, backend="textworld")


def play(env: ALFWorldEnv, actions: list[str]) -> list[tuple[str, float, bool, dict[str, Any]]]:
    results = []
    for action in actions:
        obs, reward, terminated, _, info = env.step(action)
        results.append((obs, reward, terminated, info))
    return results


# ---------------------------------------------------------------------- splits and manifests
def test_split_sizes_and_task_types_match_the_data_set() -> None:
    # The per-type counts of the data README (the standard ALFWorld numbers).
    expected = {
        "train": (3553, [308, 790, 650, 533, 459, 813]),
        "valid_seen": (140, [13, 35, 27, 25, 16, 24]),
        "valid_unseen": (134, [18, 24, 31, 21, 23, 17]),
    }
    readme_order = ["look_at_obj_in_light", "pick_and_place_simple",
                    "pick_clean_then_place_in_recep", "pick_cool_then_place_in_recep",
                    "pick_heat_then_place_in_recep", "pick_two_obj_and_place"]  # fmt: skip
    assert sorted(readme_order) == sorted(TASK_TYPES)
    for split, (size, per_type) in expected.items():
        manifest = load_manifest(split)
        assert len(manifest.games) == size == len(set(manifest.task_ids()))
        counts = Counter(game.task_type for game in manifest.games)
        assert [counts[task_type] for task_type in readme_order] == per_type


def test_splits_are_fixed_lists_with_stable_checksums() -> None:
    assert SPLITS == ("train", "valid_seen", "valid_unseen")
    assert ALFWorldEnv.splits() == (*SPLITS, "demo")
    ids = {split: set(ALFWorldEnv.task_ids(split)) for split in SPLITS}
    assert not ids["train"] & ids["valid_seen"] and not ids["train"] & ids["valid_unseen"]
    assert not ids["valid_seen"] & ids["valid_unseen"]
    assert ALFWorldEnv.task_ids("valid_seen")[0] == LAMP_TASK
    assert ALFWorldEnv.task_ids("valid_seen")[13] == BOOK_TASK
    # Pinned: a change of any game, its order or its id changes these.
    assert ALFWorldEnv.split_checksum("train") == "b85e721e03c064e5f56ae296a59ceeca"
    assert ALFWorldEnv.split_checksum("valid_seen") == "4cc074d88d8cf6aa02111e8fdf50b001"
    assert ALFWorldEnv.split_checksum("valid_unseen") == "28a71248311cb70522493241bccee2c5"
    with pytest.raises(ValueError, match="unknown split 'test'"):
        ALFWorldEnv.task_ids("test")


def _envs_script(script: str) -> Any:
    """The module of ``envs/alfworld/<script>.py`` (scripts, not part of the package)."""
    path = REPO_ROOT / "envs" / "alfworld" / f"{script}.py"
    spec = importlib.util.spec_from_file_location(f"alfworld_{script}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_shipped_manifests_equal_build_splits_output(
    shared_data_dir: Path, alfworld_data: Path
) -> None:
    build = _envs_script("build_splits")
    package_dir = REPO_ROOT / "agentbench_rl" / "envs" / "alfworld"
    from_tsv = build.manifests_from_records(
        build.records_from_tsv(shared_data_dir / "alfworld" / "MANIFEST.tsv")
    )
    for split in SPLITS:
        shipped = (package_dir / f"manifest_{split}.json").read_text(encoding="utf-8")
        assert from_tsv[split].to_json() == shipped
    # Hashing the extracted files gives the same valid manifests.
    from_files = build.manifests_from_records(build.records_from_data_dir(alfworld_data))
    for split in VALID_SPLITS:
        assert from_files[split] == load_manifest(split)


def test_the_shipped_demo_split_plays_with_no_data(tmp_path: Path) -> None:
    """Six games of our own ship in the package (one per task type), written by build_demo.py
    (the shipped files equal its output, and none is one of ALFWorld's); the env plays them with
    an empty data folder and the expert wins each."""
    build = _envs_script("build_demo")
    assert build.main(["--check"]) == 0
    assert doctest.testmod(build).failed == 0
    demo = load_manifest("demo")
    assert demo == build.demo_manifest()
    assert sorted(game.task_type for game in demo.games) == sorted(TASK_TYPES)
    official = {game.sha256 for split in SPLITS for game in load_manifest(split).games}
    assert not official & {game.sha256 for game in demo.games}
    env = ALFWorldEnv(split="demo", data_dir=tmp_path)  # nothing installed there
    for task_id in env.task_ids("demo"):
        _, info = env.reset(options={"task_id": task_id})
        for _ in range(50):
            _, reward, terminated, truncated, info = env.step(env.expert_action())
            if terminated or truncated:
                break
        assert info["won"] and reward == 1.0, task_id
    env.close()


# ---------------------------------------------------------------------- data folder and install
def test_missing_data_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(DataMissingError) as caught:
        ALFWorldEnv(split="valid_seen", data_dir=tmp_path)
    message = str(caught.value)
    assert "\n" not in message
    assert "agentbench-rl data install alfworld" in message
    assert str(tmp_path / "json_2.1.1" / "valid_seen") in message


def test_data_folder_defaults_to_alfworld_data(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentbench_rl.envs.alfworld.data import default_data_dir

    monkeypatch.setenv("ALFWORLD_DATA", "/somewhere/alfworld")
    assert default_data_dir() == Path("/somewhere/alfworld")
    monkeypatch.delenv("ALFWORLD_DATA")
    assert default_data_dir() == Path.home() / ".cache" / "alfworld"


def _valid_archive(source: Path, target: Path, fmt: str) -> Path:
    """An archive of the valid splits' game files, in the official layout."""
    files = sorted((source / "json_2.1.1").rglob("game.tw-pddl"))
    if fmt == "zip":
        with zipfile.ZipFile(target, "w") as archive:
            for file in files:
                archive.write(file, file.relative_to(source).as_posix())
            archive.writestr("../escape.txt", "outside")  # never written outside the folder
    else:
        with tarfile.open(target, "w:gz") as archive:
            for file in files:
                archive.add(file, file.relative_to(source).as_posix())
    return target


@pytest.mark.parametrize("fmt", ["zip", "tar.gz"])
def test_install_unpacks_and_checks_against_the_manifest(
    alfworld_data: Path, tmp_path: Path, fmt: str
) -> None:
    archive = _valid_archive(alfworld_data, tmp_path / f"games.{fmt}", fmt)
    seen: list[tuple[str, int, int]] = []
    report = install_archive(
        archive, tmp_path / "data", splits=VALID_SPLITS, progress=lambda *a: seen.append(a)
    )
    assert report.extracted == 274
    assert [(c.split, c.ok, c.expected) for c in report.checks] == [
        ("valid_seen", 140, 140), ("valid_unseen", 134, 134)]  # fmt: skip
    assert seen[-1] == ("check", 274, 274)
    assert not (tmp_path / "escape.txt").exists()
    # The standard install checks every split: train is missing here.
    with pytest.raises(InstallError, match=r"train: 0/3553 games ok \(3553 missing"):
        install_archive(archive, tmp_path / "data")


def test_install_command_reports_one_line(alfworld_data: Path, tmp_path: Path) -> None:
    from agentbench_rl.cli import app

    archive = _valid_archive(alfworld_data, tmp_path / "games.tar.gz", "tar.gz")
    runner = CliRunner()
    args = ["data", "install", "alfworld", "--archive", str(archive), "--data-dir",
            str(tmp_path / "data")]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert "error: alfworld:" in result.output and "train: 0/3553 games ok" in result.output
    missing = runner.invoke(app, ["data", "install", "alfworld", "--archive", "/no/such.zip"])
    assert missing.exit_code == 2 and "archive not found: /no/such.zip" in missing.output
    not_archive = tmp_path / "notes.txt"
    not_archive.write_text("hello")
    garbage = runner.invoke(app, ["data", "install", "alfworld", "--archive", str(not_archive)])
    assert garbage.exit_code == 2 and "neither a zip nor a tar archive" in garbage.output


def test_modified_game_is_refused_unless_allowed(alfworld_data: Path, tmp_path: Path) -> None:
    relative = Path("json_2.1.1") / "valid_seen" / LAMP_TASK / "game.tw-pddl"
    game = json.loads((alfworld_data / relative).read_text())
    game["walkthrough"] = [*LAMP_WALKTHROUGH, "look"]  # a harmless edit: one more step
    (tmp_path / relative).parent.mkdir(parents=True)
    (tmp_path / relative).write_text(json.dumps(game))

    env = ALFWorldEnv(split="valid_seen", data_dir=tmp_path)
    with pytest.raises(ModifiedGameError, match="differs from the valid_seen manifest"):
        env.reset(options={"task_id": LAMP_TASK})
    allowed = ALFWorldEnv(split="valid_seen", data_dir=tmp_path, allow_modified_games=True)
    with pytest.warns(UserWarning, match="playing modified game"):
        obs, _ = allowed.reset(options={"task_id": LAMP_TASK})
    assert obs.endswith("Your task is to: look at alarmclock under the desklamp.")
    assert allowed.modified_task_ids == {LAMP_TASK}


# ---------------------------------------------------------------------- the episode contract
def test_check_env_passes(alfworld_data: Path) -> None:
    from gymnasium.utils.env_checker import check_env

    env = gym.make("agentbench/ALFWorld-v0", split="valid_seen", data_dir=alfworld_data)
    check_env(env.unwrapped)
    assert env_class("agentbench/ALFWorld-v0") is ALFWorldEnv


def test_reset_shows_the_room_and_the_task(seen_env: ALFWorldEnv) -> None:
    obs, info = seen_env.reset(options={"task_id": LAMP_TASK})
    assert obs == (
        "-= Welcome to TextWorld, ALFRED! =-\n\n"
        "You are in the middle of a room. Looking quickly around you, you see a bed 2, a bed 1, "
        "a desk 1, a drawer 11, a drawer 10, a drawer 9, a drawer 8, a drawer 7, a drawer 6, "
        "a drawer 5, a drawer 4, a drawer 3, a drawer 2, a drawer 1, a dresser 1, "
        "a garbagecan 1, a safe 1, a sidetable 2, and a sidetable 1.\n\n"
        "Your task is to: look at alarmclock under the desklamp."
    )
    assert seen_env.task_description == "Your task is to: look at alarmclock under the desklamp."
    drawers = [f"drawer {n}" for n in (1, 10, 11, 2, 3, 4, 5, 6, 7, 8, 9)]  # sorted as text
    places = ["bed 1", "bed 2", "desk 1", *drawers, "dresser 1", "garbagecan 1", "safe 1",
              "sidetable 1", "sidetable 2"]  # fmt: skip
    assert info["admissible_actions"] == [f"go to {p}" for p in places] + ["inventory", "look"]
    assert "help" not in info["admissible_actions"]
    assert info["category"] == "look_at_obj_in_light"
    assert info["task_id"] == LAMP_TASK
    assert info["obs_hash"] == stable_hash(obs)
    assert (info["won"], info["score"], info["step"]) == (False, 0.0, 0)


def test_walkthrough_wins_with_reward_one_on_the_last_step(seen_env: ALFWorldEnv) -> None:
    seen_env.reset(options={"task_id": LAMP_TASK})
    results = play(seen_env, LAMP_WALKTHROUGH)
    assert [obs for obs, *_ in results] == [
        "You arrive at desk 1. On the desk 1, you see a alarmclock 2, a book 1, a bowl 1, "
        "a cd 2, a desklamp 1, a mug 2, a mug 1, a pen 2, and a pen 1.",
        "You turn on the desklamp 1.",
        "You pick up the alarmclock 2 from the desk 1.",
    ]
    assert all(seen_env.observation_space.contains(obs) for obs, *_ in results)
    assert [reward for _, reward, *_ in results] == [0.0, 0.0, 1.0]
    assert [terminated for *_, terminated, _ in results] == [False, False, True]
    info = results[-1][3]
    assert info["won"] and info["score"] == 1.0 and info["action_valid"]
    assert seen_env.episode_over
    with pytest.raises(EpisodeEndedError):
        seen_env.step("look")


def test_old_put_grammar_is_canonicalised(seen_env: ALFWorldEnv) -> None:
    assert canonical_command("put book 2 in/on sidetable 1") == "move book 2 to sidetable 1"
    assert canonical_command("put book 2 on sidetable 1") == "move book 2 to sidetable 1"
    assert canonical_command("put book 2 in sidetable 1") == "move book 2 to sidetable 1"
    assert canonical_command("take book 2 from bed 1") == "take book 2 from bed 1"
    seen_env.reset(options={"task_id": BOOK_TASK})
    old_style = [*BOOK_WALKTHROUGH[:3], "<action>Put Book 2 in/on SideTable 1</action>"]
    results = play(seen_env, old_style)
    obs, reward, terminated, info = results[-1]
    assert info["action_canonical"] == "move book 2 to sidetable 1"
    assert obs == "You move the book 2 to the sidetable 1."
    assert (reward, terminated, info["won"]) == (1.0, True, True)


def test_equal_text_in_different_states_gets_different_state_hashes(
    seen_env: ALFWorldEnv,
) -> None:
    _, start = seen_env.reset(options={"task_id": LAMP_TASK})
    obs_1, _, _, _, nothing_at_start = seen_env.step("open the pod bay doors")
    _, _, _, _, at_desk = seen_env.step("go to desk 1")
    obs_2, _, _, _, nothing_at_desk = seen_env.step("open the pod bay doors")
    assert obs_1 == obs_2 == "Nothing happens."
    assert nothing_at_start["obs_hash"] == nothing_at_desk["obs_hash"]
    assert nothing_at_start["state_hash"] != nothing_at_desk["state_hash"]
    # An invalid action changes nothing in the world.
    assert nothing_at_start["state_hash"] == start["state_hash"]
    assert nothing_at_desk["state_hash"] == at_desk["state_hash"]
    # Looking or taking inventory changes the text, not the world.
    for command in ("inventory", "look", "examine desk 1"):
        _, _, _, _, looked = seen_env.step(command)
        assert looked["action_valid"] and looked["obs_hash"] != at_desk["obs_hash"]
        assert looked["state_hash"] == at_desk["state_hash"]
    # Opening and closing a drawer: the same world again.
    _, _, _, _, at_drawer = seen_env.step("go to drawer 1")
    obs, _, _, _, opened = seen_env.step("open drawer 1")
    assert obs == "You open the drawer 1. The drawer 1 is open. In it, you see a creditcard 1."
    obs, _, _, _, closed = seen_env.step("close drawer 1")
    assert obs == "You close the drawer 1."
    assert len({at_desk["state_hash"], at_drawer["state_hash"], opened["state_hash"]}) == 3
    assert closed["state_hash"] == at_drawer["state_hash"]


BAD_INPUTS = [
    "", " ", "\n\t", "help", "go to", "go to desk 99", "take", "GO TO THE DESK",
    "<action></action>", "<action>", "<think>go to desk 1", "go to desk 1; look",
    "\x00\x01\x02", "ünïcødé ☃ 中文", "a" * 10_000, "put", "put  in/on ", "move x to",
    "{o}", "#intro#", "{r.name}", "__import__('os')",
]  # fmt: skip


def test_bad_input_never_raises_and_changes_nothing(seen_env: ALFWorldEnv) -> None:
    _, start = seen_env.reset(options={"task_id": LAMP_TASK})
    rng = random.Random(0)
    randoms = ["".join(chr(rng.randrange(0x20, 0x2FFF)) for _ in range(rng.randrange(1, 40)))
               for _ in range(20)]  # fmt: skip
    for action in [*BAD_INPUTS, *randoms]:
        obs, reward, terminated, truncated, info = seen_env.step(action)
        assert obs == "Nothing happens.", action
        assert (reward, terminated, info["action_valid"]) == (0.0, False, False)
        assert info["state_hash"] == start["state_hash"]
        assert info["admissible_actions"] == start["admissible_actions"]
        if truncated:
            seen_env.reset(options={"task_id": LAMP_TASK})
    seen_env.reset(options={"task_id": LAMP_TASK})
    assert seen_env.step(b"\xff\xfe go to desk 1")[4]["action_valid"] is False  # type: ignore[arg-type]


def test_step_limit_is_fifty(seen_env: ALFWorldEnv) -> None:
    seen_env.reset(options={"task_id": LAMP_TASK})
    for step in range(1, 51):
        _, _, terminated, truncated, info = seen_env.step("look")
        assert not terminated and truncated == (step == 50)
    assert info["step"] == 50
    with pytest.raises(EpisodeEndedError):
        seen_env.step("look")


def test_reset_restores_the_initial_state(seen_env: ALFWorldEnv) -> None:
    first_obs, first = seen_env.reset(options={"task_id": BOOK_TASK})
    play(seen_env, BOOK_WALKTHROUGH[:2])
    again_obs, again = seen_env.reset(options={"task_id": BOOK_TASK})
    assert (again_obs, again) == (first_obs, first)
    # Without a task id, the seed picks the game.
    _, drawn = seen_env.reset(seed=7)
    _, drawn_again = seen_env.reset(seed=7)
    assert drawn["task_id"] == drawn_again["task_id"] in ALFWorldEnv.task_ids("valid_seen")


@needs_backend
def test_admissible_commands_and_text_equal_textworlds(
    seen_env: ALFWorldEnv, alfworld_data: Path
) -> None:
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler
    from textworld.envs.pddl.pddl import PddlEnv

    raw = AlfredDemangler()(PddlEnv(textworld.EnvInfos(admissible_commands=True, won=True)))
    rng = random.Random(3)
    for task_id in (BOOK_TASK, ALFWorldEnv.task_ids("valid_seen")[70]):
        raw.load(str(alfworld_data / "json_2.1.1" / "valid_seen" / task_id / "game.tw-pddl"))
        state = raw.reset()
        obs, info = seen_env.reset(options={"task_id": task_id})
        for _ in range(12):
            assert obs == state.feedback
            assert info["admissible_actions"] == [
                c for c in state.admissible_commands if c != "help"
            ]
            assert info["won"] == state.won
            command = rng.choice(info["admissible_actions"])
            state, _, _ = raw.step(command)
            obs, _, terminated, _, info = seen_env.step(command)
            if terminated:
                break
    raw.close()


@needs_backend
def test_expert_replans_after_a_detour(seen_env: ALFWorldEnv) -> None:
    seen_env.reset(options={"task_id": LAMP_TASK})
    assert seen_env.expert_action() == "go to desk 1"
    play(seen_env, ["go to drawer 1", "go to bed 2"])  # off the walkthrough
    steps = 0
    while not seen_env.episode_over:
        *_, info = seen_env.step(seen_env.expert_action())
        steps += 1
    assert info["won"] and steps == 3  # back to the desk, lamp on, alarm clock taken


@pytest.mark.parametrize("backend", ["native", "textworld"])
def test_the_undo_expert_undoes_each_detour_newest_first_without_a_plan(
    alfworld_data: Path, backend: str
) -> None:
    if backend == "textworld":
        _require_textworld()
    env = ALFWorldEnv(
        split="valid_seen", data_dir=alfworld_data, backend=backend, expert_recovery="undo"
    )
    env.reset(options={"task_id": LAMP_TASK})
    env._game._game.plans.clear()  # the game's store of replans (shared by the process)
    # At the desk, take a pen the task does not need, then walk away twice.
    play(env, ["go to desk 1", "take pen 1 from desk 1", "go to bed 2", "go to drawer 1"])
    chosen = []
    while not env.episode_over:
        chosen.append(env.expert_action())
        *_, info = env.step(chosen[-1])
    # One move back (the second walk needs no undo of its own), the pen put back, then the
    # rest of the walkthrough, and no plan was searched for.
    assert chosen == ["go to desk 1", "move pen 1 to desk 1", *LAMP_WALKTHROUGH[1:]]
    assert info["won"] and not env._game._game.plans


def test_an_undo_the_game_refuses_gives_way_to_the_planners_answer(alfworld_data: Path) -> None:
    # The scene holds a paper towel roll on countertop 3, where no command puts one back and no
    # receptacle takes one: a dead end, where both experts answer as TextWorld's does.
    detour = ["go to countertop 3", "take papertowelroll 1 from countertop 3"]
    answers = []
    for recovery in ("undo", "replan"):
        env = ALFWorldEnv(split="valid_unseen", data_dir=alfworld_data, expert_recovery=recovery)
        env.reset(options={"task_id": BREAD_TASK})
        *_, info = play(env, detour)[-1]
        answers.append(env.expert_action())
    assert "move papertowelroll 1 to countertop 3" not in info["admissible_actions"]
    assert answers == ["look", "look"]


def test_an_unknown_expert_recovery_is_named(alfworld_data: Path) -> None:
    with pytest.raises(
        ValueError, match=r"^alfworld: expert_recovery 'retry' \(choose from replan, undo\)$"
    ):
        ALFWorldEnv(split="valid_seen", data_dir=alfworld_data, expert_recovery="retry")  # type: ignore[arg-type]


@needs_backend
def test_a_replanned_state_met_again_gets_the_stored_plan(textworld_env: ALFWorldEnv) -> None:
    detour = ["go to drawer 1", "go to bed 2"]
    textworld_env.reset(options={"task_id": LAMP_TASK})
    play(textworld_env, detour)
    game = textworld_env._game._game
    game.plans.clear()
    searched = textworld_env.expert_action()  # off the walkthrough: a search, stored
    assert len(game.plans) == 1
    stored = list(next(iter(game.plans.values())))

    textworld_env.reset(options={"task_id": LAMP_TASK})  # the same state by the same detour again
    play(textworld_env, detour)
    pddl_state = textworld_env._game._pddl._pddl_state
    calls: list[int] = []
    search = pddl_state.downward_lib.replan
    pddl_state.downward_lib.replan = lambda *a: calls.append(1) or search(*a)
    try:
        assert textworld_env.expert_action() == searched and not calls  # no second search
        game.plans.clear()  # and a fresh search from that state gives the stored plan
        assert pddl_state.replan(textworld_env._game._pddl._entity_infos) == stored
        assert calls == [1]
    finally:
        pddl_state.downward_lib.replan = search


@needs_backend
def test_no_side_effects_on_argv_or_home(alfworld_data: Path, tmp_path: Path) -> None:
    # fast-downward rewrites sys.argv, and importing alfworld creates ~/.cache/alfworld.
    code = (
        "import sys; sys.argv = ['probe', 'x']\n"
        "from agentbench_rl.envs.alfworld.env import ALFWorldEnv\n"
        f"env = ALFWorldEnv(split='valid_seen', data_dir={str(alfworld_data)!r}, "
        "backend='textworld')\n"
        f"env.reset(options={{'task_id': {BOOK_TASK!r}}})\n"
        "import os; assert sys.argv == ['probe', 'x'], sys.argv\n"
        "assert 'ALFWORLD_DATA' not in os.environ\n"
    )
    environment = {k: v for k, v in os.environ.items() if k != "ALFWORLD_DATA"}
    environment["HOME"] = str(tmp_path)
    subprocess.run([sys.executable, "-c", code], check=True, env=environment, cwd=REPO_ROOT)
    assert not (tmp_path / ".cache").exists()


def test_alfworld_plays_without_the_extra(alfworld_data: Path) -> None:
    # Block TextWorld, ALFWorld and the planner: the native engine plays the walkthrough (the
    # core install plus the game files plays ALFWorld); the TextWorld engine and a replan off
    # the walkthrough say in one line what to install.
    code = (
        "import sys\n"
        "for name in ('textworld', 'alfworld', 'fast_downward', 'tatsu'):\n"
        "    sys.modules[name] = None\n"
        "from agentbench_rl.envs import env_class, make\n"
        "assert len(env_class('alfworld').task_ids('valid_unseen')) == 134\n"
        f"env = make('alfworld', split='valid_seen', data_dir={str(alfworld_data)!r})\n"
        f"env.reset(options={{'task_id': {LAMP_TASK!r}}})\n"
        "rewards = [env.step(env.expert_action())[1] for _ in range(3)]\n"
        "assert rewards == [0.0, 0.0, 1.0] and env.won(), rewards\n"
        f"env.reset(options={{'task_id': {LAMP_TASK!r}}}); env.step('go to bed 1')\n"
        f"textworld = lambda: make('alfworld', data_dir={str(alfworld_data)!r}, "
        "backend='textworld')\n"
        "for attempt in (env.expert_action, textworld):\n"
        "    try:\n"
        "        attempt()\n"
        "    except ImportError as problem:\n"
        "        print(problem)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=True
    )
    assert result.stdout.splitlines() == [
        "alfworld: the expert left the walkthrough and must replan, which needs fast-downward: "
        'pip install -e ".[alfworld]"',
        "alfworld: backend='textworld' needs TextWorld and ALFWorld: "
        'pip install -e ".[alfworld]"',
    ]


def test_warm_resets_are_fast(seen_env: ALFWorldEnv) -> None:
    seen_env.reset(options={"task_id": BOOK_TASK})  # compiled once per process
    started = time.perf_counter()
    for _ in range(5):
        seen_env.reset(options={"task_id": BOOK_TASK})
    # TextWorld's own load+reset takes about 1 s on this game; a warm reset reuses the
    # compiled game. The bound is loose so that a busy machine does not fail it.
    assert (time.perf_counter() - started) / 5 < 0.5


# ---------------------------------------------------------------------- the full expert run
@pytest.mark.slow
@needs_backend
@pytest.mark.parametrize("split", VALID_SPLITS)
def test_expert_wins_every_valid_game(alfworld_data: Path, split: str) -> None:
    env = make("alfworld", split=split, data_dir=alfworld_data)
    failures = []
    lengths: Counter[int] = Counter()
    for task_id in env_class("alfworld").task_ids(split):
        env.reset(options={"task_id": task_id})
        steps = 0
        while not env.episode_over:
            *_, info = env.step(env.expert_action())
            steps += 1
        lengths[steps] += 1
        if not info["won"]:
            failures.append(task_id)
    assert failures == []
    # Walkthrough lengths read off the game files: 3 to 9 commands.
    expected = {
        "valid_seen": {3: 6, 4: 40, 5: 7, 6: 38, 7: 26, 8: 18, 9: 5},
        "valid_unseen": {3: 4, 4: 30, 5: 10, 6: 52, 7: 21, 8: 6, 9: 11},
    }
    assert dict(lengths) == expected[split]


def test_manifest_json_round_trips() -> None:
    manifest = load_manifest("valid_unseen")
    text = manifest.to_json()
    assert json.loads(text)["games"][0] == [manifest.games[0].task_id, manifest.games[0].sha256]
    assert type(manifest).from_json(text) == manifest
    assert (
        text.splitlines()[0]
        == '{"env": "alfworld", "format": 1, "split": "valid_unseen", "games": ['
    )

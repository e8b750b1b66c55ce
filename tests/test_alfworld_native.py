"""The native ALFWorld engine against TextWorld's, the oracle: the same transcripts.

Each test plays the same games on both engines (the expert's walkthrough, and seeded walks of
uniform admissible commands with the expert's replans between) and requires, at every step, the
same observation, admissible commands in the same order, reward, done, ``won`` and state hash.
A difference is a bug, not a tolerance. The default run plays a sample of each valid split;
``-m slow`` plays all 274 valid games.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
from pathlib import Path

import pytest

from agentbench_rl.envs.alfworld import native
from agentbench_rl.envs.alfworld.data import load_manifest, read_game, sha256_bytes
from agentbench_rl.envs.alfworld.env import ALFWorldEnv
from agentbench_rl.envs.alfworld.pddl import (
    State,
    World,
    disjunctive_normal_form,
    parse_domain,
    parse_formula,
    parse_problem,
    read_sexpr,
)

HAS_BACKEND = all(importlib.util.find_spec(name) for name in ("textworld", "alfworld"))
needs_backend = pytest.mark.skipif(
    not HAS_BACKEND and not os.environ.get("CI"),
    reason='the oracle needs the alfworld extra: pip install -e ".[alfworld]"',
)
SAMPLE = 8  # games per valid split in the default run
WALK = 30  # steps of each random walk in the default run


# ---------------------------------------------------------------------- the reader, by hand
DOMAIN = """
(define (domain lamp)
 (:types agent object)
 (:predicates (isOn ?o - object) (isToggled ?o - object) (near ?a - agent ?o - object))
 (:action Toggle
    :parameters (?a - agent ?o - object)
    :precondition (and (near ?a ?o))
    :effect (and (when (isOn ?o) (not (isOn ?o))) (when (not (isOn ?o)) (isOn ?o))
                 (isToggled ?o) (increase (total-cost) 5)))
 (:action Peek
    :parameters (?a - agent ?o - object)
    :precondition (or (exists (?x - object, ?y - agent) (near ?y ?x)) (isOn ?o))
    :effect (and (isToggled ?o))))
"""
PROBLEM = """
(define (problem p) (:domain lamp)
 (:objects agent1 - agent lamp1 - object)
 (:init (near agent1 lamp1))
 (:goal (and (isOn lamp1))))
"""


def test_toggle_keeps_the_planner_state_and_textworlds_record_apart() -> None:
    domain, problem = parse_domain(DOMAIN), parse_problem(PROBLEM)
    world = World(domain, problem)
    truth, facts = State(problem.init), State(problem.init)
    toggle = native.GroundAction(domain.actions["toggle"], ("agent1", "lamp1"))
    native.apply(world, toggle, truth, facts)
    # The planner turns the lamp on (the goal holds); TextWorld writes every effect atom,
    # adds before deletes, so its record says the lamp is off.
    assert ("ison", "lamp1") in truth and world.holds(problem.goal, truth, {})
    assert ("not_ison", "lamp1") in facts and ("ison", "lamp1") not in facts
    assert ("istoggled", "lamp1") in facts
    native.apply(world, toggle, truth, facts)
    assert ("ison", "lamp1") not in truth and ("not_ison", "lamp1") in facts


def test_a_comma_after_a_type_is_part_of_it_as_fast_downward_reads_it() -> None:
    domain, problem = parse_domain(DOMAIN), parse_problem(PROBLEM)
    world = World(domain, problem)
    state = State(problem.init)
    # "?x - object," types ?x as "object,", which no object has: that disjunct never holds.
    assert world.applicable(domain.actions["peek"], state) == []
    state.add(("ison", "lamp1"))
    assert world.applicable(domain.actions["peek"], state) == [("agent1", "lamp1")]


def test_preconditions_split_into_disjuncts_with_their_existential_variables() -> None:
    formula = parse_formula(read_sexpr("(and (a ?x) (or (b ?x) (exists (?y - t) (c ?x ?y))))"))
    variants = disjunctive_normal_form(formula)
    assert [extra for extra, _ in variants] == [(), (("?y", "t"),)]
    assert [len(parts) for _, parts in variants] == [2, 2]


def test_display_names_follow_alfworlds_demangler() -> None:
    names = native.display_names(["sink_bar_2_bar_sinkbasin", "desk_bar_a", "desk_bar_b", "agent1"])
    # sorted names, numbered from the count down; "basin" kept; no number: a trailing space
    assert names == {
        "agent1": "agent1 ",
        "desk_bar_a": "desk 2",
        "desk_bar_b": "desk 1",
        "sink_bar_2_bar_sinkbasin": "sinkbasin 1",
    }


def test_unknown_backend_is_refused(alfworld_data: Path) -> None:
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        ALFWorldEnv(split="valid_seen", data_dir=alfworld_data, backend="nope")


# ---------------------------------------------------------------------- against TextWorld
def _compare(alfworld_data: Path, split: str, games: int | None, walk: int) -> int:
    from agentbench_rl.envs.alfworld import backend as textworld

    oracle, ours = textworld.AlfredGame(), native.AlfredGame()
    steps = 0
    records = load_manifest(split).games
    for number, record in enumerate(records if games is None else records[:games]):
        data = read_game(alfworld_data, record)
        sha = sha256_bytes(data)
        game = json.loads(data)
        for mode in ("expert", "walk"):
            expected = oracle.start(textworld.COMPILED_GAMES.get(sha, game.copy))
            got = ours.start(native.COMPILED_GAMES.get(sha, game.copy))
            where = f"{record.task_id} ({mode})"
            assert got == expected, f"{where}: intro"
            rng = random.Random(number)
            for step in range(walk if mode == "walk" else 50):
                assert ours.admissible_commands() == oracle.admissible_commands(), f"{where} {step}"
                assert ours.state_hash() == oracle.state_hash(), f"{where} {step}: state hash"
                assert ours.won() == oracle.won(), f"{where} {step}: won"
                if oracle.won():
                    break
                assert ours.expert_command() == oracle.expert_command(), f"{where} {step}: plan"
                if mode == "expert" or rng.random() < 0.3:
                    command = oracle.expert_command()
                else:
                    command = rng.choice([*oracle.admissible_commands(), "jump"])
                assert ours.step(command) == oracle.step(command), f"{where} {step}: {command}"
                steps += 1
            if mode == "expert":
                assert ours.won(), f"{where}: the expert did not win"
    return steps


@needs_backend
@pytest.mark.parametrize("split", ["valid_seen", "valid_unseen"])
def test_native_plays_as_textworld_on_a_sample(alfworld_data: Path, split: str) -> None:
    assert _compare(alfworld_data, split, SAMPLE, WALK) > 2 * SAMPLE


@needs_backend
@pytest.mark.slow
@pytest.mark.parametrize("split", ["valid_seen", "valid_unseen"])
def test_native_plays_as_textworld_on_every_valid_game(alfworld_data: Path, split: str) -> None:
    assert _compare(alfworld_data, split, None, 50) > 0


def test_the_native_env_plays_without_textworld(alfworld_data: Path) -> None:
    env = ALFWorldEnv(split="valid_seen", data_dir=alfworld_data, backend="native")
    task = env.task_ids("valid_seen")[0]
    obs, _ = env.reset(options={"task_id": task})
    assert obs.splitlines()[-1] == "Your task is to: look at alarmclock under the desklamp."
    rewards = [env.step(env.expert_action())[1] for _ in range(3)]
    assert rewards == [0.0, 0.0, 1.0] and env.won()

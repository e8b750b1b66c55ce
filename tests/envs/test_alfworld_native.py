"""The native ALFWorld engine against TextWorld's, the oracle: the same transcripts.

Each test plays the same games on both engines, the expert's walkthrough and a seeded walk of
uniform admissible commands (an unknown command now and then), and requires at every step the
same observation, admissible commands in the same order, validity, ``won`` (so reward, done and
score) and state hash. A difference is a bug, not a tolerance. The default run plays a sample
of each valid split, its walks mixed with the expert's replanned commands (its plans compared
with TextWorld's where played); ``-m slow`` plays all 274 valid games and a seeded sample of 500
train games with walks of 50 uniform steps (a replan can take seconds in a dead end, where
neither planner finds a plan, so the full runs leave replans to the sample).
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.envs.alfworld import native
from agentbench_rl.envs.alfworld.data import (
    GameRecord,
    load_manifest,
    read_game,
    sha256_bytes,
    shipped_data_dir,
)
from agentbench_rl.envs.alfworld.env import ALFWorldEnv
from agentbench_rl.envs.alfworld.pddl import (
    Exists,
    PddlError,
    Relaxation,
    State,
    World,
    disjunctive_normal_form,
    merged_exists,
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
PILLOW_TASK = "look_at_obj_in_light-Pillow-None-DeskLamp-323/trial_T20190908_053153_077977"


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


def _read_token_by_token(text: str) -> object:
    """An independent reader: a regex tokenizer and recursive descent."""
    uncommented = "\n".join(line.split(";", 1)[0] for line in text.splitlines())
    tokens = re.findall(r"\(|\)|[^\s()]+", uncommented.lower())

    def read(at: int) -> tuple[object, int]:
        if tokens[at] != "(":
            return tokens[at], at + 1
        items, at = [], at + 1
        while tokens[at] != ")":
            item, at = read(at)
            items.append(item)
        return items, at + 1

    return read(tokens.index("("))[0]


@pytest.mark.parametrize(
    "text",
    [
        DOMAIN,
        PROBLEM,
        "((a)(b c)) (ignored)",
        "lead (A;x)\n b)(c)",
        "(x(y)z ( ) ((w)))",
        "(a\t(b\r\nc));)(",
    ],
)
def test_read_sexpr_reads_as_a_token_by_token_reader(text: str) -> None:
    assert read_sexpr(text) == _read_token_by_token(text)


def test_read_sexpr_reads_the_shipped_games_as_a_token_by_token_reader() -> None:
    games = sorted(shipped_data_dir().rglob("game.tw-pddl"))
    assert games
    for path in games:
        data = json.loads(path.read_text())
        for field in ("pddl_domain", "pddl_problem"):
            assert read_sexpr(data[field]) == _read_token_by_token(data[field])


@pytest.mark.parametrize("text", [") (a)", "(a (b)", "no list", ""])
def test_read_sexpr_refuses_unbalanced_text(text: str) -> None:
    with pytest.raises(PddlError, match="pddl: "):
        read_sexpr(text)


def _indexes(state: State) -> tuple[set[object], set[object]]:
    """A state's indexes without their empty sets (a state built afresh has none)."""
    return (
        {(key, frozenset(facts)) for key, facts in state.by_predicate.items() if facts},
        {(key, frozenset(facts)) for key, facts in state.by_argument.items() if facts},
    )


def test_copies_share_index_sets_until_written_and_stay_independent() -> None:
    rng = random.Random(0)
    pool = [(p, a, b) for p in ("at", "in") for a in "xyz" for b in "uvw"] + [("on", "x")]
    states = [State(rng.sample(pool, 8))]
    for _ in range(400):
        state = rng.choice(states)
        move = rng.random()
        if move < 0.1:
            states.append(state.copy())
        elif move < 0.55:
            state.add(rng.choice(pool))
        else:
            state.discard(rng.choice(pool))
        for each in states:  # every state indexes its own facts only, whoever changed what
            fresh = State(each.facts)
            assert _indexes(each) == _indexes(fresh)
            assert each.key() == fresh.key()
            assert all(each.predicate_key(p) == fresh.predicate_key(p) for p in ("at", "in", "on"))
    assert len(states) > 10


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


def test_a_nested_exists_merged_holds_exactly_where_the_nested_one_does() -> None:
    # ALFWorld's goals nest "exists ?r: exists ?o: ..."; holds() merges them (the inner atoms
    # then bind ?r too). Checked against the nested formula's own solutions on every state of
    # three objects in two receptacles, and a clash of names is left nested.
    domain = parse_domain(
        "(define (domain d) (:types o r) (:predicates (in ?x - o ?y - r) (hot ?x - o)"
        " (big ?y - r)))"
    )
    problem = parse_problem(
        "(define (problem p) (:domain d) (:objects a b c - o s t - r) (:init) (:goal (and)))"
    )
    world = World(domain, problem)
    goal = parse_formula(
        read_sexpr("(exists (?y - r) (and (big ?y) (exists (?x - o) (and (in ?x ?y) (hot ?x)))))")
    )
    assert isinstance(goal, Exists)
    merged = merged_exists(goal)
    assert [name for name, _ in merged.variables] == ["?y", "?x"]
    atoms = [("in", x, y) for x in "abc" for y in "st"] + [("hot", x) for x in "abc"]
    atoms += [("big", y) for y in "st"]
    rng = random.Random(0)
    for _ in range(300):
        state = State([atom for atom in atoms if rng.random() < 0.3])
        nested = any(True for _ in world.solutions(goal, state, {}))
        assert world.holds(goal, state, {}) == nested
    clash = parse_formula(
        read_sexpr("(exists (?x - o) (and (hot ?x) (exists (?x - o) (in ?x s))))")
    )
    assert isinstance(clash, Exists) and merged_exists(clash).variables == (("?x", "o"),)


def test_a_state_hash_written_piecewise_is_stable_hash_of_the_sorted_texts() -> None:
    # The texts' JSON is written once per fact; the digest must be stable_hash's of the list,
    # names with quotes, backslashes and non-ASCII letters included.
    types = {'a"1': "thing", "b\\2": "thing", "café": "place", "agent1": "agent"}
    facts = [("at", 'a"1', "café"), ("at", "b\\2", "café"), ("not_at", "agent1", "café")]
    facts += [("checked", "café"), ("near", "agent1", "nowhere")]
    texts = native.FactTexts(types)

    def written(fact: tuple[str, ...]) -> str:  # as TextWorld writes a fact
        return f"{fact[0]}({', '.join(f'{v}: {types.get(v, str())}' for v in fact[1:])})"

    hashed = [f for f in facts if not f[0].startswith("not_") and f[0] != "checked"]
    expected = stable_hash(sorted(written(fact) for fact in hashed))
    assert native.state_hash(State(facts), texts) == expected
    assert native.state_hash(State(facts), dict(types)) == expected


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
def _compare(
    data_dir: Path, records: Sequence[GameRecord], walk: int, expert_share: float = 0.0
) -> int:
    """Play ``records`` on both engines, the expert's walkthrough then a seeded walk of
    ``walk`` steps that plays the expert's command with probability ``expert_share`` (a replan
    each time it has left the plan; compared with TextWorld's) and else a uniform admissible
    command or an unknown one; require the same at every step. Returns the steps played."""
    from agentbench_rl.envs.alfworld import backend as textworld

    oracle, ours = textworld.AlfredGame(), native.AlfredGame()
    steps = 0
    for number, record in enumerate(records):
        data = read_game(data_dir, record)
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
                # The plan is compared where it is played: a replan can be seconds of search.
                if mode == "expert" or rng.random() < expert_share:
                    command = oracle.expert_command()
                    assert ours.expert_command() == command, f"{where} {step}: plan"
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
    games = load_manifest(split).games[:SAMPLE]
    assert _compare(alfworld_data, games, WALK, expert_share=0.3) > 2 * SAMPLE


@needs_backend
def test_remembered_states_play_as_textworld(alfworld_data: Path) -> None:
    # Each game's admissible commands and state hashes are remembered by state (group members
    # and replays revisit them): a second pass over the same walks reads them from the memo,
    # and must still agree with TextWorld step for step.
    games = load_manifest("valid_seen").games[:3]
    first = _compare(alfworld_data, games, WALK, expert_share=0.3)
    assert _compare(alfworld_data, games, WALK, expert_share=0.3) == first


@needs_backend
def test_native_plays_the_shipped_demo_games_as_textworld() -> None:
    # Our own games (envs/alfworld/build_demo.py): TextWorld, the oracle, reads them as we do.
    games = load_manifest("demo").games
    assert _compare(shipped_data_dir(), games, 40, expert_share=0.3) > 6 * 4


@needs_backend
@pytest.mark.slow
@pytest.mark.parametrize("split", ["valid_seen", "valid_unseen"])
def test_native_plays_as_textworld_on_every_valid_game(alfworld_data: Path, split: str) -> None:
    assert _compare(alfworld_data, load_manifest(split).games, 50) > 0


@needs_backend
@pytest.mark.slow
def test_native_plays_as_textworld_on_a_seeded_train_sample(
    alfworld_train_sample: tuple[Path, list[str]],
) -> None:
    data_dir, task_ids = alfworld_train_sample
    manifest = load_manifest("train")
    assert _compare(data_dir, [manifest.get(task_id) for task_id in task_ids], 50) > 0


def test_a_dead_end_is_proven_without_a_search(
    alfworld_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The teddy bear can be taken but put nowhere, and the task needs the hands free for the
    # pillow: no plan exists. The delete relaxation proves it (fast-downward searches ~8 s to
    # find no plan; both answer "look"), and a solvable state still goes to the planner.
    record = load_manifest("valid_seen").get(PILLOW_TASK)
    data = read_game(alfworld_data, record)
    game = native.COMPILED_GAMES.get(sha256_bytes(data), lambda: json.loads(data))
    play = native.AlfredGame()
    play.start(game)
    assert Relaxation(game.world, play._truth).goal_reachable()
    for command in ("go to bed 2", "take teddybear 1 from bed 2"):
        assert play.step(command)[1]
    assert not [c for c in play.admissible_commands() if c.startswith("move teddybear")]
    assert not Relaxation(game.world, play._truth).goal_reachable()

    def no_search(*_: object) -> tuple[str, ...]:
        raise AssertionError("searched")

    monkeypatch.setattr(native, "_search", no_search)
    assert play.expert_command() == "look"

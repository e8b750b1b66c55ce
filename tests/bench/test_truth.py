"""The Monte-Carlo truth of ``bench fidelity --env``, checked against the exact truth on a real
Sokoban level (the random agent's value by backward induction over the level's reachable
states), and its replay, resume and determinism rules."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from agentbench_rl.bench.truth import JOURNAL, TruthSettings, play_batch, policy, run
from agentbench_rl.envs.sokoban.levels import load_level
from agentbench_rl.envs.sokoban.rules import ACTIONS, move, solved

HORIZON = 6
QUIET = Console(quiet=True)


def exact_values(task_id: str, gamma: float) -> dict[tuple[int, tuple[Any, ...]], float]:
    """V_t(player, boxes) of the uniform random policy, t = 0 .. HORIZON − 1, by backward
    induction from V_HORIZON = 0; V = 0 once the room is solved (written independently of the
    bench: the level's rules only)."""
    level = load_level(task_id)
    start = (level.player, level.boxes)
    states, frontier = {start}, [start]
    while frontier:
        player, boxes = frontier.pop()
        if solved(level.room, boxes):
            continue
        for action in ACTIONS:
            reached = move(level.room, player, boxes, action)[:2]
            if reached not in states:
                states.add(reached)
                frontier.append(reached)
    following = {state: 0.0 for state in states}
    values: dict[tuple[int, tuple[Any, ...]], float] = {}
    for t in range(HORIZON - 1, -1, -1):
        now = {}
        for player, boxes in states:
            if solved(level.room, boxes):
                now[(player, boxes)] = 0.0
                continue
            total = 0.0
            for action in ACTIONS:
                new_player, new_boxes, reward = move(level.room, player, boxes, action)
                total += reward + gamma * following[(new_player, new_boxes)]
            now[(player, boxes)] = total / len(ACTIONS)
        for state, value in now.items():
            values[(t, (state[0], state[1]))] = value
        following = now
    return values


def test_monte_carlo_values_agree_with_the_exact_ones(tmp_path: Path) -> None:
    # A random walk solves a room in 6 steps rarely (and is paid 10 when it does): K = 400
    # draws make V̂'s error close to normal, which the z test below needs.
    settings = TruthSettings(
        env="sokoban",
        agent="random",
        tasks=12,
        group_size=1,
        continuations=400,
        max_steps=HORIZON,
        seed=3,
    )
    payload = run(settings, tmp_path, QUIET, parallel=400)
    rows = payload["rows"]
    batch = play_batch(
        settings, [settings.env_spec().make() for _ in range(12)], policy("random", 12)
    )
    z_scores = []
    for trajectory in batch.trajectories:
        level = load_level(trajectory.task_id)
        exact = exact_values(trajectory.task_id, settings.gamma)
        player, boxes = level.player, level.boxes
        for t, action in enumerate(trajectory.actions):
            row = next(
                i
                for i, (traj, step) in enumerate(zip(rows["traj"], rows["t"], strict=True))
                if traj == trajectory.traj and step == t
            )
            truth, error = exact[(t, (player, boxes))], rows["value_standard_error"][row]
            estimate = rows["value"][row]
            if error > 1e-9:
                z_scores.append((estimate - truth) / error)
            else:  # every draw returned the same: a reward rarer than ~3/K was never drawn
                assert abs(estimate - truth) < 0.1
            player, boxes = move(level.room, player, boxes, action)[:2]
    z = np.array(z_scores)
    assert len(z) >= 15
    # V̂ is a mean of 400 draws: within 4.5 standard errors everywhere, z² near 1 on average
    # (a mean of ~20 χ²₁ draws: [0.4, 2.2] holds with more than 99% probability)
    assert np.abs(z).max() < 4.5
    assert 0.4 < float(np.mean(z**2)) < 2.2


def test_numbers_do_not_depend_on_parallel_and_a_killed_run_resumes(tmp_path: Path) -> None:
    settings = TruthSettings(
        env="sokoban", agent="random", tasks=2, group_size=2, continuations=4, max_steps=5
    )
    first = run(settings, tmp_path / "a", QUIET, parallel=3)  # pieces of three jobs
    journal = tmp_path / "a" / JOURNAL
    lines = journal.read_text().splitlines(keepends=True)
    # killed inside step 0 (4 trajectories x 4 = 16 jobs): two pieces journaled, one torn
    journal.write_text("".join(lines[:3]) + lines[3][:10])
    resumed = run(settings, tmp_path / "a", QUIET, parallel=5)
    whole = run(settings, tmp_path / "b", QUIET, parallel=64)
    narrow = run(settings, tmp_path / "c", QUIET, parallel=1)
    for other in (resumed, whole, narrow):
        assert other["rows"] == first["rows"]
        assert json.dumps(other["results"]) == json.dumps(first["results"])  # NaN as NaN
    pieces = [json.loads(line) for line in journal.read_text().splitlines()[1:]]
    assert [piece["first_job"] for piece in pieces if piece["t"] == 0] == [0, 3, 6, 11]
    # nothing counted twice: each step's journal holds its jobs once, as the whole run's does
    whole_pieces = [
        json.loads(line) for line in (tmp_path / "b" / JOURNAL).read_text().splitlines()[1:]
    ]
    jobs = {piece["t"]: len(piece["returns"]) for piece in whole_pieces}
    resumed_jobs: dict[int, int] = {}
    for piece in pieces:
        resumed_jobs[piece["t"]] = resumed_jobs.get(piece["t"], 0) + len(piece["returns"])
    assert resumed_jobs == jobs and jobs[0] == 16
    # the resumed run's cost covers every piece, those of the killed invocation included
    assert resumed["cost"]["truth_env_steps"] == first["cost"]["truth_env_steps"]
    assert resumed["cost"]["truth_seconds"] > 0


def test_a_journal_of_whole_steps_resumes(tmp_path: Path) -> None:
    """Journals from before pieces hold one line per step t, returns keyed by trajectory (the
    committed fidelity runs' journals): they resume and score as their pieces do."""
    settings = TruthSettings(
        env="sokoban", agent="random", tasks=2, group_size=2, continuations=3, max_steps=4
    )
    first = run(settings, tmp_path, QUIET, parallel=2)
    journal = tmp_path / JOURNAL
    header, *pieces = [json.loads(line) for line in journal.read_text().splitlines()]
    steps: dict[int, dict[str, Any]] = {}
    for piece in pieces:
        step = steps.setdefault(piece["t"], {"t": piece["t"], "returns": [], "env_steps": 0})
        step["returns"] += piece["returns"]
        step["env_steps"] += piece["env_steps"]
    batch = play_batch(
        settings, [settings.env_spec().make() for _ in range(4)], policy("random", 4)
    )
    for t, step in steps.items():  # jobs run trajectory by trajectory, K each
        longer = [tr.traj for tr in batch.trajectories if len(tr.rewards) > t]
        values = step["returns"]
        assert len(values) == settings.continuations * len(longer)
        step["returns"] = {
            traj: values[i * settings.continuations : (i + 1) * settings.continuations]
            for i, traj in enumerate(longer)
        }
    header.pop("checksums")  # journals of whole steps are from before checksums
    written = [header, *steps.values()]
    journal.write_text("".join(json.dumps(line) + "\n" for line in written))
    again = run(settings, tmp_path, QUIET, parallel=2)
    assert json.dumps(again["results"]) == json.dumps(first["results"])
    assert len(journal.read_text().splitlines()) == len(written)  # nothing played again


def test_each_piece_records_the_machine_that_played_it(tmp_path: Path) -> None:
    """A journal resumes on another machine (the credit sets' did), and a model's scores are
    bitwise only on one CPU: every piece says where it was played, and the results count the
    continuations per machine, pieces journaled before machines were kept included."""
    settings = TruthSettings(
        env="sokoban", agent="random", tasks=2, group_size=2, continuations=3, max_steps=4
    )
    first = run(settings, tmp_path, QUIET, parallel=4)
    journal = tmp_path / JOURNAL
    header, *pieces = [json.loads(line) for line in journal.read_text().splitlines()]
    total = sum(len(piece["returns"]) for piece in pieces)
    assert {json.dumps(piece["machine"], sort_keys=True) for piece in pieces} == {
        json.dumps(first["machines"][0]["machine"], sort_keys=True)
    }
    assert first["machines"][0]["continuations"] == total
    # the first two pieces from an older journal, the next from another CPU, the rest cut
    elsewhere = {"cpu": "some other CPU", "threads": 2}
    unsealed = ("machine", "sha256", "batch")  # from before machines and checksums were kept
    old = [{k: v for k, v in piece.items() if k not in unsealed} for piece in pieces[:2]]
    header.pop("checksums")
    other = {k: v for k, v in pieces[2].items() if k not in unsealed[1:]}
    kept = [header, *old, {**other, "machine": elsewhere}]
    journal.write_text("".join(json.dumps(line) + "\n" for line in kept))
    resumed = run(settings, tmp_path, QUIET, parallel=4)
    counts = [len(piece["returns"]) for piece in pieces]
    assert resumed["machines"] == [
        {"machine": None, "continuations": counts[0] + counts[1]},
        {"machine": elsewhere, "continuations": counts[2]},
        {"machine": first["machines"][0]["machine"], "continuations": total - sum(counts[:3])},
    ]
    assert json.dumps(resumed["results"]) == json.dumps(first["results"])
    card = (tmp_path / "fidelity.md").read_text()
    assert "not recorded" in card and "some other CPU, 2 torch threads" in card


def test_a_log_gets_a_line_per_piece_of_continuations(tmp_path: Path) -> None:
    # Late steps hold few rows, so a line per twentieth of the work would leave a log silent
    # for hours on a long run; each journaled piece writes one.
    settings = TruthSettings(
        env="sokoban", agent="random", tasks=1, group_size=1, continuations=2, max_steps=30
    )
    log = io.StringIO()
    run(settings, tmp_path, Console(file=log, width=200))
    lines = [line for line in log.getvalue().splitlines() if ": continuations: " in line]
    steps = len((tmp_path / JOURNAL).read_text().splitlines()) - 1  # after the header
    assert len(lines) == steps > 20 and lines[-1].split(",")[0].endswith("(100%)")


def test_a_journal_of_other_settings_is_refused(tmp_path: Path) -> None:
    settings = TruthSettings(
        env="sokoban", agent="random", tasks=1, group_size=2, continuations=2, max_steps=3
    )
    run(settings, tmp_path, QUIET)
    other = TruthSettings(
        env="sokoban", agent="random", tasks=1, group_size=2, continuations=3, max_steps=3
    )
    with pytest.raises(ValueError, match="other settings"):
        run(other, tmp_path, QUIET)


def test_a_journal_written_before_a_settings_field_existed_still_resumes(tmp_path: Path) -> None:
    """A journal's settings line from before ``categories`` existed reads as the default (every
    task), so the run it started resumes instead of being refused."""
    settings = TruthSettings(
        env="sokoban", agent="random", tasks=1, group_size=2, continuations=2, max_steps=3
    )
    first = run(settings, tmp_path, QUIET)
    journal = tmp_path / JOURNAL
    lines = journal.read_text().splitlines(keepends=True)
    head = json.loads(lines[0])
    del head["settings"]["categories"]
    journal.write_text(json.dumps(head) + "\n" + "".join(lines[1:]))
    again = run(settings, tmp_path, QUIET)
    assert json.dumps(again["results"]) == json.dumps(first["results"])
    assert journal.read_text().splitlines()[1:] == [line.rstrip("\n") for line in lines[1:]]


def test_a_journal_of_other_weights_is_refused(tmp_path: Path) -> None:
    """An ``hf:`` folder retrained in place is another policy under the same spec: its
    continuations must not be mixed with the first policy's."""
    pytest.importorskip("transformers")
    from agentbench_rl.envs.spec import EnvSpec
    from agentbench_rl.harness.provenance import weights_fingerprint
    from agentbench_rl.models.policy import Policy
    from agentbench_rl.models.tiny import TinyModelConfig, build_tiny
    from agentbench_rl.prompting import PromptConfig
    from agentbench_rl.rollout.scripted import tokenizer_texts

    small = TinyModelConfig(
        hidden_size=32, layers=1, heads=2, kv_heads=1, intermediate_size=64, tokenizer_episodes=2
    )
    prompt = PromptConfig(history_observations=False, mode="choose", instruction="")
    texts = tokenizer_texts(EnvSpec(name="sokoban", split="train"), prompt, 2, 0)
    folder = tmp_path / "policy"

    def save_policy(seed: int) -> None:
        model, tokenizer = build_tiny(texts, small, seed)
        Policy(model, tokenizer, prompt, max_new_tokens=5).save(folder)

    save_policy(0)
    settings = TruthSettings(
        env="sokoban", agent=f"hf:{folder}", tasks=1, group_size=2, continuations=2, max_steps=2
    )
    run(settings, tmp_path / "out", QUIET)
    head = json.loads((tmp_path / "out" / JOURNAL).read_text().splitlines()[0])
    assert head["agent_weights"] == weights_fingerprint(folder)
    run(settings, tmp_path / "out", QUIET)  # the same weights resume
    save_policy(1)
    with pytest.raises(ValueError, match="other weights"):
        run(settings, tmp_path / "out", QUIET)


def test_a_journal_of_another_batch_is_refused(tmp_path: Path) -> None:
    """Same settings and weights but other trajectories (a policy whose scores moved with the
    code can draw other actions at the same seeds): the journal's returns are not this batch's."""
    settings = TruthSettings(
        env="sokoban", agent="random", tasks=1, group_size=2, continuations=2, max_steps=3
    )
    run(settings, tmp_path, QUIET)
    journal = tmp_path / JOURNAL
    header, *rest = journal.read_text().splitlines(keepends=True)
    played = json.loads(header)
    assert len(played["batch"]) == 32
    played["batch"] = "0" * 32
    journal.write_text(json.dumps(played) + "\n" + "".join(rest))
    with pytest.raises(ValueError, match="another batch"):
        run(settings, tmp_path, QUIET)


def test_categories_draw_the_batch_from_those_tasks_only(tmp_path: Path) -> None:
    settings = TruthSettings(
        env="textcraft",
        agent="random",
        categories=("depth-1",),
        tasks=3,
        group_size=1,
        continuations=2,
        max_steps=2,
    )
    spec = settings.env_spec()
    envs = [spec.make() for _ in range(3)]
    batch = play_batch(settings, envs, policy("random", 3))
    # the category each episode's env reports, not the draw's own list
    assert {trajectory.category for trajectory in batch.trajectories} == {"depth-1"}
    with pytest.raises(ValueError, match="no-such-depth"):
        TruthSettings(
            env="textcraft", agent="random", categories=("no-such-depth",)
        ).env_spec().draw_tasks(1, 0)


class UnseededAgent:
    """Draws from a generator it never reseeds: its replays cannot repeat its actions."""

    name = "unseeded"

    def __init__(self) -> None:
        self.rng = np.random.default_rng()

    def begin_episode(self, env: Any, seed: int) -> None:
        pass

    def act(self, observation: Any, info: dict[str, Any]) -> str:
        return str(self.rng.choice(ACTIONS))


def test_an_agent_that_does_not_replay_is_an_error(tmp_path: Path) -> None:
    settings = TruthSettings(
        env="sokoban",
        agent="python:test_truth:UnseededAgent",
        tasks=1,
        group_size=4,
        continuations=2,
        max_steps=6,
    )
    with pytest.raises(RuntimeError, match="not deterministic"):
        run(settings, tmp_path, QUIET)


@pytest.mark.parametrize(("field", "value"), [("tasks", 0), ("continuations", 1), ("gamma", 1.5)])
def test_bad_settings_are_one_line(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        TruthSettings(env="sokoban", agent="random", **{field: value})


def test_results_carry_their_settings(tmp_path: Path) -> None:
    settings = TruthSettings(
        env="sokoban", agent="random", tasks=1, group_size=2, continuations=2, max_steps=3
    )
    run(settings, tmp_path, QUIET)
    written = json.loads((tmp_path / "fidelity.json").read_text())
    assert written["settings"]["continuations"] == 2
    assert {"pearson", "spearman"} <= set(written["results"]["gigpo"]["breakdowns"]["all"])
    # Sokoban's observation is its state: every anchor set is pure; GRPO has no sets
    parts = written["results"]["gigpo"]["breakdowns"]
    assert "in impure sets" not in parts
    assert {"in singleton sets", "in pure sets of 2+"} & set(parts)
    assert not any(part.startswith("in ") for part in written["results"]["grpo"]["breakdowns"])
    assert (tmp_path / "fidelity.png").stat().st_size > 0


def test_a_replay_that_reaches_another_state_is_an_error() -> None:
    import dataclasses

    from agentbench_rl.bench.truth import PlayedBatch, continuation_jobs, continuation_returns

    settings = TruthSettings(
        env="sokoban", agent="random", tasks=1, group_size=2, continuations=2, max_steps=4
    )
    envs = [settings.env_spec().make() for _ in range(4)]
    agent = policy("random", 4)
    batch = play_batch(settings, envs, agent)
    jobs = continuation_jobs(settings, batch, 1)[:4]
    assert continuation_returns(settings, jobs, 1, envs, agent)[1] > 0  # the true states pass
    wrong = [
        dataclasses.replace(trajectory, states=("elsewhere",) * len(trajectory.states))
        for trajectory in batch.trajectories
    ]
    wrong_jobs = continuation_jobs(settings, PlayedBatch(batch.records, wrong), 1)[:4]
    with pytest.raises(RuntimeError, match="state_hash differs"):
        continuation_returns(settings, wrong_jobs, 1, envs, agent)


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["bench", "fidelity", "--env", "sokoban", "--tasks", "0"], "--tasks"),
        (["bench", "fidelity", "--env", "sokoban", "--tasks", "100000000"], "--tasks"),
        (["bench", "fidelity", "--env", "sokoban", "--group-size", "0"], "--group-size"),
        (["bench", "fidelity", "--env", "sokoban", "--continuations", "1"], "--continuations"),
        (["bench", "fidelity", "--env", "sokoban", "--parallel", "0"], "--parallel"),
        (["bench", "fidelity", "--env", "sokoban", "--seed", "-1"], "--seed"),
        (["bench", "fidelity", "--seeds", "0"], "--seeds"),
        (["bench", "credit-set", "mdp-detours", "--tasks", "0"], "--tasks"),
        (["bench", "credit-set", "mdp-detours", "--group-size", "100000"], "--group-size"),
        (["bench", "credit-set", "mdp-detours", "--seed", "-1"], "--seed"),
    ],
)
def test_count_flags_are_bounded_before_any_work(args: list[str], flag: str) -> None:
    from typer.testing import CliRunner

    from agentbench_rl.cli import app

    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    field = flag.removeprefix("--").replace("-", "_")  # a derived option names its field
    output = result.output
    assert f"Invalid value for '{flag}'" in output or f"error: {field} must" in output
    assert "Traceback" not in output


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda piece, other: {**piece, "returns": [1e6] * len(piece["returns"])}, "checksum"),
        (lambda piece, other: other, "a piece of another batch"),
        (lambda piece, other: [piece["t"]], r"not a journal piece \(a list\)"),
        (lambda piece, other: _resealed({k: v for k, v in piece.items() if k != "t"}), "KeyError"),
        (lambda piece, other: _resealed({**piece, "returns": "1.0"}), "not a journal piece"),
        (lambda piece, other: _resealed({**piece, "env_steps": -1}), "a negative count"),
        (lambda piece, other: {k: v for k, v in piece.items() if k != "sha256"}, "checksum"),
    ],
)
def test_a_damaged_spliced_or_foreign_piece_is_one_line(
    tmp_path: Path, damage: Any, problem: str
) -> None:
    """Issue 63 point 4: each piece carries its batch's fingerprint and a checksum, so an edited
    return, seed 1's pieces under seed 0's header or a damaged line is refused in one line
    naming the file and the line, never scored as another truth."""
    settings = TruthSettings(
        env="sokoban", agent="random", tasks=1, group_size=2, continuations=2, max_steps=3
    )
    run(settings, tmp_path / "seed0", QUIET)
    run(settings.model_copy(update={"seed": 1}), tmp_path / "seed1", QUIET)
    journal = tmp_path / "seed0" / JOURNAL
    lines = journal.read_text().splitlines()
    foreign = json.loads((tmp_path / "seed1" / JOURNAL).read_text().splitlines()[1])
    lines[1] = json.dumps(damage(json.loads(lines[1]), foreign))
    journal.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=problem) as refused:
        run(settings, tmp_path / "seed0", QUIET)
    assert str(refused.value).startswith(f"{journal} line 2: ") and "\n" not in str(refused.value)


def _resealed(piece: dict[str, Any]) -> dict[str, Any]:
    """A damaged piece with a valid checksum (what a careless tool would write)."""
    import hashlib

    body = {k: v for k, v in piece.items() if k != "sha256"}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    return {**body, "sha256": digest}

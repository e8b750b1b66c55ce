"""The credit benchmark (#43): the set format refuses what is not a set, the scores are the
definitions' (checked by hand on small sets), a bad estimator is one line and the others still
score, and every shipped set loads."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from agentbench_rl.bench.credit.bench import run
from agentbench_rl.bench.credit.power import TARGET_DIFFERENCE, TOP_TASK_GOAL
from agentbench_rl.bench.credit.runner import Candidate, estimate_all
from agentbench_rl.bench.credit.score import (
    PERFECT_BASELINE,
    part_masks,
    reference_scores,
    return_to_go,
    score,
)
from agentbench_rl.bench.credit.sets import (
    ARRAYS_FILE,
    META_FILE,
    STANDARD_SETS,
    CreditSet,
    CreditSetError,
    mdp_set,
    read_set,
    read_sets,
    write_set,
)
from agentbench_rl.bench.credit.settings import CreditBench
from agentbench_rl.core.batch import StepBatch

REPO = Path(__file__).resolve().parents[2]


def tiny_set(true: list[float], error: list[float] | None = None, tasks: int = 1) -> CreditSet:
    """One-step trajectories, ``tasks`` groups, rewards 0..n-1: a set whose scores are easy by
    hand."""
    n = len(true)
    batch = StepBatch.from_records(
        [
            {"group": i % tasks, "traj": i, "t": 0, "reward": float(i), "obs_key": "o",
             "state_key": f"s{i}", "action_key": "a", "valid": True, "success": i % 2 == 0,
             "next_obs_key": "end"}
            for i in range(n)
        ]
    )  # fmt: skip
    return CreditSet(
        name="tiny",
        kind="monte-carlo",
        batch=batch,
        category=np.full(n, "c", dtype=object),
        true_advantage=np.asarray(true, dtype=float),
        standard_error=np.asarray(error or [0.0] * n, dtype=float),
        value=np.zeros(n),
        value_standard_error=np.zeros(n),
        settings={"env": "hand", "gamma": 0.95},
    )


def test_a_set_round_trips_and_its_files_are_checked(tmp_path: Path) -> None:
    made = mdp_set("lucky_rare", tasks=4, group_size=3, seed=1)
    folder = tmp_path / made.name
    write_set(made, folder)
    loaded = read_set(folder)

    def columns(credit: CreditSet) -> list[dict[str, object]]:
        return [
            {key: value for key, value in record.items() if key != "hidden"}
            for record in credit.batch.to_records()
        ]

    assert columns(loaded) == columns(made)
    assert np.array_equal(loaded.true_advantage, made.true_advantage)
    assert loaded.hidden is not None and loaded.batch.hidden is not None
    assert np.allclose(loaded.batch.hidden, made.batch.hidden, atol=1e-2)  # stored as float16
    # a byte changed in the arrays: refused, naming the file
    data = bytearray((folder / ARRAYS_FILE).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (folder / ARRAYS_FILE).write_bytes(bytes(data))
    with pytest.raises(CreditSetError, match=r"set\.npz: its sha256 differs"):
        read_set(folder)
    # a foreign schema, and not a set at all
    write_set(made, folder)
    meta = json.loads((folder / META_FILE).read_text("utf-8"))
    (folder / META_FILE).write_text(json.dumps({**meta, "schema": 99}), "utf-8")
    with pytest.raises(CreditSetError, match="schema 99, this version reads schema 1"):
        read_set(folder)
    (folder / META_FILE).write_text("[1, 2]", "utf-8")
    with pytest.raises(CreditSetError, match="not a credit set"):
        read_set(folder)
    with pytest.raises(CreditSetError, match="no credit set here"):
        read_sets(tmp_path / "empty")


def _sealed_with(folder: Path, **changes: np.ndarray) -> None:
    """Rewrite a set's arrays with ``changes`` and seal it again (its sha256 in set.json)."""
    import hashlib
    import io

    with np.load(folder / ARRAYS_FILE) as npz:
        arrays = {name: npz[name] for name in npz.files}
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **{**arrays, **changes})
    (folder / ARRAYS_FILE).write_bytes(buffer.getvalue())
    meta = json.loads((folder / META_FILE).read_text("utf-8"))
    meta["sha256"] = hashlib.sha256(buffer.getvalue()).hexdigest()
    (folder / META_FILE).write_text(json.dumps(meta), "utf-8")


def test_a_malformed_set_is_one_line_naming_the_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentbench_rl.bench.credit import sets as sets_module

    made = mdp_set("lucky_rare", tasks=4, group_size=3, seed=1)
    folder = tmp_path / made.name
    rows = len(made.batch)
    bad = {
        "true_advantage": (np.full(rows, np.nan), "column true_advantage holds NaN or infinity"),
        "reward": (np.full(rows, np.inf), "column reward holds NaN or infinity"),
        "hidden": (np.zeros(rows), "column hidden is not one value per row"),
        "obs_key": (np.zeros(rows), "column obs_key holds float64, not text"),
        "valid": (np.zeros(rows), "column valid holds float64, not booleans"),
        "t": (np.zeros(rows - 1, dtype=int), "is not one value per row"),
    }
    for column, (values, problem) in bad.items():
        write_set(made, folder)
        _sealed_with(folder, **{column: values})
        with pytest.raises(CreditSetError, match=problem):
            read_set(folder)
    write_set(made, folder)
    meta = json.loads((folder / META_FILE).read_text("utf-8"))
    meta["settings"]["gamma"] = float("nan")
    (folder / META_FILE).write_text(json.dumps(meta), "utf-8")
    with pytest.raises(CreditSetError, match=r"settings\.gamma must be a number"):
        read_set(folder)
    # the decompressed size is read from the zip's directory before any array loads
    write_set(made, folder)
    monkeypatch.setattr(sets_module, "MAX_ARRAY_BYTES", 1000)
    with pytest.raises(CreditSetError, match="MB decompressed, over the"):
        read_set(folder)


def test_every_standard_set_is_pinned_and_a_resealed_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hashlib
    import shutil

    from agentbench_rl.bench.credit import sets as sets_module
    from agentbench_rl.bench.credit.pins import PINS

    shipped = {folder.name: folder for folder in STANDARD_SETS.iterdir() if folder.is_dir()}
    unpinned = sorted(set(shipped) - set(PINS))
    assert not unpinned, f"pin these in agentbench_rl/bench/credit/pins.py: {unpinned}"
    for name, folder in shipped.items():
        assert hashlib.sha256((folder / ARRAYS_FILE).read_bytes()).hexdigest() == PINS[name]
    assert all(credit.pinned for credit in read_sets(STANDARD_SETS))
    # a standard set's arrays changed and sealed again: refused; the same as one's own set: read,
    # unpinned
    shutil.copytree(STANDARD_SETS / "mdp-detours", tmp_path / "standard" / "mdp-detours")
    monkeypatch.setattr(sets_module, "STANDARD_SETS", (tmp_path / "standard").resolve())
    folder = tmp_path / "standard" / "mdp-detours"
    truth = read_set(folder).true_advantage
    _sealed_with(folder, true_advantage=-truth)
    with pytest.raises(CreditSetError, match="not the pinned ones"):
        read_set(folder)
    shutil.copytree(folder, tmp_path / "mine" / "mdp-detours")
    assert not read_set(tmp_path / "mine" / "mdp-detours").pinned


def test_scores_are_the_definitions_by_hand() -> None:
    # estimate = 2·truth on 3 rows and one row off: Pearson of (2, -2, 0, 1) with (1, -1, 0, 1)
    credit = tiny_set([1.0, -1.0, 0.0, 1.0], error=[0.1, 0.1, 0.1, 1.0])
    figures = score("x", np.array([2.0, -2.0, 0.0, 1.0]), credit).parts["all"]
    x, y = np.array([2.0, -2.0, 0.0, 1.0]), np.array([1.0, -1.0, 0.0, 1.0])
    pearson = ((x - x.mean()) * (y - y.mean())).sum() / math.sqrt(
        ((x - x.mean()) ** 2).sum() * ((y - y.mean()) ** 2).sum()
    )
    assert figures["pearson"]["value"] == pytest.approx(pearson)
    # sign agreement: rows 0 and 1 are clear of their noise (|A| > 2 se) and agree; row 3 is not
    assert figures["sign_agreement"]["value"] == pytest.approx(1.0)
    # relative error after the best scale c = Σxy/Σx² = 10/9: residual 1/9 · Σ... by hand
    c = (x * y).sum() / (x * x).sum()
    assert figures["relative_mse"]["value"] == pytest.approx(
        ((c * x - y) ** 2).sum() / (y * y).sum()
    )
    # one task: no interval
    assert math.isnan(figures["pearson"]["ci"][0])


def test_the_perfect_baseline_and_the_parts() -> None:
    records = [
        {"group": 0, "traj": "a", "t": t, "reward": r, "obs_key": o, "state_key": o,
         "action_key": "x", "valid": True, "success": True, "next_obs_key": "n"}
        for t, (r, o) in enumerate(((0.0, "p"), (0.0, "q"), (1.0, "p")))
    ] + [
        {"group": 0, "traj": "b", "t": 0, "reward": 0.0, "obs_key": "p", "state_key": "p",
         "action_key": "y", "valid": True, "success": False, "next_obs_key": "n"}
    ]  # fmt: skip
    batch = StepBatch.from_records(records)
    # G_t with γ = 0.5: trajectory a gets 0.25, 0.5, 1; b gets 0
    assert return_to_go(batch, 0.5).tolist() == [0.25, 0.5, 1.0, 0.0]
    credit = replace(tiny_set([0.0] * 4), batch=batch, category=np.full(4, "c", dtype=object))
    masks = part_masks(credit)
    assert masks["singleton anchor rows"].tolist() == [False, True, False, False]  # q: alone
    assert masks["failed trajectories"].tolist() == [False, False, False, True]
    assert masks["first half"].tolist() == [True, True, False, True]  # 2t < T: t = 0, 1 of 3


def test_the_perfect_baseline_is_noise_fair_on_an_exact_set_made_noisy() -> None:
    """Monte-Carlo truth simulated on an exact set: V̂(h_t) = V + ε_t, the truth
    A + γ·ε_{t+1} − ε_t. The row G_t − V̂(h_t), with the shared term subtracted, scores on
    average what G_t − V̂'(h_t) scores with V̂' an independent draw (a second set of
    continuations); uncorrected it is inflated."""
    exact = mdp_set("detours", tasks=16, group_size=8, seed=0)
    returns = return_to_go(exact.batch, exact.gamma)
    traj, t = exact.batch.codes("traj")[0].tolist(), list(exact.batch.t)
    row_of = {(code, step): row for row, (code, step) in enumerate(zip(traj, t, strict=True))}
    after = np.array([row_of.get((code, step + 1), -1) for code, step in zip(traj, t, strict=True)])
    sigma = np.std(exact.value) * (0.5 + 0.5 * (np.asarray(t) % 2))  # unequal noise per row
    sigma_after = np.where(after >= 0, sigma[after], 0.0)
    rng = np.random.default_rng(0)
    fair, corrected, raw = [], [], []
    for _ in range(60):
        noise, independent = rng.normal(size=(2, len(t))) * sigma
        noisy = replace(
            exact,
            kind="monte-carlo",
            true_advantage=exact.true_advantage
            + exact.gamma * np.where(after >= 0, noise[after], 0.0)
            - noise,
            standard_error=np.sqrt(exact.gamma**2 * sigma_after**2 + sigma**2),
            value=exact.value + noise,
            value_standard_error=sigma,
        )
        perfect = reference_scores(noisy)[1]
        assert perfect.estimator == PERFECT_BASELINE
        corrected.append(perfect.pearson)
        raw.append(score("raw", returns - noisy.value, noisy).pearson)
        fair.append(score("fair", returns - exact.value - independent, noisy).pearson)
    assert abs(np.mean(corrected) - np.mean(fair)) < 0.01
    assert np.mean(raw) - np.mean(fair) > 0.1
    assert math.isnan(perfect.parts["all"]["spearman"]["value"])  # not correctable


BAD = textwrap.dedent(
    """
    import math, time
    import numpy as np

    def raises(batch):
        raise RuntimeError("my bug")

    def short(batch):
        return np.zeros(len(batch) - 1)

    def nan(batch):
        values = np.zeros(len(batch))
        values[3] = math.nan
        return values

    def slow(batch):
        time.sleep(60)

    def good(batch):
        return np.asarray(batch.reward, dtype=float)
    """
)


def test_a_bad_estimator_is_one_line_and_the_others_still_score(tmp_path: Path) -> None:
    (tmp_path / "bad_estimators.py").write_text(BAD, "utf-8")
    sets = tmp_path / "sets"
    write_set(mdp_set("lucky_rare", tasks=6, group_size=3), sets / "mdp-lucky-rare")
    rows = len(read_set(sets / "mdp-lucky-rare").batch)
    sys.path.insert(0, str(tmp_path))
    try:
        for name, problem in (
            ("raises", "RuntimeError: my bug"),
            ("short", f"returned {rows - 1} advantages for {rows} rows"),
            ("nan", "returned nan at row 3 (NaN or infinity)"),
        ):
            found = estimate_all(Candidate.parse(f"python:bad_estimators:{name}"), read_sets(sets))
            assert found.values == {} and problem in found.problems["mdp-lucky-rare"], name
        slow = estimate_all(
            Candidate.parse("python:bad_estimators:slow"), read_sets(sets), time_limit=1.0
        )
        assert "ran past the time limit of 1 s" in slow.problems["mdp-lucky-rare"]
        estimators = ["python:bad_estimators:raises", "python:bad_estimators:good", "grpo"]
        bench = CreditBench(estimators=estimators, sets=sets, speed=False)
        report = run(bench, tmp_path / "out")
    finally:
        sys.path.remove(str(tmp_path))
    scored = {record["estimator"] for record in report.records()}
    assert {"python:bad_estimators:good", "grpo", PERFECT_BASELINE} <= scored
    assert "python:bad_estimators:raises" not in scored
    card = (tmp_path / "out" / "credit.md").read_text("utf-8")
    assert "- python:bad_estimators:raises on mdp-lucky-rare: RuntimeError: my bug" in card


def test_paired_differences_use_the_same_resamples() -> None:
    credit = mdp_set("detours", tasks=8, group_size=4)
    truth = credit.true_advantage
    noisy = truth + np.random.default_rng(0).normal(0, 1, len(truth))
    versus = score("noisy", noisy, credit, base=truth)
    assert versus.against is not None
    difference = versus.against["pearson"]
    # noisy minus the truth itself: negative, and its interval excludes 0
    assert difference["value"] < 0 and difference["ci"][1] < 0
    assert difference["value"] == pytest.approx(versus.parts["all"]["pearson"]["value"] - 1.0)


def test_every_shipped_set_loads_and_the_mdp_sets_are_their_recipe() -> None:
    sets = read_sets(STANDARD_SETS)
    names = {credit.name for credit in sets}
    from agentbench_rl.bench.learning.family import FAMILY

    assert {f"mdp-{name.replace('_', '-')}" for name in FAMILY} <= names
    total = sum(path.stat().st_size for path in STANDARD_SETS.rglob("*") if path.is_file())
    assert total < 30 * 2**20  # the budget
    for credit in sets:
        if credit.kind == "exact":  # made again from its recipe: the same set, row for row
            settings = credit.settings
            again = mdp_set(
                settings["env"].removeprefix("mdp:"),
                settings["tasks"],
                settings["group_size"],
                settings["seed"],
                settings["gamma"],
            )
            assert again.batch.to_records()[0].keys() >= {"group", "traj", "t"}
            assert np.array_equal(again.true_advantage, credit.true_advantage), credit.name


def test_every_standard_set_meets_the_power_goal() -> None:
    """Issue 64's goal, held by every standard set (the issue asks it of the Monte-Carlo ones;
    the exact MDP ones meet it too): no task holds more than a quarter of the truth's variance,
    and a Pearson difference of 0.05 between two estimators is resolved at 80% power. A set
    rebuilt smaller, or one added below the goal, fails here, naming the set and the tasks it
    would take."""
    for found in run(CreditBench(speed=False)).powers():
        assert found.top_task_share <= TOP_TASK_GOAL, (found.set, found.top_task_share)
        assert found.detectable <= TARGET_DIFFERENCE, (found.set, found.tasks_needed)


def test_each_shipped_credit_model_is_intact_and_is_what_its_journal_and_set_were_drawn_with() -> (
    None
):
    """A credit set's model ships (training is bitwise only on the CPU that made it), so its
    fidelity journal resumes on any machine: the weights match their record, and the journal
    and the exported set, where they exist, name those weights."""
    from agentbench_rl.spec.run_folder import check_start

    models = sorted((REPO / "baselines" / "credit" / "models").iterdir())
    assert models, "no shipped credit model"
    for model in models:
        record = check_start(model)  # raises when the weights are not the recorded ones
        assert record is not None and record["made_on"]["cpu"], model.name
        journal = REPO / "baselines" / "results" / "fidelity" / model.name / "continuations.jsonl"
        if journal.is_file():
            header = json.loads(journal.open(encoding="utf-8").readline())
            assert header["agent_weights"] == record["weights"], journal
            assert header["settings"]["agent"] == f"hf:baselines/credit/models/{model.name}"
        exported = STANDARD_SETS / model.name
        if exported.is_dir():
            assert read_set(exported).made["agent_weights"] == record["weights"], model.name


def test_the_command_line_scores_a_plain_function(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(
        "import numpy as np\n\ndef rewards(batch):\n    return np.asarray(batch.reward)\n",
        "utf-8",
    )
    sets = tmp_path / "sets"
    write_set(mdp_set("branching", tasks=6, group_size=3), sets / "mdp-branching")
    done = subprocess.run(
        [sys.executable, "-m", "agentbench_rl.cli", "bench", "credit", "--estimator",
         "python:mine:rewards", "--estimator", "gigpo", "--sets", str(sets), "--against",
         "gigpo", "--out", str(tmp_path / "out"), "--no-speed"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = json.loads((tmp_path / "out" / "credit.json").read_text("utf-8"))["records"]
    mine = next(r for r in records if r["estimator"] == "python:mine:rewards")
    assert set(mine) >= {"estimator", "set", "pearson", "spearman", "sign_agreement", "against"}
    assert len(mine["pearson"]["ci"]) == 2


def submission(folder: Path, source: str, **card: object) -> Path:
    folder.mkdir(parents=True)
    (folder / "estimator.py").write_text(source, "utf-8")
    fields = {
        "name": "Reward now",
        "function": "estimate",
        "authors": "tests",
        "url": None,
        "description": "the step's own reward as its advantage",
        **card,
    }
    (folder / "card.json").write_text(json.dumps(fields), "utf-8")
    return folder


def test_an_estimator_submission_is_validated_filed_and_ranked(tmp_path: Path) -> None:
    from agentbench_rl.bench.credit.board import (
        EstimatorSubmissionError,
        read_card,
        render_board,
        submit_estimator,
        validate_estimator,
    )

    sets = tmp_path / "sets"
    write_set(mdp_set("branching", tasks=6, group_size=3), sets / "mdp-branching")
    good = submission(
        tmp_path / "good",
        "import numpy as np\n\ndef estimate(batch):\n    return np.asarray(batch.reward, float)\n",
    )
    assert validate_estimator(good, sets) == {
        "mdp-branching": len(read_set(sets / "mdp-branching").batch)
    }
    bad = submission(tmp_path / "bad", "def estimate(batch):\n    return [0.0]\n")
    with pytest.raises(EstimatorSubmissionError, match="on the set mdp-branching: returned 1 adv"):
        validate_estimator(bad, sets)
    with pytest.raises(EstimatorSubmissionError, match="'url' must be an http"):
        read_card(submission(tmp_path / "url", "", url="ftp://x"))
    with pytest.raises(EstimatorSubmissionError, match="give 'function'"):
        read_card(submission(tmp_path / "neither", "", function=None))
    root = tmp_path / "boards"
    filed = submit_estimator(good, root, sets)
    assert filed == root / "estimators" / "reward-now"
    with pytest.raises(EstimatorSubmissionError, match="exists"):
        submit_estimator(good, root, sets)
    board = render_board(root, sets).read_text("utf-8")
    row = next(line for line in board.splitlines() if "| Reward now |" in line)
    assert "[submission](reward-now/)" in row
    assert "| gigpo | built-in |" in board and "perfect baseline" in board


def test_board_rows_are_keyed_by_submission_and_every_name_is_escaped(tmp_path: Path) -> None:
    from agentbench_rl.bench.credit.board import (
        EstimatorSubmissionError,
        read_card,
        render_board,
        submit_estimator,
    )
    from agentbench_rl.bench.credit.score import PERFECT_BASELINE

    sets = tmp_path / "sets"
    write_set(mdp_set("branching", tasks=6, group_size=3), sets / "mdp-branching")
    source = (
        "import numpy as np\n\ndef estimate(batch):\n    return np.asarray(batch.reward, float)\n"
    )
    for reserved in ("gigpo", "GRPO", PERFECT_BASELINE, "grpo:episode_stats=trajectories"):
        with pytest.raises(EstimatorSubmissionError, match="is a built-in estimator's"):
            read_card(submission(tmp_path / reserved.replace(":", "_"), source, name=reserved))
    root = tmp_path / "boards"
    forged = "x | built-in | 0.99 | 0.99 <script>alert(1)</script>"
    submit_estimator(submission(tmp_path / "forged", source, name=forged), root, sets)
    entry = {"function": None, "entry_point": "grpo"}
    submit_estimator(submission(tmp_path / "alias", "", name="my grpo", **entry), root, sets)
    board = render_board(root, sets).read_text("utf-8")
    rows = [line for line in board.splitlines() if line.startswith("| ") and line[2].isdigit()]
    forged_row = next(line for line in rows if "alert" in line)
    assert "<script>" not in board and "&lt;script&gt;" in forged_row
    assert forged_row.count(" | ") == rows[0].count(" | ")  # the | cannot open a cell
    assert "| my grpo | [submission](my-grpo/) |" in board  # shown, under its own row
    assert sum("| grpo | built-in |" in line for line in rows) == 1


def test_the_board_ranks_a_row_scored_on_fewer_sets_after_the_rows_scored_on_all() -> None:
    """A mean over fewer sets is not comparable with a mean over all of them: the row with the
    highest mean but an env or one set of an env missing ranks after the complete rows, its
    counts shown."""
    from agentbench_rl.bench.credit.bench import Report
    from agentbench_rl.bench.credit.board import board_markdown
    from agentbench_rl.bench.credit.score import PERFECT_BASELINE, Score

    names = ("sokoban-a", "webshop-b", "webshop-c")
    sets = [replace(tiny_set([0.0, 1.0]), name=name) for name in names]

    def scored(estimator: str, set_name: str, pearson: float) -> Score:
        return Score(estimator, set_name, {"all": {"pearson": {"value": pearson}}})

    report = Report(
        sets=sets,
        scores=[
            scored("no webshop", "sokoban-a", 0.9),
            scored("one webshop set", "sokoban-a", 0.8),
            scored("one webshop set", "webshop-c", 0.8),
            scored("whole", "sokoban-a", 0.2),
            scored("whole", "webshop-b", 0.4),
            scored("whole", "webshop-c", 0.6),
            scored("lower", "sokoban-a", 0.1),
            scored("lower", "webshop-b", 0.1),
            scored("lower", "webshop-c", 0.1),
        ],
    )
    board = board_markdown(report, {}).splitlines()
    rows = [line.split(" | ")[1] for line in board if line.startswith("| ") and line[2].isdigit()]
    ranked = [name for name in rows if name != PERFECT_BASELINE]  # unscored in this report
    assert ranked == ["whole", "lower", "one webshop set", "no webshop"]
    # whole: the mean of its env means, (0.2 + (0.4 + 0.6) / 2) / 2 = 0.35
    assert "| 0.20 | 0.50 | 0.35 |" in next(line for line in board if "| whole |" in line)
    row = next(line for line in board if "| one webshop set |" in line)
    assert "| 0.80 | 0.80 (1 of 2) | 0.80 (2 of 3 sets) |" in row, row
    row = next(line for line in board if "| no webshop |" in line)
    assert "| 0.90 | – | 0.90 (1 of 3 sets) |" in row, row


def test_the_board_shows_a_tie_where_the_paired_interval_holds_zero() -> None:
    from agentbench_rl.bench.credit.bench import Report
    from agentbench_rl.bench.credit.board import board_markdown
    from agentbench_rl.bench.credit.score import Score
    from agentbench_rl.bench.truth import BOOTSTRAP

    spread = np.random.default_rng(0).normal(0.0, 0.05, BOOTSTRAP)  # the set's resamples

    def scored(estimator: str, pearson: float, wobble: float) -> Score:
        entry = Score(estimator, "sokoban-a", {"all": {"pearson": {"value": pearson}}})
        entry.draws = pearson + spread + wobble * spread[::-1]
        return entry

    report = Report(
        sets=[replace(tiny_set([0.0, 1.0]), name="sokoban-a")],
        scores=[scored("first", 0.6, 0.0), scored("close", 0.59, 0.5), scored("far", 0.3, 0.0)],
    )
    ranks = {
        line.split(" | ")[1]: line.split(" | ")[0].removeprefix("| ")
        for line in board_markdown(report, {}).splitlines()
        if line.startswith("| ") and line[2].isdigit()
    }
    # close - first wobbles by ±0.05 about -0.01: a tie; far is 0.29 below, whatever the draw
    assert (ranks["first"], ranks["close"], ranks["far"]) == ("1", "1=", "3")


def test_fidelity_against_learning_is_centred_within_each_problem(tmp_path: Path) -> None:
    from agentbench_rl.bench.credit.reading import (
        Point,
        campaign_points,
        correlate,
        learning_points,
    )

    # two problems whose levels differ; within each, fidelity and gain rise together by hand:
    # centred, the points are (-0.1, -1), (0, 0), (0.1, 1) twice: Pearson 1 exactly
    points = [
        Point(name, problem, level + f, 10 * level + g)
        for problem, level in (("p", 0.0), ("q", 0.5))
        for name, f, g in (("a", -0.1, -1.0), ("b", 0.0, 0.0), ("c", 0.1, 1.0))
    ]
    found = correlate("both", points)
    assert found.pearson == pytest.approx(1.0) and found.by_problem == {"p": 1.0, "q": 1.0}
    # uncentred, the levels alone would give a correlation; reversing one problem cancels it
    flipped = [Point(p.estimator, p.problem, p.fidelity, -p.gain if p.problem == "q" else p.gain)
               for p in points]  # fmt: skip
    assert correlate("flipped", flipped).pearson == pytest.approx(0.0, abs=1e-12)
    learning = {"rows": [
        {"mdp": "branching", "estimator": name, "auc_mean": auc, "auc_share_of_oracle": None}
        for name, auc in (("grpo", 0.5), ("gigpo", 0.7), ("oracle", 0.9))
    ]}  # fmt: skip
    (tmp_path / "learning.json").write_text(json.dumps(learning), "utf-8")
    fidelity = {("grpo", "mdp-branching"): 0.2, ("gigpo", "mdp-branching"): 0.3}
    found_points = learning_points(tmp_path / "learning.json", fidelity)
    assert [(p.estimator, p.fidelity, round(p.gain, 12)) for p in found_points] == [
        ("gigpo", 0.3, 0.2),
        ("grpo", 0.2, 0.0),
    ]
    (tmp_path / "other.json").write_text("{}", "utf-8")
    with pytest.raises(ValueError, match=r"other.json: not a bench learning result"):
        learning_points(tmp_path / "other.json", fidelity)
    # a campaign's gains are its paired differences against GRPO, and GRPO's is 0, as above
    paired = [
        {"estimator": name, "baseline": baseline, "metric": metric, "mean": gain}
        for name, baseline, metric, gain in (
            ("gigpo", "grpo", "mean", 0.02),
            ("gigpo", "grpo", "final", 0.5),  # another figure
            ("bipace", "gigpo", "mean", 0.5),  # another baseline
        )
    ]
    (tmp_path / "summary.json").write_text(json.dumps({"paired": paired}), "utf-8")
    set_envs = {"sokoban-a": "sokoban", "sokoban-b": "sokoban", "mdp-branching": "mdp"}
    fidelity = {("grpo", "sokoban-a"): 0.2, ("gigpo", "sokoban-a"): 0.3,
                ("gigpo", "sokoban-b"): 0.5, ("gigpo", "mdp-branching"): 0.9}  # fmt: skip
    found_points = campaign_points(tmp_path / "summary.json", "sokoban", fidelity, set_envs)
    assert [(p.estimator, p.fidelity, p.gain) for p in found_points] == [
        ("gigpo", pytest.approx(0.4), 0.02),
        ("grpo", 0.2, 0.0),
    ]
    with pytest.raises(ValueError, match="no credit set of env 'webshop'"):
        campaign_points(tmp_path / "summary.json", "webshop", fidelity, set_envs)


def test_no_shipped_file_holds_a_machine_path() -> None:
    # issue 63: a shipped credit set recorded the paths of the machine that made it
    package = Path(__file__).resolve().parents[2] / "agentbench_rl"
    machine = re.compile(r"(?<![\w.~/-])/(?:work|tmp|root|home|Users|check|mnt|var|opt)/")
    found = [
        f"{path.relative_to(package)}: {hit.group(0)}"
        for path in package.rglob("*")
        if path.is_file() and path.suffix in {".json", ".md", ".yaml", ".txt", ".html", ".csv"}
        for hit in [machine.search(path.read_text("utf-8", "replace"))]
        if hit
    ]
    assert not found


def test_campaigns_of_several_envs_are_also_read_pooled(tmp_path: Path) -> None:
    """Issue 58: the correlation across estimators x envs, each env's points centred on it."""
    sets = tmp_path / "sets"
    for mdp in ("lucky_rare", "detours"):
        write_set(mdp_set(mdp, tasks=4, group_size=3), sets / mdp_set(mdp).name)
    campaigns = {}
    for mdp, gains in (("lucky_rare", (0.02, -0.01)), ("detours", (0.05, 0.01))):
        paired = [
            {"estimator": name, "baseline": "grpo", "metric": "mean", "mean": gain}
            for name, gain in zip(("gigpo", "rloo"), gains, strict=True)
        ]
        (tmp_path / f"{mdp}.json").write_text(json.dumps({"paired": paired}), "utf-8")
        campaigns[f"mdp:{mdp}"] = tmp_path / f"{mdp}.json"
    bench = CreditBench(estimators=["grpo", "gigpo", "rloo"], sets=sets, speed=False)
    report = run(bench.model_copy(update={"campaigns": campaigns}))
    contexts = [found.context for found in report.correlations]
    assert contexts == [
        "mdp:lucky_rare campaign (mean success)",
        "mdp:detours campaign (mean success)",
        "campaigns pooled over envs (mean success)",
    ]
    pooled = report.correlations[-1]
    assert len(pooled.points) == 6 and set(pooled.by_problem) == {"mdp:lucky_rare", "mdp:detours"}

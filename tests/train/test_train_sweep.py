"""Sweeps: the grid, skipping finished runs, the summary's intervals and the plot; the shipped
baseline files parse; Ray env workers step like local ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")  # the train extra

from agentbench_rl.harness.stats import t_interval  # noqa: E402
from agentbench_rl.train.sweep import (  # noqa: E402
    load_sweep,
    run_sweep,
    summarize_sweep,
    validation_curve,
)

BASELINES = Path(__file__).resolve().parents[2] / "baselines"


def write_sweep(tmp_path: Path, grid: dict[str, list[object]]) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "toy",
                "out": str(tmp_path / "results"),
                "grid": grid,
                "base": {"env": "sokoban", "iterations": 2},
            }
        ),
        "utf-8",
    )
    return path


def fake_run(folder: Path, curve: dict[int, float], finished: bool = True) -> None:
    folder.mkdir(parents=True)
    rows = [
        {"iteration": i, **({"val_success": curve[i]} if i in curve else {})}
        for i in range(max(curve) + 1)
    ]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if finished:
        (folder / "done.json").write_text("{}")


def test_grid_cells_and_folders(tmp_path: Path) -> None:
    sweep = load_sweep(write_sweep(tmp_path, {"estimator": ["gigpo", "grpo"], "seed": [0, 1]}))
    runs = sweep.runs()
    assert [(r.cell, r.seed) for r in runs] == [
        ("toy-gigpo", 0),
        ("toy-gigpo", 1),
        ("toy-grpo", 0),
        ("toy-grpo", 1),
    ]
    assert runs[1].folder == tmp_path / "results" / "toy-gigpo" / "seed1"
    assert runs[2].config.estimator == "grpo" and runs[2].config.iterations == 2
    assert sweep.runs(["iterations=5"])[0].config.iterations == 5


def test_bad_sweep_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_sweep(tmp_path / "none.yaml")
    path = tmp_path / "bad.yaml"
    path.write_text("base: {}\n")
    with pytest.raises(ValueError, match="needs a 'grid'"):
        load_sweep(path)
    with pytest.raises(ValueError, match="unknown estimator"):
        load_sweep(write_sweep(tmp_path, {"estimator": ["nope"]}))
    path.write_text("grid: {seed: [0\n")
    with pytest.raises(ValueError, match=r"bad\.yaml is not valid YAML \(line 2"):
        load_sweep(path)


@pytest.mark.parametrize("name", ["../escape", "a/b", ".hidden", "..", ""])
def test_a_sweep_name_is_one_plain_folder_name(tmp_path: Path, name: str) -> None:
    path = write_sweep(tmp_path, {"seed": [0]})
    data = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**data, "name": name}))
    if not name:  # no name: the file's stem
        assert load_sweep(path).name == "sweep"
        return
    with pytest.raises(ValueError, match="must be letters, digits"):
        load_sweep(path)


def test_sweep_checks_every_cells_estimator_params_before_running(tmp_path: Path) -> None:
    # #18 point 3: omega is GiGPO's, GRPO has none; the grpo cell fails at load, naming it.
    grid: dict[str, list[object]] = {
        "estimator": ["gigpo", "grpo"],
        "estimator_params": [{"omega": 0.5}],
    }
    with pytest.raises(ValueError, match=r"cell toy-grpo-.* seed 0: .*'grpo'.*omega"):
        load_sweep(write_sweep(tmp_path, grid))
    assert not (tmp_path / "results").exists()  # nothing was started


def test_finished_runs_are_skipped_and_the_summary_has_intervals(tmp_path: Path) -> None:
    sweep = load_sweep(write_sweep(tmp_path, {"estimator": ["gigpo"], "seed": [0, 1, 2]}))
    curves = {0: {0: 0.2, 2: 0.5}, 1: {0: 0.1, 2: 0.4}, 2: {0: 0.3, 2: 0.9}}
    for seed, curve in curves.items():
        fake_run(sweep.out / "toy-gigpo" / f"seed{seed}", curve)
    summary = run_sweep(sweep, runner="sequential")  # nothing left to train
    cell = summary["cells"]["toy-gigpo"]
    assert cell["start_success"]["mean"] == pytest.approx(0.2)
    assert cell["final_success"]["mean"] == pytest.approx(0.6)
    low, high = t_interval([0.5, 0.4, 0.9])
    assert cell["final_success"]["ci95"] == [round(low, 4), round(high, 4)]
    assert cell["per_seed"]["2"] == {"start": 0.3, "final": 0.9, "curve": [[0, 0.3], [2, 0.9]]}
    assert cell["threshold_95"]["all_reached"] is False
    folder = sweep.out / "toy"
    assert (folder / "success.png").read_bytes()[:4] == b"\x89PNG"
    markdown = (folder / "summary.md").read_text()
    assert "| gigpo | 3 (3) | 0.200 [" in markdown and "| 0/3 |" in markdown


def test_validation_curve_reads_only_validation_rows() -> None:
    rows = [
        {"iteration": 0, "val_success": 0.1},
        {"iteration": 1},
        {"iteration": 2, "val_success": 0.3},
    ]
    assert validation_curve(rows) == {0: 0.1, 2: 0.3}


def test_summary_of_a_partial_sweep(tmp_path: Path) -> None:
    sweep = load_sweep(write_sweep(tmp_path, {"estimator": ["gigpo", "grpo"], "seed": [0]}))
    fake_run(sweep.out / "toy-grpo" / "seed0", {0: 0.5}, finished=False)
    summary = summarize_sweep(sweep)
    assert list(summary["cells"]) == ["toy-grpo"]
    assert summary["cells"]["toy-grpo"]["final_success"]["ci95"] is None  # one seed


@pytest.mark.parametrize("path", sorted(BASELINES.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_baseline_files_parse(path: Path) -> None:
    sweep = load_sweep(path)
    assert sweep.runs()


#: Where the campaign's runs are recorded (baselines/README.md, "The paired campaign").
CAMPAIGN_RUNS = BASELINES / "results"


@pytest.mark.slow  # one PPO iteration and a validation on 200 levels: ~1 CPU-minute
def test_the_campaign_starts_from_its_shipped_weights_as_its_recorded_runs_did(
    tmp_path: Path,
) -> None:
    """The campaign file's BC start is the shipped one (``bc.cache_dir``: baselines/starts),
    its fingerprint checked when loaded: a run trained from the file reports those weights and
    the start's BC loss at iteration 0, as every recorded run of the campaign does, on any
    machine (a start cloned afresh is bitwise only on the CPU that made it)."""
    pytest.importorskip("torch")
    from agentbench_rl.spec.run_folder import RunFolder
    from agentbench_rl.train.ppo import train

    sweep = load_sweep(BASELINES / "sokoban-tiny-cpu-campaign.yaml", out=CAMPAIGN_RUNS)
    (shipped,) = (BASELINES / "starts").glob("*/start.json")
    weights = json.loads(shipped.read_text())["weights"]
    recorded = {}
    for run in sweep.runs():
        rows = RunFolder(run.folder).read_metrics().rows  # none for a run not yet recorded
        if rows:
            start = rows[0]  # iteration 0: the start of RL
            recorded[run.cell, run.seed] = (start["val_weights"], start["bc/loss"])
    assert recorded, f"no recorded run under {CAMPAIGN_RUNS}"
    assert {fingerprint for fingerprint, _ in recorded.values()} == {weights}, recorded

    first = sweep.runs(["iterations=1"])[0]
    rows = train(first.config, tmp_path / "run")
    assert (rows[0]["val_weights"], rows[0]["bc/loss"]) == next(iter(recorded.values()))


@pytest.mark.slow  # starting Ray takes ~10 s
def test_ray_env_pool_steps_like_the_local_one() -> None:
    pytest.importorskip("ray")
    from agentbench_rl.envs.spec import EnvSpec
    from agentbench_rl.rollout.ray_workers import RayEnvPool
    from agentbench_rl.rollout.workers import LocalEnvPool

    jobs = [("test-0000", 1), ("test-0001", 2), ("test-0002", 3)]
    test = EnvSpec(name="sokoban", split="test")
    local = LocalEnvPool(test, 3)
    remote = RayEnvPool(test, 3, workers=2)
    try:
        assert [i["state_hash"] for _, i in remote.reset(jobs)] == [
            i["state_hash"] for _, i in local.reset(jobs)
        ]
        moves = ["up", "left"]
        ours = remote.step([2, 0], moves)
        theirs = local.step([2, 0], moves)
        assert [(r[1], r[4]["state_hash"]) for r in ours] == [
            (r[1], r[4]["state_hash"]) for r in theirs
        ]
    finally:
        remote.close()


@pytest.mark.slow  # Ray start-up and two short trainings
def test_ray_backend_and_ray_sweep_match_local_training(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    pytest.importorskip("torch")
    from agentbench_rl.train.config import config_from_dict
    from agentbench_rl.train.ppo import comparable, train

    settings = {
        "iterations": 1,
        "n_tasks": 2,
        "group_size": 2,
        "max_steps": 3,
        "action_mode": "choose",
        "val_limit": 1,
        "tiny": {
            "hidden_size": 32,
            "layers": 1,
            "heads": 2,
            "kv_heads": 1,
            "intermediate_size": 64,
            "tokenizer_episodes": 2,
        },
    }
    local = train(config_from_dict(settings), tmp_path / "local")
    remote = train(config_from_dict({**settings, "backend": "ray"}), tmp_path / "ray")
    assert comparable(remote) == comparable(local)

    path = tmp_path / "sweep.yaml"
    path.write_text(
        yaml.safe_dump(
            {"name": "r", "out": str(tmp_path / "out"), "grid": {"seed": [0]}, "base": settings}
        )
    )
    summary = run_sweep(load_sweep(path), runner="ray")
    assert list(summary["cells"]) == ["r"]
    ran = [json.loads(x) for x in (tmp_path / "out" / "r" / "seed0" / "metrics.jsonl").open()]
    assert comparable(ran) == comparable(local)


def test_runs_start_seed_major_and_a_rerun_skips_finished_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agentbench_rl.train.ppo as ppo

    started: list[tuple[str, str]] = []

    def fake_train(config: object, folder: Path, resume: bool, console: object) -> None:
        # a GRPO run "stops" before its end the first time (no done.json), then finishes;
        # a sweep always asks to resume (a folder holding no run starts afresh)
        assert resume
        started.append((folder.parent.name, folder.name))
        folder.mkdir(parents=True, exist_ok=True)
        first = not (folder / "config.yaml").exists()
        (folder / "config.yaml").write_text("")
        if folder.parent.name != "toy-grpo" or not first:
            (folder / "done.json").write_text("{}")

    monkeypatch.setattr(ppo, "train", fake_train)
    sweep = load_sweep(write_sweep(tmp_path, {"estimator": ["gigpo", "grpo"], "seed": [0, 1]}))
    run_sweep(sweep, runner="sequential")
    assert started == [
        ("toy-gigpo", "seed0"),
        ("toy-grpo", "seed0"),
        ("toy-gigpo", "seed1"),
        ("toy-grpo", "seed1"),
    ]
    started.clear()
    run_sweep(sweep, runner="sequential")  # finished runs skipped, the others resumed
    assert started == [("toy-grpo", "seed0"), ("toy-grpo", "seed1")]
    started.clear()
    run_sweep(sweep, runner="sequential")
    assert started == []


def test_parameters_per_estimator(tmp_path: Path) -> None:
    path = write_sweep(tmp_path, {"estimator": ["grpo", "bipace"], "seed": [0]})
    data = yaml.safe_load(path.read_text())
    data["estimator_params"] = {"bipace": {"epsilon": 0.1}}
    path.write_text(yaml.safe_dump(data))
    runs = load_sweep(path).runs()
    assert [r.config.estimator_params for r in runs] == [{}, {"epsilon": 0.1}]
    data["estimator_params"] = {"bipace": 0.1}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match="estimator_params maps"):
        load_sweep(path)


def test_paired_comparisons_against_grpo_and_gigpo(tmp_path: Path) -> None:
    from scipy import stats

    grid = {"estimator": ["grpo", "gigpo", "rloo"], "seed": [0, 1, 2]}
    sweep = load_sweep(write_sweep(tmp_path, grid))
    # validations at 0 (the shared start), 5 and 10; finals and means chosen by hand
    curves = {
        "grpo": [{0: 0.3, 5: 0.4, 10: 0.4}, {0: 0.3, 5: 0.2, 10: 0.4}, {0: 0.3, 5: 0.5, 10: 0.6}],
        "gigpo": [{0: 0.3, 5: 0.5, 10: 0.5}, {0: 0.3, 5: 0.5, 10: 0.6}, {0: 0.3, 5: 0.6, 10: 0.7}],
        "rloo": [{0: 0.3, 5: 0.3, 10: 0.4}, {0: 0.3, 5: 0.3, 10: 0.5}, {0: 0.3, 5: 0.96, 10: 1.0}],
    }
    for estimator, runs in curves.items():
        for seed, curve in enumerate(runs):
            # rloo seed 2 has not finished: it is left out of every pair
            finished = not (estimator == "rloo" and seed == 2)
            fake_run(sweep.out / f"toy-{estimator}" / f"seed{seed}", curve, finished)
    summary = summarize_sweep(sweep)
    rows = {(r["estimator"], r["baseline"], r["metric"]): r for r in summary["paired"]}
    assert set(rows) == {
        (e, b, m)
        for e, b in (("gigpo", "grpo"), ("rloo", "grpo"), ("rloo", "gigpo"))  # no mirror row
        for m in ("mean", "final", "iterations_to_95")
    }
    final = rows[("gigpo", "grpo", "final")]
    # d = [0.1, 0.2, 0.1]: mean 0.1333, t = 4 on 2 degrees of freedom (scipy's ttest_rel)
    assert final["seeds"] == [0, 1, 2] and final["mean"] == pytest.approx(0.1333, abs=1e-4)
    expected = stats.ttest_rel([0.5, 0.6, 0.7], [0.4, 0.4, 0.6]).pvalue
    assert final["p_value"] == pytest.approx(expected, abs=1e-4)
    low, high = t_interval([0.1, 0.2, 0.1])
    assert final["ci95"] == pytest.approx([low, high], abs=1e-4)
    # means over validations 5 and 10: gigpo 0.5, 0.55, 0.65; grpo 0.4, 0.3, 0.55
    mean = rows[("gigpo", "grpo", "mean")]
    assert mean["mean"] == pytest.approx((0.1 + 0.25 + 0.1) / 3, abs=1e-4)
    assert rows[("rloo", "gigpo", "final")]["seeds"] == [0, 1]
    assert rows[("rloo", "gigpo", "final")]["mean"] == pytest.approx(-0.1, abs=1e-4)
    assert rows[("gigpo", "grpo", "final")]["detectable_80"] > 0
    # the unfinished rloo seed 2 still counts for its cell, and reached 0.95 at iteration 5
    assert summary["cells"]["toy-rloo"]["threshold_95"]["first_iteration"]["2"] == 5
    markdown = (sweep.out / "toy" / "summary.md").read_text()
    assert "| toy | gigpo | grpo | val_success | final | 3 | +0.133 [" in markdown
    # iterations to 0.95: rloo's seed 2 at 5, the others never (counted at 15, one interval on)
    assert summary["cells"]["toy-rloo"]["iterations_to_95"]["mean"] == pytest.approx(35 / 3, 1e-3)
    assert rows[("gigpo", "grpo", "iterations_to_95")]["mean"] == 0.0
    assert "| rloo | 3 (2) |" in markdown and "1/3 (first at 5)" in markdown


def test_gpu_sweep_files_run_every_estimator_with_bipace_published_epsilon() -> None:
    # BiPACE's authors publish epsilon 0.10 for 7B and 0.05 for 1.5B (issue #26); HGPO runs beside
    # the others in every GPU sweep file.
    from agentbench_rl.estimators import NAMES

    files = sorted(Path("baselines").glob("*-qwen2.5-*.yaml"))
    assert files
    for path in files:
        sweep = load_sweep(path)
        assert sorted(sweep.grid["estimator"]) == sorted(NAMES), path
        bipace = [run.config for run in sweep.runs() if run.config.estimator == "bipace"]
        epsilon = {config.estimator_params.get("epsilon", 0.05) for config in bipace}
        assert epsilon == ({0.10} if "-7b" in path.name else {0.05}), path


def test_a_finished_run_without_its_metrics_is_summarised_from_the_last_summary(
    tmp_path: Path,
) -> None:
    # A campaign commits its runs' done.json and its summary, not every metrics journal: a
    # clean checkout's summary keeps the finished runs' curves from the committed summary.
    sweep = load_sweep(write_sweep(tmp_path, {"estimator": ["gigpo", "grpo"], "seed": [0, 1]}))
    curves = {"gigpo": [{0: 0.2, 2: 0.5}, {0: 0.1, 2: 0.4}], "grpo": [{0: 0.2, 2: 0.3}, {0: 0.1}]}
    for estimator, runs in curves.items():
        for seed, curve in enumerate(runs):
            fake_run(sweep.out / f"toy-{estimator}" / f"seed{seed}", curve)
    first = summarize_sweep(sweep)
    (sweep.out / "toy-gigpo" / "seed1" / "metrics.jsonl").unlink()
    again = summarize_sweep(sweep)
    assert again["cells"] == first["cells"] and again["paired"] == first["paired"]
    (sweep.out / "toy-grpo" / "seed1" / "done.json").unlink()  # unfinished: never from it
    (sweep.out / "toy-grpo" / "seed1" / "metrics.jsonl").unlink()
    assert summarize_sweep(sweep)["cells"]["toy-grpo"]["seeds"] == ["0"]

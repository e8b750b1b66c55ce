"""The ``drrn`` policy: its features, its two towers against a forward written here in numpy, the
trainer, the harness and the files, and the training panel it is campaigned on."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from agentbench_rl.envs.spec import EnvSpec  # noqa: E402
from agentbench_rl.harness.config import EvalConfig  # noqa: E402
from agentbench_rl.harness.evaluate import evaluate  # noqa: E402
from agentbench_rl.models.drrn import (  # noqa: E402
    DRRN,
    TABLES,
    WEIGHTS_FILE,
    build_drrn,
    is_drrn_folder,
)
from agentbench_rl.models.drrn_features import DRRNConfig, TextFeatures, grid_rows  # noqa: E402
from agentbench_rl.models.policy import Policy, choice_logprobs, load_pretrained  # noqa: E402
from agentbench_rl.prompting import PromptConfig, PromptParts, build_prompt  # noqa: E402
from agentbench_rl.train.config import TrainConfig, config_from_dict  # noqa: E402
from agentbench_rl.train.ppo import comparable, train  # noqa: E402

PROMPT = build_prompt(
    "sokoban", "#####\n#P_O#\n#_X_#\n#####", [], ["up", "down"], PromptConfig(mode="choose")
)


def hashed(part: str, gram: str, buckets: int) -> int:
    """A feature id as the module's docstring defines it: CRC-32 of the salted gram, in the
    part's range (context, listed, current: 1, 1 + buckets, 1 + 2 buckets; actions: 1)."""
    ranges = {"context": 0, "listed": 1, "current": 2}
    return zlib.crc32(f"{part}\x1f{gram}".encode()) % buckets + 1 + ranges.get(part, 0) * buckets


def test_an_action_is_its_words_its_bigram_and_itself() -> None:
    features = TextFeatures(buckets=1000)
    expected = [
        hashed("action", "take", 1000),
        hashed("action", "key", 1000),
        hashed("action", "take key", 1000),
        hashed("action=", "take key", 1000),
    ]
    assert features("Take key</action>")["input_ids"] == expected


def test_a_grid_becomes_cells_and_the_rest_words_by_part() -> None:
    features = TextFeatures(buckets=10_000)
    ids = features(PROMPT + "\n<action>")["input_ids"]
    parts = PromptParts.of(PROMPT)
    assert parts.current == ("#####", "#P_O#", "#_X_#", "#####")
    # the grid's 20 cells, as (row, column, symbol), then their 20 3x3 neighbourhoods, come
    # last; P sits at row 1, column 1, and its neighbourhood reads "###", "#P_", "#_X"
    assert ids[-40:][6] == hashed("current", "grid 1,1,P", 10_000)
    assert ids[-20:][6] == hashed("current", "patch ####P_#_X", 10_000)
    assert ids[-20:][0] == hashed("current", "patch     ## #P", 10_000)  # a corner, padded
    assert hashed("listed", "up", 10_000) in ids  # an admissible action, as listed
    assert hashed("current", "#", 10_000) not in ids  # grid rows give no words
    no_grid = TextFeatures(buckets=10_000, grid=False)(PROMPT)["input_ids"]
    assert hashed("current", "#", 10_000) in no_grid


@pytest.mark.parametrize(
    ("lines", "rows"),
    [
        (["###", "#P#", "###"], range(0, 3)),
        (["goal:", "###", "#P#", "###", "x"], range(1, 4)),
        (["###", "#P#"], range(0)),  # two lines are no grid
        (["# #", "#P#", "###"], range(0)),  # a space breaks a row
        (["####", "#P#", "###", "###"], range(1, 4)),  # lengths must agree
    ],
)
def test_grid_rows_by_hand(lines: list[str], rows: range) -> None:
    assert grid_rows(lines) == rows


def numpy_scores(
    model: DRRN, prompt: list[int], actions: list[list[int]], buckets: int
) -> np.ndarray:
    """The towers written out in numpy from the module docstring's equations."""
    weights = {name: p.detach().double().numpy() for name, p in model.named_parameters()}

    def tower(name: str, ids: list[int], parts: int) -> np.ndarray:
        table = weights[f"{name}.bag.weight"]
        means = []
        for part in range(parts):  # each part's mean, zeros where it has no feature
            mine = [i for i in ids if part * buckets < i <= (part + 1) * buckets]
            means.append(table[mine].mean(axis=0) if mine else np.zeros(table.shape[1]))
        bag = np.concatenate(means)
        normed = (bag - bag.mean()) / np.sqrt(bag.var() + 1e-5)
        normed = normed * weights[f"{name}.norm.weight"] + weights[f"{name}.norm.bias"]
        hidden = np.maximum(
            weights[f"{name}.hidden.weight"] @ normed + weights[f"{name}.hidden.bias"], 0
        )
        return weights[f"{name}.out.weight"] @ hidden + weights[f"{name}.out.bias"]

    state = tower("state", prompt, 3)
    return np.array([state @ tower("action", ids, 1) for ids in actions])


def test_scores_are_the_two_towers_dot_product() -> None:
    model, features = build_drrn(DRRNConfig(width=8, buckets=64), seed=3)
    with torch.no_grad():  # move the zero-initialised last action layer off zero
        model.action.out.weight.normal_(0, 1, generator=torch.Generator().manual_seed(0))
    prompt = features(PROMPT)["input_ids"]
    actions = [features(f"{a}</action>")["input_ids"] for a in ("up", "down", "left")]
    scored = model.score_choices([prompt], [actions], temperature=0.5)
    assert scored.pair_rows.tolist() == [0, 0, 0] and scored.pair_columns.tolist() == [0, 1, 2]
    expected = numpy_scores(model, prompt, actions, buckets=64) / 0.5
    assert np.allclose(scored.scores.detach().numpy(), expected, atol=1e-5)


def test_a_fresh_model_is_uniform_and_its_first_ratio_is_one() -> None:
    model, features = build_drrn(DRRNConfig(width=8, buckets=64), seed=0)
    policy = Policy(model, features, PromptConfig(mode="choose"))
    out = policy.act([PROMPT, PROMPT], [["up", "down"], ["up", "down", "left"]], torch.Generator())
    assert [float(lp[0]) for lp in out.logprobs] == pytest.approx([np.log(1 / 2), np.log(1 / 3)])
    again, _ = choice_logprobs(model, out.prompt_ids, out.choices, out.chosen, policy.pad_id)
    assert again.tolist() == pytest.approx([float(lp[0]) for lp in out.logprobs], abs=1e-7)


def test_the_hidden_state_is_the_state_tower_output() -> None:
    model, features = build_drrn(DRRNConfig(width=8, buckets=64), seed=0)
    policy = Policy(model, features, PromptConfig(mode="choose"), hidden_layer=1)
    out = policy.act([PROMPT], [["up", "down"]], torch.Generator(), capture_hidden=True)
    with torch.no_grad():
        state = model.state([features(PROMPT)["input_ids"]])[2]
    assert out.hidden is not None and np.allclose(out.hidden, state.numpy(), atol=1e-6)


def test_generate_mode_is_refused() -> None:
    model, features = build_drrn(DRRNConfig(width=8, buckets=64), seed=0)
    with pytest.raises(ValueError, match="choose mode"):
        Policy(model, features, PromptConfig(mode="generate"))
    with pytest.raises(ValueError, match="action_mode: choose"):
        TrainConfig(model="drrn", action_mode="generate").check()
    with pytest.raises(ValueError, match=r"bc\.loss"):
        config_from_dict(
            {"model": "drrn", "action_mode": "choose", "bc": {"enabled": True}}
        ).check()


def test_saved_and_loaded_it_scores_alike(tmp_path: Path) -> None:
    model, features = build_drrn(DRRNConfig(width=8, buckets=64, grid=False), seed=5)
    with torch.no_grad():
        model.action.out.weight.normal_(0, 1, generator=torch.Generator().manual_seed(1))
    Policy(model, features, PromptConfig(mode="choose")).save(tmp_path / "p")
    assert is_drrn_folder(tmp_path / "p") and not is_drrn_folder(tmp_path)
    loaded, read = load_pretrained(str(tmp_path / "p"))
    assert isinstance(loaded, DRRN) and read.settings() == features.settings()
    prompt, actions = features(PROMPT)["input_ids"], [features("up</action>")["input_ids"]]
    assert torch.equal(
        loaded.score_choices([prompt], [actions], 1.0).scores,
        model.score_choices([prompt], [actions], 1.0).scores,
    )


def test_its_tables_are_saved_as_the_rows_moved_from_the_seeded_init(tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    model, features = build_drrn(DRRNConfig(width=8, buckets=64, grid=False), seed=5)
    with torch.no_grad():
        model.state.bag.weight[[3, 70]] += 1.0  # two rows trained
    Policy(model, features, PromptConfig(mode="choose")).save(tmp_path / "p")
    stored = load_file(str(tmp_path / "p" / WEIGHTS_FILE))
    assert stored["state.bag.weight.rows"].tolist() == [3, 70]
    assert stored["action.bag.weight"].shape == (0, 8)
    loaded, _ = load_pretrained(str(tmp_path / "p"))
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    # a table stored whole (the form before the rows) reads the same
    whole = {name: tensor.contiguous() for name, tensor in model.state_dict().items()}
    save_file(whole, str(tmp_path / "p" / WEIGHTS_FILE))
    assert torch.equal(load_pretrained(str(tmp_path / "p"))[0].state.bag.weight, whole[TABLES[0]])
    # an init that draws differently (here: a wrong digest) is refused in one line
    config = json.loads((tmp_path / "p" / "config.json").read_text())
    (tmp_path / "p" / "config.json").write_text(json.dumps({**config, "init_tables": "0" * 16}))
    with pytest.raises(ValueError, match="draws differently here"):
        load_pretrained(str(tmp_path / "p"))


def drrn_config(**fields: object) -> TrainConfig:
    values: dict[str, object] = {
        "env": "sokoban",
        "model": "drrn",
        "estimator": "gigpo",
        "reward": "env",  # Sokoban's step penalty and box rewards: returns differ at once
        "iterations": 2,
        "n_tasks": 4,
        "group_size": 4,
        "max_steps": 6,
        "train_panel": 3,
        "action_mode": "choose",
        "history_observations": False,
        "instruction": "",
        "learning_rate": 1e-2,
        "val_limit": 4,
        "val_every": 2,
        "checkpoint_every": 1,
        "val_greedy": True,
        "drrn": {"width": 16, "buckets": 512},
    }
    values.update(fields)
    return config_from_dict(values)


def test_it_trains_on_a_panel_and_resumes_to_the_same_numbers(tmp_path: Path) -> None:
    straight = train(drrn_config(iterations=3), tmp_path / "straight")
    assert [row["iteration"] for row in straight] == [0, 1, 2, 3]
    row = straight[2]
    assert row["panel_seed_count"] == 1 and 0.0 <= row["panel_success"] <= 1.0
    assert 0.0 < row["adv/dose"] <= 1.0 and row["adv/trained_dose"] == row["adv/dose"]
    assert (tmp_path / "straight" / "val" / "panel-0002" / "summary.json").is_file()
    train(drrn_config(iterations=2), tmp_path / "resumed")
    resumed = train(drrn_config(iterations=3), tmp_path / "resumed", resume=True)
    assert comparable(resumed) == comparable(straight)


def test_a_matched_dose_trains_that_share_of_rows(tmp_path: Path) -> None:
    rows = train(drrn_config(iterations=1, advantage_dose=0.25), tmp_path / "run")
    assert rows[1]["adv/trained_dose"] == pytest.approx(
        min(0.25, rows[1]["adv/dose"]), abs=1 / rows[1]["train/rows"]
    )


def test_the_harness_plays_a_saved_drrn_as_an_hf_agent(tmp_path: Path) -> None:
    model, features = build_drrn(DRRNConfig(width=8, buckets=64), seed=0)
    Policy(model, features, PromptConfig(mode="choose", history=0)).save(tmp_path / "p")
    config = EvalConfig(env="sokoban", split="test", agent=f"hf:{tmp_path / 'p'}", limit=3)
    summary = evaluate(config, tmp_path / "eval")
    assert summary.n_episodes == 3


def test_a_panel_is_fixed_distinct_and_evaluated_as_such(tmp_path: Path) -> None:
    train_split = EnvSpec(name="sokoban", split="train")
    panel = train_split.panel_of(5, seed=0)
    assert panel == train_split.panel_of(5, seed=0) and len(set(panel.panel)) == 5
    assert set(panel.draw_tasks(20, seed=1)) <= set(panel.panel)
    textcraft = EnvSpec(name="textcraft", split="train", categories=("depth-1",))
    assert set(textcraft.panel_of(4, seed=0).panel) <= set(textcraft.tasks())
    with pytest.raises(ValueError, match="not in 'test'"):
        EnvSpec(name="sokoban", split="test", panel=("train-1",))
    with pytest.raises(ValueError, match="repeats"):
        EnvSpec(name="sokoban", split="train", panel=("train-1", "train-1"))
    config = EvalConfig(env=panel, agent="random")
    assert EvalConfig.read(config.record()) == config
    summary = evaluate(config, tmp_path / "panel")
    assert summary.n_episodes == 5 and summary.complete_split is False


def test_a_fidelity_run_draws_its_batch_from_the_training_panel() -> None:
    from agentbench_rl.bench.truth import TruthSettings

    settings = TruthSettings(env="textcraft", agent="random", categories=("depth-1",), panel=4)
    spec = settings.env_spec()
    trained = drrn_config(env="textcraft", train_categories=["depth-1"], train_panel=4)
    assert spec.panel == trained.train_env().panel  # the campaign's panel, by the same draw
    assert set(spec.draw_tasks(8, seed=0)) <= set(spec.panel)
    with pytest.raises(ValueError, match="panel must be a whole number >= 1"):
        TruthSettings.read({"env": "textcraft", "agent": "random", "panel": 0})

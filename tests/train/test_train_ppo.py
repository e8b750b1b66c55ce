"""PPO-clip pieces by hand, the config, rewards, and every estimator inside the trainer."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
torch.set_num_threads(1)  # tiny models: one thread beats two on a shared machine

from agentbench_rl.core.batch import StepColumns  # noqa: E402
from agentbench_rl.estimators import NAMES, REGISTRY  # noqa: E402
from agentbench_rl.models.policy import pack  # noqa: E402
from agentbench_rl.rollout.batched import (  # noqa: E402
    RolloutBatch,
    RolloutEpisode,
    success_rewards,
)
from agentbench_rl.rollout.episode import EpisodeOutcome  # noqa: E402
from agentbench_rl.train.config import (  # noqa: E402
    TrainConfig,
    apply_overrides,
    config_from_dict,
    load_config,
)
from agentbench_rl.train.ppo import comparable, ppo_loss, train  # noqa: E402


def _toy(advantage: float) -> dict[str, torch.Tensor]:
    """Two answer tokens: new probs 0.75 and 0.3, old 0.5 and 0.5, reference 0.5 and 0.25."""
    return {
        "logprobs": torch.log(torch.tensor([[0.75, 0.3]])),
        "old_logprobs": torch.log(torch.tensor([[0.5, 0.5]])),
        "ref_logprobs": torch.log(torch.tensor([[0.5, 0.25]])),
        "advantages": torch.full((1, 2), advantage),
        "mask": torch.ones((1, 2), dtype=torch.bool),
    }


# The k3 estimator by hand: exp(r) - r - 1 with r = log(ref / new).
KL_1 = 2 / 3 - math.log(2 / 3) - 1  # ref 0.5, new 0.75
KL_2 = 5 / 6 - math.log(5 / 6) - 1  # ref 0.25, new 0.3


def test_ppo_loss_by_hand_positive_advantage() -> None:
    # ratios 1.5 and 0.6; A = 2: min(3.0, 1.2 * 2) = 2.4 and min(1.2, 0.8 * 2) = 1.2
    loss, stats = ppo_loss(
        **_toy(2.0), entropy=None, n_tokens=2, clip_ratio=0.2, kl_coef=0.01, entropy_coef=0.0
    )
    expected = (-2.4 - 1.2 + 0.01 * (KL_1 + KL_2)) / 2
    assert float(loss) == pytest.approx(expected, abs=1e-6)
    assert stats["pg_loss"] == pytest.approx(-3.6, abs=1e-6)
    assert stats["kl"] == pytest.approx(KL_1 + KL_2, abs=1e-6)
    assert stats["clipfrac"] == 2.0


def test_ppo_loss_by_hand_negative_advantage_and_entropy() -> None:
    # A = -1: min(-1.5, -1.2) = -1.5 and min(-0.6, -0.8) = -0.8; the loss negates them
    entropy = torch.tensor([[0.5, 1.5]])
    loss, stats = ppo_loss(
        **_toy(-1.0), entropy=entropy, n_tokens=2, clip_ratio=0.2, kl_coef=0.0, entropy_coef=0.1
    )
    expected = (1.5 + 0.8 + 0.0 * (KL_1 + KL_2) - 0.1 * (0.5 + 1.5)) / 2
    assert float(loss) == pytest.approx(expected, abs=1e-6)
    assert stats["entropy"] == pytest.approx(2.0)


def test_ppo_loss_is_a_token_mean_over_the_minibatch() -> None:
    # a padded second token does not count; n_tokens (of the whole minibatch) divides
    toy = _toy(2.0)
    toy["mask"] = torch.tensor([[True, False]])
    loss, _ = ppo_loss(
        **toy, entropy=None, n_tokens=4, clip_ratio=0.2, kl_coef=0.0, entropy_coef=0.0
    )
    assert float(loss) == pytest.approx(-2.4 / 4, abs=1e-6)


def test_ppo_gradient_at_ratio_one_is_the_policy_gradient() -> None:
    # at the sampling policy, d loss / d logprob = -A / n_tokens for each token
    logprobs = torch.log(torch.tensor([[0.5, 0.5]])).requires_grad_(True)
    loss, _ = ppo_loss(
        logprobs,
        logprobs.detach().clone(),
        None,
        None,
        torch.full((1, 2), 3.0),
        torch.ones((1, 2), dtype=torch.bool),
        2,
        0.2,
        0.0,
        0.0,
    )
    loss.backward()
    assert logprobs.grad is not None
    assert logprobs.grad.tolist()[0] == pytest.approx([-1.5, -1.5])


def test_pack_aligns_responses_after_left_padded_prompts() -> None:
    packed = pack([[5, 6, 7], [8]], [[1], [2, 3]], pad_id=0)
    assert packed.input_ids.tolist() == [[5, 6, 7, 1, 0], [0, 0, 8, 2, 3]]
    assert packed.attention_mask.tolist() == [[1, 1, 1, 1, 0], [0, 0, 1, 1, 1]]
    assert packed.position_ids.tolist() == [[0, 1, 2, 3, 3], [0, 0, 0, 1, 2]]
    assert packed.response_mask.tolist() == [[True, False], [True, True]]


def test_success_rewards_only_on_the_last_step_of_won_trajectories() -> None:
    won = {0: True, 1: False}
    records = [
        {"group": 0, "traj": traj, "t": t, "reward": 0.0, "obs_key": "o", "state_key": "s"}
        | {"action_key": "a", "valid": True, "success": won[traj]}
        for traj, t in ((0, 0), (0, 1), (1, 0), (1, 1))
    ]
    episodes = [
        RolloutEpisode(0, traj, EpisodeOutcome("t", "c", won[traj], 0.0, 2, 0.0, 0, 0))
        for traj in (0, 1)
    ]
    rollout = RolloutBatch(StepColumns.of(records), episodes=episodes)
    assert success_rewards(rollout, 10.0).tolist() == [0.0, 10.0, 0.0, 0.0]


def test_defaults_are_the_papers_numbers() -> None:
    config = TrainConfig()
    assert (config.n_tasks, config.group_size, config.history) == (16, 8, 2)
    assert (config.clip_ratio, config.kl_coef, config.invalid_penalty) == (0.2, 0.01, 0.1)
    assert (config.success_reward, config.gamma) == (10.0, 0.95)


def test_estimator_params_pass_gamma_and_penalty_where_accepted() -> None:
    config = config_from_dict({"estimator": "rloo", "gamma": 0.9})
    assert config.estimator_spec().params == {"invalid_penalty": 0.1}  # RLOO has no gamma
    config = config_from_dict({"estimator": "gigpo", "estimator_params": {"omega": 0.5}})
    assert config.estimator_spec().params == {"gamma": 0.95, "invalid_penalty": 0.1, "omega": 0.5}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"omgea": 0.5}, "unknown parameter.*omgea"),
        ({"omega": -1.0}, "omega=-1.0 is out of range"),
        ({"norm": "max"}, "norm='max' is out of range"),
    ],
)
def test_config_validation_checks_estimator_params_before_any_work(
    params: dict[str, object], message: str
) -> None:
    # #18 point 3: a misspelt or out-of-range parameter fails at validation, not after the
    # model is built.
    config = config_from_dict({"estimator": "gigpo", "estimator_params": params})
    with pytest.raises(ValueError, match=message):
        config.check()


def test_needs_hidden_reads_the_declaration() -> None:
    needing = {name for name in NAMES if "hidden" in REGISTRY[name].needs}
    assert needing  # at least one built-in declares it (else this test checks nothing)
    for name in NAMES:
        assert config_from_dict({"estimator": name}).needs_hidden() == (name in needing)


def test_overrides_and_yaml(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("estimator: grpo\ntiny:\n  hidden_size: 64\n", "utf-8")
    config = load_config(path, ["tiny.layers=3", "val_limit=null", "learning_rate=3e-4"])
    assert (config.estimator, config.tiny.hidden_size, config.tiny.layers) == ("grpo", 64, 3)
    assert config.val_limit is None and config.learning_rate == 3e-4
    with pytest.raises(ValueError, match=r"unknown config key 'tiny\.width'"):
        apply_overrides(TrainConfig(), ["tiny.width=3"])
    with pytest.raises(ValueError, match="n_tasks: 'many' is not a whole number"):
        apply_overrides(TrainConfig(), ["n_tasks=many"])
    with pytest.raises(ValueError, match="unknown config key 'colour'"):
        config_from_dict({"colour": "red"})


def test_warm_start_seed() -> None:
    shared = config_from_dict({"seed": 5, "bc": {"enabled": True, "seed": 0}})
    assert shared.warm_start_seed() == 0  # every seed of a sweep starts from one BC model
    assert config_from_dict({"seed": 5, "bc": {"enabled": True}}).warm_start_seed() == 5
    assert config_from_dict({"seed": 5, "bc": {"seed": 0}}).warm_start_seed() == 5  # no BC


def test_validate_names_the_bad_field() -> None:
    with pytest.raises(ValueError, match="unknown estimator 'ppo'"):
        config_from_dict({"estimator": "ppo"}).check()
    with pytest.raises(ValueError, match="val_split: env 'sokoban' has no split 'dev'"):
        config_from_dict({"val_split": "dev"}).check()
    with pytest.raises(ValueError, match="clip_ratio"):
        config_from_dict({"clip_ratio": 1.5}).check()


def tiny_config(**fields: object) -> TrainConfig:
    """A run that takes a second or two on a CPU."""
    values: dict[str, object] = {
        "env": "sokoban",
        "model": "tiny",
        "iterations": 1,
        "n_tasks": 2,
        "group_size": 2,
        "max_steps": 3,
        "action_mode": "choose",
        "history_observations": False,
        "instruction": "",
        "learning_rate": 1e-3,
        "val_limit": 1,
        "val_every": 1,
        "tiny": {
            "hidden_size": 32,
            "layers": 1,
            "heads": 2,
            "kv_heads": 1,
            "intermediate_size": 64,
            "tokenizer_episodes": 2,
        },
    }
    values.update(fields)
    return config_from_dict(values)


@pytest.mark.parametrize("estimator", NAMES)
def test_every_estimator_trains(estimator: str, tmp_path: Path) -> None:
    metrics = train(tiny_config(estimator=estimator), tmp_path / "run")
    assert [row["iteration"] for row in metrics] == [0, 1]
    row = metrics[1]
    assert row["train/rows"] > 0 and "ppo/loss" in row and "val_success" in row
    assert row["est/n_rows"] == row["train/rows"]
    assert np.isfinite(row["ppo/loss"])
    assert (tmp_path / "run" / "checkpoint" / "policy" / "agentbench_policy.json").is_file()
    assert (tmp_path / "run" / "done.json").is_file()


def test_same_seed_same_numbers_and_generate_mode(tmp_path: Path) -> None:
    config = tiny_config(action_mode="generate", max_new_tokens=6, iterations=2, val_every=2)
    first = train(config, tmp_path / "a")
    second = train(config, tmp_path / "b")
    assert comparable(first) == comparable(second)
    assert first[1]["train/response_tokens"] <= 6


def test_existing_run_needs_resume(tmp_path: Path) -> None:
    train(tiny_config(), tmp_path / "run")
    with pytest.raises(FileExistsError, match="--resume"):
        train(tiny_config(), tmp_path / "run")
    with pytest.raises(ValueError, match="different estimator"):
        train(tiny_config(estimator="grpo"), tmp_path / "run", resume=True)


def test_padded_positions_do_not_poison_the_kl_term() -> None:
    # A padded response position (mask False) holds log-prob -100 for the policy and 0 for the
    # reference (``padded`` fills with 0): exp(0 - (-100)) overflows float32 to inf and inf * 0
    # is NaN unless the padded positions are masked before the exponential.
    logprobs = torch.tensor([[math.log(0.5), -100.0]]).requires_grad_(True)
    mask = torch.tensor([[True, False]])
    loss, stats = ppo_loss(
        logprobs,
        torch.tensor([[math.log(0.5), 0.0]]),
        torch.tensor([[math.log(0.25), 0.0]]),
        None,
        torch.full((1, 2), 1.0),
        mask,
        1,
        0.2,
        0.01,
        0.0,
    )
    loss.backward()
    assert logprobs.grad is not None
    assert math.isfinite(float(loss.detach())) and bool(torch.isfinite(logprobs.grad).all())
    # by hand: ratio 1, A = 1 -> pg -1; k3 with r = log(0.25 / 0.5): 0.5 + log 2 - 1
    kl = 0.5 + math.log(2) - 1
    assert float(loss.detach()) == pytest.approx(-1 + 0.01 * kl, abs=1e-6)
    assert stats["kl_clamped"] == 0.0


def test_kl_term_is_clamped_as_verl_does() -> None:
    # r = log(ref / new) = 15 on a real token: k3 = e^15 - 16, clamped to 10 (verl's
    # low_var_kl); the clamp is counted per token
    loss, stats = ppo_loss(
        torch.tensor([[-20.0, math.log(0.5)]]),
        torch.tensor([[-20.0, math.log(0.5)]]),
        torch.tensor([[-5.0, math.log(0.5)]]),
        None,
        torch.zeros((1, 2)),
        torch.ones((1, 2), dtype=torch.bool),
        2,
        0.2,
        1.0,
        0.0,
    )
    assert float(loss) == pytest.approx(10.0 / 2, abs=1e-5)
    assert stats["kl"] == pytest.approx(10.0, abs=1e-5)
    assert stats["kl_clamped"] == 1.0


def test_greedy_validation_over_several_seeds_is_recorded(tmp_path: Path) -> None:
    import json

    config = tiny_config(val_greedy=True, val_seeds=[0, 1], val_limit=2, max_steps=4)
    metrics = train(config, tmp_path / "run")
    assert metrics[0]["val_greedy"] is True and metrics[0]["val_seed_count"] == 2
    summary = json.loads((tmp_path / "run" / "val" / "iter-0001" / "summary.json").read_text())
    assert summary["agent"].endswith("?greedy=true") and summary["seeds"] == [0, 1]
    # greedy choose mode on Sokoban (levels do not depend on the seed) plays every seed alike
    import pandas as pd

    episodes = pd.read_csv(tmp_path / "run" / "val" / "iter-0001" / "episodes.csv")
    by_seed = [episodes[episodes.seed == seed].sort_values("task_id") for seed in (0, 1)]
    assert by_seed[0]["steps"].tolist() == by_seed[1]["steps"].tolist()
    assert by_seed[0]["return"].tolist() == by_seed[1]["return"].tolist()


def test_batch_std_normalisation_by_hand() -> None:
    from agentbench_rl.estimators.common import normalize_advantages

    # [4, 0, -2, -2]: mean 0, variance (16 + 0 + 4 + 4) / 4 = 6
    raw = np.array([4.0, 0.0, -2.0, -2.0])
    assert normalize_advantages(raw, "batch_std") == pytest.approx(raw / math.sqrt(6))
    assert normalize_advantages(raw, "none") is raw
    assert normalize_advantages(np.zeros(3), "batch_std").tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="advantage_norm"):
        config_from_dict({"advantage_norm": "group"}).check()


def test_training_logs_raw_and_normalised_advantage_scales(tmp_path: Path) -> None:
    # the env's shaped reward (box pushes, step cost) gives the random policy's groups a spread
    config = tiny_config(
        advantage_norm="batch_std", reward="env", n_tasks=3, group_size=3, max_steps=6
    )
    row = train(config, tmp_path / "run")[1]
    assert row["adv/raw_std"] > 0.1
    assert row["adv/std"] == pytest.approx(1.0, abs=1e-9)
    assert row["adv/mean"] == pytest.approx(row["adv/raw_mean"] / row["adv/raw_std"])


def test_resume_accepts_another_bc_cache_folder(tmp_path: Path) -> None:
    # where the BC result is cached changes no number: a resumed run may name another folder
    train(tiny_config(), tmp_path / "run")
    moved = tiny_config(iterations=2, bc={"cache_dir": str(tmp_path / "cache")})
    assert [row["iteration"] for row in train(moved, tmp_path / "run", resume=True)] == [0, 1, 2]


def test_train_categories_restrict_the_task_draws() -> None:
    from agentbench_rl.envs.spec import EnvSpec
    from agentbench_rl.envs.textcraft.tasks import load_manifest

    def draw(name: str, categories: tuple[str, ...] = ()) -> list[str]:
        spec = EnvSpec(name=name, split="train", categories=categories)
        return spec.draw_tasks(200, 5, what="train_categories")

    depth = {row["task_id"]: row["depth"] for row in load_manifest()["splits"]["train"]}
    drawn = draw("textcraft", ("depth-1", "depth-2"))
    assert {depth[task] for task in drawn} == {1, 2}  # 200 draws from 263 goals reach both
    assert {depth[task] for task in draw("textcraft")} >= {3}
    with pytest.raises(ValueError, match="train_categories: sokoban's split 'train' has no fixed"):
        draw("sokoban", ("x",))
    with pytest.raises(ValueError, match="train_categories: no task of split"):
        draw("textcraft", ("depth-9",))


def test_categories_are_checked_before_any_work() -> None:
    config = TrainConfig(env="textcraft", val_split="test", val_categories=["depth-9"])
    with pytest.raises(ValueError, match="val_categories: no task of split 'test'"):
        config.check()
    config = TrainConfig(env="textcraft", val_split="test", train_categories=["depth-0"])
    with pytest.raises(ValueError, match="train_categories: no task of split 'train'"):
        config.check()
    TrainConfig(env="textcraft", val_split="test", val_categories=["depth-1"]).check()


def test_validation_plays_only_the_val_categories(tmp_path: Path) -> None:
    import csv
    import json

    from agentbench_rl.envs import env_class

    metrics = train(tiny_config(val_categories=["hard"], val_limit=2), tmp_path / "run")
    folder = tmp_path / "run" / "val" / "iter-0001"
    assert json.loads((folder / "config.json").read_text())["categories"] == ["hard"]
    hard = {t for t, c in env_class("sokoban").task_categories("val").items() if c == "hard"}
    with open(folder / "episodes.csv", newline="") as handle:
        played = [row["task_id"] for row in csv.DictReader(handle)]
    assert len(played) == 2 and set(played) <= hard
    # two groups of two: the share of groups whose members all succeeded or all failed
    assert metrics[1]["train/uniform_groups"] in (0.0, 0.5, 1.0)


def test_a_non_finite_gradient_is_refused_not_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentbench_rl.train import ppo

    real_loss = ppo.ppo_loss

    def poisoned(*args: Any, **kwargs: Any) -> Any:
        loss, stats = real_loss(*args, **kwargs)
        return loss * float("nan"), stats

    monkeypatch.setattr(ppo, "ppo_loss", poisoned)
    with pytest.raises(FloatingPointError, match=r"not finite .* no update was applied"):
        train(tiny_config(), tmp_path / "run")

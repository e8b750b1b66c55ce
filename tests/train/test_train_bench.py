"""The cost benchmarks run and report consistent parts: BiPACE against GiGPO, choice scoring."""

from __future__ import annotations

import io

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from agentbench_rl.bench.train import measure  # noqa: E402
from agentbench_rl.train.config import config_from_dict  # noqa: E402


@pytest.mark.parametrize("candidate", ["bipace", "rloo"])
def test_candidate_cost_parts_add_up(candidate: str) -> None:
    # Before, the pair was fixed in code (compute("gigpo"), compute("bipace")); any registered
    # estimator is now a candidate and the base is the config's estimator.
    config = config_from_dict(
        {
            "estimator": "grpo",
            "n_tasks": 2,
            "group_size": 2,
            "max_steps": 3,
            "action_mode": "choose",
            "tiny": {
                "hidden_size": 32,
                "layers": 1,
                "heads": 2,
                "kv_heads": 1,
                "intermediate_size": 64,
                "tokenizer_episodes": 2,
            },
        }
    )
    results = measure(config, repeats=1, candidate=candidate)
    assert results["rows"] >= 4
    base = results["rollout_base_s"] + results["estimator_base_s"] + results["update_s"]
    assert results["base_iteration_s"] == pytest.approx(base)
    extra = results["rollout_candidate_s"] - results["rollout_base_s"]
    extra += results["estimator_candidate_s"] - results["estimator_base_s"]
    assert results["candidate_extra_s"] == pytest.approx(extra)
    assert results["candidate_extra_percent"] == pytest.approx(100 * extra / base)


def test_choice_scoring_bench_times_three_ways_that_agree() -> None:
    from rich.console import Console

    from agentbench_rl.bench.choices import run

    figures = run(Console(file=io.StringIO()), env="sokoban", rows=6, repeats=1)
    ways = ("equal-length groups", "one padded batch", "one row at a time")
    assert all(figures[way] > 0 for way in ways)
    assert figures["speedup_over_batch"] == pytest.approx(
        figures["one padded batch"] / figures["equal-length groups"]
    )
    assert figures["max_score_difference"] < 1e-4  # the same scores, however batched

"""``bench eval`` runs both of its comparisons end to end (small sizes; the figures are the
bench's job, not the test's)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from agentbench_rl.bench.eval import measure_hf, measure_openai, serve_chat  # noqa: E402
from agentbench_rl.models.tiny import TinyModelConfig  # noqa: E402

SMALL = TinyModelConfig(
    hidden_size=32, layers=1, heads=2, kv_heads=1, intermediate_size=64, tokenizer_episodes=2
)


@pytest.mark.slow  # builds the val levels and a tiny model: ~20 s on two loaded cores
def test_hf_comparison_times_both_sides(tmp_path: Path) -> None:
    seconds = measure_hf(levels=3, batch_size=2, repeats=1, work=tmp_path, tiny=SMALL)
    assert set(seconds) == {"harness", "trainer"} and min(seconds.values()) > 0
    assert (tmp_path / "harness-0" / "summary.json").exists()


def test_openai_comparison_plays_the_same_episodes(tmp_path: Path) -> None:
    # measure_openai raises when the two sides' episodes differ
    seconds = measure_openai(3, 3, latency=0.0, max_steps=2, repeats=1, work=tmp_path)
    assert set(seconds) == {"concurrent", "sequential"}


def test_latency_server_answers_an_admissible_action_per_seed() -> None:
    from agentbench_rl.agents.openai_http import ChatClient

    prompt = "Observation:\n#P#\nAdmissible actions: up, down, left, right\nAnswer"
    with serve_chat(latency=0.0) as server:
        client = ChatClient(server.base_url)
        answers = {client.chat("m", prompt, seed=seed) for seed in range(12)}
        again = {client.chat("m", prompt, seed=seed) for seed in range(12)}
    assert answers == again  # the same request, the same answer
    assert answers <= {
        f"<think></think><action>{a}</action>" for a in ("up", "down", "left", "right")
    }
    assert len(answers) > 1  # 12 seeds over 4 actions: the seed picks

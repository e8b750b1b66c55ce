"""``hf:`` agents in the harness: a saved tiny policy, both action modes, spec errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
torch.set_num_threads(1)

from agentbench_rl.agents import load_agent  # noqa: E402
from agentbench_rl.agents.hf import HFAgent, parse_spec  # noqa: E402
from agentbench_rl.agents.prompting import HistoryStep, PromptConfig  # noqa: E402
from agentbench_rl.harness.evaluate import EvalConfig, evaluate  # noqa: E402
from agentbench_rl.models.policy import Policy  # noqa: E402
from agentbench_rl.models.tiny import TinyModelConfig, build_tiny  # noqa: E402

SMALL = TinyModelConfig(
    hidden_size=32, layers=1, heads=2, kv_heads=1, intermediate_size=64, tokenizer_episodes=2
)


@pytest.fixture(scope="module")
def saved_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    prompt = PromptConfig(history_observations=False, mode="choose", instruction="")
    model, tokenizer = build_tiny("sokoban", {}, prompt, SMALL, seed=0)
    folder = tmp_path_factory.mktemp("policy")
    Policy(model, tokenizer, prompt, hidden_layer=1, max_new_tokens=5).save(folder)
    return folder


def test_spec_parsing_and_errors() -> None:
    assert parse_spec("hf:Qwen/Qwen2.5-1.5B-Instruct") == ("Qwen/Qwen2.5-1.5B-Instruct", {})
    with pytest.raises(ValueError, match="unknown option"):
        parse_spec("hf:x?colour=red")
    with pytest.raises(ValueError, match="mode must be generate or choose"):
        parse_spec("hf:x?mode=guess")
    with pytest.raises(ValueError, match="expected hf:"):
        parse_spec("hf:")


def test_missing_model_fails_with_one_line(tmp_path: Path) -> None:
    agent = HFAgent(f"hf:{tmp_path / 'nothing-here'}")
    with pytest.raises(ValueError, match="cannot load the model"):
        _ = agent.policy


def test_saved_policy_plays_through_the_harness_reproducibly(
    saved_policy: Path, tmp_path: Path
) -> None:
    agent = load_agent(f"hf:{saved_policy}")
    assert isinstance(agent, HFAgent)
    config = EvalConfig(
        env="sokoban", split="val", agent=f"hf:{saved_policy}", limit=2, max_steps=4
    )
    first = evaluate(config, tmp_path / "a")
    second = evaluate(config, tmp_path / "b")
    assert (tmp_path / "a" / "episodes.csv").read_text() == (
        tmp_path / "b" / "episodes.csv"
    ).read_text()
    assert first["n_episodes"] == 2 and first["invalid_action_rate"] == 0.0  # choose mode
    assert second["success"]["mean"] == first["success"]["mean"]


def test_stored_settings_and_overrides(saved_policy: Path) -> None:
    agent = HFAgent(f"hf:{saved_policy}")
    assert agent.policy.prompt.mode == "choose"  # from agentbench_policy.json
    assert agent.policy.prompt.history_observations is False
    generating = HFAgent(f"hf:{saved_policy}?mode=generate&temperature=0.5")
    assert generating.policy.prompt.mode == "generate"
    assert generating.policy.temperature == 0.5


class _Env:
    env_name = "sokoban"


def test_prompt_shows_the_drivers_history(saved_policy: Path) -> None:
    # The episode driver owns the history; the agent builds its prompt from what it is given.
    agent = HFAgent(f"hf:{saved_policy}?greedy=true")
    assert agent.reads_history and agent.answer_format == "choose"
    agent.begin_episode(_Env(), seed=0)  # type: ignore[arg-type]
    info: dict[str, Any] = {"admissible_actions": ["up", "down"]}
    first = agent.act("#P#", info)
    assert first in ("<action>up</action>", "<action>down</action>")
    prompts: list[str] = []
    original = agent.policy.act

    def spy(prompt_texts: Any, *args: Any, **kwargs: Any) -> Any:
        prompts.extend(prompt_texts)
        return original(prompt_texts, *args, **kwargs)

    agent.policy.act = spy  # type: ignore[method-assign]
    agent.act("#_P#", info, [HistoryStep("#P#", "down")])
    assert "Your last actions: down" in prompts[0]  # the stored policy shows actions only

"""``hf:`` agents in the harness: a saved tiny policy, both action modes, spec errors."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
torch.set_num_threads(1)

from agentbench_rl.agents import load_agent  # noqa: E402
from agentbench_rl.agents.hf import HFAgent, parse_spec  # noqa: E402
from agentbench_rl.cli import main  # noqa: E402
from agentbench_rl.envs.spec import EnvSpec  # noqa: E402
from agentbench_rl.harness.agent_errors import AgentError  # noqa: E402
from agentbench_rl.harness.config import EvalConfig, RunOptions  # noqa: E402
from agentbench_rl.harness.evaluate import evaluate  # noqa: E402
from agentbench_rl.models.policy import POLICY_FILE, Policy  # noqa: E402
from agentbench_rl.models.tiny import TinyModelConfig, build_tiny  # noqa: E402
from agentbench_rl.prompting import HistoryStep, PromptConfig  # noqa: E402
from agentbench_rl.rollout.scripted import tokenizer_texts  # noqa: E402

SMALL = TinyModelConfig(
    hidden_size=32, layers=1, heads=2, kv_heads=1, intermediate_size=64, tokenizer_episodes=2
)


@pytest.fixture(scope="module")
def saved_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    prompt = PromptConfig(history_observations=False, mode="choose", instruction="")
    model, tokenizer = build_tiny(
        tokenizer_texts(
            EnvSpec(name="sokoban", split="train"), prompt, SMALL.tokenizer_episodes, 0
        ),
        SMALL,
        0,
    )
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
    for memory in ("0", "1.5", "lots", "nan"):  # refused when the spec is read, before a load
        with pytest.raises(ValueError, match=r"memory must be in \(0, 1\]"):
            parse_spec(f"hf:x?engine=vllm&memory={memory}")


def test_an_unknown_model_with_no_hub_to_reach_fails_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Offline, an unknown ``hf:`` id took 70 s and printed 10 raw retry lines (issue 63)."""
    import time

    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    began = time.monotonic()
    with pytest.raises(ValueError, match=r"http://127\.0\.0\.1:9 cannot be reached") as raised:
        _ = HFAgent("hf:nobody/no-such-model").policy
    assert time.monotonic() - began < 10 and "\n" not in str(raised.value)


def test_missing_model_fails_with_one_line(tmp_path: Path) -> None:
    agent = HFAgent(f"hf:{tmp_path / 'nothing-here'}")
    with pytest.raises(ValueError, match="cannot load the model"):
        _ = agent.policy


def _broken_copies(saved_policy: Path, root: Path) -> list[Path]:
    """A missing folder, a checkpoint with truncated weights, one with unreadable settings."""
    truncated, settings = root / "truncated", root / "settings"
    for folder in (truncated, settings):
        shutil.copytree(saved_policy, folder)
    weights = truncated / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    (settings / POLICY_FILE).write_text("{", "utf-8")
    return [root / "nothing-here", truncated, settings]


def test_a_model_that_cannot_load_stops_the_run_before_any_episode(
    saved_policy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before the fix the model loaded on the first episode: the run wrote config.json and
    # agent.json, then stopped with "agent hf:... raised ValueError on task val-0003, seed 0".
    for target in _broken_copies(saved_policy, tmp_path):
        spec = f"hf:{target}"
        out = tmp_path / f"out-{target.name}"
        config = EvalConfig(env="sokoban", split="val", agent=spec, limit=2, max_steps=3)
        with pytest.raises(ValueError) as raised:
            evaluate(config, out)
        assert not isinstance(raised.value, AgentError)
        message = str(raised.value)
        assert message.startswith(f"agent '{spec}': cannot load the model '{target}' (")
        assert "\n" not in message and not out.exists()
        with pytest.raises(SystemExit) as exited:
            main(["eval", "--env", "sokoban", "--split", "val", "--agent", spec, "--out", str(out)])
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert exited.value.code == 2 and len(lines) == 1, err
        assert "cannot load the model" in lines[0] and "raised" not in lines[0]
        assert not out.exists()


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
    assert first.n_episodes == 2 and first.invalid_action_rate == 0.0  # choose mode
    assert second.success.mean == first.success.mean


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


@pytest.mark.parametrize("options", ["", "?mode=generate", "?mode=generate&greedy=true"])
def test_batched_hf_agent_writes_the_sequential_bytes(
    saved_policy: Path, tmp_path: Path, options: str
) -> None:
    # Sampling agents draw per (episode, step) from their own generator (choose: the row's
    # multinomial; generate: RowSampler), so batch neighbours never change an episode.
    config = EvalConfig(
        env="sokoban", split="val", agent=f"hf:{saved_policy}{options}", limit=5, max_steps=3
    )
    evaluate(config, tmp_path / "sequential")
    evaluate(config, tmp_path / "batched", RunOptions(batch_size=3))
    for name in ("episodes.csv", "summary.json"):
        assert (tmp_path / "batched" / name).read_bytes() == (
            tmp_path / "sequential" / name
        ).read_bytes()


def test_one_batched_call_per_step(saved_policy: Path, tmp_path: Path) -> None:
    agent = HFAgent(f"hf:{saved_policy}")
    calls: list[int] = []
    original = agent.policy.act

    def count(prompt_texts: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(len(prompt_texts))
        return original(prompt_texts, *args, **kwargs)

    agent.policy.act = count  # type: ignore[method-assign]
    config = EvalConfig(env="sokoban", split="val", agent=agent.name, limit=4, max_steps=3)
    evaluate(config, tmp_path / "run", RunOptions(batch_size=4), agent=agent)
    assert calls[0] == 4 and len(calls) <= 3  # every live episode in one forward per step


def test_vllm_engine_option_is_checked(saved_policy: Path) -> None:
    with pytest.raises(ValueError, match="engine must be hf or vllm"):
        parse_spec("hf:x?engine=tgi")
    assert parse_spec("hf:x?engine=vllm")[1] == {"engine": "vllm"}
    with pytest.raises(ValueError, match="generate mode only"):
        _ = HFAgent(f"hf:{saved_policy}?engine=vllm").policy  # the saved policy chooses
    if not torch.cuda.is_available():  # no GPU (or no vLLM): one line, no traceback
        with pytest.raises(ValueError, match=r"vLLM|GPU"):
            _ = HFAgent(f"hf:{saved_policy}?engine=vllm&mode=generate").policy


@pytest.mark.gpu
def test_vllm_engine_batches_write_the_sequential_bytes(saved_policy: Path, tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    config = EvalConfig(
        env="sokoban",
        split="val",
        agent=f"hf:{saved_policy}?engine=vllm&mode=generate",
        limit=6,
        max_steps=3,
    )
    evaluate(config, tmp_path / "sequential")
    evaluate(config, tmp_path / "batched", RunOptions(batch_size=6))
    assert (tmp_path / "batched" / "episodes.csv").read_bytes() == (
        tmp_path / "sequential" / "episodes.csv"
    ).read_bytes()


@pytest.mark.parametrize("mode", ["choose", "generate"])
def test_rows_draw_from_their_own_generators(saved_policy: Path, mode: str) -> None:
    # The episode CSV of a random tiny model hides what it generated; compare the answers.
    policy = HFAgent(f"hf:{saved_policy}?mode={mode}").policy
    prompts = ["Observation: #P#", "a longer prompt, padded less than the other " * 3, "x"]
    admissible = [["up", "down"], ["left", "right", "up", "down"], ["down", "up"]]

    def generators() -> list[Any]:
        return [torch.Generator().manual_seed(seed) for seed in (11, 12, 13)]

    together = policy.act(prompts, admissible, generators()).responses
    alone = [
        policy.act([prompt], [actions], [generator]).responses[0]
        for prompt, actions, generator in zip(prompts, admissible, generators(), strict=True)
    ]
    assert together == alone
    if mode == "generate":  # 5 tokens of 512: other seeds give other text (choose may tie)
        others = [torch.Generator().manual_seed(seed) for seed in (21, 22, 23)]
        assert policy.act(prompts, admissible, others).responses != together

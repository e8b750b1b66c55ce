"""The GPU paths that need neither vLLM nor verl: the trainer in bf16 on the device, batched
``hf:`` evaluation, hidden states and the vision-language policy there.

``pytest -m gpu`` runs them on a CUDA machine (``bench gpu`` does, on a lent one); with
``AGENTBENCH_TEST_DEVICE=cpu`` they run on the CPU (``bench gpu --dry-run``, in CI), so they
cannot rot between lent machines. Without either they skip.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from agentbench_rl.bench.gpu import TEST_DEVICE_VARIABLE  # noqa: E402
from agentbench_rl.envs import make  # noqa: E402
from agentbench_rl.envs.spec import EnvSpec  # noqa: E402
from agentbench_rl.harness.config import EvalConfig, RunOptions  # noqa: E402
from agentbench_rl.harness.evaluate import evaluate  # noqa: E402
from agentbench_rl.models.policy import Policy  # noqa: E402
from agentbench_rl.models.tiny import TinyModelConfig, TinyVLConfig, build_tiny  # noqa: E402
from agentbench_rl.models.vision import build_tiny_vl  # noqa: E402
from agentbench_rl.prompting import PromptConfig, build_prompt  # noqa: E402
from agentbench_rl.rollout.scripted import tokenizer_texts  # noqa: E402

pytestmark = pytest.mark.gpu

SMALL = TinyModelConfig(
    hidden_size=32, layers=2, heads=2, kv_heads=1, intermediate_size=64, tokenizer_episodes=2
)


@pytest.fixture(scope="module")
def device() -> str:
    """``cuda``, or ``cpu`` when the rehearsal asks for it; otherwise the test skips."""
    if os.environ.get(TEST_DEVICE_VARIABLE) == "cpu":
        return "cpu"
    if not torch.cuda.is_available():
        pytest.skip(f"needs a CUDA GPU (or {TEST_DEVICE_VARIABLE}=cpu)")
    return "cuda"


def _tiny_policy(mode: str = "generate") -> Policy:
    prompt = PromptConfig(history_observations=False, mode=mode)  # type: ignore[arg-type]
    texts = tokenizer_texts(
        EnvSpec(name="sokoban", split="train"), prompt, SMALL.tokenizer_episodes, 0
    )
    model, tokenizer = build_tiny(texts, SMALL, 0)
    return Policy(model, tokenizer, prompt, hidden_layer=1, max_new_tokens=6)


def test_training_in_bf16_on_the_device(device: str, tmp_path: Path) -> None:
    """``train`` in bf16 on the device: one iteration, validation and a checkpoint; the first
    minibatch's PPO ratio is 1 up to bf16's rounding (sampling and the training forward agree)."""
    from agentbench_rl.cli import main

    overrides = [
        f"device={device}",
        "dtype=bfloat16",
        "iterations=1",
        "n_tasks=2",
        "group_size=2",
        "max_steps=2",
        "max_new_tokens=6",
        "minibatch_size=1024",
        "val_every=1",
        "val_limit=2",
        "tiny.tokenizer_episodes=2",
        *(f"tiny.{key}={getattr(SMALL, key)}" for key in ("hidden_size", "layers", "heads")),
        "tiny.kv_heads=1",
        "tiny.intermediate_size=64",
    ]
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--env", "sokoban", "--out", str(out), *overrides])
    assert exit_info.value.code == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in rows] == [0, 1]
    trained = rows[1]
    assert all(np.isfinite(value) for value in trained.values() if isinstance(value, float))
    assert trained["ppo/approx_kl"] < 1e-3  # exactly 0 in float32 (tests/train/)
    assert (out / "checkpoint").is_dir() and (out / "done.json").is_file()


def test_batched_evaluation_on_the_device_writes_the_sequential_bytes(
    device: str, tmp_path: Path
) -> None:
    """An ``hf:`` policy on the device plays a batch of episodes exactly as one at a time (the
    claim the CPU holds bitwise: a row's answers depend on its own episode only)."""
    folder = tmp_path / "policy"
    _tiny_policy().save(folder)
    spec = f"hf:{folder}?device={device}"
    config = EvalConfig(env="sokoban", split="val", agent=spec, limit=4, max_steps=3)
    evaluate(config, tmp_path / "sequential")
    evaluate(config, tmp_path / "batched", RunOptions(batch_size=4))
    assert (tmp_path / "batched" / "episodes.csv").read_bytes() == (
        tmp_path / "sequential" / "episodes.csv"
    ).read_bytes()


def test_hidden_states_on_the_device_match_the_cpu(device: str) -> None:
    """BiPACE's hidden states (last prompt token, float32) are the CPU's to rounding."""
    policy = _tiny_policy("choose")
    env = make("sokoban", split="val")
    prompts, admissible = [], []
    for task in ("val-0000", "val-0001", "val-0002"):
        observation, info = env.reset(options={"task_id": task})
        actions = info["admissible_actions"]
        prompts.append(build_prompt("sokoban", observation, [], actions, policy.prompt))
        admissible.append(actions)

    def hidden() -> Any:
        out = policy.act(prompts, admissible, torch.Generator().manual_seed(0), capture_hidden=True)
        return out.hidden

    on_cpu = hidden()
    policy.model.to(device)
    on_device = hidden()
    assert on_cpu is not None and on_device is not None
    assert on_device.shape == (3, SMALL.hidden_size)
    np.testing.assert_allclose(on_device, on_cpu, atol=1e-4, rtol=1e-4)


def test_vision_language_policy_on_the_device(device: str) -> None:
    """tiny-vl on the device in bf16: a frame in the prompt, an answer in both modes."""
    sizes = TinyVLConfig(tokenizer_episodes=2)
    texts = tokenizer_texts(EnvSpec(name="visual_sokoban", split="val"), PromptConfig(), 2, 0)
    model, tokenizer, image_processor = build_tiny_vl(texts, sizes, 0)
    model = model.to(device=device, dtype=torch.bfloat16)
    env = make("visual_sokoban", split="val")
    observation, info = env.reset(options={"task_id": "val-0000"})
    actions = info["admissible_actions"]
    for mode in ("choose", "generate"):
        prompt = PromptConfig(mode=mode)  # type: ignore[arg-type]
        policy = Policy(model, tokenizer, prompt, max_new_tokens=4, image_processor=image_processor)
        text = build_prompt("visual_sokoban", observation, [], actions, prompt)
        out = policy.act([text, text], [actions, actions], torch.Generator().manual_seed(0))
        assert len(out.responses) == 2 and all(len(ids) > 0 for ids in out.response_ids)

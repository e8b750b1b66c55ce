"""The vLLM rollout path's pieces with a fake engine (no vLLM needed); the same paths on vLLM's
own engine are ``tests/train/test_vllm_real.py`` (``.ci/vllm``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
torch.set_num_threads(1)

from agentbench_rl.envs.spec import EnvSpec  # noqa: E402
from agentbench_rl.models.policy import Policy  # noqa: E402
from agentbench_rl.models.tiny import TinyModelConfig, TinyVLConfig, build_tiny  # noqa: E402
from agentbench_rl.models.vision import build_tiny_vl  # noqa: E402
from agentbench_rl.models.vllm_engine import (  # noqa: E402
    VLLMActor,
    prompt_batch,
    push_weights,
    sampling_kwargs,
    weight_items,
)
from agentbench_rl.prompting import PromptConfig  # noqa: E402
from agentbench_rl.rollout.scripted import tokenizer_texts  # noqa: E402

SMALL = TinyModelConfig(
    hidden_size=32, layers=1, heads=2, kv_heads=1, intermediate_size=64, tokenizer_episodes=2
)


@pytest.fixture(scope="module")
def policy() -> Policy:
    prompt = PromptConfig(mode="generate", history_observations=False, instruction="")
    model, tokenizer = build_tiny(
        tokenizer_texts(
            EnvSpec(name="sokoban", split="train"), prompt, SMALL.tokenizer_episodes, 0
        ),
        SMALL,
        0,
    )
    return Policy(model, tokenizer, prompt, hidden_layer=1, temperature=0.8, max_new_tokens=7)


class FakeLLM:
    """Stands in for ``vllm.LLM``: ``generate`` answers ``<think></think><action>up</action>``
    as token ids with made-up log-probs; ``collective_rpc("load_policy_weights")`` records the
    weights (one worker), ``reset_prefix_cache`` counts its calls."""

    def __init__(self, folder: str, tokenizer: Any, take: int | None = None) -> None:
        self.folder = folder
        self.tokenizer = tokenizer
        self.loaded: dict[str, torch.Tensor] = {}
        self.take = take  # how many weights the worker claims to load (None: all)
        self.resets = 0
        self.calls: list[tuple[list[dict[str, list[int]]], list[dict[str, Any]]]] = []

    def collective_rpc(self, method: str, args: tuple[Any, ...] = ()) -> list[int]:
        assert method == "load_policy_weights"
        (items,) = args
        self.loaded.update({name: tensor.clone() for name, tensor in items})
        return [len(items) if self.take is None else self.take]

    def reset_prefix_cache(self) -> bool:
        self.resets += 1
        return True

    def generate(self, prompts: Any, params: Any, use_tqdm: bool = False) -> list[Any]:
        self.calls.append((prompts, params))
        tokens = self.tokenizer("<think></think><action>up</action>")["input_ids"]
        outputs = []
        for _ in prompts:
            logprobs = [
                {token: SimpleNamespace(logprob=-0.1 * (k + 1))} for k, token in enumerate(tokens)
            ]
            sample = SimpleNamespace(
                token_ids=tokens,
                text="<think></think><action>up</action>",
                logprobs=logprobs,
            )
            outputs.append(SimpleNamespace(outputs=[sample]))
        return outputs


def test_sampling_kwargs() -> None:
    assert sampling_kwargs(0.8, 0.95, 128, seed=3) == {
        "n": 1,
        "temperature": 0.8,
        "top_p": 0.95,
        "max_tokens": 128,
        "seed": 3,
        "logprobs": 0,
        "skip_special_tokens": True,
    }
    greedy = sampling_kwargs(0.8, 0.95, 128, seed=3, greedy=True)
    assert (greedy["temperature"], greedy["top_p"]) == (0.0, 1.0)
    banned = sampling_kwargs(0.8, 0.95, 128, seed=3, bad_words=("<|image_pad|>",))
    assert banned["bad_words"] == ["<|image_pad|>"]


def test_prompt_batch_is_token_ids() -> None:
    assert prompt_batch([[1, 2, 3], []]) == [
        {"prompt_token_ids": [1, 2, 3]},
        {"prompt_token_ids": []},
    ]


def test_weight_items_use_hf_names_and_skip_the_tied_head(policy: Policy) -> None:
    items = dict(weight_items(policy.model))
    assert "lm_head.weight" not in items  # tied to the embeddings
    assert "model.embed_tokens.weight" in items
    assert "model.layers.0.self_attn.q_proj.weight" in items
    assert "model.layers.0.mlp.gate_proj.weight" in items
    state = policy.model.state_dict()
    assert set(items) == set(state) - {"lm_head.weight"}


def test_weight_items_strip_wrapper_prefixes() -> None:
    class Wrapped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.module = torch.nn.Linear(2, 2)
            self.config = SimpleNamespace(tie_word_embeddings=False)

    names = [name for name, _ in weight_items(Wrapped())]
    assert names == ["weight", "bias"]


def test_push_weights_loads_every_weight_and_drops_the_prefix_cache(policy: Policy) -> None:
    llm = FakeLLM("x", policy.tokenizer)
    push_weights(llm, list(weight_items(policy.model)))
    assert torch.equal(
        llm.loaded["model.embed_tokens.weight"],
        policy.model.state_dict()["model.embed_tokens.weight"],
    )
    assert llm.resets == 1  # cached prompt states of the old weights must go
    short = FakeLLM("x", policy.tokenizer, take=3)
    with pytest.raises(RuntimeError, match="vLLM workers loaded \\[3\\] of"):
        push_weights(short, list(weight_items(policy.model)))


def test_actor_samples_syncs_and_captures_hidden(policy: Policy) -> None:
    engines: list[FakeLLM] = []

    def factory(folder: str) -> FakeLLM:
        engines.append(FakeLLM(folder, policy.tokenizer))
        return engines[-1]

    actor = VLLMActor(policy, engine_factory=factory, params_factory=dict)
    prompts = ["Observation:\n#P#", "Observation:\n#_P#"]
    out = actor.act(prompts, [["up"]] * 2, torch.Generator().manual_seed(0), capture_hidden=True)
    llm = engines[0]
    sent_prompts, sent_params = llm.calls[0]
    assert sent_prompts == prompt_batch([policy.encode_prompt(p) for p in prompts])
    assert [p["temperature"] for p in sent_params] == [0.8, 0.8]
    assert [p["max_tokens"] for p in sent_params] == [7, 7]
    assert all("bad_words" not in p for p in sent_params)  # a text model bans nothing
    assert len({p["seed"] for p in sent_params}) == 2  # one seed per row
    assert out.responses == ["<think></think><action>up</action>"] * 2
    assert out.format_ok == [True, True]
    assert np.allclose(out.logprobs[0][:3], [-0.1, -0.2, -0.3])
    assert out.hidden is not None and out.hidden.shape == (2, SMALL.hidden_size)
    # the hidden state is the policy's own prompt forward
    policy_out = policy.act(prompts, [["up"]] * 2, torch.Generator(), capture_hidden=True)
    assert policy_out.hidden is not None
    assert np.allclose(out.hidden, policy_out.hidden, atol=1e-5)
    # same generator seed, same per-row seeds
    actor.act(prompts, [["up"]] * 2, torch.Generator().manual_seed(0))
    assert [p["seed"] for p in llm.calls[1][1]] == [p["seed"] for p in sent_params]
    with torch.no_grad():
        for parameter in policy.model.parameters():
            parameter.add_(1.0)
    actor.sync()
    assert torch.equal(
        llm.loaded["model.norm.weight"], policy.model.state_dict()["model.norm.weight"]
    )


def test_vision_language_rows_ban_the_vision_tokens() -> None:
    """vLLM encodes each ``bad_words`` string with the model's tokenizer and masks the result:
    each must encode to exactly one of the four vision placeholder ids, and together they must
    cover all four (a sampled ``<|image_pad|>`` breaks the training forward's M-RoPE)."""
    from agentbench_rl.envs import make
    from agentbench_rl.prompting import build_prompt

    prompt = PromptConfig(mode="generate", history_observations=False, instruction="")
    tiny = TinyVLConfig(
        hidden_size=32, layers=1, vision_depth=1, vision_hidden_size=16, tokenizer_episodes=2
    )
    model, tokenizer, processor = build_tiny_vl(
        tokenizer_texts(
            EnvSpec(name="visual_sokoban", split="train"), prompt, tiny.tokenizer_episodes, 0
        ),
        tiny,
        0,
    )
    policy = Policy(model, tokenizer, prompt, max_new_tokens=7, image_processor=processor)
    engines: list[FakeLLM] = []

    def factory(folder: str) -> FakeLLM:
        engines.append(FakeLLM(folder, tokenizer))
        return engines[-1]

    actor = VLLMActor(policy, engine_factory=factory, params_factory=dict)
    env = make("visual_sokoban", split="test")
    observation, info = env.reset(options={"task_id": "test-0000"})
    row = build_prompt("visual_sokoban", observation, [], info["admissible_actions"], prompt)
    actor.act([row, row], [["up"]] * 2, torch.Generator().manual_seed(0))
    sent_prompts, sent_params = engines[0].calls[0]
    assert "multi_modal_data" in sent_prompts[0]
    vision_ids = {
        model.config.image_token_id,
        model.config.video_token_id,
        model.config.vision_start_token_id,
        model.config.vision_end_token_id,
    }
    for params in sent_params:
        encoded = [tokenizer.encode(w, add_special_tokens=False) for w in params["bad_words"]]
        assert all(len(ids) == 1 for ids in encoded), encoded
        assert {ids[0] for ids in encoded} == vision_ids


def test_without_vllm_the_engine_error_is_clear(policy: Policy) -> None:
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r'pip install -e "\.\[vllm\]"'):
            VLLMActor(policy)
    else:  # pragma: no cover - only where vLLM is installed
        pytest.skip("vLLM is installed here")

"""The vision-language policy on the tiny-vl model (a random-initialised Qwen2.5-VL built here):
frames reach the model, log-probs match between acting and training, hidden states, save/load,
``hf:`` evaluation on visual Sokoban, and (GPU only) the Qwen2.5-VL-3B baseline's pieces."""

from __future__ import annotations

import base64
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
torch.set_num_threads(1)

from agentbench_rl.envs import make  # noqa: E402
from agentbench_rl.envs.sokoban.render import render_image  # noqa: E402
from agentbench_rl.envs.spec import EnvSpec  # noqa: E402
from agentbench_rl.harness.config import EvalConfig  # noqa: E402
from agentbench_rl.harness.evaluate import evaluate  # noqa: E402
from agentbench_rl.models.policy import (  # noqa: E402
    Policy,
    choice_logprobs,
    load_saved_policy,
    pack,
    response_logprobs,
)
from agentbench_rl.models.tiny import TinyVLConfig  # noqa: E402
from agentbench_rl.models.vision import (  # noqa: E402
    ImagePromptIds,
    build_tiny_vl,
    image_token_count,
    pixel_bytes,
    vision_token_ids,
    vllm_prompt,
)
from agentbench_rl.prompting import Prompt, PromptConfig, build_prompt  # noqa: E402
from agentbench_rl.rollout.scripted import tokenizer_texts  # noqa: E402

SMALL = TinyVLConfig(
    hidden_size=32,
    layers=1,
    heads=2,
    kv_heads=1,
    intermediate_size=64,
    vision_depth=1,
    vision_hidden_size=16,
    vision_heads=1,
    vision_intermediate_size=32,
    tokenizer_episodes=2,
)
CHOOSE = PromptConfig(mode="choose", history_observations=False, instruction="")


@pytest.fixture(scope="module")
def tiny_vl() -> tuple[Any, Any, Any]:
    return build_tiny_vl(
        tokenizer_texts(
            EnvSpec(name="visual_sokoban", split="train"), CHOOSE, SMALL.tokenizer_episodes, 0
        ),
        SMALL,
        0,
    )


@pytest.fixture(scope="module")
def prompts() -> tuple[list[Prompt], list[list[str]]]:
    env = make("visual_sokoban", split="test")
    out, admissible = [], []
    for k in range(3):
        observation, info = env.reset(options={"task_id": f"test-{k:04d}"})
        out.append(
            build_prompt("visual_sokoban", observation, [], info["admissible_actions"], CHOOSE)
        )
        admissible.append(list(info["admissible_actions"]))
    return out, admissible


def policy_of(tiny_vl: tuple[Any, Any, Any], mode: str) -> Policy:
    model, tokenizer, processor = tiny_vl
    prompt = PromptConfig(mode=mode, history_observations=False, instruction="")  # type: ignore[arg-type]
    return Policy(model, tokenizer, prompt, max_new_tokens=6, image_processor=processor)


def test_frame_costs_nine_image_tokens(tiny_vl: tuple[Any, Any, Any]) -> None:
    # By hand: Qwen2-VL's smart_resize rounds 96 to the nearest multiple of 28 (84), which is
    # 6 x 6 patches of 14 px; the merger joins 2 x 2 patches, so 36 / 4 = 9 tokens.
    assert image_token_count(tiny_vl[2], 96, 96) == 9
    assert image_token_count(tiny_vl[2], 112, 112) == 16  # 8 x 8 patches / 4


def test_prompt_ids_carry_the_frame(
    tiny_vl: tuple[Any, Any, Any], prompts: tuple[list[Prompt], list[list[str]]]
) -> None:
    policy = policy_of(tiny_vl, "choose")
    ids = policy.encode_prompt(prompts[0][0])
    assert isinstance(ids, ImagePromptIds)
    assert ids.count(ids.image_token_id) == 9
    assert ids.image_grid_thw.tolist() == [[1, 6, 6]]
    assert np.array_equal(ids.images[0], prompts[0][0].images[0])
    # vLLM gets one placeholder per image and the frame itself
    request = vllm_prompt(ids)
    assert request["prompt_token_ids"].count(ids.image_token_id) == 1
    assert len(request["prompt_token_ids"]) == len(ids) - 8
    assert np.array_equal(np.asarray(request["multi_modal_data"]["image"][0]), ids.images[0])


def test_the_model_sees_the_frame(
    tiny_vl: tuple[Any, Any, Any], prompts: tuple[list[Prompt], list[list[str]]]
) -> None:
    """Same text, different frame: the action scores change (a text-only path would not)."""
    policy = policy_of(tiny_vl, "choose")
    text, actions = prompts[0][0], prompts[1][0]
    blank = Prompt(str(text), [np.zeros_like(text.images[0])])
    rows = [text, blank]
    out = policy.act(rows, [actions, actions], torch.Generator().manual_seed(0))
    packed = pack(out.prompt_ids, [out.response_ids[0]] * 2, policy.pad_id)
    logprobs, _ = response_logprobs(policy.model, packed)
    assert not torch.allclose(logprobs[0], logprobs[1])


@pytest.mark.parametrize("mode", ["choose", "generate"])
def test_training_forward_matches_acting(
    tiny_vl: tuple[Any, Any, Any], prompts: tuple[list[Prompt], list[list[str]]], mode: str
) -> None:
    """PPO's first ratio is 1: the training forward (M-RoPE positions over the padded batch)
    gives the log-probs the rollout sampled with: per token in ``generate`` mode, the one
    log-prob per row over the admissible actions in ``choose`` mode."""
    policy = policy_of(tiny_vl, mode)
    texts, admissible = prompts
    # rows of different lengths: one prompt without its frame pads the batch
    rows = [*texts, Prompt(str(texts[0]))]
    out = policy.act(
        rows, [*admissible, admissible[0]], torch.Generator().manual_seed(1), capture_hidden=True
    )
    assert out.hidden is not None and out.hidden.shape == (4, SMALL.hidden_size)

    def trained(first: int, last: int) -> list[np.ndarray]:
        if mode == "choose":
            assert out.choices is not None and out.chosen is not None
            logprobs, _ = choice_logprobs(
                policy.model,
                out.prompt_ids[first:last],
                out.choices[first:last],
                out.chosen[first:last],
                policy.pad_id,
                policy.temperature,
            )
            return [logprobs[k : k + 1].detach().numpy() for k in range(last - first)]
        packed = pack(out.prompt_ids[first:last], out.response_ids[first:last], policy.pad_id)
        logprobs, _ = response_logprobs(policy.model, packed)
        return [
            logprobs[k, : len(out.logprobs[first + k])].detach().numpy()
            for k in range(last - first)
        ]

    for row, value in enumerate(trained(0, len(rows))):
        np.testing.assert_allclose(value, out.logprobs[row], atol=1e-4)
    # a row alone scores as in the batch (padding and positions do not leak between rows)
    np.testing.assert_allclose(trained(0, 1)[0], out.logprobs[0], atol=1e-4)


def test_saved_policy_plays_visual_sokoban_as_hf_agent(
    tiny_vl: tuple[Any, Any, Any], tmp_path: Path
) -> None:
    policy = policy_of(tiny_vl, "choose")
    policy.save(tmp_path / "policy")
    loaded = load_saved_policy(str(tmp_path / "policy"))
    assert loaded.image_processor is not None and loaded.prompt.mode == "choose"
    spec = f"hf:{tmp_path / 'policy'}?device=cpu"
    config = EvalConfig(env="visual_sokoban", split="val", agent=spec, limit=2, max_steps=3)
    first = evaluate(config, tmp_path / "a")
    evaluate(config, tmp_path / "b")
    assert first.n_episodes == 2 and first.mean_steps <= 3
    assert (tmp_path / "a" / "episodes.csv").read_text() == (
        tmp_path / "b" / "episodes.csv"
    ).read_text()


class VisionChatServer(ThreadingHTTPServer):
    """``/v1/models`` and ``/v1/chat/completions`` on 127.0.0.1, answered by the tiny-vl policy:
    image parts are decoded from their base64 PNG back into frames, as vLLM's server does."""

    def __init__(self, policy: Policy) -> None:
        super().__init__(("127.0.0.1", 0), _VisionHandler)
        self.policy = policy
        self.frames: list[np.ndarray] = []
        self.texts: list[str] = []
        self.lock = threading.Lock()


class _VisionHandler(BaseHTTPRequestHandler):
    server: VisionChatServer

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _answer(self, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._answer({"object": "list", "data": [{"id": "tiny-vl", "object": "model"}]})

    def do_POST(self) -> None:
        from PIL import Image

        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        parts = request["messages"][-1]["content"]
        text = "".join(p["text"] for p in parts if p["type"] == "text")
        frames = []
        for part in parts:
            if part["type"] == "image_url":
                data = part["image_url"]["url"].removeprefix("data:image/png;base64,")
                frames.append(np.asarray(Image.open(io.BytesIO(base64.b64decode(data)))))
        generator = torch.Generator().manual_seed(int(request.get("seed", 0)))
        with self.server.lock:
            self.server.frames.extend(frames)
            self.server.texts.append(text)
            out = self.server.policy.act([Prompt(text, frames)], [["up"]], generator)
        message = {"role": "assistant", "content": out.responses[0]}
        self._answer({"object": "chat.completion", "choices": [{"index": 0, "message": message}]})


def test_openai_agent_sends_frames_as_image_parts(
    tiny_vl: tuple[Any, Any, Any], tmp_path: Path
) -> None:
    server = VisionChatServer(policy_of(tiny_vl, "generate"))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        config = EvalConfig(
            env="visual_sokoban",
            split="val",
            agent=f"openai:{base_url}#tiny-vl?max_tokens=6",
            limit=1,
            max_steps=2,
        )
        summary = evaluate(config, tmp_path / "run")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    assert summary.n_episodes == 1 and 1 <= len(server.frames) <= 2
    # the first frame is the env's render of the grid the first prompt shows
    lines = server.texts[0].splitlines()
    grid = "\n".join(lines[lines.index("Observation:") + 1 : lines.index("Observation:") + 7])
    assert np.array_equal(server.frames[0], render_image(grid))  # every pixel arrived


def test_bench_compares_vision_and_text_iterations() -> None:
    from agentbench_rl.bench.train import compare_models
    from agentbench_rl.train.config import config_from_dict

    config = config_from_dict(
        {
            "env": "visual_sokoban",
            "model": "tiny-vl",
            "n_tasks": 1,
            "group_size": 2,
            "max_steps": 2,
            "action_mode": "choose",
            "bc": {"enabled": False},
            "tiny_vl": {"tokenizer_episodes": 2, "hidden_size": 32, "vision_depth": 1},
            "tiny": {"tokenizer_episodes": 2, "hidden_size": 32, "layers": 1},
        }
    )
    compared = compare_models(config, "tiny", repeats=1)
    assert compared["model_rows"] == compared["other_rows"] == 4  # 2 trajectories x 2 steps
    assert compared["ratio"] == pytest.approx(compared["model_s"] / compared["other_s"])
    # 4 rows, at most 4 distinct frames of 36 x 1176 float32 pixel values; the text model none
    assert 0 < compared["model_pixel_kb_per_row"] <= 36 * 1176 * 4 / 1000
    assert compared["other_pixel_kb_per_row"] == 0.0


@pytest.mark.gpu
def test_qwen25_vl_3b_baseline_starts(tmp_path: Path) -> None:
    """The 3B baseline's model class, processor and vLLM multimodal prompt (needs a GPU, the
    model in the Hugging Face cache and vLLM)."""
    vllm = pytest.importorskip("vllm")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from agentbench_rl.train.config import load_config
    from agentbench_rl.train.ppo import initial_policy

    config = load_config(Path("baselines/visual-sokoban-qwen2.5-vl-3b.yaml"), ["bc.enabled=false"])
    policy, _ = initial_policy(config, "cuda", None)
    assert type(policy.model).__name__ == "Qwen2_5_VLForConditionalGeneration"
    env = make("visual_sokoban", split="val")
    observation, info = env.reset(options={"task_id": "val-0000"})
    prompt = build_prompt(
        "visual_sokoban", observation, [], info["admissible_actions"], policy.prompt
    )
    ids = policy.encode_prompt(prompt)
    assert isinstance(ids, ImagePromptIds)
    llm = vllm.LLM(model=config.model, dtype="bfloat16", gpu_memory_utilization=0.3)
    params = vllm.SamplingParams(max_tokens=32, temperature=0.0)
    answer = llm.generate([vllm_prompt(ids)], params, use_tqdm=False)[0].outputs[0].text
    assert isinstance(answer, str) and answer


def test_train_tiny_vl_bc_ppo_and_validation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``train --env visual_sokoban --model tiny-vl --bc``: behaviour cloning, PPO with BiPACE
    (hidden states with the image in the prompt), validation through the harness, resume."""
    from agentbench_rl.cli import main

    out = tmp_path / "run"
    args = ["train", "--env", "visual_sokoban", "--model", "tiny-vl", "--estimator", "bipace"]
    overrides = [
        "iterations=1",
        "n_tasks=1",
        "group_size=2",
        "max_steps=3",
        "action_mode=choose",
        "bc.episodes=2",
        "bc.epochs=1",
        "bc.cache_dir=",
        "val_every=1",
        "val_limit=1",
        *(f"tiny_vl.{k}={v}" for k, v in vars(SMALL).items()),
    ]
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--bc", "--out", str(out), *overrides])
    assert exit_info.value.code in (0, None), capsys.readouterr().err
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in rows] == [0, 1]
    assert rows[0]["bc/rows"] > 0 and "val_success" in rows[1]
    assert (out / "checkpoint" / "policy" / "preprocessor_config.json").is_file()


def test_generate_never_writes_vision_placeholders(
    tiny_vl: tuple[Any, Any, Any], prompts: tuple[list[Prompt], list[list[str]]]
) -> None:
    """A sampled ``<|image_pad|>`` in an answer would be read as a slot for image features by the
    training forward; near-uniform sampling (temperature 1000) over 240 tokens would draw some."""
    model, tokenizer, processor = tiny_vl
    prompt = PromptConfig(mode="generate", history_observations=False, instruction="")
    policy = Policy(
        model, tokenizer, prompt, temperature=1000.0, max_new_tokens=60, image_processor=processor
    )
    texts, admissible = prompts
    rows = [*texts, texts[0]]
    out = policy.act(rows, [*admissible, admissible[0]], torch.Generator().manual_seed(3))
    placeholders = set(vision_token_ids(model))
    assert len(placeholders) == 4
    assert not placeholders & {t for ids in out.response_ids for t in ids}
    packed = pack(out.prompt_ids, out.response_ids, policy.pad_id)
    logprobs, _ = response_logprobs(model, packed, temperature=1000.0)
    np.testing.assert_allclose(
        logprobs[0, : len(out.logprobs[0])].detach().numpy(), out.logprobs[0], atol=1e-4
    )


def test_long_prompts_are_cut_but_never_inside_an_image(
    tiny_vl: tuple[Any, Any, Any], prompts: tuple[list[Prompt], list[list[str]]]
) -> None:
    """``max_prompt_tokens`` keeps a prompt's last tokens; an image the cut would split is
    dropped whole (its start, pads and end, its pixel values and grid), and what is left still
    acts and trains alike (M-RoPE positions over the cut prompt)."""
    model, tokenizer, _ = tiny_vl
    texts, admissible = prompts
    first, second = texts[0].images[0], texts[1].images[0]
    two_frames = Prompt(str(texts[0]), [first, second])
    whole = policy_of(tiny_vl, "choose").encode_prompt(two_frames)
    assert isinstance(whole, ImagePromptIds) and len(whole.images) == 2
    start, end = tokenizer.convert_tokens_to_ids(["<|vision_start|>", "<|vision_end|>"])
    spans = whole.image_spans()
    assert [(whole[a], whole[b - 1]) for a, b in spans] == [(start, end)] * 2
    assert [b - a for a, b in spans] == [11, 11]  # 9 pads (test above) + start + end

    def cut_to(limit: int) -> Policy:
        policy = policy_of(tiny_vl, "choose")
        policy.max_prompt_tokens = limit
        return policy

    # the cut falls before both images: plain last-n cut, both frames kept
    kept = cut_to(len(whole) - spans[0][0]).encode_prompt(two_frames)
    assert isinstance(kept, ImagePromptIds) and list(kept) == whole[spans[0][0] :]
    assert len(kept.images) == 2 and torch.equal(kept.pixel_values, whole.pixel_values)
    # the cut falls inside the first image: it goes whole, the second stays with its own patches
    policy = cut_to(len(whole) - spans[0][0] - 3)
    cut = policy.encode_prompt(two_frames)
    assert isinstance(cut, ImagePromptIds) and list(cut) == whole[spans[0][1] :]
    assert len(cut.images) == 1 and np.array_equal(cut.images[0], second)
    alone = policy_of(tiny_vl, "choose").encode_prompt(Prompt(str(texts[0]), [second]))
    assert isinstance(alone, ImagePromptIds)
    assert torch.equal(cut.pixel_values, alone.pixel_values)
    assert cut.image_grid_thw.tolist() == [[1, 6, 6]]
    out = policy.act([two_frames], [admissible[0]], torch.Generator().manual_seed(0))
    assert out.choices is not None and out.chosen is not None
    trained, _ = choice_logprobs(
        model, out.prompt_ids, out.choices, out.chosen, policy.pad_id, policy.temperature
    )
    np.testing.assert_allclose(trained.detach().numpy(), out.logprobs[0], atol=1e-4)
    # the cut falls inside the last image: no image is left, a text prompt remains
    text_only = cut_to(len(whole) - spans[1][0] - 1).encode_prompt(two_frames)
    assert not isinstance(text_only, ImagePromptIds)
    assert text_only == whole[spans[1][1] :] and start not in text_only


def test_rows_showing_one_frame_share_its_pixel_values(
    tiny_vl: tuple[Any, Any, Any], prompts: tuple[list[Prompt], list[list[str]]]
) -> None:
    """One tensor per distinct frame (equal frames, not only the same array), with the values
    the image processor gives the frames all at once."""
    processor = tiny_vl[2]
    policy = policy_of(tiny_vl, "choose")
    texts, _ = prompts
    first, second = texts[0].images[0], texts[1].images[0]
    rows = [
        policy.encode_prompt(texts[0]),
        policy.encode_prompt(Prompt(str(texts[1]), [first.copy()])),
        policy.encode_prompt(texts[1]),
    ]
    assert all(isinstance(row, ImagePromptIds) for row in rows)
    a, b, c = (row.pixel_values for row in rows if isinstance(row, ImagePromptIds))
    assert a is b and c is not a
    assert pixel_bytes(rows) == 2 * 36 * 1176 * 4  # two distinct frames, float32
    both = policy.encode_prompt(Prompt(str(texts[0]), [first, second]))
    together = processor(images=[first, second], return_tensors="pt")
    assert isinstance(both, ImagePromptIds)
    assert torch.equal(both.pixel_values, together["pixel_values"])
    assert torch.equal(both.image_grid_thw, together["image_grid_thw"])

"""Rollout generation with both engines on the same batch: transformers' ``generate`` (the
policy's ``act``, ``engine: hf``) against vLLM (``engine: vllm``,
:class:`~agentbench_rl.models.vllm_engine.VLLMActor`), tokens per second and their ratio.

The batch is ``rows`` prompts of the env's first tasks, answered in ``generate`` mode with
``max_new_tokens`` at temperature 1; each side runs ``repeats`` times, alternating (A, B, B,
A, ...) so that load from other processes falls on both alike, and reports its median. The
engine's build (vLLM loads and compiles: tens of seconds) is timed apart, not counted in the
rate. The model is the ``tiny`` policy built on the spot, or a saved policy folder (``--model``,
what ``hf:`` loads). vLLM's CPU build needs its KV cache size (``VLLM_CPU_KVCACHE_SPACE``,
GiB), which this command sets to 1 unless it is set.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from agentbench_rl.bench.timing import alternate

if TYPE_CHECKING:
    from agentbench_rl.prompting import ActionMode


def _prompts(env_name: str, rows: int, prompt: Any) -> list[str]:
    from agentbench_rl.envs import env_class, make
    from agentbench_rl.prompting import action_choices, build_prompt

    env = make(env_name, split="test")
    ids = env_class(env_name).task_ids("test")
    texts: list[str] = []
    for k in range(rows):
        observation, info = env.reset(options={"task_id": ids[k % len(ids)]})
        choices = action_choices(info, prompt.mode)
        texts.append(build_prompt(env_name, observation, [], choices, prompt))
    return texts


def bench_policy(model: Path | None, mode: ActionMode = "generate") -> Any:
    """A saved policy folder (what ``hf:`` loads) on the CPU in ``mode``, or the ``tiny``
    policy built on the spot."""
    from agentbench_rl.envs.spec import EnvSpec
    from agentbench_rl.models.policy import Policy, load_saved_policy
    from agentbench_rl.models.tiny import TinyModelConfig, build_tiny
    from agentbench_rl.prompting import PromptConfig
    from agentbench_rl.rollout.scripted import tokenizer_texts

    if model is not None:
        return load_saved_policy(str(model), {"mode": mode, "device": "cpu"})
    prompt = PromptConfig(mode=mode, history_observations=False)
    tiny = TinyModelConfig(tokenizer_episodes=20)
    texts = tokenizer_texts(
        EnvSpec(name="sokoban", split="train"), prompt, tiny.tokenizer_episodes, 0
    )
    network, tokenizer = build_tiny(texts, tiny, 0)
    return Policy(network, tokenizer, prompt)


def run(
    console: Console,
    model: Path | None = None,
    env: str = "sokoban",
    rows: int = 32,
    max_new_tokens: int = 32,
    repeats: int = 3,
) -> dict[str, float]:
    """Time both engines on one batch and print the table; returns the figures."""
    import torch

    from agentbench_rl.models.vllm_engine import EngineSettings, VLLMActor

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    policy = bench_policy(model)
    policy.max_new_tokens = max_new_tokens  # a saved policy's own length too
    prompts = _prompts(env, rows, policy.prompt)
    admissible = [["up"]] * rows
    began = time.perf_counter()
    engine = VLLMActor(policy, EngineSettings(gpu_memory_utilization=0.1))
    build_s = time.perf_counter() - began
    sides = {"transformers": policy, "vllm": engine}

    def answering(side: Any) -> Callable[[], Any]:  # a fresh generator per run: the same draws
        return lambda: side.act(prompts, admissible, torch.Generator().manual_seed(0))

    runs = alternate({name: answering(side) for name, side in sides.items()}, repeats)
    figures = {
        name: statistics.median(
            sum(len(ids) for ids in out.response_ids) / seconds for seconds, out in timed
        )
        for name, timed in runs.items()
    }
    figures["ratio"] = figures["vllm"] / figures["transformers"]
    figures["vllm_build_s"] = build_s
    table = Table(title=f"{rows} prompts x {max_new_tokens} tokens, {env}")
    table.add_column("engine")
    table.add_column("tokens/s", justify="right")
    table.add_row("transformers generate", f"{figures['transformers']:.1f}")
    table.add_row("vLLM", f"{figures['vllm']:.1f}")
    table.add_row("vLLM / transformers", f"{figures['ratio']:.2f}x")
    console.print(table)
    console.print(
        f"median of {repeats} alternating runs each, after one warm-up; vLLM's build "
        f"(load and compile) took {build_s:.0f} s and is not counted; torch threads "
        f"{torch.get_num_threads()}",
        highlight=False,
    )
    return figures

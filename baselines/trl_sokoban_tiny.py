"""A real TRL ``GRPOTrainer`` run on our Sokoban env, on a CPU, with the harness before and after.

    python baselines/trl_sokoban_tiny.py --out runs/trl-grpo-trl [--server URL]  # TRL's own GRPO
    python baselines/trl_sokoban_tiny.py --estimator gigpo --seed 0 --out runs/trl-gigpo/seed0

The model is a tiny random-initialised Qwen2 (``agentbench_rl.models.tiny``) whose tokenizer
carries TRL's own Qwen2.5 chat template (read from the installed trl, so TRL recognises it and
parses the model's ``<tool_call>`` answers) and that template's tags as tokens. TRL trains it with
``environment_factory`` (``agentbench_rl.integrations.trl``): each rollout is one Sokoban
episode on a task of the train split, the env's command as the ``act`` tool, the episode's
return from ``get_reward``. With ``--estimator NAME`` the trainer is
``StepCreditGRPOTrainer`` (``agentbench_rl.integrations.trl_credit``): every env step's tokens
carry that estimator's credit for the step; without it, TRL's own GRPO (one advantage per
episode).

Before GRPO, TRL's ``SFTTrainer`` warm-starts the model on expert episodes written as tool
calls (a random-initialised model never writes a ``<tool_call>``, so GRPO would see no step).
The harness evaluates the warm start and the final model (``ToolCallingAgent``: the
conversation, chat template and parser TRL trains with; greedy) on levels of the test split.

Writes OUT/model (weights), OUT/trainer_state.json (TRL's logged steps; OUT/sft_state.json the
warm start's), OUT/config.json (this run's settings and versions), OUT/eval-start/ and OUT/eval/
(the harness's episodes and summary) and OUT/metrics.jsonl (the same run as the home trainer's
metrics: :func:`metrics_rows`); the recorded runs in ``baselines/results/`` keep all but the
weights.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path
from typing import Any

from agentbench_rl.extras import require
from agentbench_rl.harness.provenance import machine
from agentbench_rl.spec.run_folder import RunFolder

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is experimental
# One thread, as the runs were recorded and as bit-for-bit reruns need (docs/training.md). torch
# otherwise takes every core, and beside other jobs its threads contend: a warm start at 7-26 s
# a step where the recorded run took 0.48 s; with one thread, beside two other training runs on
# two cores, 1.14 s (2026-12-07). Set before torch is imported.
os.environ.setdefault("OMP_NUM_THREADS", "1")

#: Everything that sets this run's numbers (recorded in OUT/config.json).
SETTINGS: dict[str, Any] = {
    "env": "sokoban",
    "train_split": "train",
    "dataset_rows": 32,
    "dataset_seed": 0,
    "max_steps": 30,  # TRL optimiser steps
    "per_device_train_batch_size": 8,  # two groups of num_generations
    "num_generations": 4,
    # A step is about 90 tokens (the call, then the env's answer of about 63 and the template's
    # tags) after a prompt of about 570: room for Sokoban's 15 steps in 2,048 positions. TRL ends
    # a rollout whose next tool answer would pass max_completion_length (at 64, as this file
    # once had, every rollout stopped after its first step, so every group of a task was alike).
    "max_completion_length": 1472,
    "max_tool_calling_iterations": 15,
    "learning_rate": 1e-4,
    "seed": 0,
    "tiny": {
        "hidden_size": 64,
        "layers": 2,
        "heads": 4,
        "kv_heads": 2,
        "intermediate_size": 128,
        "max_positions": 2048,
    },
    "tokenizer_episodes": 40,
    # The warm start: TRL's SFTTrainer on expert episodes written as tool calls, so the policy
    # calls the tool at all (a random-initialised model never writes a <tool_call>).
    "sft": {
        "episodes": 120,
        "max_steps": 480,
        "batch_size": 4,
        "learning_rate": 3e-3,
        "max_length": 2048,  # whole expert episodes
    },
    "eval": {"split": "test", "limit": 20, "seeds": [0]},
}
#: Both trainers' arguments for a run on this machine: the CPU, no checkpoints, no trackers.
ON_THIS_CPU: dict[str, Any] = {"use_cpu": True, "save_strategy": "no", "report_to": "none"}
#: The chat template's tags, one token each, and the JSON around the action in an ``act`` call
#: as the template renders it, so that a call is six tokens (tag, JSON head, action, JSON tail,
#: tag, end of turn) a tiny model learns in a few warm-start steps. The tags stay tokens of
#: their own: TRL's response parser finds a call by its ``<tool_call>`` token, and a token that
#: merged the tag with the JSON (as this tuple once had) hid every call from it.
TEMPLATE_TOKENS = (
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    '\n{"name": "act", "arguments": {"action": "',
    '"}}\n',
)


def tiny_model(settings: dict[str, Any]) -> tuple[Any, Any]:
    """The tiny Qwen2 and its tokenizer, with TRL's Qwen2.5 chat template."""
    from trl.chat_template_utils import qwen2_5_chat_template

    from agentbench_rl.envs.spec import EnvSpec
    from agentbench_rl.models.tiny import TinyModelConfig, build_tiny_model, build_tokenizer
    from agentbench_rl.prompting import PromptConfig
    from agentbench_rl.rollout.scripted import tokenizer_texts

    texts = list(
        tokenizer_texts(
            EnvSpec(name=settings["env"], split="train"),
            PromptConfig(),
            settings["tokenizer_episodes"],
            settings["seed"],
        )
    )
    texts.append(qwen2_5_chat_template)
    tokenizer = build_tokenizer(texts, TinyModelConfig().vocab_size)
    tokenizer.add_tokens(list(TEMPLATE_TOKENS))
    tokenizer.chat_template = qwen2_5_chat_template
    tokenizer.eos_token = "<|im_end|>"
    tokenizer.padding_side = "left"
    config = TinyModelConfig(**settings["tiny"])
    model = build_tiny_model(tokenizer, config, settings["seed"])
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model, tokenizer


def expert_conversations(settings: dict[str, Any]) -> Any:
    """Expert episodes on train tasks as TRL's tool-calling conversations (the environment's
    first observation in the user turn, as ``GRPOTrainer`` appends ``reset``'s answer)."""
    from datasets import Dataset
    from transformers.utils import get_json_schema

    from agentbench_rl.envs.spec import EnvSpec
    from agentbench_rl.integrations.trl import environment_class, train_dataset

    spec = EnvSpec(name=settings["env"], split=settings["train_split"])
    environment = environment_class(spec)()
    schema = get_json_schema(environment.act)
    conversations = []
    rows = train_dataset(spec, settings["sft"]["episodes"], settings["dataset_seed"] + 1)
    for row in rows:
        first = environment.reset(task_id=row["task_id"], seed=row["seed"])
        messages = [{"role": "user", "content": row["prompt"][0]["content"] + first}]
        while not environment.over:
            action = environment.env.expert_action()
            arguments = {"action": action}
            call = {"type": "function", "function": {"name": "act", "arguments": arguments}}
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
            messages.append({"role": "tool", "name": "act", "content": environment.act(action)})
        conversations.append({"messages": messages, "tools": [schema]})
    return Dataset.from_list(conversations)


def warm_start(model: Any, tokenizer: Any, out: Path, settings: dict[str, Any]) -> None:
    from trl import SFTConfig, SFTTrainer

    sft = settings["sft"]
    args = SFTConfig(
        output_dir=str(out / "sft"),
        max_steps=sft["max_steps"],
        per_device_train_batch_size=sft["batch_size"],
        learning_rate=sft["learning_rate"],
        max_length=sft["max_length"],
        logging_steps=10,
        seed=settings["seed"],
        **ON_THIS_CPU,
    )
    trainer = SFTTrainer(
        model=model,
        args=args,
        processing_class=tokenizer,
        train_dataset=expert_conversations(settings),
    )
    trainer.train()
    trainer.state.save_to_json(str(out / "sft_state.json"))
    shutil.rmtree(out / "sft", ignore_errors=True)


def train(out: Path, server: str | None, settings: dict[str, Any], estimator: str | None) -> None:
    import torch
    import transformers
    import trl
    from trl import GRPOConfig, GRPOTrainer

    from agentbench_rl.envs.spec import EnvSpec
    from agentbench_rl.integrations.trl import environment_class, train_dataset
    from agentbench_rl.integrations.trl_credit import StepCreditGRPOTrainer

    torch.manual_seed(settings["seed"])
    spec = EnvSpec(name=settings["env"], split=settings["train_split"])
    model, tokenizer = tiny_model(settings)
    warm_start(model, tokenizer, out, settings)
    evaluate_model(model, tokenizer, out / "eval-start", settings)
    args = GRPOConfig(
        output_dir=str(out / "trainer"),
        max_steps=settings["max_steps"],
        per_device_train_batch_size=settings["per_device_train_batch_size"],
        num_generations=settings["num_generations"],
        max_completion_length=settings["max_completion_length"],
        max_tool_calling_iterations=settings["max_tool_calling_iterations"],
        learning_rate=settings["learning_rate"],
        logging_steps=1,
        seed=settings["seed"],
        **ON_THIS_CPU,
    )
    common = {
        "model": model,
        "args": args,
        "processing_class": tokenizer,
        "train_dataset": train_dataset(spec, settings["dataset_rows"], settings["dataset_seed"]),
        "environment_factory": environment_class(spec, server),
    }
    trainer = (
        StepCreditGRPOTrainer(**common, estimator=estimator)
        if estimator is not None
        else GRPOTrainer(**common)
    )
    trainer.train()
    trainer.save_model(str(out / "model"))
    tokenizer.save_pretrained(str(out / "model"))
    trainer.state.save_to_json(str(out / "trainer_state.json"))
    versions = {"trl": trl.__version__, "transformers": transformers.__version__,
                "torch": torch.__version__, "torch_threads": torch.get_num_threads()}  # fmt: skip
    # the processor too: a rerun with the same versions and threads differed at rounding level
    # on 2026-12-07 from a record that did not name its CPU (docs/training.md, "TRL")
    record = {"settings": settings, "estimator": estimator, "server": server is not None,
              "versions": versions, "machine": machine(torch.get_num_threads())}  # fmt: skip
    (out / "config.json").write_text(json.dumps(record, indent=1) + "\n")
    shutil.rmtree(out / "trainer", ignore_errors=True)
    evaluate_model(model, tokenizer, out / "eval", settings)
    RunFolder(out).write_metrics(metrics_rows(out))


#: TRL's logged figures kept in a run's metrics.jsonl, as ``engine/<name>`` (what the engine names).
TRL_FIGURES = ("loss", "grad_norm", "entropy", "reward_std", "frac_reward_zero_std",
               "tools/call_frequency", "tools/failure_frequency")  # fmt: skip


def metrics_rows(out: Path) -> list[Any]:
    """The run in ``out`` as the home trainer's ``metrics.jsonl`` rows (``MetricsRow``):
    iteration 0 is the warm start with its evaluation, iteration k TRL's optimiser step k (its
    mean reward as ``train/return``, its time, its other figures as ``engine/<name>``); the
    last also carries the final evaluation. Read from ``trainer_state.json`` and the harness's
    ``eval-start/`` and ``eval/``, so a recorded run's rows can be written again."""
    from agentbench_rl.spec.records import Evaluation, MetricsRow, with_figures

    def validation(folder: str) -> MetricsRow:  # ToolCallingAgent plays greedily
        summary = Evaluation.of(json.loads((out / folder / "summary.json").read_text()))
        return summary.validation_figures(True)

    steps = json.loads((out / "trainer_state.json").read_text())["log_history"]
    start: MetricsRow = {"iteration": 0}
    rows = [with_figures(start, validation("eval-start"))]
    for step in (step for step in steps if "reward" in step):
        row: MetricsRow = {"iteration": int(step["step"]), "train/return": float(step["reward"]),
                           "train/response_tokens": float(step["completions/mean_length"]),
                           "time/iteration_s": float(step["step_time"])}  # fmt: skip
        figures = {f"engine/{name}": float(step[name]) for name in TRL_FIGURES if name in step}
        rows.append(with_figures(row, figures))
    rows[-1] = with_figures(rows[-1], validation("eval"))
    return rows


def evaluate_model(model: Any, tokenizer: Any, out: Path, settings: dict[str, Any]) -> Any:
    """The harness on levels of the test split, the model played as TRL plays it."""
    from agentbench_rl.envs.spec import EnvSpec
    from agentbench_rl.harness.config import EvalConfig, RunOptions
    from agentbench_rl.harness.evaluate import evaluate
    from agentbench_rl.integrations.trl import ToolCallingAgent

    config = EvalConfig(
        env=EnvSpec(name=settings["env"], split=settings["eval"]["split"]),
        agent="python:agentbench_rl.integrations.trl:ToolCallingAgent",
        seeds=settings["eval"]["seeds"],
        limit=settings["eval"]["limit"],
    )
    model.eval()
    summary = evaluate(config, out, RunOptions(), agent=ToolCallingAgent(model, tokenizer))
    model.train()
    print(
        f"{out.name}: success {summary.success.mean:.3f} on {settings['eval']['limit']} tasks"
    )
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--server", default=None, help="serve-env URL of the train split")
    parser.add_argument("--estimator", default=None, help="our step-level credit (a registry name)")
    parser.add_argument("--seed", type=int, default=SETTINGS["seed"], help="the run's seed")
    options = parser.parse_args()
    try:  # before any folder or work: a missing trl is one line naming the extra
        require("trl", "baselines/trl_sokoban_tiny.py")
    except ImportError as missing:
        raise SystemExit(f"error: {missing}") from None
    options.out.mkdir(parents=True, exist_ok=True)
    settings = {**SETTINGS, "seed": options.seed}
    train(options.out, options.server, settings, options.estimator)


if __name__ == "__main__":
    main()

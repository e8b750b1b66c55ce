"""``agentbench-rl bench gpu``: the figures one lent GPU machine brings back in one call.

Every GPU path of the project (the trainer's transformers engine on CUDA in bf16, BiPACE's
hidden states at real widths, batched ``hf:`` evaluation, the Qwen2.5-VL policy) is measured by
one command that needs no internet and no weights: the models are the published shapes built
random-initialised with our tokenizer (:mod:`agentbench_rl.models.architectures`), the envs are
Sokoban (generated) and ALFWorld's shipped ``demo`` games. ``.ci/gpu`` carries what the machine
lacks and runs it there; ``--dry-run`` rehearses every section with tiny models on the CPU (in
CI), so it cannot rot between lent machines.

The sections, each in a process of its own under its own time limit (one that fails or hangs
costs only itself; the others still report), in this order:

- ``tests``: the ``gpu``-marked tests that need neither vLLM nor verl
  (``tests/models/test_gpu.py``);
- ``train``: one iteration of the home trainer (``train_iteration``, transformers engine, bf16,
  generate mode) at Qwen2.5-0.5B and -1.5B on Sokoban and on ALFWorld: rollout tokens per
  second, the update's seconds, peak GPU memory, and the first minibatch's PPO ratio (it is 1
  where sampling and the training forward agree);
- ``bipace``: BiPACE's extra cost over GiGPO as a share of the iteration
  (:func:`agentbench_rl.bench.train.measure`) at the 1.5B and 7B shapes;
- ``eval``: batched ``hf:`` evaluation of a saved 0.5B policy, episodes and tokens per second;
- ``vision``: Qwen2.5-VL-3B's forward (choose mode: scoring the actions) and generation on one
  96 x 96 Sokoban frame.

Written under ``--out``: ``gpu.json`` (:class:`GpuRecord`: the machine, the commit, every
section's seconds and its figures or its error), ``gpu.md`` (the same as tables) and
``gpu.log`` (everything the sections printed).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

from agentbench_rl.core.atomic import atomic_write_text
from agentbench_rl.models.tiny import TinyModelConfig

#: The sections in the order they run, each with its time limit in seconds on the device. The
#: limits add up to 6 minutes: with the machine's start, one 15-minute lease holds the run and
#: a second one (``--scale`` shortens or lengthens every limit).
SECTION_LIMITS: dict[str, int] = {
    "tests": 60,
    "train": 120,
    "bipace": 90,
    "eval": 40,
    "vision": 50,
}
#: The shapes each section runs at (:data:`agentbench_rl.models.architectures.ARCHITECTURES`).
TRAIN_SHAPES = ("qwen2.5-0.5b", "qwen2.5-1.5b")
BIPACE_SHAPES = ("qwen2.5-1.5b", "qwen2.5-7b")
EVAL_SHAPE = "qwen2.5-0.5b"
VISION_SHAPE = "qwen2.5-vl-3b"
#: ALFWorld plays its shipped games, so the machine needs no data.
TRAIN_ENVS: dict[str, dict[str, object]] = {
    "sokoban": {"train_split": "train"},
    "alfworld": {"train_split": "demo", "env_kwargs": {"expert_recovery": "undo"}},
}
#: The variable the ``gpu`` tests read: ``cpu`` runs them on the CPU (the rehearsal).
TEST_DEVICE_VARIABLE = "AGENTBENCH_TEST_DEVICE"


# ---------------------------------------------------------------------- the record
class TestsFigures(TypedDict):
    """The ``tests`` section: pytest's last line, its exit status, the failed tests."""

    summary: str
    exit_status: int
    failed: list[str]
    seconds: float


class TrainRow(TypedDict):
    """One training iteration at one shape on one env (GB: ``None`` on the CPU)."""

    rows: float
    prompt_tokens_mean: float
    response_tokens: int
    rollout_s: float
    rollout_tokens_per_s: float
    estimator_s: float
    update_s: float
    weights_gb: float | None
    peak_gb: float | None
    first_approx_kl: float | None
    first_clipfrac: float | None


class BipaceRow(TypedDict):
    """BiPACE over GiGPO at one shape: :func:`agentbench_rl.bench.train.measure`'s seconds
    (its keys, not repeated here), the shape and the peak memory."""

    figures: dict[str, float]
    hidden_size: int
    layers: int
    peak_gb: float | None


class EvalFigures(TypedDict):
    """Batched ``hf:`` evaluation of a saved policy."""

    episodes: int
    seconds: float
    episodes_per_s: float
    tokens_per_s: float
    agent_calls: int
    peak_gb: float | None


class VisionCall(TypedDict):
    """One call of the vision-language policy on the frame."""

    seconds: float
    prompt_tokens: float
    response_tokens: int
    peak_gb: float | None


class VisionFigures(TypedDict):
    """The ``vision`` section: the frame's shape, the rows, the forward and the generation."""

    frame: list[int]
    rows: int
    forward: VisionCall
    generate: VisionCall


#: What one section measures (``train`` and ``bipace``: a row per shape and env).
SectionFigures = (
    TestsFigures | dict[str, TrainRow] | dict[str, BipaceRow] | EvalFigures | VisionFigures
)


class SectionOutcome(TypedDict):
    """One section's seconds, and its figures or its error with the last lines it printed."""

    seconds: float
    figures: NotRequired[SectionFigures]
    error: NotRequired[str]
    tail: NotRequired[list[str]]


class GpuMachine(TypedDict):
    """What the figures were taken on."""

    gpu: str | None
    python: str
    torch: str
    cuda: str | None
    transformers: str
    date: str
    git_commit: str | None
    git_dirty: bool | None


class GpuRecord(TypedDict):
    """``gpu.json``: the machine and every section's outcome, in the order they ran."""

    dry_run: bool
    machine: GpuMachine
    sections: dict[str, SectionOutcome]


@dataclass(frozen=True)
class Settings:
    """Where and how big a section runs: on the GPU at the published shapes, or (``dry_run``)
    on the CPU with tiny stand-ins and a handful of rows."""

    dry_run: bool

    @property
    def device(self) -> str:
        """``cuda``, or ``cpu`` in a rehearsal."""
        return "cpu" if self.dry_run else "cuda"

    def shape(self, name: str) -> Any:
        """The architecture ``name``, or its rehearsal stand-in."""
        from agentbench_rl.models import architectures

        real = architectures.ARCHITECTURES[name]
        if not self.dry_run:
            return real
        vision = real.vision is not None
        return architectures.REHEARSAL_VISION if vision else architectures.REHEARSAL_TEXT

    def sizes(self, real: dict[str, int], rehearsal: dict[str, int]) -> dict[str, int]:
        """``real`` on the device, ``rehearsal`` in a dry run."""
        return rehearsal if self.dry_run else real


# ---------------------------------------------------------------------- measuring helpers
class TokenCounter:
    """Counts the rows, prompt tokens and response tokens a policy's ``act`` handles (the
    policy's own method is wrapped, so the trainer and the harness call it unchanged)."""

    def __init__(self, policy: Any) -> None:
        self.rows = self.prompt_tokens = self.response_tokens = 0
        act = policy.act

        def counted(*args: Any, **kwargs: Any) -> Any:
            out = act(*args, **kwargs)
            self.rows += len(out.response_ids)
            self.prompt_tokens += sum(len(ids) for ids in out.prompt_ids)
            self.response_tokens += sum(len(ids) for ids in out.response_ids)
            return out

        policy.act = counted


def _peak_memory_gb(device: str) -> float | None:
    import torch

    if device != "cuda":
        return None
    return torch.cuda.max_memory_allocated() / 2**30


def _reset_peak(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def _synchronize(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def _say(line: str) -> None:
    print(line, flush=True)


def _train_config(settings: Settings, env: str, estimator: str = "gigpo") -> Any:
    """The trainer's config for a timed iteration: the papers' generate mode in bf16, one
    minibatch (so its PPO ratio is the first one), rollouts sized to the time limit."""
    from agentbench_rl.train.config import TrainConfig

    sizes = settings.sizes(
        {"n_tasks": 8, "group_size": 8, "max_steps": 3, "max_new_tokens": 128},
        {"n_tasks": 2, "group_size": 2, "max_steps": 2, "max_new_tokens": 8},
    )
    return TrainConfig.model_validate(
        {
            "env": env,
            "estimator": estimator,
            "action_mode": "generate",
            "dtype": "bfloat16",
            "device": settings.device,
            "torch_threads": 0,
            "forward_batch_size": 16,
            "minibatch_size": 4096,
            "tiny": TinyModelConfig(tokenizer_episodes=20),
            **TRAIN_ENVS[env],
            **sizes,
        }
    )


def _policy(settings: Settings, config: Any, shape_name: str) -> Any:
    """The config's policy around a random-initialised model of ``shape_name``."""
    import torch

    from agentbench_rl.models.architectures import build_architecture
    from agentbench_rl.rollout.scripted import tokenizer_texts
    from agentbench_rl.train.ppo import make_policy

    texts = tokenizer_texts(
        config.train_env(), config.prompt_config(), config.tiny.tokenizer_episodes, config.seed
    )
    dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}[config.dtype]
    model, tokenizer, image_processor = build_architecture(
        settings.shape(shape_name), texts, config.seed, dtype, settings.device
    )
    return make_policy(model, tokenizer, config, image_processor)


# ---------------------------------------------------------------------- the sections
def section_tests(settings: Settings) -> TestsFigures:
    """The ``gpu``-marked tests that need neither vLLM nor verl, in a pytest of their own."""
    environment = {**os.environ, TEST_DEVICE_VARIABLE: settings.device}
    command = [
        *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
        *("-m", "gpu and not vllm and not verl", "tests"),
    ]
    began = time.perf_counter()
    done = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    _say("\n".join(lines[-30:]))
    failed = [line.split(" ", 1)[1] for line in lines if line.startswith("FAILED ")]
    return {
        "summary": lines[-1] if lines else done.stderr.strip()[-200:],
        "exit_status": done.returncode,
        "failed": failed,
        "seconds": time.perf_counter() - began,
    }


def section_train(settings: Settings) -> dict[str, TrainRow]:
    """One training iteration at each train shape on each env."""
    import torch

    from agentbench_rl.train.ppo import Learner, make_pool, train_iteration

    results: dict[str, TrainRow] = {}
    for shape_name in TRAIN_SHAPES:
        for env in TRAIN_ENVS:
            config = _train_config(settings, env)
            policy = _policy(settings, config, shape_name)
            _synchronize(settings.device)
            weights_gb = _peak_memory_gb(settings.device)
            reference = copy.deepcopy(policy.model).eval().requires_grad_(False)
            optimizer = torch.optim.Adam(policy.model.parameters(), lr=config.learning_rate)
            learner = Learner(policy, optimizer, reference, None, policy, None)
            counter = TokenCounter(policy)
            pool = make_pool(config)
            _reset_peak(settings.device)
            try:
                row = train_iteration(config, learner, pool, config.estimator_spec(), 1)
            finally:
                pool.close()
            _synchronize(settings.device)
            rollout_s = row["time/rollout_s"]
            results[f"{shape_name} {env}"] = {
                "rows": row["train/rows"],
                "prompt_tokens_mean": counter.prompt_tokens / max(1, counter.rows),
                "response_tokens": counter.response_tokens,
                "rollout_s": rollout_s,
                "rollout_tokens_per_s": counter.response_tokens / rollout_s,
                "estimator_s": row["time/estimator_s"],
                "update_s": row["time/update_s"],
                "weights_gb": weights_gb,
                "peak_gb": _peak_memory_gb(settings.device),
                # the loss's figures, which the row's type cannot list
                "first_approx_kl": cast("float | None", row.get("ppo/approx_kl")),
                "first_clipfrac": cast("float | None", row.get("ppo/clipfrac")),
            }
            _say(f"train {shape_name} {env}: {json.dumps(results[f'{shape_name} {env}'])}")
            del policy, reference, optimizer, learner
            _free(settings.device)
    return results


def section_bipace(settings: Settings) -> dict[str, BipaceRow]:
    """BiPACE's extra cost over GiGPO per iteration at each BiPACE shape."""
    from agentbench_rl.bench.train import DEFAULT_CANDIDATE, measure

    results: dict[str, BipaceRow] = {}
    for shape_name in BIPACE_SHAPES:
        config = _train_config(settings, "sokoban").model_copy(
            update=settings.sizes(
                {"n_tasks": 4, "group_size": 4, "max_steps": 2, "max_new_tokens": 64},
                {"n_tasks": 2, "group_size": 2, "max_steps": 2, "max_new_tokens": 8},
            )
        )
        policy = _policy(settings, config, shape_name)
        _reset_peak(settings.device)
        figures = measure(config, repeats=2, candidate=DEFAULT_CANDIDATE, policy=policy)
        results[shape_name] = {
            "figures": figures,
            "hidden_size": settings.shape(shape_name).hidden_size,
            "layers": settings.shape(shape_name).layers,
            "peak_gb": _peak_memory_gb(settings.device),
        }
        _say(f"bipace {shape_name}: {json.dumps(results[shape_name])}")
        del policy
        _free(settings.device)
    return results


def section_eval(settings: Settings) -> EvalFigures:
    """Batched ``hf:`` evaluation of a saved policy on Sokoban's val split."""
    import tempfile

    from agentbench_rl.agents.hf import HFAgent
    from agentbench_rl.envs.spec import EnvSpec
    from agentbench_rl.harness.config import EvalConfig, RunOptions
    from agentbench_rl.harness.evaluate import evaluate

    config = _train_config(settings, "sokoban")
    rows = settings.sizes({"episodes": 64}, {"episodes": 4})["episodes"]
    with tempfile.TemporaryDirectory() as folder:
        saved = Path(folder) / "policy"
        policy = _policy(settings, config, EVAL_SHAPE)
        policy.save(saved)
        del policy
        _free(settings.device)
        spec = f"hf:{saved}?mode=generate&device={settings.device}&dtype=bfloat16"
        agent = HFAgent(spec)
        agent.prepare()
        counter = TokenCounter(agent.policy)
        evaluation = EvalConfig(
            env=EnvSpec(name="sokoban", split="val", max_steps=config.max_steps),
            agent=spec,
            limit=rows,
        )
        _reset_peak(settings.device)
        began = time.perf_counter()
        evaluate(evaluation, Path(folder) / "eval", RunOptions(batch_size=rows), agent=agent)
        _synchronize(settings.device)
        seconds = time.perf_counter() - began
    return {
        "episodes": rows,
        "seconds": seconds,
        "episodes_per_s": rows / seconds,
        "tokens_per_s": counter.response_tokens / seconds,
        "agent_calls": counter.rows,
        "peak_gb": _peak_memory_gb(settings.device),
    }


def section_vision(settings: Settings) -> VisionFigures:
    """Qwen2.5-VL-3B's forward and generation on one 96 x 96 visual Sokoban frame."""
    import torch

    from agentbench_rl.envs import make
    from agentbench_rl.models.policy import Policy
    from agentbench_rl.prompting import PromptConfig, build_prompt

    config = _train_config(settings, "sokoban").model_copy(update={"env": "visual_sokoban"})
    rows = settings.sizes({"rows": 8}, {"rows": 2})["rows"]
    generating = _policy(settings, config, VISION_SHAPE)
    choosing = Policy(
        generating.model,
        generating.tokenizer,
        PromptConfig(mode="choose"),
        image_processor=generating.image_processor,
    )
    env = make("visual_sokoban", split="val")
    observation, info = env.reset(options={"task_id": "val-0000"})
    frame = observation["image"].shape
    calls: dict[str, VisionCall] = {}
    for name, policy in (("forward", choosing), ("generate", generating)):
        prompt = build_prompt(
            "visual_sokoban", observation, [], info["admissible_actions"], policy.prompt
        )
        admissible = [info["admissible_actions"]] * rows
        policy.act([prompt], admissible[:1], torch.Generator().manual_seed(0))  # warm-up
        counter = TokenCounter(policy)
        _reset_peak(settings.device)
        began = time.perf_counter()
        policy.act([prompt] * rows, admissible, torch.Generator().manual_seed(1))
        _synchronize(settings.device)
        seconds = time.perf_counter() - began
        calls[name] = {
            "seconds": seconds,
            "prompt_tokens": counter.prompt_tokens / max(1, counter.rows),
            "response_tokens": counter.response_tokens,
            "peak_gb": _peak_memory_gb(settings.device),
        }
        _say(f"vision {name}: {json.dumps(calls[name])}")
    env.close()
    return {
        "frame": list(frame),
        "rows": rows,
        "forward": calls["forward"],
        "generate": calls["generate"],
    }


def _free(device: str) -> None:
    import gc

    import torch

    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


SECTIONS: dict[str, Callable[[Settings], SectionFigures]] = {
    "tests": section_tests,
    "train": section_train,
    "bipace": section_bipace,
    "eval": section_eval,
    "vision": section_vision,
}


# ---------------------------------------------------------------------- the whole run
def machine() -> GpuMachine:
    """What the figures were taken on: the accelerator, the libraries, the commit, the date."""
    import torch
    import transformers

    from agentbench_rl.harness.provenance import package_revision

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    revision = package_revision()
    return {
        "gpu": gpu,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "git_commit": revision["git_commit"],
        "git_dirty": revision["git_dirty"],
    }


@contextmanager
def _log(path: Path) -> Iterator[Callable[[str], None]]:
    with open(path, "a", encoding="utf-8") as stream:

        def write(text: str) -> None:
            stream.write(text if text.endswith("\n") else text + "\n")
            stream.flush()
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
            sys.stdout.flush()

        yield write


def run_section(
    name: str, settings: Settings, limit: float, log: Callable[[str], None]
) -> SectionOutcome:
    """Run one section in a process of its own, cut at ``limit`` seconds; returns its seconds
    and figures, or its error with the last lines it printed."""
    result_file = (
        Path(os.environ.get("TMPDIR", "/tmp")) / f"agentbench-gpu-{os.getpid()}-{name}.json"
    )
    result_file.unlink(missing_ok=True)
    command = [sys.executable, "-m", "agentbench_rl.bench.gpu", "--section", name]
    command += ["--result", str(result_file), *(["--dry-run"] if settings.dry_run else [])]
    log(f"== {name} (limit {limit:.0f} s)")
    began = time.perf_counter()
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    tail: list[str] = []
    assert process.stdout is not None
    try:
        deadline = began + limit
        for line in _lines_until(process, deadline):
            log(line)
            tail = [*tail[-19:], line.rstrip()]
        status = process.wait(timeout=max(0.1, deadline - time.perf_counter()))
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        status = None
    seconds = time.perf_counter() - began
    outcome: SectionOutcome = {"seconds": seconds}
    if status is None:
        outcome |= {"error": f"cut at its limit of {limit:g} s", "tail": tail}
    elif status != 0 or not result_file.is_file():
        outcome |= {"error": f"exit status {status}", "tail": tail}
    else:  # what this module's main wrote: the section's figures
        outcome["figures"] = cast(SectionFigures, json.loads(result_file.read_text("utf-8")))
    result_file.unlink(missing_ok=True)
    log(
        f"== {name}: {'error: ' + outcome['error'] if 'error' in outcome else 'done'} "
        f"in {seconds:.0f} s"
    )
    return outcome


def _lines_until(process: subprocess.Popen[str], deadline: float) -> Iterator[str]:
    """The process's output lines until it ends; ``TimeoutExpired`` past ``deadline``."""
    import selectors

    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    while True:
        left = deadline - time.perf_counter()
        if left <= 0:
            raise subprocess.TimeoutExpired(process.args, 0)
        if not selector.select(timeout=min(left, 1.0)):
            continue
        line = process.stdout.readline()
        if not line:
            return
        yield line


def run(
    out: Path, dry_run: bool = False, sections: Sequence[str] | None = None, scale: float = 1.0
) -> GpuRecord:
    """Every section (or those named), each under its limit times ``scale``; writes
    ``gpu.json``, ``gpu.md`` and ``gpu.log`` under ``out`` and returns the record."""
    names = list(sections or SECTION_LIMITS)
    unknown = sorted(set(names) - set(SECTION_LIMITS))
    if unknown:
        raise ValueError(
            f"bench gpu: unknown section(s) {', '.join(unknown)} "
            f"(choose from {', '.join(SECTION_LIMITS)})"
        )
    settings = Settings(dry_run)
    if not dry_run:
        import torch

        if not torch.cuda.is_available():
            raise ValueError("bench gpu: no CUDA GPU here (rehearse on the CPU with --dry-run)")
    out.mkdir(parents=True, exist_ok=True)
    record: GpuRecord = {"dry_run": dry_run, "machine": machine(), "sections": {}}
    with _log(out / "gpu.log") as log:
        log(f"bench gpu{' --dry-run' if dry_run else ''}: {json.dumps(record['machine'])}")
        for name in names:
            record["sections"][name] = run_section(
                name, settings, SECTION_LIMITS[name] * scale, log
            )
            atomic_write_text(out / "gpu.json", json.dumps(record, indent=1) + "\n")
    atomic_write_text(out / "gpu.md", markdown(record))
    return record


# ---------------------------------------------------------------------- the report
def _number(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def markdown(record: GpuRecord) -> str:
    """The record as Markdown: the machine, then one table per section (or its error)."""
    info = record["machine"]
    lines = [
        f"# bench gpu{' (dry run, CPU)' if record['dry_run'] else ''}",
        "",
        f"{info['gpu'] or 'CPU'}; Python {info['python']}, torch {info['torch']} "
        f"(CUDA {info['cuda']}), transformers {info['transformers']}; commit "
        f"{info.get('git_commit') or '?'}{' (dirty)' if info.get('git_dirty') else ''}; "
        f"{info['date']}.",
    ]
    for name, outcome in record["sections"].items():
        lines += ["", f"## {name} ({outcome['seconds']:.0f} s)", ""]
        if "figures" not in outcome:
            error = outcome.get("error", "no figures")
            lines += [f"error: {error}", "", "```", *outcome.get("tail", []), "```"]
            continue
        lines += _TABLES[name](outcome["figures"])
    return "\n".join(lines) + "\n"


def _tests_table(figures: TestsFigures) -> list[str]:
    lines = [f"`{figures['summary']}` (exit status {figures['exit_status']})"]
    return lines + [f"- failed: `{name}`" for name in figures["failed"]]


def _train_table(figures: dict[str, TrainRow]) -> list[str]:
    lines = [
        "| model, env | rows | prompt tokens | rollout s | rollout tokens/s | update s "
        "| weights GB | peak GB | first approx KL | first clip frac |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in figures.items():
        lines.append(
            f"| {name} | {row['rows']:.0f} | {row['prompt_tokens_mean']:.0f} "
            f"| {row['rollout_s']:.1f} | {row['rollout_tokens_per_s']:,.0f} "
            f"| {row['update_s']:.1f} | {_number(row['weights_gb'])} | {_number(row['peak_gb'])} "
            f"| {_number(row['first_approx_kl'], 5)} | {_number(row['first_clipfrac'], 4)} |"
        )
    return lines


def _bipace_table(figures: dict[str, BipaceRow]) -> list[str]:
    lines = [
        "| model | hidden | layers | rows | GiGPO iteration s | BiPACE extra s | extra % "
        "| peak GB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in figures.items():
        measured = row["figures"]
        lines.append(
            f"| {name} | {row['hidden_size']:.0f} | {row['layers']:.0f} "
            f"| {measured['rows']:.0f} | {measured['base_iteration_s']:.2f} "
            f"| {measured['candidate_extra_s']:.3f} "
            f"| {measured['candidate_extra_percent']:+.1f} | {_number(row['peak_gb'])} |"
        )
    return lines


def _eval_table(figures: EvalFigures) -> list[str]:
    return [
        "| episodes | seconds | episodes/s | tokens/s | peak GB |",
        "|---:|---:|---:|---:|---:|",
        f"| {figures['episodes']} | {figures['seconds']:.1f} | {figures['episodes_per_s']:.2f} "
        f"| {figures['tokens_per_s']:,.0f} | {_number(figures['peak_gb'])} |",
    ]


def _vision_table(figures: VisionFigures) -> list[str]:
    lines = [
        f"frame {'x'.join(str(n) for n in figures['frame'])}, {figures['rows']} rows",
        "",
        "| call | seconds | prompt tokens | response tokens | peak GB |",
        "|---|---:|---:|---:|---:|",
    ]
    for row, name in ((figures["forward"], "forward"), (figures["generate"], "generate")):
        lines.append(
            f"| {name} | {row['seconds']:.2f} | {row['prompt_tokens']:.0f} "
            f"| {row['response_tokens']} | {_number(row['peak_gb'])} |"
        )
    return lines


# each table reads its own section's figures (the record holds them as their union)
_TABLES: dict[str, Callable[[Any], list[str]]] = {
    "tests": _tests_table,
    "train": _train_table,
    "bipace": _bipace_table,
    "eval": _eval_table,
    "vision": _vision_table,
}


def main(argv: Sequence[str] | None = None) -> int:
    """One section in this process (what :func:`run_section` starts): its figures go to
    ``--result`` as JSON."""
    parser = argparse.ArgumentParser(description="one section of bench gpu")
    parser.add_argument("--section", choices=list(SECTIONS), required=True)
    parser.add_argument("--result", type=Path, required=True)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    figures = SECTIONS[args.section](Settings(args.dry_run))
    atomic_write_text(args.result, json.dumps(figures, default=float) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

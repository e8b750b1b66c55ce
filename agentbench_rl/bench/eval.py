"""How fast the harness evaluates model agents: batched ``hf:`` and concurrent ``openai:``.

Two ratios (``agentbench-rl bench eval``):

1. **hf: batched vs the trainer.** A tiny checkpoint (the trainer's ``tiny`` model, ``choose``
   mode, as ``hf:<folder>``) plays the first ``levels`` Sokoban val levels through
   ``evaluate(..., batch_size=N)``, against the trainer's own batched machinery playing the same
   episodes (:func:`~agentbench_rl.rollout.batched.rollout_groups`, one member per task, pools of
   N envs, one forward per step). Goal: the harness within 1.5x of the trainer.
2. **openai: concurrency C vs 1.** The ``openai:`` agent plays Sokoban val episodes against
   :class:`LatencyChatServer` (a local OpenAI-compatible server that waits ``latency`` seconds
   per request, as a remote model would), with ``--concurrency C`` against ``--concurrency 1``.
   Goal: at least 20x faster with C = 32 (the ideal is C).

Each side runs ``repeats`` times, alternating, and the median counts (on a shared machine,
neighbours' load then hits both sides alike). Both sides of each pair must write the same
``episodes.csv``; the bench checks it, so a speed-up never comes from playing other episodes.
"""

from __future__ import annotations

import json
import multiprocessing
import re
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agentbench_rl.core.hashing import seed_from

_ADMISSIBLE = re.compile(r"^Admissible actions: (.*)$", re.MULTILINE)


class LatencyChatServer(ThreadingHTTPServer):
    """A local OpenAI-compatible chat server standing in for a remote model: every request
    waits ``latency`` seconds, then answers ``<think></think><action>A</action>`` with ``A`` one
    of the prompt's admissible actions, picked by a hash of (prompt, request seed), so equal
    requests get equal answers whatever order they arrive in. Serves each request on its own
    thread (as a real server answers concurrent requests).

    Example:
        >>> with serve_chat(latency=0.0) as server:
        ...     from agentbench_rl.agents.openai_http import ChatClient
        ...     client = ChatClient(server.base_url)
        ...     client.chat("m", "Admissible actions: up, down", seed=1) in (
        ...         "<think></think><action>up</action>", "<think></think><action>down</action>")
        True
    """

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, latency: float) -> None:
        super().__init__(("127.0.0.1", 0), _ChatHandler)
        self.latency = latency
        self.requests = 0  # answered so far
        self.in_flight = 0
        self.peak = 0  # the most requests served at once
        self._count = threading.Lock()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def answer(self, payload: dict[str, Any]) -> str:
        """The answer to one chat request (after the latency)."""
        with self._count:
            self.requests += 1
        prompt = str(payload["messages"][-1]["content"])
        found = _ADMISSIBLE.search(prompt)
        actions = found.group(1).split(", ") if found else [""]
        pick = seed_from(prompt, payload.get("seed", 0)) % len(actions)
        return f"<think></think><action>{actions[pick]}</action>"


class _ChatHandler(BaseHTTPRequestHandler):
    server: LatencyChatServer
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers
    disable_nagle_algorithm = True  # headers and body go out at once (as uvicorn's do)

    def log_message(self, format: str, *args: Any) -> None:  # no access log on the console
        pass

    def _send(self, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send({"data": [{"id": "latency-test"}]})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        payload = json.loads(self.rfile.read(length))
        server = self.server
        with server._count:
            server.in_flight += 1
            server.peak = max(server.peak, server.in_flight)
        time.sleep(server.latency)
        with server._count:
            server.in_flight -= 1
        content = server.answer(payload)
        self._send({"choices": [{"message": {"role": "assistant", "content": content}}]})


@contextmanager
def serve_chat(latency: float) -> Iterator[LatencyChatServer]:
    """A :class:`LatencyChatServer` running on a background thread for the ``with`` block."""
    server = LatencyChatServer(latency)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _serve_in_process(latency: float, ports: Any) -> None:
    server = LatencyChatServer(latency)
    ports.put(server.server_address[1])
    server.serve_forever()


@contextmanager
def serve_chat_process(latency: float) -> Iterator[str]:
    """A :class:`LatencyChatServer` in its own process (as a remote server is: it does not
    compete with the client for the interpreter lock); yields its base URL."""
    context = multiprocessing.get_context("spawn")
    ports = context.Queue()
    process = context.Process(target=_serve_in_process, args=(latency, ports), daemon=True)
    process.start()
    try:
        yield f"http://127.0.0.1:{ports.get(timeout=120)}/v1"
    finally:
        process.terminate()
        process.join()


def _alternate(sides: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Median seconds of each side, the sides run in turn ``repeats`` times."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(repeats):
        for name, function in sides.items():
            began = time.perf_counter()
            function()
            times[name].append(time.perf_counter() - began)
    return {name: statistics.median(values) for name, values in times.items()}


def _warm_levels(levels: int) -> None:
    """Build the Sokoban val levels of this process before any timing (the first reset builds
    the split's levels; neither side should pay it)."""
    from agentbench_rl.envs import env_class, make

    task = env_class("sokoban").task_ids("val")[: max(1, levels)][-1]
    make("sokoban", split="val").reset(seed=0, options={"task_id": task})


def save_tiny_checkpoint(folder: Path, seed: int = 0, tiny: Any = None) -> Path:
    """The trainer's tiny Sokoban model (``choose`` mode, untrained; ``tiny``: a
    ``TinyModelConfig`` other than the trainer's) saved as an ``hf:`` folder."""
    from agentbench_rl.envs.spec import EnvSpec
    from agentbench_rl.models.tiny import build_tiny
    from agentbench_rl.rollout.scripted import tokenizer_texts
    from agentbench_rl.train.config import TrainConfig
    from agentbench_rl.train.ppo import make_policy

    config = TrainConfig(env="sokoban", action_mode="choose")
    size = tiny if tiny is not None else config.tiny
    model, tokenizer = build_tiny(
        tokenizer_texts(
            EnvSpec(name="sokoban", split="train"),
            config.prompt_config(),
            size.tokenizer_episodes,
            seed,
        ),
        size,
        seed,
    )
    make_policy(model, tokenizer, config).save(folder)
    return folder


def measure_hf(
    levels: int, batch_size: int, repeats: int, work: Path, tiny: Any = None
) -> dict[str, float]:
    """Seconds for the harness (``hf:`` agent, ``batch_size``, loading the checkpoint as a user
    would) and the trainer's batched rollout (the policy already in memory) to play the first
    ``levels`` Sokoban val levels (seed 0: the same tasks and env seeds; the two draw their
    samples from different streams)."""
    import torch

    from agentbench_rl.envs import env_class
    from agentbench_rl.envs.spec import EnvSpec
    from agentbench_rl.harness.config import EvalConfig, RunOptions
    from agentbench_rl.harness.evaluate import evaluate
    from agentbench_rl.models.policy import load_saved_policy
    from agentbench_rl.rollout.batched import rollout_groups
    from agentbench_rl.rollout.workers import LocalEnvPool

    folder = save_tiny_checkpoint(work / "tiny", tiny=tiny)
    config = EvalConfig(
        env=EnvSpec(name="sokoban", split="val"), agent=f"hf:{folder}", limit=levels
    )
    tasks = env_class("sokoban").task_ids("val")[:levels]
    policy = load_saved_policy(str(folder), {"device": "cpu"})
    policy.forward_batch_size = batch_size
    runs = iter(range(10**6))
    _warm_levels(levels)

    def harness() -> None:
        evaluate(config, work / f"harness-{next(runs)}", RunOptions(batch_size=batch_size))

    def trainer() -> None:
        generator = torch.Generator().manual_seed(0)
        for start in range(0, len(tasks), batch_size):
            chunk = tasks[start : start + batch_size]
            pool = LocalEnvPool(EnvSpec(name="sokoban", split="val"), len(chunk))
            rollout_groups(pool, policy, "sokoban", policy.prompt, chunk, 1, 0, generator)

    return _alternate({"harness": harness, "trainer": trainer}, repeats)


def measure_openai(
    episodes: int,
    concurrency: int,
    latency: float,
    max_steps: int | None,
    repeats: int,
    work: Path,
) -> dict[str, float]:
    """Seconds for the ``openai:`` agent to play ``episodes`` Sokoban val episodes against a
    :class:`LatencyChatServer`, at ``concurrency`` and at 1; checks both wrote the same file."""
    from agentbench_rl.envs.spec import EnvSpec
    from agentbench_rl.harness.config import EvalConfig, RunOptions
    from agentbench_rl.harness.evaluate import evaluate

    with serve_chat_process(latency) as base_url:
        config = EvalConfig(
            env=EnvSpec(name="sokoban", split="val", max_steps=max_steps),
            agent=f"openai:{base_url}#latency-test?temperature=0",
            limit=episodes,
        )
        runs = iter(range(10**6))
        folders: dict[str, Path] = {}
        _warm_levels(episodes)

        def run(name: str, c: int) -> Callable[[], None]:
            def side() -> None:
                folders[name] = work / f"{name}-{next(runs)}"
                evaluate(config, folders[name], RunOptions(concurrency=c))

            return side

        seconds = _alternate(
            {"concurrent": run("concurrent", concurrency), "sequential": run("sequential", 1)},
            repeats,
        )
        same = (folders["concurrent"] / "episodes.csv").read_bytes() == (
            folders["sequential"] / "episodes.csv"
        ).read_bytes()
        if not same:
            raise RuntimeError("bench eval: concurrent and sequential runs wrote other episodes")
        return seconds


def run(
    console: Console,
    levels: int = 200,
    batch_size: int = 50,
    episodes: int = 64,
    concurrency: int = 32,
    latency: float = 0.05,
    max_steps: int | None = None,
    repeats: int = 3,
) -> dict[str, float]:
    """Measure both ratios, print them as a table and return the figures."""
    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="agentbench-bench-eval-") as folder:
        work = Path(folder)
        hf = measure_hf(levels, batch_size, repeats, work / "hf")
        api = measure_openai(episodes, concurrency, latency, max_steps, repeats, work / "openai")
    figures = {
        "hf_harness_s": hf["harness"],
        "hf_trainer_s": hf["trainer"],
        "hf_ratio": hf["harness"] / hf["trainer"],
        "openai_concurrent_s": api["concurrent"],
        "openai_sequential_s": api["sequential"],
        "openai_speedup": api["sequential"] / api["concurrent"],
    }
    table = Table(title="bench eval (median of alternating runs)")
    for column in ("comparison", "seconds", "ratio", "goal"):
        table.add_column(column)
    table.add_row(
        f"hf: tiny, {levels} Sokoban val levels: harness --batch-size {batch_size} / trainer",
        f"{hf['harness']:.2f} / {hf['trainer']:.2f}",
        f"{figures['hf_ratio']:.2f}x",
        "<= 1.5x",
    )
    table.add_row(
        f"openai: {episodes} episodes, +{latency * 1000:.0f} ms per request: "
        f"concurrency 1 / {concurrency}",
        f"{api['sequential']:.2f} / {api['concurrent']:.2f}",
        f"{figures['openai_speedup']:.1f}x",
        ">= 20x",
    )
    console.print(table)
    return figures

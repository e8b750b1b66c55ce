"""Batched and concurrent evaluation (``eval --batch-size N --concurrency C``): the same bytes
as the sequential run for every agent kind, batch size, worker count and concurrency; resume
after a kill mid-batch; Retry-After; one-line errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any

import pytest

from agentbench_rl.agents.openai_http import ChatClient
from agentbench_rl.bench.eval import serve_chat
from agentbench_rl.harness.config import EvalConfig, RunOptions
from agentbench_rl.harness.evaluate import evaluate
from agentbench_rl.spec.results_folder import JOURNAL_FILE as JOURNAL

CLI = [sys.executable, "-m", "agentbench_rl.cli"]
REPO_ROOT = Path(__file__).resolve().parents[2]

# A user's agent that answers None now and then (an invalid, non-string step) and otherwise a
# seeded random admissible action: its rows must come out the same in any batch.
ODD_AGENT = """
import random, time

class OddRandom:
    def begin_episode(self, env, seed):
        self.rng = random.Random(seed)
    def act(self, observation, info):
        time.sleep(float(__import__("os").environ.get("ODD_AGENT_SLEEP", "0")))
        if self.rng.random() < 0.1:
            return None
        return self.rng.choice(info["admissible_actions"])
"""

# A user's batched agent: one seeded stream per row, reseeded at every batch.
BATCH_AGENT = """
import random

class RowRandom:
    name = "row-random"
    def begin_episodes(self, envs, seeds):
        self.rngs = [random.Random(seed) for seed in seeds]
    def act_batch(self, observations, infos, *, rows, histories):
        return [self.rngs[row].choice(info["admissible_actions"]) for row, info in zip(rows, infos)]
"""


def _files(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in ("episodes.csv", "summary.json")}


@pytest.fixture
def odd_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "odd_agent.py").write_text(ODD_AGENT)
    (tmp_path / "batch_agent.py").write_text(BATCH_AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{REPO_ROOT}")
    return "python:odd_agent:OddRandom"


@pytest.mark.parametrize("agent", ["random", "expert", "odd", "batched"])
def test_batches_write_the_sequential_bytes(agent: str, odd_agent: str, tmp_path: Path) -> None:
    spec = {"odd": odd_agent, "batched": "python:batch_agent:RowRandom"}.get(agent, agent)
    config = EvalConfig(env="sokoban", split="test", agent=spec, seeds=[0, 1], limit=7)
    sequential = evaluate(config, tmp_path / "sequential")
    if agent == "odd":
        assert sequential.non_string_actions > 0  # the test has the case it is about
    for batch_size in (2, 5, 14, 30):  # uneven, one batch of all, larger than the jobs
        evaluate(config, tmp_path / f"batch-{batch_size}", RunOptions(batch_size=batch_size))
        assert _files(tmp_path / f"batch-{batch_size}") == _files(tmp_path / "sequential")


def test_batches_in_worker_processes_write_the_sequential_bytes(tmp_path: Path) -> None:
    config = EvalConfig(env="sokoban", split="test", agent="random", seeds=[0, 1], limit=6)
    evaluate(config, tmp_path / "sequential")
    evaluate(config, tmp_path / "workers", RunOptions(workers=2, batch_size=4))
    assert _files(tmp_path / "workers") == _files(tmp_path / "sequential")


def test_openai_concurrency_writes_the_sequential_bytes(tmp_path: Path) -> None:
    with serve_chat(latency=0.02) as server:
        config = EvalConfig(
            env="sokoban",
            split="test",
            agent=f"openai:{server.base_url}#m?temperature=0",
            limit=6,
            max_steps=5,
        )
        evaluate(config, tmp_path / "sequential")
        sequential_requests, server.requests = server.requests, 0
        assert server.peak == 1
        evaluate(
            config, tmp_path / "concurrent", RunOptions(concurrency=4)
        )  # batch size 4 by default
        assert server.requests == sequential_requests  # the same requests, nothing repeated
        assert server.peak > 1  # and they did overlap
        evaluate(config, tmp_path / "mixed", RunOptions(batch_size=5, concurrency=2))
    assert _files(tmp_path / "concurrent") == _files(tmp_path / "sequential")
    assert _files(tmp_path / "mixed") == _files(tmp_path / "sequential")


class _RateLimited(BaseHTTPRequestHandler):
    """Refuses the first request with 429 and ``Retry-After: 3``, then answers."""

    refused = 0

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if _RateLimited.refused == 0:
            _RateLimited.refused += 1
            self.send_response(429)
            self.send_header("Retry-After", "3")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({"choices": [{"message": {"content": "ok"}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_retry_after_is_honoured() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RateLimited)
    Thread(target=server.serve_forever, daemon=True).start()
    waits: list[float] = []
    try:
        client = ChatClient(f"http://127.0.0.1:{server.server_address[1]}/v1", sleep=waits.append)
        assert client.chat("m", "hello") == "ok"
    finally:
        server.shutdown()
        server.server_close()
    assert waits == [3.0]  # the server's 3 s, not the 0.5 s first backoff


class _ClosesSilently(BaseHTTPRequestHandler):
    """Keep-alive by its protocol, but closes the connection after every answer without
    saying so (as servers do with idle connections): the client's kept connection goes stale."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps({"choices": [{"message": {"content": "ok"}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True


def test_a_stale_kept_connection_is_reopened_without_a_retry() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ClosesSilently)
    Thread(target=server.serve_forever, daemon=True).start()
    waits: list[float] = []
    try:
        client = ChatClient(
            f"http://127.0.0.1:{server.server_address[1]}/v1", retries=0, sleep=waits.append
        )
        answers = [client.chat("m", "hello") for _ in range(3)]  # no retries allowed
    finally:
        server.shutdown()
        server.server_close()
    assert answers == ["ok"] * 3 and waits == []


def test_killed_batched_eval_resumes_to_the_sequential_bytes(
    odd_agent: str, tmp_path: Path
) -> None:
    args = ["eval", "--env", "sokoban", "--split", "test", "--agent", odd_agent]
    args += ["--seeds", "0", "1", "--limit", "30"]
    env = dict(os.environ)
    subprocess.run(
        [*CLI, *args, "--out", str(tmp_path / "full")], env=env, check=True, capture_output=True
    )
    run = tmp_path / "killed"
    slow = {**env, "ODD_AGENT_SLEEP": "0.002"}
    process = subprocess.Popen(
        [*CLI, *args, "--out", str(run), "--batch-size", "8"],
        env=slow,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    journal = run / JOURNAL
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if journal.exists() and journal.read_text().count("\n") >= 12:
            break
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    done_before = journal.read_text().count("\n")
    # >= 12 of 60: the first batch of 8 is recorded and the second is being played (its
    # episodes end at different steps, so the journal gains them one by one)
    assert 12 <= done_before < 60, "the run must be killed midway"
    subprocess.run(
        [*CLI, *args, "--out", str(run), "--resume", "--batch-size", "5"],
        env=env,
        check=True,
        capture_output=True,
    )
    assert _files(run) == _files(tmp_path / "full")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--agent", "random", "--concurrency", "4"], "--concurrency applies to openai: agents"),
        (["--agent", "random", "--batch-size", "0"], "batch_size must be a whole number >= 1"),
        (["--agent", "random", "--concurrency", "0"], "concurrency must be a whole number >= 1"),
    ],
)
def test_bad_batch_arguments_exit_with_one_line(
    args: list[str], message: str, tmp_path: Path
) -> None:
    result = subprocess.run(
        [*CLI, "eval", "--env", "sokoban", "--out", str(tmp_path / "x"), *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr

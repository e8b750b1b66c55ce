"""``openai:`` agents against a small local OpenAI-compatible server serving the tiny model.

The server listens on 127.0.0.1 only, on a free port, answers a bounded number of requests and
is shut down by the fixture.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
torch.set_num_threads(1)

from agentbench_rl.agents import load_agent  # noqa: E402
from agentbench_rl.agents.openai_http import (  # noqa: E402
    ChatClient,
    OpenAIAgent,
    ServerError,
    parse_spec,
)
from agentbench_rl.envs.spec import EnvSpec  # noqa: E402
from agentbench_rl.harness.config import EvalConfig  # noqa: E402
from agentbench_rl.harness.evaluate import evaluate  # noqa: E402
from agentbench_rl.models.policy import Policy  # noqa: E402
from agentbench_rl.models.tiny import TinyModelConfig, build_tiny  # noqa: E402
from agentbench_rl.prompting import PromptConfig, build_prompt  # noqa: E402
from agentbench_rl.rollout.scripted import tokenizer_texts  # noqa: E402

MAX_REQUESTS = 200  # the server refuses more than this (a bounded test)


class TinyChatServer(ThreadingHTTPServer):
    """``/v1/models`` and ``/v1/chat/completions`` backed by the tiny model (generate mode)."""

    def __init__(self, policy: Policy, failures_first: int = 0) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.policy = policy
        self.failures_left = failures_first
        self.requests: list[dict[str, Any]] = []
        self.headers_seen: list[dict[str, str]] = []
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: TinyChatServer

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        return

    def _answer(self, status: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _refuse_if_exhausted(self) -> bool:
        with self.server.lock:
            if len(self.server.requests) >= MAX_REQUESTS:
                self._answer(429, {"error": "request budget of the test server spent"})
                return True
            self.server.headers_seen.append(dict(self.headers))
            if self.server.failures_left > 0:
                self.server.failures_left -= 1
                self._answer(503, {"error": "warming up"})
                return True
        return False

    def do_GET(self) -> None:
        if self._refuse_if_exhausted():
            return
        if self.path == "/v1/models":
            self._answer(200, {"object": "list", "data": [{"id": "tiny", "object": "model"}]})
        else:
            self._answer(404, {"error": "not found"})

    def do_POST(self) -> None:
        if self._refuse_if_exhausted():
            return
        length = int(self.headers.get("Content-Length", "0"))
        request = json.loads(self.rfile.read(length))
        with self.server.lock:
            self.server.requests.append(request)
        if self.path != "/v1/chat/completions":
            self._answer(404, {"error": "not found"})
            return
        prompt = request["messages"][-1]["content"]
        generator = torch.Generator().manual_seed(int(request.get("seed", 0)))
        policy = self.server.policy
        with self.server.lock:  # one forward at a time
            text = policy.act([prompt], [["up"]], generator).responses[0]
        self._answer(
            200,
            {
                "object": "chat.completion",
                "model": request["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
            },
        )


@pytest.fixture(scope="module")
def tiny_policy() -> Policy:
    prompt = PromptConfig(mode="generate")
    small = TinyModelConfig(
        hidden_size=32, layers=1, heads=2, kv_heads=1, intermediate_size=64, tokenizer_episodes=2
    )
    model, tokenizer = build_tiny(
        tokenizer_texts(
            EnvSpec(name="sokoban", split="train"), prompt, small.tokenizer_episodes, 0
        ),
        small,
        0,
    )
    return Policy(model, tokenizer, prompt, hidden_layer=1, max_new_tokens=6)


def serve(policy: Policy, failures_first: int = 0) -> Iterator[TinyChatServer]:
    server = TinyChatServer(policy, failures_first)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def server(tiny_policy: Policy) -> Iterator[TinyChatServer]:
    yield from serve(tiny_policy)


def test_spec_parsing() -> None:
    assert parse_spec("openai:http://127.0.0.1:8000/v1#Qwen/Qwen2.5-7B-Instruct") == (
        "http://127.0.0.1:8000/v1",
        "Qwen/Qwen2.5-7B-Instruct",
        {},
    )
    with pytest.raises(ValueError, match="expected openai:<base_url>#<model>"):
        parse_spec("openai:http://127.0.0.1:8000/v1")
    with pytest.raises(ValueError, match="must start with http"):
        parse_spec("openai:127.0.0.1#m")
    with pytest.raises(ValueError, match="unknown option"):
        parse_spec("openai:http://h/v1#m?colour=red")


def test_agent_plays_sokoban_through_the_harness(
    server: TinyChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    spec = f"openai:{server.base_url}#tiny?temperature=0.7&max_tokens=6"
    config = EvalConfig(env="sokoban", split="val", agent=spec, limit=2, max_steps=3)
    summary = evaluate(config, tmp_path / "run")
    assert summary.n_episodes == 2 and summary.mean_steps <= 3
    chats = [r for r in server.requests if "messages" in r]
    assert 2 <= len(chats) <= 6
    first = chats[0]
    assert first["model"] == "tiny" and first["temperature"] == 0.7 and first["max_tokens"] == 6
    from agentbench_rl.envs import make

    env = make("sokoban", split="val", max_steps=3)
    # The first episode plays the first task of the --limit sample (seeded, stratified).
    observation, info = env.reset(options={"task_id": config.tasks()[0]})
    expected = build_prompt(
        "sokoban", observation, [], info["admissible_actions"], PromptConfig(mode="generate")
    )
    assert first["messages"] == [{"role": "user", "content": expected}]
    assert all(h.get("Authorization") == "Bearer sk-test" for h in server.headers_seen)


def test_same_seed_same_episodes(server: TinyChatServer, tmp_path: Path) -> None:
    spec = f"openai:{server.base_url}#tiny"
    config = EvalConfig(env="sokoban", split="val", agent=spec, limit=2, max_steps=3)
    evaluate(config, tmp_path / "a")
    evaluate(config, tmp_path / "b")
    assert (tmp_path / "a" / "episodes.csv").read_text() == (
        tmp_path / "b" / "episodes.csv"
    ).read_text()


def test_retries_with_backoff_after_server_errors(tiny_policy: Policy) -> None:
    for server in serve(tiny_policy, failures_first=2):
        waits: list[float] = []
        client = ChatClient(server.base_url, retries=3, backoff=0.5, sleep=waits.append)
        agent = OpenAIAgent(f"openai:{server.base_url}#tiny", client=client)
        assert waits == [0.5, 1.0]  # two 503s, then the model list
        agent.begin_episode(type("E", (), {"env_name": "sokoban"})(), seed=1)  # type: ignore[arg-type]
        answer = agent.act("#P#", {"admissible_actions": ["up"]})
        assert isinstance(answer, str)


def test_unreachable_server_is_one_clear_error() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ValueError, match=r"cannot reach http://127\.0\.0\.1:\d+/v1/models after 2"):
        load_agent(f"openai:http://127.0.0.1:{port}/v1#tiny?retries=1&timeout=2")


def test_client_error_is_not_retried(server: TinyChatServer) -> None:
    waits: list[float] = []
    client = ChatClient(server.base_url, retries=3, sleep=waits.append)
    with pytest.raises(ServerError, match="HTTP 404"):
        client.request("GET", "/nope")
    assert waits == []

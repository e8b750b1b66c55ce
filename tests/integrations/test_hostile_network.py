"""Hostile servers for the ``openai:`` agent: every answer is bounded in size and time, parsed
in linear time, never played when it is a redirect, printed without control characters, and
Ctrl-C ends the requests in flight at once. Every case here hung, grew without bound, printed
raw escape sequences or was a traceback before the client was hardened."""

from __future__ import annotations

import json
import re
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_cli_newcomer import interruptible  # Ctrl-C as a terminal gives it, in a child

from agentbench_rl.agents.openai_http import (
    MAX_ANSWER_BYTES,
    ChatClient,
    OpenAIAgent,
    ServerError,
)
from agentbench_rl.core.text import printable
from agentbench_rl.prompting import format_ok

REPO_ROOT = Path(__file__).resolve().parents[2]
MODELS = b'{"data": [{"id": "m"}]}'
CLI_EVAL = [sys.executable, "-m", "agentbench_rl.cli", "eval", "--agent"]

#: What a hostile server does with one request: it gets the socket and the request's first line.
Behaviour = Callable[[socket.socket, str], None]


def answer(status: str, body: bytes, headers: str = "") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n{headers}\r\n"
    return head.encode("latin-1") + body


def models_then(behaviour: Behaviour) -> Behaviour:
    """Answer GET /models properly (the agent asks it when built), everything else hostilely."""

    def serve(connection: socket.socket, request_line: str) -> None:
        if request_line.startswith("GET"):
            connection.sendall(answer("200 OK", MODELS))
        else:
            behaviour(connection, request_line)

    return serve


@contextmanager
def hostile_server(behaviour: Behaviour) -> Iterator[str]:
    """A server on 127.0.0.1 that reads each request and hands the socket to ``behaviour``."""

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            stream = self.request.makefile("rb")
            while True:
                request_line = stream.readline().decode("latin-1")
                if not request_line:
                    return
                length = 0
                while (line := stream.readline()) not in (b"\r\n", b""):
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                stream.read(length)
                try:
                    behaviour(self.request, request_line)
                except OSError:  # the client went away: what a hostile server cannot stop
                    return

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def huge_answer(connection: socket.socket, request_line: str) -> None:
    """A 100 MB answer, its size announced honestly."""
    block = b"x" * (1 << 20)
    connection.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {100 << 20}\r\n\r\n".encode())
    for _ in range(100):
        connection.sendall(block)


def unannounced_huge_answer(connection: socket.socket, request_line: str) -> None:
    """A 100 MB answer without a length (read until the server closes)."""
    connection.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
    for _ in range(100):
        connection.sendall(b"x" * (1 << 20))


def slow_drip(connection: socket.socket, request_line: str) -> None:
    """A valid answer, one byte every 0.1 s (each read well within a per-read timeout)."""
    for byte in answer("200 OK", b'{"choices": []}' * 50):
        connection.sendall(bytes([byte]))
        time.sleep(0.1)


def never_answers(connection: socket.socket, request_line: str) -> None:
    time.sleep(120)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("behaviour", [huge_answer, unannounced_huge_answer])
def test_an_answer_past_the_size_cap_is_refused(behaviour: Behaviour) -> None:
    with hostile_server(models_then(behaviour)) as url:
        client = ChatClient(url, retries=0)
        client.request("GET", "/models")
        with pytest.raises(ServerError, match="over the 16 MiB limit"):
            client.chat("m", "hello")
    assert MAX_ANSWER_BYTES == 16 * 2**20


@pytest.mark.timeout(60)
def test_a_slow_drip_is_cut_off_at_the_whole_request_deadline() -> None:
    with hostile_server(models_then(slow_drip)) as url:
        client = ChatClient(url, timeout=1.0, retries=0)
        client.request("GET", "/models")
        began = time.monotonic()
        with pytest.raises(ServerError, match="no complete answer within 1 s"):
            client.chat("m", "hello")
        assert time.monotonic() - began < 5  # the drip alone would take 78 s


def drip_body(connection: socket.socket, request_line: str) -> None:
    """Headers at once, then the body one byte every 0.2 s (the cut body is not JSON)."""
    body = MODELS + b" " * 200
    connection.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode())
    for byte in body:
        connection.sendall(bytes([byte]))
        time.sleep(0.2)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("behaviour", [slow_drip, drip_body, never_answers])
def test_the_agent_check_of_a_dripping_server_keeps_its_timeout(behaviour: Behaviour) -> None:
    """``GET /models`` when the agent is built took 60 s with ``timeout=5`` and then said "not
    JSON": one exchange within the timeout, and the line says the deadline cut it."""
    with hostile_server(behaviour) as url:
        began = time.monotonic()
        with pytest.raises(ValueError, match=r"no complete answer within 1 s \(the deadline"):
            OpenAIAgent(f"openai:{url}#m?timeout=1")
        assert time.monotonic() - began < 3


def test_a_redirect_is_never_played_as_the_answer() -> None:
    content = json.dumps({"choices": [{"message": {"content": "<action>up</action>"}}]}).encode()
    redirect = answer("307 Temporary Redirect", content, "Location: http://elsewhere/v1\r\n")
    with hostile_server(models_then(lambda c, r: c.sendall(redirect))) as url:
        client = ChatClient(url, retries=0)
        with pytest.raises(
            ServerError, match=r"answered 307 \(a redirect to http://elsewhere/v1\)"
        ):
            client.chat("m", "hello")
        client.close()


def test_a_deeply_nested_model_list_is_one_line() -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    refused = pytest.raises(ValueError, match="the answer is not JSON \\(nested deeper than 64")
    with hostile_server(lambda c, r: c.sendall(answer("200 OK", deep))) as url, refused:
        OpenAIAgent(f"openai:{url}#m?retries=0")


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("timeout=inf", "timeout must be in (0, 3600] seconds, got inf"),
        ("timeout=nan", "timeout must be in (0, 3600] seconds, got nan"),
        ("timeout=0", "timeout must be in (0, 3600] seconds, got 0.0"),
        ("timeout=-1", "timeout must be in (0, 3600] seconds, got -1.0"),
        ("retries=-1", "retries must be a whole number in 0..20, got -1"),
        ("max_tokens=-1", "max_tokens must be >= 1, got -1"),
        ("temperature=nan", "temperature must be a number >= 0, got nan"),
        ("history=-2", "history must be >= 0, got -2"),
    ],
)
def test_bad_agent_options_are_one_line_before_any_request(option: str, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        OpenAIAgent(f"openai:http://127.0.0.1:9/v1#m?{option}")
    assert message in str(refused.value) and "\n" not in str(refused.value)


ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b]52;c;ZXZpbA==\x07\nerror: forged line"


def test_server_text_reaches_messages_without_control_characters() -> None:
    body = ESCAPES.encode()
    reasons = answer(f"418 {ESCAPES.splitlines()[0]}", body)
    with hostile_server(models_then(lambda c, r: c.sendall(reasons))) as url:
        client = ChatClient(url, retries=0)
        with pytest.raises(ServerError) as refused:
            client.chat("m", "hello")
        client.close()
    text = str(refused.value)
    assert text.isprintable() and "\\x1b]0;owned" in text


def test_the_cli_prints_a_hostile_error_as_one_plain_line(tmp_path: Path) -> None:
    body = ESCAPES.encode()
    with hostile_server(lambda c, r: c.sendall(answer("404 Not Found", body))) as url:
        done = subprocess.run(
            [*CLI_EVAL, f"openai:{url}#m", "--limit", "1", "--out", str(tmp_path / "out")],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO_ROOT,
        )
    assert done.returncode == 2
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr
    assert len(done.stderr.splitlines()) == 1  # the forged "error:" stays inside the one line
    assert done.stderr.startswith("error:") and "\\x0aerror: forged line" in done.stderr


@pytest.mark.timeout(120)
def test_ctrl_c_with_concurrent_requests_stops_at_once(tmp_path: Path) -> None:
    arrived = threading.Semaphore(0)

    def hang(connection: socket.socket, request_line: str) -> None:
        arrived.release()
        never_answers(connection, request_line)

    out = str(tmp_path / "out")
    with hostile_server(models_then(hang)) as url:
        process = subprocess.Popen(
            [*CLI_EVAL, f"openai:{url}#m", "--limit", "4", "--concurrency", "2", "--out", out],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
            preexec_fn=interruptible,
        )
        try:
            assert arrived.acquire(timeout=60) and arrived.acquire(timeout=30)  # two in flight
            process.send_signal(signal.SIGINT)
            began = time.monotonic()
            _, stderr = process.communicate(timeout=60)
            stopped_after = time.monotonic() - began
        finally:
            process.kill()
    assert process.returncode == 130 and "interrupted" in stderr
    assert stopped_after < 10  # it waited 117 s for the retries in flight before


@pytest.mark.timeout(30)
def test_format_check_is_linear_on_many_unclosed_tags() -> None:
    assert not format_ok("<think>a</think>" + "<action>" * 200_000)  # 1.6 MB stalled a run 200 s
    assert not format_ok("<action>" * 16_000)


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_ACTION = re.compile(r"<action>.*?</action>", re.DOTALL | re.IGNORECASE)


def regex_format_ok(response: str) -> bool:
    """The format rule as the papers' regexes state it (quadratic, but independent)."""
    if len(_THINK.findall(response)) != 1 or len(_ACTION.findall(response)) != 1:
        return False
    return response.lower().index("<think>") < response.lower().index("<action>")


@given(
    st.lists(
        st.sampled_from(["<think>", "</think>", "<action>", "</Action>", "<ACTION>", "x", " "]),
        max_size=12,
    )
)
def test_format_check_agrees_with_the_regex_rule(parts: list[str]) -> None:
    response = "".join(parts)
    assert format_ok(response) == regex_format_ok(response)


def test_printable_escapes_every_control_and_keeps_text() -> None:
    assert printable("plain text, ünïcödé") == "plain text, ünïcödé"
    shown = printable("a\x1b[31mb\r\nc\u202ed\x7f")
    assert shown.isprintable() and shown == "a\\x1b[31mb\\x0d\\x0ac\\u202ed\\x7f"


def drip_for_a_minute(connection: socket.socket, request_line: str) -> None:
    """Headers at once, then one byte every 0.5 s for 60 s (the issue-63 server)."""
    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
    for _ in range(120):
        connection.sendall(b" ")
        time.sleep(0.5)


@pytest.mark.timeout(120)
def test_the_whole_eval_process_ends_at_the_agents_deadline(tmp_path: Path) -> None:
    """The deadline ends the exchange, not only the message: ``eval`` printed "no complete
    answer within 5 s" but exited only when the dripping server stopped, at 63.6 s."""
    with hostile_server(models_then(drip_for_a_minute)) as url:
        began = time.monotonic()
        agent = f"openai:{url}#m?timeout=5&retries=0"
        out = str(tmp_path / "out")
        done = subprocess.run(
            [*CLI_EVAL, agent, "--env", "sokoban", "--limit", "1", "--out", out],
            capture_output=True,
            text=True,
            timeout=100,
        )
        took = time.monotonic() - began
    assert done.returncode == 2 and "no complete answer within 5 s" in done.stderr
    assert took < 5 + 25  # the deadline and the interpreter's start on a busy machine, not 60 s

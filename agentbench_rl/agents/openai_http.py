"""``openai:<base_url>#<model>``: any OpenAI-compatible chat server as a harness agent.

``vllm serve``, most hosted models and many local servers speak this API. The agent sends each
step's prompt (:mod:`agentbench_rl.agents.prompting`, ``generate`` format) as one user message
to ``<base_url>/chat/completions`` (with the frame as a base64 PNG image part when the
observation has one, as visual Sokoban's does) and hands the answer to the env, which extracts
``<action>...</action>``. Options after the model name: ``#model?temperature=0.7&history=2&
max_tokens=512``. The API key is read from ``$OPENAI_API_KEY`` (or the variable named by the
``api_key_env`` option); requests that fail to connect, time out, or get 429/5xx are retried
with exponential backoff, waiting at least what a ``Retry-After`` header asks. The server is
asked for its model list when the agent is built, so an unreachable URL fails at once with one
line.

It is a batched agent: ``act_batch`` sends one request per live episode, up to ``concurrency``
at once (threads: each request is a blocking ``urllib`` call that releases the GIL while it
waits; ``eval --concurrency C`` sets it). Every request carries its own seed, (episode seed +
step), and answers are matched to their rows, so the results are the same whatever the batch
size and concurrency.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import numpy as np

from agentbench_rl.agents.base import PromptingBatchAgent
from agentbench_rl.agents.prompting import HistoryStep, PromptConfig

OPTIONS = ("temperature", "history", "max_tokens", "api_key_env", "timeout", "retries")
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class ServerError(RuntimeError):
    """The server could not be reached or kept failing after every retry."""


def parse_spec(spec: str) -> tuple[str, str, dict[str, str]]:
    """Split ``openai:<base_url>#<model>?k=v`` into base URL, model and options.

    Example:
        >>> parse_spec("openai:http://127.0.0.1:8000/v1#qwen?temperature=0")
        ('http://127.0.0.1:8000/v1', 'qwen', {'temperature': '0'})
    """
    body = spec.removeprefix("openai:")
    base_url, sep, rest = body.partition("#")
    model, _, query = rest.partition("?")
    if not sep or not base_url or not model:
        raise ValueError(f"agent '{spec}': expected openai:<base_url>#<model>")
    if not base_url.startswith(("http://", "https://")):
        raise ValueError(f"agent '{spec}': the base URL must start with http:// or https://")
    options = dict(parse_qsl(query, keep_blank_values=True))
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        accepted = ", ".join(OPTIONS)
        raise ValueError(f"agent '{spec}': unknown option(s) {', '.join(unknown)} ({accepted=})")
    return base_url.rstrip("/"), model, options


def png_bytes(image: Any) -> bytes:
    """An RGB uint8 array (height, width, 3) as a PNG file.

    Written with the standard library (zlib) because the core package carries no image
    library; frames are small and lossless PNG keeps every pixel the env drew.

    Example:
        >>> png_bytes([[[255, 0, 0]]])[:8]
        b'\\x89PNG\\r\\n\\x1a\\n'
    """
    pixels = np.asarray(image, dtype=np.uint8)
    height, width = pixels.shape[:2]
    raw = b"".join(b"\x00" + row.tobytes() for row in pixels)  # filter 0 on every scanline

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def user_content(prompt: str) -> str | list[dict[str, Any]]:
    """The user message's content: the prompt text, or, when the prompt shows frames
    (:class:`~agentbench_rl.agents.prompting.Prompt`), each frame as a base64 PNG
    ``image_url`` part followed by the text part (the OpenAI vision format vLLM serves).

    Example:
        >>> user_content("#P#")
        '#P#'
    """
    images = getattr(prompt, "images", ())
    if not images:
        return str(prompt)
    parts: list[dict[str, Any]] = [
        {
            "type": "image_url",
            "image_url": {
                "url": "data:image/png;base64," + base64.b64encode(png_bytes(i)).decode("ascii")
            },
        }
        for i in images
    ]
    parts.append({"type": "text", "text": str(prompt)})
    return parts


def retry_after(value: str | None, now: float | None = None, cap: float = 60.0) -> float:
    """Seconds a ``Retry-After`` header asks to wait (delay seconds or an HTTP date), capped at
    ``cap``; 0 when absent or unreadable.

    Example:
        >>> retry_after("2"), retry_after(None), retry_after("soon")
        (2.0, 0.0, 0.0)
        >>> retry_after("Thu, 01 Jan 1970 00:00:10 GMT", now=4.0)
        6.0
    """
    if not value:
        return 0.0
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError, IndexError):
            return 0.0
        seconds = when - (time.time() if now is None else now)
    return min(cap, max(0.0, seconds))


class ChatClient:
    """A minimal OpenAI-compatible chat client (standard library only) with retries.

    Each thread keeps one persistent (keep-alive) connection to the server, so concurrent
    requests do not pay a TCP handshake each; a kept connection the server has closed is
    reopened at once, without counting as a failure. (Proxy variables are not read: the
    client talks to the base URL directly.)

    Args:
        base_url: e.g. ``http://127.0.0.1:8000/v1``.
        api_key: sent as ``Authorization: Bearer``; ``None`` sends none.
        timeout: seconds per request.
        retries: attempts after the first one.
        backoff: first wait in seconds, doubled after every failure (capped at 8 s); a
            ``Retry-After`` header asking for longer is honoured (up to 60 s).
        sleep: the wait function (tests pass a fake one).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        retries: int = 5,
        backoff: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.sleep = sleep
        parts = urlsplit(self.base_url)
        self._https = parts.scheme == "https"
        self._host = parts.netloc
        self._prefix = parts.path
        self._local = threading.local()

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection, and whether it was used before."""
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            return connection, True
        kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        connection = kind(self._host, timeout=self.timeout)
        self._local.connection = connection
        return connection, False

    def _send(
        self, method: str, path: str, data: bytes | None, headers: dict[str, str]
    ) -> tuple[int, str | None, bytes]:
        """One exchange: status, ``Retry-After`` and body (``OSError`` when the connection
        fails; a reused connection the server closed is reopened once)."""
        for _ in range(2):
            connection, reused = self._connection()
            try:
                connection.request(method, self._prefix + path, body=data, headers=headers)
                response = connection.getresponse()
                body = response.read()
            except (OSError, http.client.HTTPException) as error:
                connection.close()
                self._local.connection = None
                stale = isinstance(
                    error, (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)
                )
                if reused and stale:
                    continue
                if isinstance(error, http.client.HTTPException):
                    raise ConnectionError(str(error) or type(error).__name__) from None
                raise
            if response.will_close:
                connection.close()
                self._local.connection = None
            return response.status, response.getheader("Retry-After"), body
        raise ConnectionError("the server closed the connection")

    def request(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        """Send one request (with retries) and return the decoded JSON answer."""
        url = f"{self.base_url}{path}"
        data = json.dumps(payload).encode("utf-8") if payload is not None else None
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        problem, asked = "", 0.0
        for attempt in range(self.retries + 1):
            if attempt:
                self.sleep(max(asked, min(8.0, self.backoff * 2 ** (attempt - 1))))
            asked = 0.0
            try:
                status, wait, body = self._send(method, path, data, headers)
            except OSError as error:  # refused, reset, timed out, unknown host
                problem = str(error) or type(error).__name__
                continue
            if status < 400:
                try:
                    return json.loads(body.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError):
                    raise ServerError(f"{method} {url}: the answer is not JSON") from None
            problem = f"HTTP {status}: {body.decode('utf-8', 'replace')[:200]}"
            asked = retry_after(wait)
            if status not in RETRY_STATUS:
                raise ServerError(f"{method} {url} failed with {problem}")
        raise ServerError(f"cannot reach {url} after {self.retries + 1} attempts (last: {problem})")

    def chat(self, model: str, prompt: str, **sampling: Any) -> str:
        """The assistant's answer to one user message."""
        message = {"role": "user", "content": user_content(prompt)}
        payload = {"model": model, "messages": [message], **sampling}
        answer = self.request("POST", "/chat/completions", payload)
        try:
            return str(answer["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError):
            raise ServerError(f"unexpected answer from {self.base_url}: {answer!r:.200}") from None


class OpenAIAgent(PromptingBatchAgent):
    """An OpenAI-compatible chat model playing the env (see the module docstring)."""

    def __init__(self, spec: str, client: ChatClient | None = None) -> None:
        super().__init__()
        self.name = spec
        self.base_url, self.model, options = parse_spec(spec)
        try:
            self.temperature = float(options.get("temperature", 1.0))
            self.max_tokens = int(options.get("max_tokens", 512))
            history = int(options.get("history", 2))
            timeout = float(options.get("timeout", 60))
            retries = int(options.get("retries", 5))
        except ValueError as problem:
            raise ValueError(f"agent '{spec}': bad option value ({problem})") from None
        self.prompt = PromptConfig(history=history, mode="generate")
        api_key = os.environ.get(options.get("api_key_env", "OPENAI_API_KEY"))
        self.client = client or ChatClient(self.base_url, api_key, timeout, retries)
        try:
            self.client.request("GET", "/models")
        except ServerError as problem:
            raise ValueError(f"agent '{spec}': {problem}") from None
        #: Requests in flight at most (``eval --concurrency``).
        self.concurrency = 1
        self._pool: ThreadPoolExecutor | None = None  # made on the first concurrent batch
        self._pool_size = 0

    #: Answers must keep the papers' format (the driver's validity rule).
    answer_format = "generate"

    def act_batch(
        self,
        observations: Sequence[Any],
        infos: Sequence[dict[str, Any]],
        *,
        rows: Sequence[int],
        histories: Sequence[Sequence[HistoryStep]],
    ) -> list[str]:
        """Every row's answer: one request per row, up to ``concurrency`` at once, each with
        its own seed (episode seed + step)."""
        prompts = self.row_prompts(observations, infos, rows, histories, self.prompt)
        seeds = [
            (self.row_seed(row) + len(history)) % 2**31
            for row, history in zip(rows, histories, strict=True)
        ]
        requests = list(zip(prompts, seeds, strict=True))
        if self.concurrency <= 1 or len(requests) <= 1:
            return [self._ask(prompt, seed) for prompt, seed in requests]
        if self._pool is None or self._pool_size != self.concurrency:
            if self._pool is not None:
                self._pool.shutdown()
            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="openai-agent")
            self._pool_size = self.concurrency
        return list(self._pool.map(lambda request: self._ask(*request), requests))

    def _ask(self, prompt: str, seed: int) -> str:
        return self.client.chat(
            self.model,
            prompt,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            seed=seed,
        )

"""``openai:<base_url>#<model>``: any OpenAI-compatible chat server as a harness agent.

``vllm serve``, most hosted models and many local servers speak this API. The agent sends each
step's prompt (:mod:`agentbench_rl.agents.prompting`, ``generate`` format) as one user message
to ``<base_url>/chat/completions`` (with the frame as a base64 PNG image part when the
observation has one, as visual Sokoban's does) and hands the answer to the env, which extracts
``<action>...</action>``. Options after the model name: ``#model?temperature=0.7&history=2&
max_tokens=512``. The API key is read from ``$OPENAI_API_KEY`` (or the variable named by the
``api_key_env`` option); requests that fail to connect, time out, or get 429/5xx are retried
with exponential backoff. The server is asked for its model list when the agent is built, so an
unreachable URL fails at once with one line.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qsl

import numpy as np

from agentbench_rl.agents.prompting import HistoryStep, PromptConfig, build_prompt
from agentbench_rl.envs.base import TextAgentEnv

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


class ChatClient:
    """A minimal OpenAI-compatible chat client (standard library only) with retries.

    Args:
        base_url: e.g. ``http://127.0.0.1:8000/v1``.
        api_key: sent as ``Authorization: Bearer``; ``None`` sends none.
        timeout: seconds per request.
        retries: attempts after the first one.
        backoff: first wait in seconds, doubled after every failure (capped at 8 s).
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

    def request(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        """Send one request (with retries) and return the decoded JSON answer."""
        url = f"{self.base_url}{path}"
        data = json.dumps(payload).encode("utf-8") if payload is not None else None
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self.sleep(min(8.0, self.backoff * 2 ** (attempt - 1)))
            request = urllib.request.Request(url, data=data, headers=headers, method=method)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as error:
                body = error.read().decode("utf-8", "replace")[:200]
                problem = f"HTTP {error.code}: {body}"
                if error.code not in RETRY_STATUS:
                    raise ServerError(f"{method} {url} failed with {problem}") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
                problem = str(getattr(error, "reason", error))
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


class OpenAIAgent:
    """An OpenAI-compatible chat model playing the env (see the module docstring)."""

    def __init__(self, spec: str, client: ChatClient | None = None) -> None:
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
        self._env_name = ""
        self._seed = 0

    #: The episode driver passes the history and holds answers to the papers' format.
    reads_history = True
    answer_format = "generate"

    def begin_episode(self, env: TextAgentEnv[Any], seed: int) -> None:
        """Remember the env; the episode seed goes to the server with every request."""
        self._env_name = env.env_name
        self._seed = seed

    def act(
        self, observation: Any, info: dict[str, Any], history: Sequence[HistoryStep] = ()
    ) -> str:
        """The model's answer to this step's prompt (``history``: the driver's past steps)."""
        prompt = build_prompt(
            self._env_name, observation, history, info["admissible_actions"], self.prompt
        )
        return self.client.chat(
            self.model,
            prompt,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            seed=(self._seed + len(history)) % 2**31,
        )

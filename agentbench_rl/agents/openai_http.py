"""``openai:<base_url>#<model>``: any OpenAI-compatible chat server as a harness agent.

``vllm serve``, most hosted models and many local servers speak this API. The agent sends each
step's prompt (:mod:`agentbench_rl.prompting`, ``generate`` format) as one user message
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
import contextlib
import http.client
import json
import math
import os
import socket
import struct
import threading
import time
import weakref
import zlib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import numpy as np

from agentbench_rl.agents.base import PromptingBatchAgent
from agentbench_rl.core.jsonfile import JSONProblem, loads_strict
from agentbench_rl.core.text import printable
from agentbench_rl.envs.base import StepInfo
from agentbench_rl.prompting import HistoryStep, PromptConfig

OPTIONS = ("temperature", "history", "max_tokens", "api_key_env", "timeout", "retries")
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
#: The largest answer body read: a chat answer is a few KB, a model list a few hundred.
MAX_ANSWER_BYTES = 16 * 2**20
_CAP_TEXT = "16 MiB"
#: The longest deadline of one exchange, and the most retries, an agent spec may ask for.
MAX_TIMEOUT = 3600.0
MAX_RETRIES = 20


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
    (:class:`~agentbench_rl.prompting.Prompt`), each frame as a base64 PNG
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


@dataclass(frozen=True)
class _Answer:
    status: int
    reason: str
    headers: dict[str, str]
    body: bytes


class ChatClient:
    """A minimal OpenAI-compatible chat client (standard library only) with retries.

    Each thread keeps one persistent (keep-alive) connection to the server, so concurrent
    requests do not pay a TCP handshake each; a kept connection the server has closed is
    reopened at once, without counting as a failure. (Proxy variables are not read: the
    client talks to the base URL directly.)

    What a server sends is bounded: an answer body past :data:`MAX_ANSWER_BYTES` is refused,
    ``timeout`` is a deadline for the whole exchange (connecting, sending, the answer's last
    byte; a server that drips bytes slowly is cut off there), JSON is parsed with the strict
    reader's depth limit, a redirect is an error (never played as an answer), and server text
    in messages is stripped of control characters. :meth:`cancel` (Ctrl-C) ends every request
    in flight and every wait between retries at once.

    Args:
        base_url: e.g. ``http://127.0.0.1:8000/v1``.
        api_key: sent as ``Authorization: Bearer``; ``None`` sends none.
        timeout: seconds for one exchange, from connecting to the answer's last byte.
        retries: attempts after the first one.
        backoff: first wait in seconds, doubled after every failure (capped at 8 s); a
            ``Retry-After`` header asking for longer is honoured (up to 60 s).
        sleep: the wait function (tests pass a fake one); by default a wait that
            :meth:`cancel` ends.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        retries: int = 5,
        backoff: float = 0.5,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        check_limits(timeout, retries)
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._cancelled = threading.Event()
        self.sleep = sleep or self._wait
        parts = urlsplit(self.base_url)
        self._https = parts.scheme == "https"
        self._host = parts.netloc
        self._prefix = parts.path
        self._local = threading.local()
        self._open: set[http.client.HTTPConnection] = set()  # in an exchange now
        self._kept: set[http.client.HTTPConnection] = set()  # each thread's open one
        self._open_lock = threading.Lock()
        # A client dropped without close() (an agent at the end of an evaluation) closes its
        # kept connections as it goes, instead of leaving each socket to the collector.
        weakref.finalize(self, _close_all, self._kept)

    def _wait(self, seconds: float) -> None:
        self._cancelled.wait(seconds)  # returns at once when cancelled

    def cancel(self) -> None:
        """End every request in flight (their sockets are shut) and every later one."""
        self._cancelled.set()
        with self._open_lock:
            for connection in list(self._open):
                _shut(connection)

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection, and whether it was used before."""
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            return connection, True
        kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        connection = kind(self._host, timeout=self.timeout)
        self._local.connection = connection
        with self._open_lock:
            self._kept.add(connection)
        return connection, False

    def close(self) -> None:
        """Close every kept connection (each thread's); later requests open new ones."""
        with self._open_lock:
            kept = list(self._kept)
            self._kept.clear()
        _close_all(kept)
        self._local = threading.local()

    def _forget(self) -> None:
        """Close this thread's kept connection, if any."""
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            self._drop(connection)

    def _drop(self, connection: http.client.HTTPConnection) -> None:
        connection.close()
        self._local.connection = None
        with self._open_lock:  # a server that closes every connection makes one per request
            self._kept.discard(connection)

    def _send(self, method: str, path: str, data: bytes | None, headers: dict[str, str]) -> _Answer:
        """One exchange within ``timeout`` (``OSError`` when the connection fails or the deadline
        passes; a reused connection the server closed is reopened once)."""
        deadline = time.monotonic() + self.timeout
        for _ in range(2):
            connection, reused = self._connection()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            connection.timeout = remaining
            if connection.sock is not None:
                connection.sock.settimeout(remaining)
            expired = threading.Event()
            watchdog = threading.Timer(remaining, _expire, (connection, expired))
            watchdog.daemon = True
            with self._open_lock:
                self._open.add(connection)
            watchdog.start()
            try:
                connection.request(method, self._prefix + path, body=data, headers=headers)
                response = connection.getresponse()
                body = _read_capped(response)
            except ServerError:
                self._drop(connection)
                raise
            except (OSError, http.client.HTTPException) as error:
                self._drop(connection)
                if expired.is_set() or isinstance(error, TimeoutError):
                    break  # the deadline: the socket's own timeout may fire before the watchdog
                if self._cancelled.is_set():
                    raise ServerError("cancelled") from None
                stale = isinstance(
                    error, (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)
                )
                if reused and stale:
                    continue
                if isinstance(error, http.client.HTTPException):
                    raise ConnectionError(str(error) or type(error).__name__) from None
                raise
            finally:
                watchdog.cancel()
                with self._open_lock:
                    self._open.discard(connection)
            if expired.is_set():  # the deadline shut the socket: what was read is cut short
                self._drop(connection)
                break
            if response.will_close:
                self._drop(connection)
            answer_headers = {key.lower(): value for key, value in response.getheaders()}
            return _Answer(response.status, response.reason, answer_headers, body)
        raise TimeoutError(f"no complete answer within {self.timeout:g} s")

    def request(
        self,
        method: str,
        path: str,
        payload: dict[str, Any] | None = None,
        connect_retries: int | None = None,
        retry_timeouts: bool = True,
    ) -> Any:
        """Send one request (with retries) and return the decoded JSON answer; a failure to
        connect is retried at most ``connect_retries`` times (default: as any failure), and an
        exchange the deadline cut is retried only with ``retry_timeouts``."""
        retries = self.retries
        connect_retries = retries if connect_retries is None else connect_retries
        refused = 0
        url = printable(f"{self.base_url}{path}")
        data = json.dumps(payload, allow_nan=False).encode("utf-8") if payload is not None else None
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        problem, asked = "", 0.0
        for attempt in range(retries + 1):
            if attempt:
                self.sleep(max(asked, min(8.0, self.backoff * 2 ** (attempt - 1))))
            if self._cancelled.is_set():
                raise ServerError(f"{method} {url}: cancelled")
            asked = 0.0
            try:
                answer = self._send(method, path, data, headers)
            except OSError as error:  # refused, reset, timed out, unknown host
                problem = printable(str(error) or type(error).__name__)
                if isinstance(error, TimeoutError) and not retry_timeouts:
                    raise ServerError(
                        f"{method} {url}: {problem} (the deadline of the timeout option cut it)"
                    ) from None
                refused += 1
                if refused > connect_retries:
                    raise ServerError(
                        f"cannot reach {url} after {refused} attempts (last: {problem})"
                    ) from None
                continue
            if 200 <= answer.status < 300:
                try:
                    return loads_strict(answer.body.decode("utf-8"))
                except (UnicodeDecodeError, JSONProblem) as error:
                    reason = getattr(error, "reason", "not UTF-8 text")
                    self._forget()  # a server that answers so is not kept talking to
                    raise ServerError(
                        f"{method} {url}: the answer is not JSON ({reason})"
                    ) from None
            if 300 <= answer.status < 400:
                where = printable(answer.headers.get("location", "nowhere")[:200])
                self._forget()
                raise ServerError(
                    f"{method} {url} answered {answer.status} (a redirect to {where}); give the "
                    "agent the final URL"
                )
            text = printable(answer.body[:200].decode("utf-8", "replace"))
            problem = f"HTTP {answer.status} {printable(answer.reason[:80])}: {text}"
            asked = retry_after(answer.headers.get("retry-after"))
            if answer.status not in RETRY_STATUS:
                self._forget()
                raise ServerError(f"{method} {url} failed with {problem}")
        raise ServerError(f"cannot reach {url} after {retries + 1} attempts (last: {problem})")

    def chat(self, model: str, prompt: str, **sampling: Any) -> str:
        """The assistant's answer to one user message."""
        message = {"role": "user", "content": user_content(prompt)}
        payload = {"model": model, "messages": [message], **sampling}
        answer = self.request("POST", "/chat/completions", payload)
        try:
            return str(answer["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError):
            shown = printable(f"{answer!r:.200}")
            raise ServerError(f"unexpected answer from {self.base_url}: {shown}") from None


def _close_all(connections: Iterable[http.client.HTTPConnection]) -> None:
    for connection in list(connections):
        connection.close()


def _expire(connection: http.client.HTTPConnection, expired: threading.Event) -> None:
    """The deadline's watchdog: mark the exchange expired and end it."""
    expired.set()
    _shut(connection)


def _shut(connection: http.client.HTTPConnection) -> None:
    """Shut a connection's socket from another thread (a blocked read there returns at once)."""
    sock = connection.sock
    if sock is not None:
        with contextlib.suppress(OSError):  # already closed
            sock.shutdown(socket.SHUT_RDWR)


def _read_capped(response: http.client.HTTPResponse) -> bytes:
    """The answer body, refused past :data:`MAX_ANSWER_BYTES` (announced or sent)."""
    announced = response.getheader("Content-Length")
    if announced is not None and announced.isdigit() and int(announced) > MAX_ANSWER_BYTES:
        raise ServerError(f"the answer is {int(announced)} bytes, over the {_CAP_TEXT} limit")
    parts, size = [], 0
    while chunk := response.read1(1 << 16):
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise ServerError(f"the answer is over the {_CAP_TEXT} limit")
        parts.append(chunk)
    response.close()  # read to its end: the connection may carry the next request
    return b"".join(parts)


def check_limits(timeout: float, retries: int) -> None:
    """Refuse a timeout outside (0, :data:`MAX_TIMEOUT`] seconds (NaN and infinity included)
    or retries outside 0 .. :data:`MAX_RETRIES`."""
    if not (isinstance(timeout, int | float) and 0 < timeout <= MAX_TIMEOUT):
        raise ValueError(f"timeout must be in (0, {MAX_TIMEOUT:g}] seconds, got {timeout}")
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES:
        raise ValueError(f"retries must be a whole number in 0..{MAX_RETRIES}, got {retries}")


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
            if not (math.isfinite(self.temperature) and self.temperature >= 0):
                raise ValueError(f"temperature must be a number >= 0, got {self.temperature}")
            if self.max_tokens < 1:
                raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
            if history < 0:
                raise ValueError(f"history must be >= 0, got {history}")
            check_limits(timeout, retries)
        except ValueError as problem:
            raise ValueError(f"agent '{printable(spec)}': bad option value ({problem})") from None
        self.prompt = PromptConfig(history=history, mode="generate")
        api_key = os.environ.get(options.get("api_key_env", "OPENAI_API_KEY"))
        self.client = client or ChatClient(self.base_url, api_key, timeout, retries)
        try:  # no server there is said at once (one retry, not the backoff's 15 s), and a
            # server that does not answer within the timeout is not waited for twice
            self.client.request(
                "GET", "/models", connect_retries=min(1, retries), retry_timeouts=False
            )
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
        infos: Sequence[StepInfo],
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
        try:
            return list(self._pool.map(lambda request: self._ask(*request), requests))
        except BaseException:  # Ctrl-C (or a failed row): end the requests still in flight now
            self.client.cancel()
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
            raise

    def _ask(self, prompt: str, seed: int) -> str:
        return self.client.chat(
            self.model,
            prompt,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            seed=seed,
        )

"""An aiohttp client whose answers are bounded in bytes: what the ORS client reads a server
through (:class:`~agentbench_rl.envs.remote.ORSRemoteEnv`). ors-sdk reads an answer's event
stream line by line and joins its chunks without a bound, so a server that streams without end,
or one huge event, would fill memory before any deadline; here every byte read from an answer
counts, and past the bound the read raises :class:`AnswerTooLarge` (aiohttp has a bound on a
line, not on an answer: hence this small wrapper).
"""

from __future__ import annotations

from typing import Any

import aiohttp


class AnswerTooLarge(ValueError):
    """An answer held more bytes than the client reads."""


class BoundedStream:
    """An answer's ``StreamReader``, counting what each read returns (the rest delegated).

    Example:
        >>> import asyncio
        >>> from aiohttp.base_protocol import BaseProtocol
        >>> async def lines(limit: int) -> list[bytes]:
        ...     loop = asyncio.get_running_loop()
        ...     raw = aiohttp.StreamReader(BaseProtocol(loop), 2**16, loop=loop)
        ...     raw.feed_data(b"event: chunk\\ndata: xx\\n\\n"); raw.feed_eof()
        ...     return [line async for line in BoundedStream(raw, limit, "http://h/")]
        >>> asyncio.run(lines(100))
        [b'event: chunk\\n', b'data: xx\\n', b'\\n']
        >>> asyncio.run(lines(20))
        Traceback (most recent call last):
        ...
        agentbench_rl.envs.bounded_http.AnswerTooLarge: an answer of http://h/ passed 20 bytes
    """

    def __init__(self, stream: aiohttp.StreamReader, limit: int, url: str) -> None:
        self._stream, self._limit, self._url, self._read = stream, limit, url, 0

    def _counted(self, data: bytes) -> bytes:
        self._read += len(data)
        if self._read > self._limit:
            raise AnswerTooLarge(f"an answer of {self._url} passed {self._limit:,} bytes")
        return data

    async def read(self, n: int = -1) -> bytes:
        return self._counted(await self._stream.read(n))

    async def readline(self) -> bytes:
        return self._counted(await self._stream.readline())

    async def readany(self) -> bytes:
        return self._counted(await self._stream.readany())

    async def readexactly(self, n: int) -> bytes:
        return self._counted(await self._stream.readexactly(n))

    async def readchunk(self) -> tuple[bytes, bool]:
        data, end = await self._stream.readchunk()
        return self._counted(data), end

    def __aiter__(self) -> BoundedStream:
        return self

    async def __anext__(self) -> bytes:
        line = await self.readline()
        if not line:
            raise StopAsyncIteration
        return line

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def bounded_session(base_url: str, limit: int) -> aiohttp.ClientSession:
    """An aiohttp session on ``base_url`` whose every answer is cut at ``limit`` bytes."""

    class BoundedResponse(aiohttp.ClientResponse):
        async def start(self, connection: Any) -> aiohttp.ClientResponse:
            started = await super().start(connection)
            self.content = BoundedStream(self.content, limit, str(self.url))  # type: ignore[has-type]
            return started

    return aiohttp.ClientSession(base_url=base_url, response_class=BoundedResponse)

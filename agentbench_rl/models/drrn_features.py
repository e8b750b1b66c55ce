"""The DRRN's features (its "tokenizer": text in, feature ids out) and its config, apart from
the network (:mod:`agentbench_rl.models.drrn`) so that a run's config reads without torch.

Features (:class:`TextFeatures`, the model's "tokenizer": text in, feature ids out). The prompt
is read back into its parts (:class:`~agentbench_rl.prompting.PromptParts`: context, current
observation, admissible actions) and each part's lines give word unigrams and bigrams, hashed
(CRC-32, stable across processes) into the part's own range of ``buckets`` ids, so "apple" in
the current observation and "apple" in the history are different features. Where the current
observation holds a character grid (three or more lines of equal length without spaces:
Sokoban's), each cell gives a feature of (row, column, symbol) instead (a one-hot of the grid,
which the first layer reads as a fully connected grid encoder) and one of its 3x3
neighbourhood wherever it lies (the local patterns a convolution's first layer reads, so what
is learnt at one place of a level holds at another). An action's features are its
words, bigrams and the whole action.

Example:
    >>> features = TextFeatures(buckets=64)
    >>> len(features("take key</action>")["input_ids"])  # take, key, take key, the action
    4
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from agentbench_rl.prompting import CHOOSE_SUFFIX, PromptParts
from agentbench_rl.spec.typed import Flag, Spec, Whole

FEATURES_FILE = "features.json"
#: The version of the feature scheme (tokens, salts, hashing): a saved model is read only by the
#: scheme it was trained with.
FEATURES_VERSION = 3
#: Entries the line cache keeps before it starts afresh (lines repeat across steps and groups).
CACHE_LINES = 200_000

_TOKEN = re.compile(r"[a-z]+|\d+|[^\sa-z\d]")
#: The prompt's parts, in the order their features come: each has its own range of ids
#: (``buckets`` each) and its own mean in the state tower.
PARTS = ("context", "listed", "current")


class DRRNConfig(Spec):
    """The ``drrn`` model: its features and its two towers (module docstring)."""

    buckets: Annotated[Whole, Field(ge=16, le=2**22)] = 2**14  # hashed feature ids
    width: Annotated[Whole, Field(ge=2, le=4096)] = 64  # of the embeddings and both towers
    grid: Flag = True  # a character grid in the observation as cells and 3x3 patterns


class TextFeatures:
    """Text to hashed feature ids (module docstring), with the slice of a tokenizer's interface
    that :class:`~agentbench_rl.models.policy.Policy` uses: call, pad id, ``save_pretrained``.

    A choice continuation (``take key</action>``, one line) gives the action's features; any
    other text is read as a prompt. Id 0 is padding, never a feature.

    Example:
        >>> features = TextFeatures(buckets=64)
        >>> len(features("take key</action>")["input_ids"])  # take, key, take key, the action
        4
    """

    pad_token_id = 0
    eos_token_id = None
    chat_template = None

    def __init__(self, buckets: int, grid: bool = True) -> None:
        self.buckets = buckets
        self.grid = grid
        self._lines: dict[tuple[str, str], tuple[int, ...]] = {}

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        """``{"input_ids": [...]}``: the text's feature ids."""
        if "\n" not in text and text.endswith(CHOOSE_SUFFIX):
            return {"input_ids": self.action_ids(text[: -len(CHOOSE_SUFFIX)])}
        return {"input_ids": self.prompt_ids(text)}

    def _hashed(self, part: str, grams: Sequence[str]) -> tuple[int, ...]:
        """The grams' ids in ``part``'s range (a prompt part's, :data:`PARTS`; else the first)."""
        base = PARTS.index(part) * self.buckets + 1 if part in PARTS else 1
        return tuple(
            zlib.crc32(f"{part}\x1f{gram}".encode()) % self.buckets + base for gram in grams
        )

    def _line(self, part: str, line: str) -> tuple[int, ...]:
        """A line's unigram and bigram ids (cached: lines repeat across steps and groups)."""
        key = (part, line)
        cached = self._lines.get(key)
        if cached is None:
            words = _TOKEN.findall(line.lower())
            grams = words + [f"{a} {b}" for a, b in pairwise(words)]
            if len(self._lines) >= CACHE_LINES:
                self._lines.clear()
            cached = self._lines[key] = self._hashed(part, grams)
        return cached

    def action_ids(self, action: str) -> list[int]:
        """An action's ids: its words and bigrams, and the whole action."""
        return [*self._line("action", action), *self._hashed("action=", [action.lower()])]

    def prompt_ids(self, text: str) -> list[int]:
        """A prompt's ids, part by part in :data:`PARTS` order (context, admissible actions,
        current observation: the policy's ``max_prompt_tokens`` cut keeps the end)."""
        parts = PromptParts.of(text)
        ids: list[int] = []
        for line in parts.context:
            ids.extend(self._line("context", line))
        for action in parts.actions:
            ids.extend(self._line("listed", action))
        grid = grid_rows(parts.current) if self.grid else range(0)
        for row, line in enumerate(parts.current):
            if grid and row == grid.start:
                ids.extend(self._grid(parts.current[grid.start : grid.stop]))
            elif row not in grid:
                ids.extend(self._line("current", line))
        return ids

    def _grid(self, lines: Sequence[str]) -> tuple[int, ...]:
        """A grid's ids (the current observation's part): each cell's (row, column, symbol),
        and each cell's 3x3 neighbourhood wherever it lies (a translation-invariant local
        pattern, as a convolution's first layer sees it; outside the grid reads as a space)."""
        key = ("grid", "\n".join(lines))
        cached = self._lines.get(key)
        if cached is None:
            grams = [
                f"grid {row},{column},{symbol}"
                for row, line in enumerate(lines)
                for column, symbol in enumerate(line)
            ]
            padded = [" " * (len(lines[0]) + 2), *(f" {line} " for line in lines)]
            padded.append(padded[0])
            grams += [
                "patch "
                + "".join(padded[row + dr][column + dc] for dr in range(3) for dc in range(3))
                for row in range(len(lines))
                for column in range(len(lines[0]))
            ]
            cached = self._lines[key] = self._hashed("current", grams)
        return cached

    def settings(self) -> dict[str, Any]:
        """What reading text the same way again takes (``features.json``)."""
        return {"version": FEATURES_VERSION, "buckets": self.buckets, "grid": self.grid}

    def save_pretrained(self, folder: Path) -> None:
        """Write ``features.json`` (the tokenizer's place in a saved policy)."""
        text = json.dumps(self.settings(), indent=1) + "\n"
        (Path(folder) / FEATURES_FILE).write_text(text, "utf-8")


def grid_rows(lines: Sequence[str]) -> range:
    """The rows of the first character grid among ``lines``: three or more consecutive lines of
    one length (three or more) without whitespace; an empty range when there is none.

    Example:
        >>> grid_rows(["Goal:", "###", "#P#", "###", "done"]), grid_rows(["a b", "c"])
        (range(1, 4), range(0, 0))
    """
    start = 0
    while start < len(lines):
        end = start
        while (
            end < len(lines)
            and len(lines[end]) >= 3
            and len(lines[end]) == len(lines[start])
            and not any(c.isspace() for c in lines[end])
        ):
            end += 1
        if end - start >= 3:
            return range(start, end)
        start = max(end, start + 1)
    return range(0)

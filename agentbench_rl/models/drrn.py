"""The ``drrn`` policy: a text-native actor cheap enough for many-seed RL on the real envs on a CPU.

A DRRN (He et al. 2016, "Deep Reinforcement Learning with a Natural Language Action Space"):
two towers, one over the prompt (the state) and one over each admissible action, and the
action's score is their dot product,

    ``h_s = W_2 relu(W_1 LN([bag(φ_c(s)); bag(φ_l(s)); bag(φ_o(s))]))``,
    ``h_a = U_2 relu(U_1 LN(bag(ψ(a))))``,
    ``score(s, a) = h_s · h_a / T``,          ``π(a | s) = softmax_a score(s, a)``,

where ``bag`` is the mean of the hashed features' embeddings (``torch.nn.EmbeddingBag``; zeros
for a part without features), taken apart for the prompt's context ``φ_c``, listed actions
``φ_l`` and current observation ``φ_o`` and put side by side, so a long history does not drown
the observation; ``LN`` is a layer norm and ``T`` the temperature. It plays and trains in
``choose`` mode only, through the same code as a language model
(:func:`~agentbench_rl.models.policy.score_choices` hands the scoring to
:meth:`DRRN.score_choices`): the same episode driver, estimators, PPO-clip, behaviour cloning
(``bc.loss: choice``), validation, run folders and sweeps.

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

What it can represent: any function of the bag of features through a two-layer MLP per tower,
coupled only by the dot product. What it cannot: word order beyond bigrams, counting past what
the bag's mean keeps, or relations between the state and an action other than the learnt
alignment of their embeddings (it cannot copy a word from the goal into an action it has
never been rewarded for). The last action tower's layer starts at zero, so a fresh model's
policy is exactly uniform over the admissible actions.

Hidden states (BiPACE): ``h_s`` (``hidden_layer: 1``), or the layers below it.

Example:
    >>> model, features = build_drrn(DRRNConfig(width=8, buckets=64), seed=0)
    >>> prompt = features("Observation:\\nYou see a key.\\nAdmissible actions: take key, wait")
    >>> choices = [[features(a + "</action>")["input_ids"] for a in ("take key", "wait")]]
    >>> scored = model.score_choices([prompt["input_ids"]], choices, 1.0, capture_hidden=True)
    >>> scored.scores.tolist(), scored.last_prompt_hidden[-1].shape  # uniform at the start
    ([0.0, 0.0], torch.Size([1, 8]))
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Sequence
from itertools import chain, pairwise
from pathlib import Path
from typing import Annotated, Any

import torch
from pydantic import Field

from agentbench_rl.models.choices import ChoiceScores
from agentbench_rl.prompting import CHOOSE_SUFFIX, PromptParts
from agentbench_rl.spec.typed import Flag, Spec, Whole

#: ``config.json``'s ``model_type`` of a saved DRRN (what :func:`is_drrn_folder` looks for).
MODEL_TYPE = "agentbench-drrn"
WEIGHTS_FILE = "model.safetensors"
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


class _Settings:
    """What :class:`~agentbench_rl.models.policy.Policy` reads of a model's ``config``."""

    def __init__(self, config: DRRNConfig) -> None:
        self.drrn = config
        self.num_hidden_layers = 2  # the hidden states: LN(bag), relu(W_1 ·), h_s


class Tower(torch.nn.Module):
    """One tower: per part of its input (``parts``), the mean of its features' embeddings;
    the means side by side through a layer norm, a ReLU layer and a linear output."""

    def __init__(self, buckets: int, width: int, parts: int = 1) -> None:
        super().__init__()
        self.buckets, self.parts = buckets, parts
        size = parts * buckets + 1
        self.bag = torch.nn.EmbeddingBag(size, width, mode="sum", padding_idx=0)
        self.norm = torch.nn.LayerNorm(parts * width)
        self.hidden = torch.nn.Linear(parts * width, width)
        self.out = torch.nn.Linear(width, width)

    def forward(
        self, rows: Sequence[Sequence[int]]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Each row's layers: its parts' normed means, the ReLU layer, the output. A row's ids
        come part by part (a part's ids lie in its range of ``buckets``); a part without ids
        reads zeros."""
        device = self.bag.weight.device
        lengths = torch.tensor([len(row) for row in rows], dtype=torch.long)
        flat = torch.tensor(list(chain.from_iterable(rows)), dtype=torch.long)
        row_of = torch.repeat_interleave(torch.arange(len(rows)), lengths)
        segment = row_of * self.parts + torch.div(flat - 1, self.buckets, rounding_mode="floor")
        keys, counts = torch.unique_consecutive(segment, return_counts=True)
        offsets = torch.cumsum(counts, 0) - counts
        weights = (1.0 / counts.float()).repeat_interleave(counts)
        means = self.bag(flat.to(device), offsets.to(device), per_sample_weights=weights.to(device))
        width = self.bag.embedding_dim
        placed = torch.zeros((len(rows) * self.parts, width), device=device, dtype=means.dtype)
        placed = placed.index_copy(0, keys.to(device), means)
        bag = self.norm(placed.view(len(rows), self.parts * width))
        hidden = torch.relu(self.hidden(bag))
        return bag, hidden, self.out(hidden)


class DRRN(torch.nn.Module):
    """The two towers (module docstring); built by :func:`build_drrn`, read by
    :func:`load_drrn`."""

    def __init__(self, config: DRRNConfig, seed: int = 0) -> None:
        super().__init__()
        self.config = _Settings(config)
        self.state = Tower(config.buckets, config.width, parts=len(PARTS))
        self.action = Tower(config.buckets, config.width)
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for tower in (self.state, self.action):
                torch.nn.init.normal_(tower.bag.weight, 0.0, 1.0, generator=generator)
                tower.bag.weight[0] = 0.0  # padding
                for layer in (tower.hidden, tower.out):
                    bound = config.width**-0.5
                    torch.nn.init.uniform_(layer.weight, -bound, bound, generator=generator)
                    layer.bias.zero_()
            self.action.out.weight.zero_()  # every score 0: a uniform policy to start

    def score_choices(
        self,
        prompt_ids: Sequence[Sequence[int]],
        choices: Sequence[Sequence[Sequence[int]]],
        temperature: float,
        capture_hidden: bool = False,
    ) -> ChoiceScores:
        """Every row's admissible actions scored (``h_s · h_a / T``), rows in order, each row's
        actions in order; with ``capture_hidden`` the state tower's layers, ``h_s`` last."""
        device = self.state.bag.weight.device
        states = self.state(prompt_ids)
        actions = self.action([a for row in choices for a in row])
        counts = torch.tensor([len(row) for row in choices], dtype=torch.long, device=device)
        pair_rows = torch.repeat_interleave(torch.arange(len(choices), device=device), counts)
        starts = torch.cumsum(counts, 0) - counts
        pair_columns = torch.arange(len(pair_rows), device=device) - starts[pair_rows]
        scores = (states[2][pair_rows] * actions[2]).sum(dim=1) / temperature
        return ChoiceScores(pair_rows, pair_columns, scores, states if capture_hidden else None)

    def save_pretrained(self, folder: Path) -> None:
        """Write ``config.json`` and the weights (``model.safetensors``)."""
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        config = {"model_type": MODEL_TYPE, **self.config.drrn.model_dump()}
        (folder / "config.json").write_text(json.dumps(config, indent=1) + "\n", "utf-8")
        state = {name: tensor.contiguous() for name, tensor in self.state_dict().items()}
        save_file(state, str(folder / WEIGHTS_FILE))


def build_drrn(config: DRRNConfig, seed: int) -> tuple[DRRN, TextFeatures]:
    """A fresh model (its init drawn from ``seed``) and its features."""
    return DRRN(config, seed), TextFeatures(config.buckets, config.grid)


def is_drrn_folder(path: str | Path) -> bool:
    """Whether ``path`` is a folder a DRRN was saved to.

    Example:
        >>> is_drrn_folder("Qwen/Qwen2.5-1.5B-Instruct")
        False
    """
    config = Path(path) / "config.json"
    if not config.is_file():
        return False
    try:
        return json.loads(config.read_text("utf-8")).get("model_type") == MODEL_TYPE
    except (ValueError, AttributeError):
        return False


def load_drrn(folder: str | Path, device: str = "cpu") -> tuple[DRRN, TextFeatures]:
    """A saved DRRN and its features; ``ValueError`` naming the folder when they do not read."""
    from safetensors.torch import load_file

    folder = Path(folder)
    stored = json.loads((folder / "config.json").read_text("utf-8"))
    stored.pop("model_type", None)
    config = DRRNConfig.read(stored)
    features = json.loads((folder / FEATURES_FILE).read_text("utf-8"))
    if features.get("version") != FEATURES_VERSION:
        raise ValueError(
            f"{folder}: features of version {features.get('version')}, this code reads "
            f"version {FEATURES_VERSION}"
        )
    if (features.get("buckets"), features.get("grid")) != (config.buckets, config.grid):
        raise ValueError(f"{folder}: {FEATURES_FILE} and config.json disagree")
    model = DRRN(config)
    model.load_state_dict(load_file(str(folder / WEIGHTS_FILE)))
    return model.to(device), TextFeatures(config.buckets, config.grid)

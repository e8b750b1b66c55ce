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

Features: :mod:`agentbench_rl.models.drrn_features` (the model's "tokenizer" and its config,
which read without torch).

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

import hashlib
import json
from collections.abc import Sequence
from itertools import chain
from pathlib import Path

import torch

from agentbench_rl.models.choices import ChoiceScores
from agentbench_rl.models.drrn_features import (
    FEATURES_FILE,
    FEATURES_VERSION,
    PARTS,
    DRRNConfig,
    TextFeatures,
)

#: ``config.json``'s ``model_type`` of a saved DRRN (what :func:`is_drrn_folder` looks for).
MODEL_TYPE = "agentbench-drrn"
WEIGHTS_FILE = "model.safetensors"
#: The embedding tables, saved as the rows trained away from the init (``<table>.rows``: which).
TABLES = ("state.bag.weight", "action.bag.weight")
ROWS_SUFFIX = ".rows"


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
        self.init_seed = seed
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
        """Write ``config.json`` and the weights (``model.safetensors``): the embedding tables
        (:data:`TABLES`) as the rows that differ from the seeded init, which ``config.json``
        names with a digest of its tables (training moves the rows of the features it met:
        a few thousand of 65k, so a trained policy takes about 1 MB, not 17)."""
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        init = DRRN(self.config.drrn, self.init_seed).state_dict()
        config = {
            "model_type": MODEL_TYPE,
            **self.config.drrn.model_dump(),
            "init_seed": self.init_seed,
            "init_tables": _tables_digest(init),
        }
        (folder / "config.json").write_text(json.dumps(config, indent=1) + "\n", "utf-8")
        state = {}
        for name, tensor in self.state_dict().items():
            tensor = tensor.detach().cpu()
            if name in TABLES:
                rows = torch.nonzero((tensor != init[name]).any(dim=1)).flatten()
                state[name + ROWS_SUFFIX], tensor = rows, tensor[rows]
            state[name] = tensor.contiguous()
        save_file(state, str(folder / WEIGHTS_FILE))


def _tables_digest(state: dict[str, torch.Tensor]) -> str:
    """A sha256 (16 hex digits) of the embedding tables' bytes."""
    digest = hashlib.sha256()
    for name in TABLES:
        digest.update(state[name].detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


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


def saved_parameter_count(folder: str | Path) -> int | None:
    """The parameters of the DRRN saved in ``folder`` (its whole tables, which the weights file
    holds as the rows training moved), or ``None`` when no DRRN was saved there.

    Example:
        >>> saved_parameter_count("no-such-folder") is None
        True
    """
    if not is_drrn_folder(folder):
        return None
    stored = json.loads((Path(folder) / "config.json").read_text("utf-8"))
    config = DRRNConfig.read({k: v for k, v in stored.items() if k in DRRNConfig.model_fields})
    with torch.device("meta"):  # shapes only: nothing is drawn or allocated
        model = DRRN(config)
    return sum(parameter.numel() for parameter in model.parameters())


def load_drrn(folder: str | Path, device: str = "cpu") -> tuple[DRRN, TextFeatures]:
    """A saved DRRN and its features; ``ValueError`` naming the folder when they do not read."""
    from safetensors.torch import load_file

    folder = Path(folder)
    stored = json.loads((folder / "config.json").read_text("utf-8"))
    stored.pop("model_type", None)
    seed, init_tables = stored.pop("init_seed", 0), stored.pop("init_tables", None)
    config = DRRNConfig.read(stored)
    features = json.loads((folder / FEATURES_FILE).read_text("utf-8"))
    if features.get("version") != FEATURES_VERSION:
        raise ValueError(
            f"{folder}: features of version {features.get('version')}, this code reads "
            f"version {FEATURES_VERSION}"
        )
    if (features.get("buckets"), features.get("grid")) != (config.buckets, config.grid):
        raise ValueError(f"{folder}: {FEATURES_FILE} and config.json disagree")
    model = DRRN(config, seed)
    state = model.state_dict()
    if init_tables is not None and _tables_digest(state) != init_tables:
        raise ValueError(
            f"{folder}: the seeded init its weights are stored against (seed {seed}) draws "
            f"differently here (torch {torch.__version__}): its tables cannot be rebuilt"
        )
    weights = load_file(str(folder / WEIGHTS_FILE))
    for name in TABLES:
        rows = weights.pop(name + ROWS_SUFFIX, None)
        if rows is not None:  # absent: a table stored whole (policies saved before 2026-12-07)
            weights[name] = state[name].index_copy(0, rows, weights[name])
    model.load_state_dict(weights)
    return model.to(device), TextFeatures(config.buckets, config.grid)

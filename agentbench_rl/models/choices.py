"""What choose mode's scoring hands back, and what a model that scores actions itself offers.

A language model scores an admissible action by its continuation's token log-probs
(:func:`~agentbench_rl.models.policy.score_choices`); a model built to score (state, action)
pairs, such as :class:`~agentbench_rl.models.drrn.DRRN`, is a :class:`ChoiceScorer` and does it
its own way. Both hand back :class:`ChoiceScores`, which acting, behaviour cloning and PPO read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch


@dataclass
class ChoiceScores:
    """Every admissible continuation of every row, scored after its prompt.

    Attributes:
        pair_rows: (pairs,) the row of each (row, continuation) pair, rows in order.
        pair_columns: (pairs,) the continuation's index within its row.
        scores: (pairs,) the continuation's score: a language model's summed token log-probs
            (logits / temperature), a :class:`ChoiceScorer`'s own score / temperature.
        last_prompt_hidden: when asked for, per layer (embeddings first) the hidden state of
            each row's last prompt token, (rows, hidden) (a :class:`ChoiceScorer`: its state
            encoder's layers).
    """

    pair_rows: torch.Tensor
    pair_columns: torch.Tensor
    scores: torch.Tensor
    last_prompt_hidden: tuple[torch.Tensor, ...] | None

    @classmethod
    def of_groups(
        cls, parts: Sequence[ChoiceScores], groups: Sequence[Sequence[int]]
    ) -> ChoiceScores:
        """One batch from the scores of its row groups (``parts[k]`` scored the rows
        ``groups[k]``, in that order): pairs back in row order, each row's in action order."""
        device = parts[0].scores.device
        rows = torch.cat(
            [
                torch.tensor(group, dtype=torch.long, device=device)[part.pair_rows]
                for part, group in zip(parts, groups, strict=True)
            ]
        )
        columns = torch.cat([part.pair_columns for part in parts])
        order = torch.argsort(rows * (int(columns.max()) + 1) + columns)
        hidden = None
        if all(part.last_prompt_hidden is not None for part in parts):
            placed = [row for group in groups for row in group]
            back = torch.argsort(torch.tensor(placed, dtype=torch.long, device=device))
            layers = zip(*(part.last_prompt_hidden or () for part in parts), strict=True)
            hidden = tuple(torch.cat(layer)[back] for layer in layers)
        scores = torch.cat([part.scores for part in parts])
        return cls(rows[order], columns[order], scores[order], hidden)

    def for_rows(self, source: Sequence[int]) -> ChoiceScores:
        """The scores of rows that repeat these ones: row ``r`` is row ``source[r]`` here."""
        device = self.scores.device
        counts = torch.bincount(self.pair_rows, minlength=max(source) + 1)
        starts = torch.cumsum(counts, 0) - counts
        index = torch.cat(
            [
                torch.arange(int(starts[u]), int(starts[u] + counts[u]), device=device)
                for u in source
            ]
        )
        rows = torch.repeat_interleave(
            torch.arange(len(source), device=device), counts[torch.tensor(source, device=device)]
        )
        hidden = None
        if self.last_prompt_hidden is not None:
            picked = torch.tensor(source, dtype=torch.long, device=device)
            hidden = tuple(layer[picked] for layer in self.last_prompt_hidden)
        return ChoiceScores(rows, self.pair_columns[index], self.scores[index], hidden)


@runtime_checkable
class ChoiceScorer(Protocol):
    """A model that scores every row's admissible actions itself (the feature ids of each
    prompt and of each action, as its own "tokenizer" made them)."""

    def score_choices(
        self,
        prompt_ids: Sequence[Sequence[int]],
        choices: Sequence[Sequence[Sequence[int]]],
        temperature: float,
        capture_hidden: bool = False,
    ) -> ChoiceScores:
        """The scores of every (row, action) pair; see :class:`ChoiceScores`."""

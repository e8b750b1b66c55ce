"""PPO-clip on tabular softmax policies, vectorised over seeds: the trainer's update in numpy.

The loss is the trainer's (``agentbench_rl/train/ppo.py``, ``ppo_loss``): per row (one action
is one token here) ``ρ = π_θ(a|c) / π_old(a|c)``, ``L = −min(ρA, clip(ρ, 1−ε, 1+ε)A)``,
averaged over the minibatch; gradients clipped to a global norm (per seed), then one Adam step
per minibatch, ``ppo_epochs = 1`` as the trainer's default. Its settings (ε, the gradient norm)
are read from :class:`~agentbench_rl.train.config.TrainConfig`. The trainer's KL penalty to the
reference and its entropy bonus are left out: the reference of a tabular policy is its
initial table, and a penalty every estimator pays alike only slows all of them.

Written in numpy rather than calling the trainer's torch ``ppo_loss``: for a softmax table the
gradient has a closed form (eq. 2), the bench stays usable without the ``train`` extra
(torch), and one numpy pass updates the 20 seeds' tables at once, which keeps the default run
within minutes on one core:

    ∂L/∂θ[c, b] = −(1/n) Σ_{rows with context c} A·ρ·[unclipped]·(1[b = a] − π_θ(b|c))   (eq. 2)

where "unclipped" is where the min takes the unclipped term: ``A ≥ 0 and ρ ≤ 1 + ε`` or
``A < 0 and ρ ≥ 1 − ε`` (elsewhere the clipped term is constant in θ).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from agentbench_rl.bench.learning.mdp import softmax
from agentbench_rl.train.config import TrainConfig

_TRAINER = TrainConfig()


@dataclass(frozen=True)
class PPOSettings:
    """The update's settings; ε and the gradient-norm limit are the trainer's defaults.

    ``learning_rate`` is for logits of a table (the trainer's 1e-6 is for LLM weights);
    ``minibatches``: each iteration's rows of a seed are split into this many shuffled
    minibatches (the trainer fixes the rows per minibatch, 256; here a seed has about 300 rows).
    """

    learning_rate: float = 0.1
    clip_ratio: float = _TRAINER.clip_ratio
    max_grad_norm: float = _TRAINER.max_grad_norm
    minibatches: int = 4
    betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-8


@dataclass
class TabularAdam:
    """Adam (Kingma & Ba 2015, Algorithm 1) on a stack of logit tables (seeds, C, A).

    Example:
        >>> adam = TabularAdam(np.zeros((1, 1, 2)))
        >>> adam.step(np.array([[[1.0, -1.0]]]), 0.1)
        >>> adam.logits.round(3).tolist()  # the first step moves each logit by lr
        [[[-0.1, 0.1]]]
    """

    logits: np.ndarray
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    first: np.ndarray = field(init=False)
    second: np.ndarray = field(init=False)
    steps: int = 0

    def __post_init__(self) -> None:
        self.first = np.zeros_like(self.logits)
        self.second = np.zeros_like(self.logits)

    def step(self, gradient: np.ndarray, learning_rate: float) -> None:
        """One Adam step on ``logits`` (in place) with bias-corrected moments."""
        beta1, beta2 = self.betas
        self.steps += 1
        self.first = beta1 * self.first + (1 - beta1) * gradient
        self.second = beta2 * self.second + (1 - beta2) * gradient * gradient
        first = self.first / (1 - beta1**self.steps)
        second = self.second / (1 - beta2**self.steps)
        self.logits -= learning_rate * first / (np.sqrt(second) + self.eps)


def clip_gradient_norm(gradient: np.ndarray, max_norm: float) -> np.ndarray:
    """Scale each seed's gradient (axis 0) to a global norm of at most ``max_norm``, as
    ``torch.nn.utils.clip_grad_norm_`` does (``max_norm / (norm + 1e-6)``, capped at 1).

    Example:
        >>> clip_gradient_norm(np.array([[[3.0, 4.0]]]), 1.0).round(4).tolist()
        [[[0.6, 0.8]]]
    """
    norm = np.sqrt((gradient * gradient).sum(axis=(1, 2)))
    scale = np.minimum(1.0, max_norm / (norm + 1e-6))
    return gradient * scale[:, None, None]


@dataclass(frozen=True)
class Rows:
    """What the update needs of each row: its seed (index in the stack), context, action,
    the sampling policy's log-probability, and its minibatch."""

    seed: np.ndarray
    context: np.ndarray
    action: np.ndarray
    old_logprob: np.ndarray
    minibatch: np.ndarray


def clip_gradient(
    logits: np.ndarray, rows: Rows, selected: np.ndarray, advantages: np.ndarray, clip: float
) -> np.ndarray:
    """Eq. 2 over the ``selected`` rows, each seed's rows averaged over that seed's count.

    Example:
        >>> rows = Rows(np.array([0]), np.array([0]), np.array([1]), np.log([0.5]),
        ...             np.array([0]))
        >>> clip_gradient(np.zeros((1, 1, 2)), rows, np.array([0]), np.array([2.0]), 0.2).tolist()
        [[[1.0, -1.0]]]
    """
    n_seeds, n_contexts, n_actions = logits.shape
    cell = rows.seed[selected] * n_contexts + rows.context[selected]
    action = rows.action[selected]
    probs = softmax(logits.reshape(-1, n_actions)[cell])
    ratio = np.exp(np.log(probs[np.arange(len(cell)), action]) - rows.old_logprob[selected])
    advantage = advantages[selected]
    unclipped = np.where(advantage >= 0, ratio <= 1 + clip, ratio >= 1 - clip)
    count = np.bincount(rows.seed[selected], minlength=n_seeds)[rows.seed[selected]]
    coefficient = -advantage * ratio * unclipped / count
    size = n_seeds * n_contexts
    gradient = np.bincount(
        cell * n_actions + action, weights=coefficient, minlength=size * n_actions
    ).reshape(size, n_actions)
    for b in range(n_actions):
        gradient[:, b] -= np.bincount(cell, weights=coefficient * probs[:, b], minlength=size)
    return gradient.reshape(logits.shape)


def ppo_update(
    adam: TabularAdam, rows: Rows, advantages: np.ndarray, settings: PPOSettings
) -> None:
    """One pass over the rows: one clipped, Adam step per minibatch, every seed at once."""
    for minibatch in range(settings.minibatches):
        selected = np.flatnonzero(rows.minibatch == minibatch)
        if selected.size == 0:
            continue
        gradient = clip_gradient(adam.logits, rows, selected, advantages, settings.clip_ratio)
        adam.step(clip_gradient_norm(gradient, settings.max_grad_norm), settings.learning_rate)

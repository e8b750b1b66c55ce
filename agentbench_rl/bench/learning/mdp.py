"""Finite-horizon MDPs with exact dynamics, their exact objective, and the hidden-feature model.

A :class:`FiniteMDP` is what every member of the learning testbed (``family.py``) builds: up to
K outcomes per (state, action), each with a probability, a next state and a reward; a policy
context per state (what the tabular policy conditions on: the observation, or the observation
and the earlier choice that matters); the keys the estimators see (``obs_key``, ``state_key``);
and the factors the hidden-feature model projects. Because the policy depends only on the
state's context and the episode ends at ``horizon``, the objective is exact by backward
induction (eq. 1):

    V_H(s) = 0,   V_t(s) = Σ_a π(a|c(s)) Σ_k P_k(s, a) [r_k(s, a) + V_{t+1}(s'_k)·(1 − end(s'_k))]
    J(π)   = mean over tasks τ of V_0(start_τ) / success_reward

Every member pays ``success_reward`` (10, the trainer's ``10·won``) on a win and 0 otherwise,
so J is the success probability.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentbench_rl.core.hashing import stable_hash


@dataclass(frozen=True)
class FiniteMDP:
    """A finite-horizon MDP with several tasks (start states) and a tabular policy's contexts.

    Attributes:
        name: the member's name (``--mdp``).
        successor, probability, reward: (S, A, K) outcomes of each (state, action).
        terminal: (S,) an episode ends on reaching such a state.
        context: (S,) the policy context of each state (what π conditions on).
        obs_key, state_key: (S,) the keys the estimators see; ``obs_key`` gets a per-row
            variant suffix when ``obs_variants > 1`` (observations that carry noise).
        features: (S, F) integer factor ids of each state, for the hidden-feature model.
        starts: (T,) the start state of each task.
        horizon: the step limit.
        actions: the action names (``action_key``).
        initial_logits: (C, A) the policy's logits before training.
        obs_variants: how many noisy renderings each observation has.
        success_reward: the reward of a win.
    """

    name: str
    successor: np.ndarray
    probability: np.ndarray
    reward: np.ndarray
    terminal: np.ndarray
    context: np.ndarray
    obs_key: np.ndarray
    state_key: np.ndarray
    features: np.ndarray
    starts: np.ndarray
    horizon: int
    actions: tuple[str, ...]
    initial_logits: np.ndarray
    obs_variants: int = 1
    success_reward: float = 10.0

    @property
    def n_states(self) -> int:
        """Number of states S."""
        return len(self.terminal)

    @property
    def n_contexts(self) -> int:
        """Number of policy contexts C."""
        return len(self.initial_logits)


@dataclass
class MDPBuilder:
    """Builds a :class:`FiniteMDP` state by state (states are named by a hashable key).

    Example:
        >>> builder = MDPBuilder(("stay", "win"))
        >>> start = builder.state("start", obs="a room", features=(0,))
        >>> goal = builder.state("goal", obs="done", features=(1,), terminal=True)
        >>> builder.transition(start, 0, [(1.0, start, 0.0)])
        >>> builder.transition(start, 1, [(0.5, goal, 10.0), (0.5, start, 0.0)])
        >>> mdp = builder.build("toy", starts=[start], horizon=2)
        >>> round(float(exact_success(mdp, softmax(mdp.initial_logits)[None])[0]), 4)  # 1 − 0.75²
        0.4375
    """

    actions: tuple[str, ...]
    _index: dict[Any, int] = field(default_factory=dict)
    _obs: list[str] = field(default_factory=list)
    _state: list[str] = field(default_factory=list)
    _context: list[Any] = field(default_factory=list)
    _features: list[tuple[int, ...]] = field(default_factory=list)
    _terminal: list[bool] = field(default_factory=list)
    _outcomes: dict[tuple[int, int], list[tuple[float, int, float]]] = field(default_factory=dict)
    _logits: dict[Any, np.ndarray] = field(default_factory=dict)

    def state(
        self,
        key: Any,
        *,
        obs: str,
        features: Sequence[int],
        context: Any = None,
        terminal: bool = False,
        logits: Sequence[float] | None = None,
    ) -> int:
        """The id of state ``key``, added on first sight. ``context`` defaults to ``obs`` (a
        policy over the observation); ``logits`` set the context's initial logits (else 0)."""
        if key in self._index:
            return self._index[key]
        self._index[key] = len(self._obs)
        self._obs.append(obs)
        self._state.append(repr(key))
        context = obs if context is None else context
        self._context.append(context)
        self._features.append(tuple(features))
        self._terminal.append(terminal)
        if logits is not None:
            self._logits[context] = np.asarray(logits, dtype=np.float64)
        return self._index[key]

    def transition(
        self, state: int, action: int, outcomes: Sequence[tuple[float, int, float]]
    ) -> None:
        """``outcomes``: (probability, next state, reward) triples summing to probability 1."""
        total = sum(p for p, _, _ in outcomes)
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"MDPBuilder: outcomes of ({state}, {action}) sum to {total}, not 1")
        self._outcomes[(state, action)] = list(outcomes)

    def build(
        self, name: str, *, starts: Sequence[int], horizon: int, obs_variants: int = 1
    ) -> FiniteMDP:
        """The MDP; a (state, action) without outcomes stays in place with reward 0 (only
        terminal states should have none: they are never acted in)."""
        n_states, n_actions = len(self._obs), len(self.actions)
        width = max((len(o) for o in self._outcomes.values()), default=1)
        successor = np.tile(np.arange(n_states)[:, None, None], (1, n_actions, width))
        probability = np.zeros((n_states, n_actions, width))
        probability[:, :, 0] = 1.0
        reward = np.zeros((n_states, n_actions, width))
        for (state, action), outcomes in self._outcomes.items():
            probability[state, action, 0] = 0.0
            for k, (p, target, gain) in enumerate(outcomes):
                successor[state, action, k] = target
                probability[state, action, k] = p
                reward[state, action, k] = gain
        contexts = {key: index for index, key in enumerate(dict.fromkeys(self._context))}
        logits = np.zeros((len(contexts), n_actions))
        for key, row in self._logits.items():
            logits[contexts[key]] = row
        n_features = max(len(f) for f in self._features)
        features = np.array([f + (f[-1],) * (n_features - len(f)) for f in self._features])
        return FiniteMDP(
            name=name,
            successor=successor,
            probability=probability,
            reward=reward,
            terminal=np.array(self._terminal),
            context=np.array([contexts[key] for key in self._context]),
            obs_key=np.array([stable_hash(text) for text in self._obs], dtype=object),
            state_key=np.array([stable_hash(text) for text in self._state], dtype=object),
            features=features,
            starts=np.asarray(starts, dtype=np.int64),
            horizon=horizon,
            actions=self.actions,
            initial_logits=logits,
            obs_variants=obs_variants,
        )


def softmax(logits: np.ndarray) -> np.ndarray:
    """Softmax over the last axis.

    Example:
        >>> softmax(np.zeros(4)).tolist()
        [0.25, 0.25, 0.25, 0.25]
    """
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def exact_success(mdp: FiniteMDP, policies: np.ndarray) -> np.ndarray:
    """J(π) of eq. 1 for each of a stack of policies (n, C, A) of context probabilities.

    Vectorised over the stack (one per seed): H steps of (n, S, A, K) array arithmetic.
    """
    continuation_mask = ~mdp.terminal[mdp.successor]  # (S, A, K): V after an end is 0
    value = np.zeros((len(policies), mdp.n_states))
    for _ in range(mdp.horizon):
        after = value[:, mdp.successor] * continuation_mask
        q = (mdp.probability * (mdp.reward + after)).sum(axis=3)  # (n, S, A)
        value = (policies[:, mdp.context] * q).sum(axis=2)
    return value[:, mdp.starts].mean(axis=1) / mdp.success_reward


def exact_advantages(mdp: FiniteMDP, policies: np.ndarray, gamma: float = 1.0) -> np.ndarray:
    """``A_t(s, a) = Q_t(s, a) − V_t(s)`` of each policy of a stack (n, C, A), (n, H, S, A),
    by the backward induction of eq. 1 with discount ``gamma`` (1: the objective's own).

    Example:
        >>> from agentbench_rl.bench.learning.family import lucky_rare
        >>> mdp = lucky_rare()
        >>> table = exact_advantages(mdp, softmax(mdp.initial_logits)[None])
        >>> table.shape[:2] == (1, mdp.horizon)
        True
        >>> policy = softmax(mdp.initial_logits)[None][:, mdp.context]  # π(a|s): mean A is 0
        >>> bool(np.allclose((policy[:, None] * table).sum(axis=3), 0.0))
        True
    """
    return exact_tables(mdp, policies, gamma)[0]


def exact_tables(
    mdp: FiniteMDP, policies: np.ndarray, gamma: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`exact_advantages`' ``A_t(s, a)`` (n, H, S, A) and the values ``V_t(s)`` (n, H, S)
    it subtracts (the credit sets' truth and value).

    Example:
        >>> from agentbench_rl.bench.learning.family import lucky_rare
        >>> mdp = lucky_rare()
        >>> policies = softmax(mdp.initial_logits)[None]
        >>> advantages, values = exact_tables(mdp, policies)
        >>> start = int(mdp.starts[0])  # J is V_0 of the starts over the win's reward
        >>> bool(np.isclose(values[0, 0, mdp.starts].mean() / mdp.success_reward,
        ...                 exact_success(mdp, policies)[0]))
        True
    """
    continuation_mask = ~mdp.terminal[mdp.successor]
    value = np.zeros((len(policies), mdp.n_states))
    table = np.zeros((len(policies), mdp.horizon, mdp.n_states, len(mdp.actions)))
    values = np.zeros((len(policies), mdp.horizon, mdp.n_states))
    for t in range(mdp.horizon - 1, -1, -1):
        after = gamma * value[:, mdp.successor] * continuation_mask
        q = (mdp.probability * (mdp.reward + after)).sum(axis=3)  # Q_t: (n, S, A)
        value = (policies[:, mdp.context] * q).sum(axis=2)  # V_t: (n, S)
        table[:, t] = q - value[:, :, None]
        values[:, t] = value
    return table, values


def optimal_success(mdp: FiniteMDP) -> float:
    """The best J over policies of the true state (eq. 1 with a max over actions): an upper
    bound where the policy sees less than the state (aliased observations).

    Example:
        >>> from agentbench_rl.bench.learning.family import lucky_rare
        >>> round(optimal_success(lucky_rare()), 4)  # always "steady": 0.95⁶
        0.7351
    """
    continuation_mask = ~mdp.terminal[mdp.successor]
    value = np.zeros(mdp.n_states)
    for _ in range(mdp.horizon):
        after = value[mdp.successor] * continuation_mask
        value = (mdp.probability * (mdp.reward + after)).sum(axis=2).max(axis=1)
    return float(value[mdp.starts].mean() / mdp.success_reward)


# ------------------------------------------------------------------ hidden-feature model
@dataclass(frozen=True)
class HiddenFeatures:
    """Synthetic actor hidden states for BiPACE: a fixed random projection of the true state's
    factors and the last action, plus noise (shared by ``bench learning`` and ``bench fidelity``).

    ``h = normalise(Σ_f E[f]) + action_weight·E_act[last action] + noise·z/√dim``, with ``E``
    fixed unit-variance random embeddings (one per factor id, seeded by ``seed``) and ``z``
    standard normal per row. Two rows of one state and one last action have cosine about
    ``(1 + w²) / (1 + w² + σ²)``; states that share factors (a player cell, a layer) are
    correlated; so cosine clustering can recover the true state, but imperfectly: noise splits
    some visits of a state, the last action splits others, similar states can merge.

    Example:
        >>> model = HiddenFeatures(dim=8, seed=0)
        >>> h = model.embed(np.array([[0, 1], [0, 1]]), np.array([-1, -1]), np.zeros((2, 8)))
        >>> bool(np.allclose(h[0], h[1]))
        True
    """

    dim: int = 32
    action_weight: float = 0.3
    noise: float = 0.15
    seed: int = 0
    max_factors: int = 4096
    max_actions: int = 16

    def tables(self) -> tuple[np.ndarray, np.ndarray]:
        """The factor and action embeddings (rows of norm about 1)."""
        rng = np.random.default_rng(self.seed)
        factors = rng.standard_normal((self.max_factors, self.dim)) / np.sqrt(self.dim)
        actions = rng.standard_normal((self.max_actions + 1, self.dim)) / np.sqrt(self.dim)
        return factors, actions

    def embed(self, features: np.ndarray, last_action: np.ndarray, z: np.ndarray) -> np.ndarray:
        """Hidden vectors of rows with state factors (n, F), last action (n,; −1 at t = 0)
        and standard normal draws z (n, dim)."""
        if features.max(initial=0) >= self.max_factors:
            raise ValueError(f"HiddenFeatures: factor ids must be < {self.max_factors}")
        factors, actions = self.tables()
        state = factors[features].sum(axis=1)
        state /= np.linalg.norm(state, axis=1, keepdims=True)
        return (
            state + self.action_weight * actions[last_action] + self.noise * z / np.sqrt(self.dim)
        )


def cluster_purity(clusters: np.ndarray, states: np.ndarray) -> float:
    """Share of clusters whose rows all share one true state.

    Example:
        >>> cluster_purity(np.array([0, 0, 1, 1]), np.array(["a", "a", "a", "b"]))
        0.5
    """
    pairs = {(int(c), s) for c, s in zip(clusters.tolist(), states.tolist(), strict=True)}
    per_cluster = np.bincount([c for c, _ in pairs])
    present = per_cluster[per_cluster > 0]
    return float(np.mean(present == 1))

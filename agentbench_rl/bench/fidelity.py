"""``agentbench-rl bench fidelity``: how well each estimator recovers the true advantage.

Two small MDPs whose true advantages are computable exactly:

- **Sokoban**: standard 6x6 one-box rooms (the env's generator and pure rules), 15-step limit,
  played by a fixed noisy expert: with probability 1 − ε it takes a move that shortens the
  distance to the solution (split evenly among such moves), otherwise a uniform move (ε = 0.5);
  in a dead state (no solution left) it moves uniformly. V and Q come from exact policy
  evaluation over the reachable (player, boxes) graph.
- **Aliased world**: a synthetic branching text world, 6 layers of 6 states, 3 actions, each
  action leading to one of two random states of the next layer (the likelier with probability
  0.7 to 0.95), 30% of transitions paying 0.2 on the way and a 0/1 reward on reaching the last
  layer. The observation text names the layer and one of 3 "scenes", so each text hides two
  true states with different values. The policy is a fixed random softmax of the observation
  text (the agent sees text, not the state).

The episodes stop at a step limit, so the exact evaluation runs backwards over time,
``V_t(s) = Σ_a π(a|s) Q_t(s, a)`` and ``Q_t(s, a) = E[r + γ·V_{t+1}(s')]`` with ``V_H = 0`` and
V = 0 after a terminal state (the solved room, the last layer): this is the advantage the
sampled returns estimate. A stationary V (the linear system of the infinite-horizon process)
would be biased near the step limit. The true advantage of a row is ``A_t(s, a) = Q_t(s, a) −
V_t(s)`` with the estimators' default γ = 0.95.

Each seed samples 4 groups (4 rooms, or 4 worlds) of G = 8 trajectories, runs every registered
estimator (entry points included; one that needs a column other than ``hidden`` is left out) at
its defaults (plus GiGPO keyed by the true state), and scores its advantages against the
true ones over the seed's rows: Pearson correlation, sign agreement (share of the rows with
A ≠ 0, and the same weighted by |A|: rows whose true advantage is almost 0 have no sign worth
getting right), the relative squared error after the best scale
``min_c mean((c·Â − A)²) / mean(A²)`` (0 is perfect, 1 is no better than predicting 0), and the
singleton rate. The table gives mean ± std
over seeds.

BiPACE gets the synthetic hidden states of ``bench learning``
(:class:`~agentbench_rl.bench.learning.mdp.HiddenFeatures`): a fixed random projection of the
true state's factors (player and box cells; layer and slot) and of the last action, plus noise.
They carry the true state, imperfectly, so BiPACE's clusters are not GiGPO's anchor sets in
disguise (they were, when the hidden state was a function of the observation text). The table
sweeps BiPACE's ε over 0, 0.01, 0.05 (the default), 0.1 and 0.2 and reports, for the
estimators that declare step-level sets (``step_sets`` in the registry: anchor sets, clusters),
their purity: the share of sets
whose rows all share one true state.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
from rich import box
from rich.console import Console
from rich.table import Table

from agentbench_rl.bench.learning.family import room_graph
from agentbench_rl.bench.learning.mdp import HiddenFeatures, cluster_purity
from agentbench_rl.core.batch import StepBatch
from agentbench_rl.core.hashing import seed_from, stable_hash
from agentbench_rl.envs.sokoban.env import SokobanEnv
from agentbench_rl.envs.sokoban.generator import LevelConfig
from agentbench_rl.envs.sokoban.rules import ACTIONS, render_grid
from agentbench_rl.estimators import EstimatorParams, compute, resolve, runnable

GAMMA = 0.95
GROUPS_PER_SEED = 4
GROUP_SIZE = 8
HIDDEN = HiddenFeatures()  # the hidden-feature model of bench learning
BIPACE_EPSILONS = (0.0, 0.01, 0.05, 0.1, 0.2)  # 0.05 is BiPACE's default
SOKOBAN_EPSILON = 0.5
WORLD_LAYERS = 6
WORLD_WIDTH = 6
WORLD_SCENES = 3
WORLD_ACTIONS = ("left", "forward", "right")
WORLD_FIND = 0.3  # share of transitions that pay WORLD_FIND_REWARD
WORLD_FIND_REWARD = 0.2
WORLD_CHANCE = (0.7, 0.95)  # range of the probability of an action's likelier outcome
SCENES = ("a dusty lamp", "a locked chest", "a narrow window")

# The optional batch columns the bench provides: an estimator that needs another is left out.
PROVIDED_COLUMNS = ("hidden",)
# Configuration, not logic: the settings an estimator runs with instead of its defaults alone,
# as (label, parameters). GiGPO also keyed by the true state (the oracle of the aliasing claim);
# BiPACE over a sweep of ε (0.05, its default, included).
VARIANTS: dict[str, tuple[tuple[str, EstimatorParams], ...]] = {
    "gigpo": (("gigpo", {}), ("gigpo anchor=state", {"anchor": "state"})),
    "bipace": tuple(
        (f"bipace ε={epsilon:g}" + (" (default)" if epsilon == 0.05 else ""), {"epsilon": epsilon})
        for epsilon in BIPACE_EPSILONS
    ),
}


def estimator_runs(
    columns: Sequence[str] = PROVIDED_COLUMNS,
) -> list[tuple[str, str, EstimatorParams]]:
    """(label, estimator, parameters) of every run: each registered estimator (entry points
    included) whose needs are among the optional batch ``columns`` (this bench's by default;
    the Monte-Carlo bench passes what its agent handed over), at its defaults or at its
    :data:`VARIANTS`.

    Example:
        >>> [label for label, _, _ in estimator_runs()][:4]
        ['grpo', 'rloo', 'gigpo', 'gigpo anchor=state']
        >>> "bipace" in {name for _, name, _ in estimator_runs(())}
        False
    """
    return [
        (label, name, params)
        for name in runnable(columns)
        for label, params in VARIANTS.get(name, ((name, {}),))
    ]


METRICS = (
    "correlation",
    "sign_agreement",
    "weighted_sign_agreement",
    "relative_mse",
    "singleton_rate",
    "purity",
)
METRIC_TITLES = {
    "correlation": "corr.",
    "sign_agreement": "sign",
    "weighted_sign_agreement": "w. sign",
    "relative_mse": "rel. MSE",
    "singleton_rate": "singleton",
    "purity": "purity",
}


@dataclass(frozen=True)
class TabularMDP:
    """A finite MDP with a fixed stochastic policy and a step limit.

    Transitions have up to K outcomes: from state s under action a the next state is
    ``successor[s, a, k]`` with probability ``probability[s, a, k]`` and reward
    ``reward[s, a, k]``. Reaching a ``terminal`` state ends the episode.
    """

    successor: np.ndarray  # (S, A, K) int
    probability: np.ndarray  # (S, A, K)
    reward: np.ndarray  # (S, A, K)
    terminal: np.ndarray  # (S,) bool
    policy: np.ndarray  # (S, A)
    start: int
    horizon: int
    obs_text: tuple[str, ...]  # what the agent reads in each state
    state_text: tuple[str, ...]  # the true state, for state_key
    actions: tuple[str, ...]
    features: np.ndarray  # (S, F) factor ids of the true state, for the hidden-feature model


def exact_advantages(mdp: TabularMDP, gamma: float) -> np.ndarray:
    """``A_t(s, a) = Q_t(s, a) − V_t(s)`` for t < horizon, by backward induction.

    Example:
        >>> # one state, two actions: "stay" pays 1 and ends, "go" pays 0 and ends; π uniform
        >>> mdp = TabularMDP(np.array([[[1], [1]], [[1], [1]]]), np.ones((2, 2, 1)),
        ...     np.array([[[1.0], [0.0]], [[0.0], [0.0]]]), np.array([False, True]),
        ...     np.full((2, 2), 0.5), 0, 1, ("s", "end"), ("s", "end"), ("stay", "go"),
        ...     np.array([[0], [1]]))
        >>> exact_advantages(mdp, 0.9)[0, 0].tolist()
        [0.5, -0.5]
    """
    n_states, n_actions = mdp.policy.shape
    advantages = np.zeros((mdp.horizon, n_states, n_actions))
    value_next = np.zeros(n_states)  # V_H = 0
    for t in range(mdp.horizon - 1, -1, -1):
        # V after a terminal state is 0: the episode has ended.
        continuation = np.where(mdp.terminal[mdp.successor], 0.0, value_next[mdp.successor])
        q = (mdp.probability * (mdp.reward + gamma * continuation)).sum(axis=2)
        value = (mdp.policy * q).sum(axis=1)
        advantages[t] = q - value[:, None]
        value_next = value
    return advantages


# ------------------------------------------------------------------------------------ Sokoban
def sokoban_mdp(seed: int, epsilon: float = SOKOBAN_EPSILON) -> TabularMDP:
    """The standard-setting room of ``seed`` under the noisy expert, over its reachable states."""
    config = LevelConfig()
    graph = room_graph(seed, config)
    room, states, edges, terminal = graph.room, graph.states, graph.edges, graph.terminal
    n_states = len(states)
    successor = np.tile(np.arange(n_states)[:, None, None], (1, len(ACTIONS), 1))
    reward = np.zeros((n_states, len(ACTIONS), 1))
    for source, row in edges.items():
        for column, (target, gain) in enumerate(row):
            successor[source, column, 0], reward[source, column, 0] = target, gain

    # Moves to the solution: reverse BFS from the solved states over the reachable graph.
    distance = np.full(n_states, np.inf)
    distance[terminal] = 0
    sources: list[list[int]] = [[] for _ in range(n_states)]
    for source, row in edges.items():
        for target, _ in row:
            sources[target].append(source)
    frontier = deque(np.flatnonzero(terminal).tolist())
    while frontier:
        here = frontier.popleft()
        for source in sources[here]:
            if distance[source] == np.inf:
                distance[source] = distance[here] + 1
                frontier.append(source)
    policy = np.full((n_states, len(ACTIONS)), 1 / len(ACTIONS))
    for alive in np.flatnonzero(np.isfinite(distance) & ~terminal):
        after = distance[successor[alive, :, 0]]
        best = after == after.min()
        policy[alive] = epsilon / len(ACTIONS) + (1 - epsilon) * best / best.sum()
    texts = tuple(render_grid(room, player, boxes) for player, boxes in states)
    return TabularMDP(
        successor=successor,
        probability=np.ones((n_states, len(ACTIONS), 1)),
        reward=reward,
        terminal=terminal,
        policy=policy,
        start=0,
        horizon=SokobanEnv.default_max_steps,
        obs_text=texts,
        state_text=texts,
        actions=ACTIONS,
        features=np.array(
            [(player, config.width * config.height + min(boxes)) for player, boxes in states]
        ),
    )


# ------------------------------------------------------------------------------ aliased world
def aliased_world(seed: int) -> TabularMDP:
    """A layered text world in which each observation text hides two true states.

    Example:
        >>> world = aliased_world(0)
        >>> len(set(world.obs_text)) < len(set(world.state_text))
        True
    """
    rng = np.random.default_rng(seed)
    # state 0: the start; then WORLD_LAYERS layers of WORLD_WIDTH states; the last is terminal.
    layer = np.concatenate([[0], np.repeat(np.arange(1, WORLD_LAYERS + 1), WORLD_WIDTH)])
    slot = np.concatenate([[0], np.tile(np.arange(WORLD_WIDTH), WORLD_LAYERS)])
    n_states, n_actions = len(layer), len(WORLD_ACTIONS)
    successor = np.zeros((n_states, n_actions, 2), dtype=np.int64)
    probability = np.zeros((n_states, n_actions, 2))
    reward = np.zeros((n_states, n_actions, 2))
    leaf_value = rng.integers(0, 2, size=n_states).astype(np.float64)
    for state in range(n_states):
        if layer[state] == WORLD_LAYERS:
            successor[state] = state  # terminal: never acted in
            probability[state, :, 0] = 1.0
            continue
        first = 1 + layer[state] * WORLD_WIDTH  # first state of the next layer
        for action in range(n_actions):
            targets = first + rng.choice(WORLD_WIDTH, size=2, replace=False)
            successor[state, action] = targets
            chance = rng.uniform(*WORLD_CHANCE)
            probability[state, action] = (chance, 1 - chance)
            # a find on the way (0.2 with probability WORLD_FIND), the leaf's 0/1 at the end
            reward[state, action] = WORLD_FIND_REWARD * (rng.random(2) < WORLD_FIND)
            if layer[state] + 1 == WORLD_LAYERS:
                reward[state, action] += leaf_value[targets]
    scene = slot % WORLD_SCENES
    obs_text = tuple(
        f"Layer {layer[s]}. You see {SCENES[scene[s]]}." if s else "You stand at the gate."
        for s in range(n_states)
    )
    # The agent reads text, so its policy is a function of the text: aliased states share it.
    logits = {text: rng.normal(0.0, 1.0, size=n_actions) for text in sorted(set(obs_text))}
    policy = np.array([np.exp(logits[text]) / np.exp(logits[text]).sum() for text in obs_text])
    return TabularMDP(
        successor=successor,
        probability=probability,
        reward=reward,
        terminal=layer == WORLD_LAYERS,
        policy=policy,
        start=0,
        horizon=WORLD_LAYERS,
        obs_text=obs_text,
        state_text=tuple(f"layer {layer[s]} slot {slot[s]}" for s in range(n_states)),
        actions=WORLD_ACTIONS,
        features=np.stack([layer, WORLD_LAYERS + 1 + slot], axis=1),
    )


# ---------------------------------------------------------------------------------- sampling
def sample_group(
    mdp: TabularMDP, advantages: np.ndarray, size: int, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """``size`` trajectories from the start state: per row the trajectory, t, state, action,
    the previous action (−1 at t = 0), reward and true advantage."""
    columns: dict[str, list[np.ndarray]] = {
        key: [] for key in ("traj", "t", "state", "action", "last", "reward", "true")
    }
    state = np.full(size, mdp.start)
    last = np.full(size, -1)
    alive = np.ones(size, dtype=bool)
    for t in range(mdp.horizon):
        trajs = np.flatnonzero(alive)
        if trajs.size == 0:
            break
        here = state[trajs]
        action = _categorical(mdp.policy[here], rng)
        outcome = _categorical(mdp.probability[here, action], rng)
        landed = mdp.successor[here, action, outcome]
        for key, values in (
            ("traj", trajs),
            ("t", np.full(trajs.size, t)),
            ("state", here),
            ("action", action),
            ("last", last[trajs]),
            ("reward", mdp.reward[here, action, outcome]),
            ("true", advantages[t, here, action]),
        ):
            columns[key].append(values)
        state[trajs], last[trajs] = landed, action
        alive[trajs] = ~mdp.terminal[landed]
    return {key: np.concatenate(values) for key, values in columns.items()}


def _categorical(probabilities: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per row of a (n, k) matrix of probabilities."""
    cumulative = np.cumsum(probabilities, axis=1)
    draws = rng.random(len(probabilities))[:, None] * cumulative[:, -1:]
    return np.minimum((draws >= cumulative).sum(axis=1), probabilities.shape[1] - 1)


def seed_batch(
    make_mdp: Callable[[int], TabularMDP], name: str, seed: int
) -> tuple[StepBatch, np.ndarray]:
    """The batch of one seed (GROUPS_PER_SEED groups of GROUP_SIZE) and its true advantages."""
    rng = np.random.default_rng(seed_from("fidelity", name, seed))
    columns: dict[str, list[Any]] = {
        key: []
        for key in ("group", "traj", "t", "reward", "obs_key", "state_key", "action_key", "hidden")
    }
    true_parts = []
    for group in range(GROUPS_PER_SEED):
        mdp = make_mdp(seed_from("fidelity", name, seed, group) % 2**31)
        group_rows = sample_group(mdp, exact_advantages(mdp, GAMMA), GROUP_SIZE, rng)
        obs_keys = np.array([stable_hash(text) for text in mdp.obs_text], dtype=object)
        state_keys = np.array([stable_hash(text) for text in mdp.state_text], dtype=object)
        states = group_rows["state"]
        columns["group"].append(np.full(len(states), group))
        columns["traj"].append(group * GROUP_SIZE + group_rows["traj"])
        columns["t"].append(group_rows["t"])
        columns["reward"].append(group_rows["reward"])
        columns["obs_key"].append(obs_keys[states])
        columns["state_key"].append(state_keys[states])
        columns["action_key"].append(np.array(mdp.actions, dtype=object)[group_rows["action"]])
        noise = rng.standard_normal((len(states), HIDDEN.dim))
        columns["hidden"].append(HIDDEN.embed(mdp.features[states], group_rows["last"], noise))
        true_parts.append(group_rows["true"])
    arrays = {key: np.concatenate(values) for key, values in columns.items()}
    batch = StepBatch(valid=np.ones(len(arrays["t"]), dtype=bool), **arrays)
    return batch, np.concatenate(true_parts)


# ----------------------------------------------------------------------------------- scoring
def score(estimate: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """How well ``estimate`` recovers ``truth`` (one value per row).

    ``correlation``: Pearson. ``sign_agreement``: share of the rows with A ≠ 0 whose estimate
    has A's sign (an estimate of exactly 0 disagrees). ``weighted_sign_agreement``: the same,
    each row weighted by |A|, since a row whose true advantage is almost 0 has no sign worth
    getting right. ``relative_mse``: ``min_c mean((c·Â − A)²) / mean(A²)``.

    Example:
        >>> figures = score(np.array([2.0, -2.0, 0.0]), np.array([1.0, -1.0, 0.5]))
        >>> figures["sign_agreement"], figures["weighted_sign_agreement"]
        (0.6666666666666666, 0.8)
    """
    spread = float(np.std(estimate) * np.std(truth))
    correlation = (
        float(np.mean((estimate - estimate.mean()) * (truth - truth.mean())) / spread)
        if spread > 0
        else 0.0
    )
    decided = np.abs(truth) > 1e-12
    agrees = np.sign(estimate) == np.sign(truth)
    weight = np.abs(truth)
    energy = float(estimate @ estimate)
    scale = float(estimate @ truth) / energy if energy > 0 else 0.0
    return {
        "correlation": correlation,
        "sign_agreement": float(np.mean(agrees[decided])) if decided.any() else 0.0,
        "weighted_sign_agreement": float(weight @ agrees / weight.sum()) if decided.any() else 0.0,
        "relative_mse": float(np.mean((scale * estimate - truth) ** 2) / np.mean(truth**2)),
    }


def step_set_purity(batch: StepBatch, name: str, params: EstimatorParams) -> float:
    """Purity of the step-level sets the estimator declares (``step_sets``: anchor sets,
    clusters): the share of sets whose rows share one true state; NaN for an estimator
    without step-level sets."""
    sets = resolve(name).step_set_codes(batch, params)
    if sets is None:
        return float("nan")
    # a set is per group; the group is part of the code, so (code, state) pairs decide purity
    return cluster_purity(sets[0], batch.state_key)


MDPS: dict[str, Callable[[int], TabularMDP]] = {
    "sokoban": sokoban_mdp,
    "aliased_world": aliased_world,
}


def evaluate(seeds: int) -> dict[str, dict[str, dict[str, list[float]]]]:
    """Per MDP, per estimator label, per metric: one value per seed."""
    runs = estimator_runs()
    results: dict[str, dict[str, dict[str, list[float]]]] = {}
    for mdp_name, make_mdp in MDPS.items():
        per_estimator: dict[str, dict[str, list[float]]] = {
            label: {metric: [] for metric in METRICS} for label, _, _ in runs
        }
        for seed in range(seeds):
            batch, truth = seed_batch(make_mdp, mdp_name, seed)
            for label, name, params in runs:
                result = compute(name, batch, **params)
                figures = score(result.advantages, truth)
                figures["singleton_rate"] = result.diagnostics["singleton_rate"]
                figures["purity"] = step_set_purity(batch, name, params)
                for metric in METRICS:
                    per_estimator[label][metric].append(figures[metric])
        results[mdp_name] = per_estimator
    return results


def summarise(values: list[float]) -> tuple[float, float]:
    """Mean and (unbiased) std over seeds."""
    return float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def cell(values: list[float], digits: int, separator: str = " ± ") -> str:
    """``mean ± std`` with ``digits`` decimals; "–" for a metric that does not apply (NaN)."""
    mean, spread = summarise(values)
    if np.isnan(mean):
        return "–"
    return f"{mean:.{digits}f}{separator}{spread:.{digits}f}"


def json_number(value: float) -> float | None:
    """``value``, or ``None`` for NaN (JSON has no NaN)."""
    return None if np.isnan(value) else value


def markdown_table(results: dict[str, dict[str, dict[str, list[float]]]], seeds: int) -> str:
    """The table as Markdown: one row per (MDP, estimator), mean ± std over seeds."""
    lines = [
        f"# Advantage fidelity ({seeds} seeds per MDP, {GROUPS_PER_SEED} groups of "
        f"{GROUP_SIZE} trajectories per seed, γ = {GAMMA})",
        "",
        "| MDP | estimator | " + " | ".join(METRIC_TITLES[m] for m in METRICS) + " |",
        "|---|---|" + "---|" * len(METRICS),
    ]
    for mdp_name, per_estimator in results.items():
        for label, metrics in per_estimator.items():
            cells = [cell(metrics[m], 3) for m in METRICS]
            lines.append(f"| {mdp_name} | {label} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "corr.: Pearson correlation with the exact A(s,a) over a seed's rows; sign: share of the",
        "rows with A ≠ 0 whose sign is right; w. sign: the same, each row",
        "weighted by its true |A|; rel. MSE: min_c mean((c·Â − A)²) / mean(A²); singleton: the",
        "estimator's singleton rate; purity: share of its anchor sets or clusters whose rows",
        "share one true state (– where it has neither). BiPACE's hidden states: a random",
        "projection of the true state's factors and the last action, plus noise (bench learning's",
        "model); ε is its clustering threshold.",
    ]
    return "\n".join(lines) + "\n"


def plot(results: dict[str, dict[str, dict[str, list[float]]]], path: Path) -> None:
    """Bars per estimator, one colour per MDP, for four of the metrics (mean ± std)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(next(iter(results.values())))
    shown = ("correlation", "weighted_sign_agreement", "relative_mse", "singleton_rate")
    figure, axes = plt.subplots(2, 2, figsize=(13, 8))
    width = 0.8 / len(results)
    positions = np.arange(len(labels))
    for axis, metric in zip(axes.flat, shown, strict=True):
        for offset, (mdp_name, per_estimator) in enumerate(results.items()):
            stats = [summarise(per_estimator[label][metric]) for label in labels]
            axis.bar(
                positions + offset * width,
                [mean for mean, _ in stats],
                width,
                yerr=[spread for _, spread in stats],
                label=mdp_name,
                capsize=2,
            )
        axis.set_title(METRIC_TITLES[metric])
        axis.set_xticks(positions + width * (len(results) - 1) / 2)
        axis.set_xticklabels(labels, rotation=30, ha="right")
        axis.grid(axis="y", alpha=0.3)
    axes.flat[0].legend()
    figure.suptitle("Advantage fidelity against the exact A(s,a) (mean ± std over seeds)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


class SeedFigures(TypedDict):
    """One metric of one estimator on one MDP: mean and std over seeds, and each seed's value
    (``None``: NaN, a metric that does not apply)."""

    mean: float | None
    std: float | None
    per_seed: list[float | None]


class EstimatorRun(TypedDict):
    """An estimator label's registry name and parameters."""

    name: str
    params: EstimatorParams


class ExactFidelity(TypedDict):
    """``fidelity.json`` of ``bench fidelity`` on the exact MDPs: the sizes, every estimator
    run, and per MDP, per estimator label, per metric, its figures over seeds."""

    seeds: int
    groups_per_seed: int
    group_size: int
    gamma: float
    estimators: dict[str, EstimatorRun]
    results: dict[str, dict[str, dict[str, SeedFigures]]]


def run(seeds: int, out: Path, console: Console) -> ExactFidelity:
    """Evaluate every estimator on both MDPs; print the table; write Markdown, JSON and PNG."""
    if seeds < 1:
        raise ValueError(f"fidelity: seeds must be >= 1, got {seeds}")
    results = evaluate(seeds)
    out.mkdir(parents=True, exist_ok=True)

    for mdp_name, per_estimator in results.items():
        table = Table(
            title=f"Advantage fidelity on {mdp_name}: mean ± std over {seeds} seeds",
            box=box.SIMPLE_HEAD,
            pad_edge=False,
        )
        table.add_column("estimator", no_wrap=True)
        for metric in METRICS:
            table.add_column(METRIC_TITLES[metric], justify="right", min_width=9)
        for label, metrics in per_estimator.items():
            cells = (cell(metrics[m], 2, "±") for m in METRICS)
            table.add_row(label, *cells)
        console.print(table)

    (out / "fidelity.md").write_text(markdown_table(results, seeds), encoding="utf-8")
    payload: ExactFidelity = {
        "seeds": seeds,
        "groups_per_seed": GROUPS_PER_SEED,
        "group_size": GROUP_SIZE,
        "gamma": GAMMA,
        "estimators": {
            label: {"name": name, "params": params} for label, name, params in estimator_runs()
        },
        "results": {
            mdp_name: {
                label: {
                    metric: {
                        "mean": json_number(summarise(values)[0]),
                        "std": json_number(summarise(values)[1]),
                        "per_seed": [json_number(value) for value in values],
                    }
                    for metric, values in metrics.items()
                }
                for label, metrics in per_estimator.items()
            }
            for mdp_name, per_estimator in results.items()
        },
    }
    (out / "fidelity.json").write_text(json.dumps(payload, indent=1), encoding="utf-8")
    plot(results, out / "fidelity.png")
    console.print(f"wrote {out / 'fidelity.md'}, {out / 'fidelity.json'}, {out / 'fidelity.png'}")
    return payload

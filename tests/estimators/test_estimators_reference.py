"""Every estimator against a straightforward per-row implementation of docs/estimators.md.

The reference below reads the spec literally: dicts keyed by tuples of keys, Python loops over
rows, ``statistics`` for means and stds, a dense ``numpy.linalg.solve`` per group for
Gated-BEPO, tuples of observations and actions for ProGPO's prefixes and levels. It shares no
code with ``agentbench_rl.estimators``. Random batches come from hypothesis: small alphabets of
observations and actions so that anchors, prefixes and states recur, rows in random order.

``random_records`` and ``reference`` are imported by ``test_estimators_properties``.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import defaultdict
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from agentbench_rl.estimators import StepBatch, compute

EPS = 1e-6
Row = dict[str, Any]


# ------------------------------------------------------------------------------ random batches
@st.composite
def random_records(
    draw: st.DrawFn,
    max_groups: int = 3,
    max_trajs: int = 4,
    max_len: int = 5,
    hidden_size: int = 0,
    observations: str = "ABCD",
) -> list[Row]:
    """A batch as records, rows shuffled. With ``hidden_size``, hidden states are a random
    direction per (group, observation) plus small noise, so rows of one observation cluster."""
    records: list[Row] = []
    for g in range(draw(st.integers(1, max_groups))):
        for k in range(draw(st.integers(1, max_trajs))):
            for t in range(draw(st.integers(1, max_len))):
                obs = draw(st.sampled_from(observations))
                records.append(
                    {
                        "group": f"g{g}",
                        "traj": f"g{g}-{k}",
                        "t": t,
                        "reward": draw(st.sampled_from([0.0, 0.0, 1.0, -1.0, 0.5, 2.0])),
                        "obs_key": obs,
                        "state_key": draw(st.sampled_from([obs, obs, obs + "'"])),
                        "action_key": draw(st.sampled_from("xyz")),
                        "valid": draw(st.booleans()),
                    }
                )
    if hidden_size:
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        directions: dict[tuple[str, str], np.ndarray] = {}
        for row in records:
            key = (row["group"], row["obs_key"])
            if key not in directions:
                directions[key] = rng.standard_normal(hidden_size)
            noise = rng.standard_normal(hidden_size) * draw(st.sampled_from([0.01, 0.3]))
            row["hidden"] = (directions[key] + noise).tolist()
    order = draw(st.permutations(range(len(records))))
    return [records[i] for i in order]


# --------------------------------------------------------------------------- reference helpers
def mean(values: list[float]) -> float:
    return statistics.fmean(values)


def std(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) >= 2 else 0.0


def normalised(x: float, values: list[float], mode: str) -> float:
    if len(values) == 1:
        return 0.0
    if mode == "mean":
        return x - mean(values)
    return (x - mean(values)) / (std(values) + EPS)


def trajectories(rows: list[Row]) -> dict[Any, list[int]]:
    """Row indices of each trajectory, in t order."""
    by_traj: dict[Any, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        by_traj[row["traj"]].append(i)
    for indices in by_traj.values():
        indices.sort(key=lambda i: rows[i]["t"])
    return by_traj


def next_rows(rows: list[Row]) -> list[int | None]:
    following: list[int | None] = [None] * len(rows)
    for indices in trajectories(rows).values():
        for here, there in itertools.pairwise(indices):
            following[here] = there
    return following


def discounted(rows: list[Row], values: list[float], discount: float) -> list[float]:
    out = [0.0] * len(rows)
    for indices in trajectories(rows).values():
        running = 0.0
        for i in reversed(indices):
            running = values[i] + discount * running
            out[i] = running
    return out


def penalty(row: Row, p: float) -> float:
    return p if not row["valid"] else 0.0


def step_return(rows: list[Row], gamma: float, p: float) -> list[float]:
    raw = discounted(rows, [row["reward"] for row in rows], gamma)
    return [raw[i] - penalty(row, p) for i, row in enumerate(rows)]


def episode_return(rows: list[Row]) -> dict[Any, float]:
    totals: dict[Any, float] = defaultdict(float)
    for row in rows:
        totals[row["traj"]] += row["reward"]
    return totals


def score(rows: list[Row], p: float) -> list[float]:
    returns = episode_return(rows)
    return [returns[row["traj"]] - penalty(row, p) for row in rows]


def episode_advantage(rows: list[Row], mode: str, stats: str, p: float) -> list[float]:
    scores = score(rows, p)
    returns = episode_return(rows)
    members: dict[Any, list[float]] = defaultdict(list)
    if stats == "rows":
        for i, row in enumerate(rows):
            members[row["group"]].append(scores[i])
    else:
        seen = set()
        for row in rows:
            if row["traj"] not in seen:
                seen.add(row["traj"])
                members[row["group"]].append(returns[row["traj"]])
        # the spec subtracts the penalty after normalising R(τ_i) in this mode
        return [
            normalised(returns[row["traj"]], members[row["group"]], mode) - penalty(row, p)
            for row in rows
        ]
    return [normalised(scores[i], members[row["group"]], mode) for i, row in enumerate(rows)]


def sets_by(rows: list[Row], key: Any) -> dict[Any, list[int]]:
    sets: dict[Any, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        sets[key(row)].append(i)
    return sets


# ---------------------------------------------------------------------------- the estimators
def ref_grpo(
    rows: list[Row],
    norm: str = "mean_std",
    episode_stats: str = "rows",
    invalid_penalty: float = 0.0,
) -> list[float]:
    return episode_advantage(rows, norm, episode_stats, invalid_penalty)


def ref_rloo(rows: list[Row], invalid_penalty: float = 0.0) -> list[float]:
    returns = episode_return(rows)
    scores = score(rows, invalid_penalty)
    out = []
    for i, row in enumerate(rows):
        others = [
            returns[k]
            for k in {r["traj"] for r in rows if r["group"] == row["group"]}
            if k != row["traj"]
        ]
        out.append(scores[i] - mean(others) if others else 0.0)
    return out


def ref_gigpo(
    rows: list[Row],
    gamma: float = 0.95,
    omega: float = 1.0,
    norm: str = "mean_std",
    episode_stats: str = "rows",
    anchor: str = "obs",
    invalid_penalty: float = 0.0,
) -> list[float]:
    g = step_return(rows, gamma, invalid_penalty)
    episode = episode_advantage(rows, norm, episode_stats, invalid_penalty)
    column = "obs_key" if anchor == "obs" else "state_key"
    sets = sets_by(rows, lambda row: (row["group"], row[column]))
    out = []
    for i, row in enumerate(rows):
        members = [g[j] for j in sets[(row["group"], row[column])]]
        out.append(episode[i] + omega * normalised(g[i], members, norm))
    return out


def ref_clusters(rows: list[Row], epsilon: float) -> list[int]:
    label = [-1] * len(rows)
    next_label = 0
    for group in sorted({row["group"] for row in rows}):
        order = sorted((row["t"], i) for i, row in enumerate(rows) if row["group"] == group)
        sums: list[np.ndarray] = []
        labels: list[int] = []
        for _, i in order:
            h = np.asarray(rows[i]["hidden"], dtype=float)
            u = h / math.sqrt(float(h @ h))
            best, best_cos = None, -math.inf
            for c, total in enumerate(sums):
                cos = float(total @ u) / math.sqrt(float(total @ total))
                if cos > best_cos:
                    best, best_cos = c, cos
            if best is not None and 1 - best_cos <= epsilon:
                sums[best] = sums[best] + u
                label[i] = labels[best]
            else:
                sums.append(u)
                labels.append(next_label)
                label[i] = next_label
                next_label += 1
    return label


def ref_bipace(
    rows: list[Row],
    gamma: float = 0.95,
    omega: float = 1.0,
    epsilon: float = 0.05,
    pace: str = "q",
    min_peers: int = 2,
    norm: str = "mean_std",
    episode_stats: str = "rows",
    invalid_penalty: float = 0.0,
) -> list[float]:
    g = step_return(rows, gamma, invalid_penalty)
    episode = episode_advantage(rows, norm, episode_stats, invalid_penalty)
    cluster = ref_clusters(rows, epsilon)
    out = []
    for i, row in enumerate(rows):
        members = [j for j in range(len(rows)) if cluster[j] == cluster[i]]
        values = [g[j] for j in members]
        if len(members) < 2:
            step = 0.0
        elif pace == "state":
            step = normalised(g[i], values, norm)
        else:
            d = std(values) + EPS if norm == "mean_std" else 1.0
            loo = (g[i] - mean([g[j] for j in members if j != i])) / d
            same = [g[j] for j in members if rows[j]["action_key"] == row["action_key"]]
            other = [g[j] for j in members if rows[j]["action_key"] != row["action_key"]]
            if pace == "q":
                step = (mean(same) - mean(values)) / d if len(same) >= min_peers else loo
            else:
                step = (g[i] - mean(other)) / d if other else loo
        out.append(episode[i] + omega * step)
    return out


def ref_ecpo(
    rows: list[Row],
    kappa: float = 2.0,
    tau: float = 4.0,
    gamma: float = 0.95,
    omega: float = 1.0,
    norm: str = "mean_std",
    episode_stats: str = "rows",
    anchor: str = "obs",
    invalid_penalty: float = 0.0,
) -> list[float]:
    g = step_return(rows, gamma, invalid_penalty)
    episode = episode_advantage(rows, norm, episode_stats, invalid_penalty)
    column = "obs_key" if anchor == "obs" else "state_key"
    sets = sets_by(rows, lambda row: (row["group"], row[column]))
    out = []
    for i, row in enumerate(rows):
        members = sets[(row["group"], row[column])]
        values = [g[j] for j in members]
        n_s, mu_s, sigma_s = len(values), mean(values), std(values)
        by_action: dict[Any, list[float]] = defaultdict(list)
        for j in members:
            by_action[rows[j]["action_key"]].append(g[j])
        mine = by_action[row["action_key"]]
        shrunk = (len(mine) * mean(mine) + kappa * mu_s) / (len(mine) + kappa)
        act = shrunk - mu_s
        if norm == "mean_std":
            act /= sigma_s + EPS
        between = sum(len(v) / n_s * (mean(v) - mu_s) ** 2 for v in by_action.values())
        within = sum((x - mean(v)) ** 2 for v in by_action.values() for x in v) / n_s
        gate = math.tanh(n_s / tau) * between / (between + within + EPS)
        out.append(episode[i] + omega * gate * act)
    return out


def ref_progpo(
    rows: list[Row],
    gamma: float = 0.95,
    omega: float = 1.0,
    depth: int = 2,
    norm: str = "mean_std",
    episode_stats: str = "rows",
    invalid_penalty: float = 0.0,
) -> list[float]:
    g = step_return(rows, gamma, invalid_penalty)
    episode = episode_advantage(rows, norm, episode_stats, invalid_penalty)
    following = next_rows(rows)
    path: dict[int, list[int]] = {}  # row -> the rows of its trajectory up to it
    for indices in trajectories(rows).values():
        for k, i in enumerate(indices):
            path[i] = indices[: k + 1]

    def key(i: int, k: int | None) -> tuple[Any, ...]:
        steps = path[i] if k is None else path[i][-(k + 1) :]
        parts: list[Any] = []
        for j in steps[:-1]:
            parts += [rows[j]["obs_key"], rows[j]["action_key"]]
        return (*parts, rows[i]["obs_key"])

    def members(key_of: Any) -> dict[int, list[int]]:
        sets: dict[Any, list[int]] = defaultdict(list)
        for j in range(len(rows)):
            sets[(rows[j]["group"], key_of(j))].append(j)
        return {j: sets[(rows[j]["group"], key_of(j))] for j in range(len(rows))}

    prefix = members(lambda j: key(j, None))
    levels = [members(lambda j, k=k: key(j, k)) for k in range(depth + 1)]
    if all("semantic_key" in row for row in rows):
        levels.append(members(lambda j: rows[j]["semantic_key"]))
    potential = []
    for i in range(len(rows)):
        weights, means = [], []
        for level in levels:
            values = [g[j] for j in level[i]]
            if len(values) >= 2:
                weights.append(len(values) / (statistics.variance(values) + 0.01))
                means.append(mean(values))
        potential.append(
            sum(w * m for w, m in zip(weights, means, strict=True)) / sum(weights)
            if weights
            else g[i]
        )
    credit = []
    for i, row in enumerate(rows):
        nxt = following[i]
        credit.append(
            row["reward"] + gamma * (potential[nxt] if nxt is not None else 0.0) - potential[i]
        )
    group_credit = sets_by(rows, lambda row: row["group"])
    out = []
    for i, row in enumerate(rows):
        peers = [g[j] for j in prefix[i]]
        in_group = [credit[j] for j in group_credit[row["group"]]]
        if len(peers) >= 2:
            step = normalised(g[i], peers, norm)
        elif len(in_group) == 1:
            step = 0.0
        else:
            step = credit[i] / (std(in_group) + EPS)
        out.append(episode[i] + omega * step)
    return out


def ref_gated_bepo(
    rows: list[Row],
    gamma: float = 0.95,
    lam: float = 0.95,
    omega: float = 1.0,
    mixing: str = "additive",
    norm: str = "mean_std",
    episode_stats: str = "rows",
    invalid_penalty: float = 0.0,
) -> list[float]:
    episode = episode_advantage(rows, norm, episode_stats, invalid_penalty)
    following = next_rows(rows)
    terminal = ("⊥",)  # never equal to a state key (a string)
    successor = [rows[n]["state_key"] if n is not None else terminal for n in following]
    value: dict[tuple[Any, Any], float] = {}
    for group in {row["group"] for row in rows}:
        mine = [i for i, row in enumerate(rows) if row["group"] == group]
        states = sorted({rows[i]["state_key"] for i in mine})
        index = {s: k for k, s in enumerate(states)}
        system = np.eye(len(states))
        b = np.zeros(len(states))
        leaving = {s: [i for i in mine if rows[i]["state_key"] == s] for s in states}
        for s, out_rows in leaving.items():
            b[index[s]] = mean([rows[i]["reward"] for i in out_rows])
            for i in out_rows:
                if successor[i] is not terminal:
                    system[index[s], index[successor[i]]] -= gamma / len(out_rows)
        solved = np.linalg.solve(system, b)
        for s in states:
            value[(group, s)] = float(solved[index[s]])

    def v(i: int, state: Any) -> float:
        return 0.0 if state is terminal else value[(rows[i]["group"], state)]

    delta = [
        row["reward"] + gamma * v(i, successor[i]) - v(i, row["state_key"])
        for i, row in enumerate(rows)
    ]
    bellman = discounted(rows, delta, gamma * lam)
    gate = []
    for row in rows:
        reached = {
            successor[j]
            for j, other in enumerate(rows)
            if other["group"] == row["group"] and other["state_key"] == row["state_key"]
        }
        gate.append(len(reached) >= 2)
    out = []
    for i, row in enumerate(rows):
        gated = [
            bellman[j] for j, other in enumerate(rows) if other["group"] == row["group"] and gate[j]
        ]
        d = std(gated) + EPS if norm == "mean_std" and len(gated) >= 2 else 1.0
        if mixing == "additive":
            out.append(episode[i] + omega * (bellman[i] / d if gate[i] else 0.0))
        else:
            out.append(bellman[i] / d if gate[i] else episode[i])
    return out


def ref_hgpo(
    rows: list[Row],
    gamma: float = 0.95,
    history_length: int = 2,
    alpha: float = 1.0,
    base_group: bool = False,
    norm: str = "mean_std",
    lone_row: str = "zero",
    invalid_penalty: float = 0.0,
) -> list[float]:
    g = step_return(rows, gamma, invalid_penalty)
    episode = episode_advantage(rows, norm, "rows", invalid_penalty)
    window: dict[int, tuple[Any, ...]] = {}  # row -> its observations o_0 .. o_t
    for indices in trajectories(rows).values():
        for k, i in enumerate(indices):
            window[i] = tuple(rows[j]["obs_key"] for j in indices[: k + 1])
    groups: dict[tuple[Any, int, tuple[Any, ...]], list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        for k in range(1, min(history_length + 1, len(window[i])) + 1):
            groups[(row["group"], k, window[i][-k:])].append(i)
    out = []
    for i, row in enumerate(rows):
        items: list[tuple[int, float]] = []
        if base_group:
            lone = sum(1 for other in rows if other["group"] == row["group"]) == 1
            if lone and lone_row == "score":
                own = score(rows, invalid_penalty)[i]
                items.append((0, own / (1 + EPS) if norm == "mean_std" else own))
            else:
                items.append((0, episode[i]))
        for k in range(1, min(history_length + 1, len(window[i])) + 1):
            values = [g[j] for j in groups[(row["group"], k, window[i][-k:])]]
            if len(values) >= 2:
                # a plain sum in row order, as the authors' code: its a ≠ 0 rule below sees the
                # float residue of a mean of equal values (hgpo.py's docstring)
                centre = sum(values) / len(values)
                a = g[i] - centre
                if norm == "mean_std":
                    a /= math.sqrt(sum((x - centre) ** 2 for x in values) / len(values)) + EPS
                items.append((k, a))
        items = [(k, a) for k, a in items if a != 0]
        total = sum((k + 1) ** alpha for k, _ in items)
        out.append(sum((k + 1) ** alpha * a for k, a in items) / (total + EPS) if items else 0.0)
    return out


def ref_g2po(
    rows: list[Row],
    gamma: float = 0.95,
    step_weight: float = 1.0,
    norm: str = "mean_std",
    invalid_penalty: float = 0.1,
    lone_row: str = "zero",
) -> list[float]:
    returns = episode_return(rows)
    trajs = trajectories(rows)
    length = {traj: len(indices) for traj, indices in trajs.items()}
    anchors = sets_by(rows, lambda row: (row["group"], row["obs_key"]))
    value = {
        key: mean(
            [
                gamma ** (length[rows[j]["traj"]] - rows[j]["t"]) * returns[rows[j]["traj"]]
                for j in members
            ]
        )
        for key, members in anchors.items()
    }
    following = next_rows(rows)
    reached = []
    for i, row in enumerate(rows):
        after = following[i]
        if after is not None:
            reached.append(value[(rows[after]["group"], rows[after]["obs_key"])])
        else:
            reached.append(10.0 if returns[row["traj"]] == 10.0 else 0.0)
    penalised = [reached[i] - penalty(row, invalid_penalty) for i, row in enumerate(rows)]
    gained = [reached[i] - value[(row["group"], row["obs_key"])] for i, row in enumerate(rows)]
    groups = sets_by(rows, lambda row: row["group"])
    episode = episode_advantage(rows, norm, "rows", invalid_penalty)
    out = []
    for i, row in enumerate(rows):
        own_group = groups[row["group"]]
        if lone_row == "score" and len(own_group) == 1:
            own = score(rows, invalid_penalty)[i]
            episode[i] = own / (1 + EPS) if norm == "mean_std" else own
        step = normalised(
            penalised[i], [penalised[j] for j in anchors[(row["group"], row["obs_key"])]], norm
        ) + normalised(gained[i], [gained[j] for j in own_group], norm)
        out.append(episode[i] + step_weight * step)
    return out


def graph_of(rows: list[Row]) -> tuple[list[Any], list[Any]]:
    """Each row's node (group, observation) and successor: the next row's node, else the
    absorbing node of the trajectory's outcome (a positive return: success)."""
    returns = episode_return(rows)
    following = next_rows(rows)
    node = [(row["group"], row["obs_key"]) for row in rows]
    successor = [
        node[after] if after is not None else ("⊕" if returns[row["traj"]] > 0 else "⊖")
        for row, after in zip(rows, following, strict=True)
    ]
    return node, successor


def behaviour_values(
    rows: list[Row], node: list[Any], successor: list[Any], reward: list[float], gamma: float
) -> dict[Any, float]:
    """V(s) = mean over the rows leaving s of reward + γ·V(successor); absorbing nodes 0; one
    dense solve over all nodes."""
    states = sorted(set(node), key=repr)
    index = {s: k for k, s in enumerate(states)}
    system = np.eye(len(states))
    b = np.zeros(len(states))
    for s in states:
        leaving = [i for i in range(len(rows)) if node[i] == s]
        b[index[s]] = mean([reward[i] for i in leaving])
        for i in leaving:
            if successor[i] in index:
                system[index[s], index[successor[i]]] -= gamma / len(leaving)
    solved = np.linalg.solve(system, b)
    values: dict[Any, float] = {s: float(solved[index[s]]) for s in states}
    values["⊕"] = values["⊖"] = 0.0
    return values


def ref_graft(
    rows: list[Row],
    gamma: float = 0.95,
    lam: float = 0.95,
    hops: int = 0,
    omega: float = 1.0,
    norm: str = "mean_std",
    episode_stats: str = "rows",
    invalid_penalty: float = 0.0,
) -> list[float]:
    node, successor = graph_of(rows)
    rewards = [row["reward"] for row in rows]
    values = behaviour_values(rows, node, successor, rewards, gamma)
    delta = [rewards[i] + gamma * values[successor[i]] - values[node[i]] for i in range(len(rows))]
    gae = [0.0] * len(rows)
    for indices in trajectories(rows).values():
        for k, i in enumerate(indices):
            ahead = indices[k:] if hops == 0 else indices[k : k + hops]
            gae[i] = sum((gamma * lam) ** hop * delta[j] for hop, j in enumerate(ahead))
    episode = episode_advantage(rows, norm, episode_stats, invalid_penalty)
    states = sets_by(rows, lambda row: (row["group"], row["obs_key"]))
    return [
        episode[i] + omega * normalised(gae[i], [gae[j] for j in states[node[i]]], norm)
        for i in range(len(rows))
    ]


def ref_crbc(
    rows: list[Row],
    gamma: float = 0.98,
    episode_weight: float = 1.0,
    step_weight: float = 5.0,
    norm: str = "mean_std",
    episode_stats: str = "rows",
    invalid_penalty: float = 0.0,
) -> list[float]:
    node, successor = graph_of(rows)
    rewards = [row["reward"] for row in rows]
    values = behaviour_values(rows, node, successor, rewards, gamma)
    target = [rewards[i] + gamma * values[successor[i]] for i in range(len(rows))]
    episode = episode_advantage(rows, norm, episode_stats, invalid_penalty)
    out = []
    for i, row in enumerate(rows):
        leaving = [j for j in range(len(rows)) if node[j] == node[i]]
        actions = {rows[j]["action_key"] for j in leaving}
        step = 0.0
        if len(actions) >= 2:
            q = mean([target[j] for j in leaving if rows[j]["action_key"] == row["action_key"]])
            step = q - values[node[i]]
            if norm == "mean_std":
                step /= std([target[j] for j in leaving]) + EPS
        out.append(episode_weight * episode[i] + step_weight * step)
    return out


def ref_graphhca(
    rows: list[Row],
    gamma: float = 0.95,
    power: float | str = 1.0,
    floor: float = 0.01,
    step_weight: float = 1.0,
    norm: str = "mean_std",
    episode_stats: str = "rows",
    invalid_penalty: float = 0.0,
) -> list[float]:
    node, successor = graph_of(rows)
    states = sorted(set(node), key=repr)
    potential: dict[Any, float] = {s: 0.0 for s in states}
    if power == 1:  # the linear closure: P(s) = γ·mean P(s'), P(⊕) = 1, one dense solve
        reached = [gamma * (s == "⊕") for s in successor]
        potential = behaviour_values(rows, node, successor, reached, gamma)
    potential["⊕"], potential["⊖"] = 1.0, 0.0
    for _ in range(0 if power == 1 else 200_000):  # value iteration from 0 for other powers
        moved = 0.0
        updated = {}
        for s in states:
            reached = [potential[successor[i]] for i in range(len(rows)) if node[i] == s]
            if power == "inf":
                backed = max(reached)
            else:
                exponent = float(power)
                backed = mean([x**exponent for x in reached]) ** (1 / exponent)
            updated[s] = gamma * backed
            moved = max(moved, abs(updated[s] - potential[s]))
        potential.update(updated)
        if moved <= 1e-16:
            break
    log_potential = {s: math.log(max(p, floor)) for s, p in potential.items()}
    increment = [log_potential[successor[i]] - log_potential[node[i]] for i in range(len(rows))]
    episode = episode_advantage(rows, norm, episode_stats, invalid_penalty)
    return [
        episode[i]
        + step_weight
        * normalised(
            increment[i], [increment[j] for j in range(len(rows)) if node[j] == node[i]], norm
        )
        for i in range(len(rows))
    ]


reference = {
    "grpo": ref_grpo,
    "rloo": ref_rloo,
    "gigpo": ref_gigpo,
    "bipace": ref_bipace,
    "ecpo": ref_ecpo,
    "progpo": ref_progpo,
    "gated_bepo": ref_gated_bepo,
    "hgpo": ref_hgpo,
    "g2po": ref_g2po,
    "crbc": ref_crbc,
    "graphhca": ref_graphhca,
    "graft": ref_graft,
}

# ------------------------------------------------------------------------------------ the tests
NORMS = st.sampled_from(["mean_std", "mean"])
STATS = st.sampled_from(["rows", "trajectories"])
GAMMAS = st.sampled_from([0.0, 0.5, 0.95, 1.0])
PENALTIES = st.sampled_from([0.0, 0.5])


def agree(name: str, records: list[Row], **params: Any) -> None:
    expected = reference[name](records, **params)
    got = compute(name, StepBatch.from_records(records), **params).advantages
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-8)


@settings(max_examples=60, deadline=None)
@given(random_records(), NORMS, STATS, PENALTIES)
def test_grpo_matches_reference(records: list[Row], norm: str, stats: str, p: float) -> None:
    agree("grpo", records, norm=norm, episode_stats=stats, invalid_penalty=p)


@settings(max_examples=60, deadline=None)
@given(random_records(), PENALTIES)
def test_rloo_matches_reference(records: list[Row], p: float) -> None:
    agree("rloo", records, invalid_penalty=p)


@settings(max_examples=60, deadline=None)
@given(random_records(), GAMMAS, NORMS, STATS, st.sampled_from(["obs", "state"]), PENALTIES)
def test_gigpo_matches_reference(
    records: list[Row], gamma: float, norm: str, stats: str, anchor: str, p: float
) -> None:
    agree(
        "gigpo",
        records,
        gamma=gamma,
        omega=0.7,
        norm=norm,
        episode_stats=stats,
        anchor=anchor,
        invalid_penalty=p,
    )


@settings(max_examples=40, deadline=None)
@given(
    random_records(hidden_size=8),
    GAMMAS,
    NORMS,
    st.sampled_from(["q", "diff", "state"]),
    st.sampled_from([1, 2, 3]),
    st.sampled_from([0.0, 0.05, 0.5]),
    PENALTIES,
)
def test_bipace_matches_reference(
    records: list[Row], gamma: float, norm: str, pace: str, min_peers: int, epsilon: float, p: float
) -> None:
    agree(
        "bipace",
        records,
        gamma=gamma,
        norm=norm,
        pace=pace,
        min_peers=min_peers,
        epsilon=epsilon,
        invalid_penalty=p,
    )


@settings(max_examples=60, deadline=None)
@given(
    random_records(),
    GAMMAS,
    NORMS,
    st.sampled_from([0.0, 2.0, 10.0]),
    st.sampled_from([0.5, 4.0]),
    st.sampled_from(["obs", "state"]),
    PENALTIES,
)
def test_ecpo_matches_reference(
    records: list[Row], gamma: float, norm: str, kappa: float, tau: float, anchor: str, p: float
) -> None:
    agree(
        "ecpo",
        records,
        gamma=gamma,
        norm=norm,
        kappa=kappa,
        tau=tau,
        anchor=anchor,
        invalid_penalty=p,
    )


@settings(max_examples=60, deadline=None)
@given(
    random_records(observations="AB"),
    GAMMAS,
    NORMS,
    st.sampled_from([0, 1, 2, 4, 8]),
    STATS,
    PENALTIES,
    st.booleans(),
)
def test_progpo_matches_reference(
    records: list[Row], gamma: float, norm: str, depth: int, stats: str, p: float, semantic: bool
) -> None:
    if semantic:
        for row in records:
            row["semantic_key"] = row["obs_key"] + str(row["t"] % 2)
    agree(
        "progpo",
        records,
        gamma=gamma,
        norm=norm,
        depth=depth,
        episode_stats=stats,
        invalid_penalty=p,
    )


@settings(max_examples=60, deadline=None)
@given(
    random_records(),
    GAMMAS,
    st.sampled_from([0.0, 0.5, 1.0]),
    NORMS,
    st.sampled_from(["additive", "replace"]),
    PENALTIES,
)
def test_gated_bepo_matches_reference(
    records: list[Row], gamma: float, lam: float, norm: str, mixing: str, p: float
) -> None:
    agree("gated_bepo", records, gamma=gamma, lam=lam, norm=norm, mixing=mixing, invalid_penalty=p)


@settings(max_examples=60, deadline=None)
@given(
    random_records(observations="AB"),
    GAMMAS,
    NORMS,
    st.sampled_from([0, 1, 2, 4]),
    st.sampled_from([0.0, 1.0, 2.5]),
    st.booleans(),
    st.sampled_from(["zero", "score"]),
    PENALTIES,
)
def test_hgpo_matches_reference(
    records: list[Row],
    gamma: float,
    norm: str,
    history_length: int,
    alpha: float,
    base_group: bool,
    lone_row: str,
    p: float,
) -> None:
    agree(
        "hgpo",
        records,
        gamma=gamma,
        norm=norm,
        history_length=history_length,
        alpha=alpha,
        base_group=base_group,
        lone_row=lone_row,
        invalid_penalty=p,
    )


# The 2026 graph-Bellman estimators. G2PO's returns of exactly 10 are successes (the code's
# SUCCESS_REWARD): the batches here give some trajectories one.
def with_successes(records: list[Row]) -> list[Row]:
    """The records with every trajectory of a 2.0 reward given a 10.0 one instead."""
    return [{**row, "reward": 10.0 if row["reward"] == 2.0 else row["reward"]} for row in records]


@settings(max_examples=60, deadline=None)
@given(
    random_records(observations="AB"),
    GAMMAS,
    NORMS,
    st.sampled_from(["zero", "score"]),
    PENALTIES,
    st.sampled_from([0.0, 1.0, 2.5]),
)
def test_g2po_matches_reference(
    records: list[Row], gamma: float, norm: str, lone_row: str, p: float, weight: float
) -> None:
    agree(
        "g2po",
        with_successes(records),
        gamma=gamma,
        norm=norm,
        lone_row=lone_row,
        invalid_penalty=p,
        step_weight=weight,
    )


@settings(max_examples=60, deadline=None)
@given(
    random_records(observations="AB"),
    GAMMAS,
    st.sampled_from([0.0, 0.5, 1.0]),
    st.sampled_from([0, 1, 3]),
    NORMS,
    STATS,
    PENALTIES,
)
def test_graft_matches_reference(
    records: list[Row], gamma: float, lam: float, hops: int, norm: str, stats: str, p: float
) -> None:
    agree(
        "graft",
        records,
        gamma=gamma,
        lam=lam,
        hops=hops,
        norm=norm,
        episode_stats=stats,
        invalid_penalty=p,
    )


@settings(max_examples=60, deadline=None)
@given(
    random_records(observations="AB"),
    GAMMAS,
    NORMS,
    STATS,
    PENALTIES,
    st.sampled_from([(1.0, 5.0), (0.0, 1.0), (2.0, 0.0)]),
)
def test_crbc_matches_reference(
    records: list[Row],
    gamma: float,
    norm: str,
    stats: str,
    p: float,
    weights: tuple[float, float],
) -> None:
    agree(
        "crbc",
        records,
        gamma=gamma,
        norm=norm,
        episode_stats=stats,
        invalid_penalty=p,
        episode_weight=weights[0],
        step_weight=weights[1],
    )


@settings(max_examples=60, deadline=None)
@given(
    random_records(observations="AB"),
    st.sampled_from([0.5, 0.95, 1.0]),
    st.sampled_from([1.0, 5.0, 10.0, "inf"]),
    st.sampled_from([0.01, 0.2]),
    NORMS,
    STATS,
)
def test_graphhca_matches_reference(
    records: list[Row], gamma: float, power: float | str, floor: float, norm: str, stats: str
) -> None:
    agree(
        "graphhca", records, gamma=gamma, power=power, floor=floor, norm=norm, episode_stats=stats
    )

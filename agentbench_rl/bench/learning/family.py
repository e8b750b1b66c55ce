"""The MDP family of ``bench learning``: one member per claim of the estimator papers.

Every member pays 10 on a win and 0 otherwise (the trainer's ``reward="success"``), has 4 tasks
(start states; each iteration draws tasks with replacement and plays G trajectories on each),
and is built from a fixed seed, so it is the same MDP in every run. Each builder's docstring is
the member's card: what it models, the claim it tests, its size and horizon. The numbers in the
cards were fixed before any estimator was run on the member and were not changed after.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from agentbench_rl.bench.learning.mdp import FiniteMDP, MDPBuilder
from agentbench_rl.envs.sokoban.env import SokobanEnv
from agentbench_rl.envs.sokoban.generator import LevelConfig, generate_level
from agentbench_rl.envs.sokoban.rules import ACTIONS, Room, move, render_grid, solved

WIN = 10.0  # the trainer's success reward
TASKS = 4


@dataclass(frozen=True)
class RoomGraph:
    """The reachable (player, boxes) states of one Sokoban room and its move graph.

    ``edges[i][a]`` is the (state, env reward) that action ``ACTIONS[a]`` leads to from state
    ``i``; a solved state is reached but never expanded (the episode ends there).
    """

    room: Room
    states: list[tuple[int, frozenset[int]]]
    edges: dict[int, list[tuple[int, float]]]
    terminal: np.ndarray


def room_graph(seed: int, config: LevelConfig | None = None) -> RoomGraph:
    """Breadth-first search over the states reachable from the level of ``seed``.

    Example:
        >>> graph = room_graph(0)
        >>> bool(graph.terminal.any()), graph.terminal[0].item()
        (True, False)
    """
    level = generate_level(seed, config or LevelConfig())
    room = level.room
    start = (level.player, level.boxes)
    index = {start: 0}
    states = [start]
    edges: dict[int, list[tuple[int, float]]] = {}
    queue = deque([0])
    while queue:
        here = queue.popleft()
        player, boxes = states[here]
        edges[here] = []
        for action in ACTIONS:
            new_player, new_boxes, gain = move(room, player, boxes, action)
            reached = (new_player, new_boxes)
            if reached not in index:
                index[reached] = len(states)
                states.append(reached)
                if not solved(room, new_boxes):  # a solved room ends the episode
                    queue.append(index[reached])
            edges[here].append((index[reached], gain))
    terminal = np.array([solved(room, boxes) for _, boxes in states])
    return RoomGraph(room, states, edges, terminal)


def episode_ends(
    builder: MDPBuilder, task: int, won: str = "You won.", lost: str = "You lost."
) -> tuple[int, int]:
    """The task's two terminal states, won and lost (never acted in, so their features are
    shared placeholders)."""
    return (
        builder.state((task, "won"), obs=won, features=(0,), terminal=True),
        builder.state((task, "lost"), obs=lost, features=(1,), terminal=True),
    )


def dense_anchors() -> FiniteMDP:
    """**Dense anchors** (Sokoban). The 6x6 one-box rooms of ``bench fidelity`` (generator
    seeds 0-3, one per task), every reachable (player, box) state, 4 moves, 15-step limit, the
    trainer's sparse reward (10 on solving, else 0). The observation is the rendered grid, so it
    is the state: anchors repeat whenever a trajectory revisits a grid or two trajectories
    meet. Claim: GiGPO's anchor-state step term beats GRPO's episode-only credit (GiGPO paper,
    Sokoban). Hidden features: player cell and box cell. Under the uniform initial policy
    rooms 0 and 1 are solved with probability about 1e-4, rooms 2 and 3 with 0.01 and 0.18.
    """
    builder = MDPBuilder(ACTIONS)
    starts = []
    config = LevelConfig()
    cells = config.width * config.height
    for task in range(TASKS):
        graph = room_graph(task, config)
        ids = [
            builder.state(
                (task, player, tuple(sorted(boxes))),
                obs=render_grid(graph.room, player, boxes),
                features=(player, *(cells + box for box in sorted(boxes))),
                terminal=bool(graph.terminal[i]),
            )
            for i, (player, boxes) in enumerate(graph.states)
        ]
        for source, row in graph.edges.items():
            for action, (target, _) in enumerate(row):
                gain = WIN if graph.terminal[target] else 0.0
                builder.transition(ids[source], action, [(1.0, ids[target], gain)])
        starts.append(ids[0])
    return builder.build("dense_anchors", starts=starts, horizon=SokobanEnv.default_max_steps)


def aliased() -> FiniteMDP:
    """**Observation aliasing.** 6 rooms in a row; each room has a hidden bit b (lit or dark)
    that the observation ("Task i. Room k.") does not show, so each observation text hides two
    true states. From (k, b) each of 3 actions leads to room k + 1 with new bit b' = 1 with
    probability 0.5·b + 0.5·(0.9 if it is the room's right action else 0.1); after the last
    room the task is won with probability 0.9 if b' = 1, else 0.1. The right action does not
    depend on b, so the best policy of the observation is as good as the best of the state, but
    the two aliased states have very different values. Tasks: 4 (their own right actions;
    b = 1 at the start of tasks 1 and 3). Size: 48 states, 24 observations; horizon 6.
    Claim: GiGPO keyed by the true state (``anchor="state"``) beats keying by the observation
    text, whose anchor sets mix the lit and the dark state (GiGPO's anchor choice).
    Hidden features: task, room and bit.
    """
    rooms, actions = 6, ("left", "forward", "right")
    rng = np.random.default_rng(101)
    builder = MDPBuilder(actions)
    starts = []
    for task in range(TASKS):
        right = rng.integers(0, len(actions), size=rooms)
        won, lost = episode_ends(builder, task)

        def room(k: int, bit: int, task: int = task) -> int:
            return builder.state(
                (task, k, bit),
                obs=f"Task {task}. Room {k}.",
                features=(2 + task, 10 + k, 20 + bit),
            )

        for k in range(rooms):
            for bit in (0, 1):
                here = room(k, bit)
                for action in range(len(actions)):
                    lit = 0.5 * bit + 0.5 * (0.9 if action == right[k] else 0.1)
                    if k + 1 < rooms:
                        outcomes = [(lit, room(k + 1, 1), 0.0), (1 - lit, room(k + 1, 0), 0.0)]
                    else:
                        win = 0.9 * lit + 0.1 * (1 - lit)
                        outcomes = [(win, won, WIN), (1 - win, lost, 0.0)]
                    builder.transition(here, action, outcomes)
        starts.append(room(0, task % 2))
    return builder.build("aliased", starts=starts, horizon=rooms)


def sparse_anchors() -> FiniteMDP:
    """**Sparse anchors.** A corridor of 6 cells (0-5) per task; at each cell one of 4 actions
    moves forward, one moves back, two stay (which is which: random per task and cell); reaching
    cell 5 wins; 12-step limit. Each observation is rendered with one of 24 flavour lines drawn
    afresh at every step ("You hear dripping water."), so exact observation repeats are rare:
    GiGPO's singleton rate at G = 8 is about 30% under the initial policy (which dithers in the
    first cells) and rises as the policy learns to walk on (the table gives its mean over the
    run), while keyed by the true state it is near 0. The policy, like an LLM reading past
    flavour text, conditions on the cell. Size: 4 tasks x 6 cells, 24 observation
    variants; horizon 12. Claim: BiPACE's cosine clusters of hidden states recover the state
    that exact-match anchors miss (BiPACE paper); hidden features: task, cell and last action,
    plus noise. GiGPO with ``anchor="state"`` is the oracle.
    """
    cells, actions = 6, ("north", "south", "east", "west")
    rng = np.random.default_rng(202)
    builder = MDPBuilder(actions)
    starts = []
    for task in range(TASKS):
        won = builder.state((task, "won"), obs="You found the exit.", features=(0,), terminal=True)
        ids = [
            builder.state(
                (task, cell),
                obs=f"Task {task}. Cell {cell}.",
                features=(1 + task, 10 + cell),
            )
            for cell in range(cells - 1)
        ]
        for cell in range(cells - 1):
            forward, back = rng.choice(len(actions), size=2, replace=False)
            for action in range(len(actions)):
                if action == forward:
                    target, gain = (won, WIN) if cell + 1 == cells - 1 else (ids[cell + 1], 0.0)
                elif action == back:
                    target, gain = ids[max(cell - 1, 0)], 0.0
                else:
                    target, gain = ids[cell], 0.0
                builder.transition(ids[cell], action, [(1.0, target, gain)])
        starts.append(ids[0])
    return builder.build("sparse_anchors", starts=starts, horizon=12, obs_variants=24)


def lucky_rare() -> FiniteMDP:
    """**Lucky rare actions.** 6 stages; at each, "steady" (the policy's common action, initial
    probability 0.88) survives to the next stage with probability 0.95 and the last stage's
    survivor wins, while "gamble" (initial probability 0.12) wins at once with probability
    q and loses otherwise, q = 0.25, 0.30, 0.35, 0.40 in tasks 0-3. Gambling is worse in
    every stage (q < 0.95^(stages left)), but a gamble that wins is a rare action with the
    best return of its anchor set, and the discounted step return favours it (10 now against
    10·0.95^k later). Size: 4 tasks x 6 stages; horizon 6. Claim: ECPO's shrinkage and
    variance gate stop a lucky rare action from pulling the policy (ECPO's "divergent anchor
    bias"), where GiGPO's anchor advantage rewards it.
    """
    stages, actions = 6, ("steady", "gamble")
    builder = MDPBuilder(actions)
    starts = []
    logits = (0.0, float(np.log(0.12 / 0.88)))
    for task, q in enumerate((0.25, 0.30, 0.35, 0.40)):
        won, lost = episode_ends(builder, task)
        ids = [
            builder.state(
                (task, k),
                obs=f"Task {task}. Stage {k}.",
                features=(2 + task, 10 + k),
                logits=logits,
            )
            for k in range(stages)
        ]
        for k in range(stages):
            ahead = (won, WIN) if k + 1 == stages else (ids[k + 1], 0.0)
            builder.transition(ids[k], 0, [(0.95, *ahead), (0.05, lost, 0.0)])
            builder.transition(ids[k], 1, [(q, won, WIN), (1 - q, lost, 0.0)])
        starts.append(ids[0])
    return builder.build("lucky_rare", starts=starts, horizon=stages)


def history_credit() -> FiniteMDP:
    """**History-dependent credit.** First choose one of 3 keys (the observation "Choose a
    key." then shows nothing of the choice); walk a corridor of 3 cells (one of 3 actions moves
    on, chosen at random per task and cell; the others stay); at the door ("A door.") the
    action that matches the key opens it with probability 0.9, 0.6 or 0.3 for keys 0, 1, 2 (a
    wrong action loses). The policy conditions on the observation and the key chosen earlier
    (its recent history), the estimators' ``obs_key`` on the observation only: the right door
    action depends on an earlier choice, and GiGPO's door anchor set pools the three keys, so
    the right action under key 2 (mean return 3) looks worse than the pooled mean. Size: 4
    tasks x (1 + 3 x 3 + 3) states; horizon 8. Claim: ProGPO's exact-prefix peers credit the
    door action against rows with the same history (ProGPO).
    """
    keys, corridor, actions = 3, 3, ("first", "second", "third")
    rng = np.random.default_rng(303)
    builder = MDPBuilder(actions)
    starts = []
    for task in range(TASKS):
        won, lost = episode_ends(builder, task, "The door opens.", "The door stays shut.")
        start = builder.state(
            (task, "start"), obs=f"Task {task}. Choose a key.", features=(2 + task, 10)
        )
        moves = rng.integers(0, len(actions), size=corridor)

        def place(where: int, key: int, task: int = task) -> int:
            text = (
                f"Task {task}. A door." if where == corridor else f"Task {task}. Corridor {where}."
            )
            return builder.state(
                (task, where, key),
                obs=text,
                context=(text, key),
                features=(2 + task, 11 + where, 20 + key),
            )

        for key in range(keys):
            builder.transition(start, key, [(1.0, place(0, key), 0.0)])
            for where in range(corridor):
                for action in range(len(actions)):
                    target = place(where + 1 if action == moves[where] else where, key)
                    builder.transition(place(where, key), action, [(1.0, target, 0.0)])
            opens = (0.9, 0.6, 0.3)[key]
            for action in range(len(actions)):
                chance = opens if action == key else 0.0
                outcomes = (
                    [(chance, won, WIN), (1 - chance, lost, 0.0)] if chance else [(1.0, lost, 0.0)]
                )
                builder.transition(place(corridor, key), action, outcomes)
        starts.append(start)
    return builder.build("history_credit", starts=starts, horizon=8)


def recent_cue() -> FiniteMDP:
    """**History in the recent observations.** Each episode starts with a cue drawn at random
    ("A red light." or "A green light.", probability 1/2, whatever the action); one step later
    a hallway and then a door, whose observations are the same for both cues; at the door,
    "first" opens it with probability 0.9 after a red light and "second" with probability 0.3
    after a green one (any other action loses). The policy conditions on the observation and
    the cue seen two steps back; GiGPO's door anchor set pools both cues, so once the policy
    has learnt the red door the right green action (mean return 3) looks worse than the pooled
    mean. The cue is in the observations, not only in the actions: a group keyed by the last
    three observations (cue, hallway, door) holds one cue. Size: 4 tasks x 9 states; horizon 6.
    Claim: HGPO's history-consistent groups credit the door action against rows with the same
    recent observations, where observation-only groups pool them (HGPO).
    """
    actions = ("first", "second", "third")
    opens = {"red": (0, 0.9), "green": (1, 0.3)}  # cue: (the action that opens, its chance)
    builder = MDPBuilder(actions)
    starts = []
    for task in range(TASKS):
        won, lost = episode_ends(builder, task, "The door opens.", "The door stays shut.")
        start = builder.state(
            (task, "start"), obs=f"Task {task}. Look around.", features=(2 + task, 10)
        )
        cues = []
        for index, (cue, (right, chance)) in enumerate(opens.items()):
            seen = builder.state(
                (task, cue), obs=f"Task {task}. A {cue} light.", features=(2 + task, 11, 20 + index)
            )
            cues.append(seen)
            hallway = builder.state(
                (task, "hallway", cue),
                obs=f"Task {task}. A hallway.",
                context=("hallway", task, cue),
                features=(2 + task, 12, 20 + index),
            )
            door = builder.state(
                (task, "door", cue),
                obs=f"Task {task}. A door.",
                context=("door", task, cue),
                features=(2 + task, 13, 20 + index),
            )
            for action in range(len(actions)):
                builder.transition(seen, action, [(1.0, hallway, 0.0)])
                builder.transition(hallway, action, [(1.0, door, 0.0)])
                outcomes = (
                    [(chance, won, WIN), (1 - chance, lost, 0.0)]
                    if action == right
                    else [(1.0, lost, 0.0)]
                )
                builder.transition(door, action, outcomes)
        for action in range(len(actions)):
            builder.transition(start, action, [(0.5, cues[0], 0.0), (0.5, cues[1], 0.0)])
        starts.append(start)
    return builder.build("recent_cue", starts=starts, horizon=6)


def branching() -> FiniteMDP:
    """**Stochastic branching.** A layered world: 5 layers of 4 states, 3 actions; each
    (state, action) leads to 3 states of the next layer with Dirichlet(1, 1, 1) probabilities;
    from the last layer each action wins with its own probability (uniform in [0, 1]). Many
    states have several successors under any policy, so one trajectory's return is a noisy
    sample of what follows a state, and a Bellman backup over the group's empirical graph
    averages over the successors seen. Observation = state. Size: 4 tasks x 20 states;
    horizon 5. Claim: Gated-BEPO's gated Bellman credit beats per-trajectory returns where
    transitions branch (Gated-BEPO).
    """
    layers, width, actions = 5, 4, ("left", "forward", "right")
    rng = np.random.default_rng(404)
    builder = MDPBuilder(actions)
    starts = []
    for task in range(TASKS):
        won, lost = episode_ends(builder, task)

        def node(layer: int, slot: int, task: int = task) -> int:
            return builder.state(
                (task, layer, slot),
                obs=f"Task {task}. Layer {layer}, place {slot}.",
                features=(2 + task, 10 + layer, 20 + slot),
            )

        for layer in range(layers):
            for slot in range(width):
                for action in range(len(actions)):
                    if layer + 1 < layers:
                        targets = rng.choice(width, size=3, replace=False)
                        chances = rng.dirichlet(np.ones(3))
                        outcomes = [
                            (float(p), node(layer + 1, int(s)), 0.0)
                            for p, s in zip(chances, targets, strict=True)
                        ]
                        outcomes[-1] = (
                            1.0 - sum(p for p, _, _ in outcomes[:-1]),
                            *outcomes[-1][1:],
                        )
                    else:
                        win = float(rng.random())
                        outcomes = [(win, won, WIN), (1 - win, lost, 0.0)]
                    builder.transition(node(layer, slot), action, outcomes)
        starts.append(node(0, int(rng.integers(width))))
    return builder.build("branching", starts=starts, horizon=layers)


def detours() -> FiniteMDP:
    """**Detours to the exit.** A 3x3 grid of rooms per task, one room other than the start
    and the exit walled off (drawn per task, always leaving a way through); 4 moves (a move
    into a wall or the walled room stays put); start in one corner, the exit in the opposite
    one, win on reaching it; 14-step limit against a shortest way of 4 moves. Observation =
    room. Under the initial (uniform) policy the exit is reached in 29.5% of the episodes
    (exact), mostly after loops, back-steps and bumps into walls, so a winning trajectory is
    full of steps that brought it no nearer. Claim: GraphGPO's credit by the graph distance to
    success (each step valued by how near its next room is to the exit on the group's own
    transition graph) beats outcome-only credit (GRPO), which gives every step of a winning
    episode, wandering included, the same credit (GraphGPO paper). Size: 4 tasks x 9 rooms (8
    open); horizon 14. Hidden features: task, row, column.
    """
    side, actions = 3, ("north", "south", "east", "west")
    moves = ((-1, 0), (1, 0), (0, 1), (0, -1))
    rng = np.random.default_rng(505)
    builder = MDPBuilder(actions)
    starts = []
    inner = [(row, col) for row in range(side) for col in range(side)]
    inner = [cell for cell in inner if cell not in ((0, 0), (side - 1, side - 1))]
    for task in range(TASKS):
        while True:  # two walled rooms that leave a way from the start to the exit
            picks = rng.choice(len(inner), size=1, replace=False)
            walled = {inner[int(k)] for k in picks}
            if _reachable((0, 0), (side - 1, side - 1), side, walled, moves):
                break
        exit_ = builder.state((task, "exit"), obs="You found the exit.", features=(0,),
                              terminal=True)  # fmt: skip
        rooms = {
            (row, col): builder.state(
                (task, row, col),
                obs=f"Task {task}. Room {row}, {col}.",
                features=(1 + task, 10 + row, 20 + col),
            )
            for row in range(side)
            for col in range(side)
            if (row, col) not in walled
        }
        for (row, col), here in rooms.items():
            for action, (d_row, d_col) in enumerate(moves):
                cell = (row + d_row, col + d_col)
                if cell == (side - 1, side - 1):
                    builder.transition(here, action, [(1.0, exit_, WIN)])
                else:
                    builder.transition(here, action, [(1.0, rooms.get(cell, here), 0.0)])
        starts.append(rooms[(0, 0)])
    return builder.build("detours", starts=starts, horizon=14)


def _reachable(
    start: tuple[int, int],
    goal: tuple[int, int],
    side: int,
    walled: set[tuple[int, int]],
    moves: tuple[tuple[int, int], ...],
) -> bool:
    """Whether ``goal`` can be walked to from ``start`` in a ``side`` x ``side`` grid."""
    seen, queue = {start}, deque([start])
    while queue:
        row, col = queue.popleft()
        for d_row, d_col in moves:
            cell = (row + d_row, col + d_col)
            inside = 0 <= cell[0] < side and 0 <= cell[1] < side
            if inside and cell not in walled and cell not in seen:
                seen.add(cell)
                queue.append(cell)
    return goal in seen


FAMILY: dict[str, Callable[[], FiniteMDP]] = {
    "dense_anchors": dense_anchors,
    "aliased": aliased,
    "sparse_anchors": sparse_anchors,
    "lucky_rare": lucky_rare,
    "history_credit": history_credit,
    "recent_cue": recent_cue,
    "branching": branching,
    "detours": detours,
}

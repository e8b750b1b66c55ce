"""Seeded Sokoban level generator.

The classic recipe of gym-sokoban (Schrader, 2018), which RAGEN and the GiGPO paper use: carve the
room by a random walk stamping small masks, put the boxes on their targets, then play backwards
(the player pulls boxes away from the targets) and keep the most scrambled state seen. Reverse play
only reaches solvable states; the exact solver then rejects a level whose optimal solution is
longer than the setting's ``solution_limit``, so every level handed out is winnable within it.
The episode's step limit plays no part here: a task id names the same level whatever the limit.

We write our own rather than depend on gym-sokoban: that package needs the old ``gym`` and breaks
on numpy 2, and its exhaustive reverse search costs far more than the 2 ms a level we allow.
"""

from __future__ import annotations

import random
import time
from collections import deque
from dataclasses import dataclass

from agentbench_rl.envs.sokoban.rules import Room, render_grid
from agentbench_rl.envs.sokoban.solver import solve

# The stamps of gym-sokoban's room_topology_generation (3x3, 1 = floor).
_MASKS = (
    ((0, 0, 0), (1, 1, 1), (0, 0, 0)),
    ((0, 1, 0), (0, 1, 0), (0, 1, 0)),
    ((0, 0, 0), (1, 1, 0), (0, 1, 0)),
    ((0, 0, 0), (1, 1, 0), (1, 1, 0)),
    ((0, 0, 0), (0, 1, 1), (0, 1, 0)),
)
_DIRECTIONS = ((1, 0), (0, 1), (-1, 0), (0, -1))
P_CHANGE_DIRECTION = 0.35
REVERSE_STATES = 20_000  # bound on the reverse search, for many boxes in large rooms
MAX_ATTEMPTS = 1000
#: Bounds of the level setting: beyond them building the 700 fixed levels takes minutes.
MAX_SIDE = 12
MAX_BOXES = 3
MAX_SOLUTION_LIMIT = 100
#: Wall-clock bound on generating a setting's levels. It can only turn a run into an error,
#: never change a level, so results stay the same on every machine that finishes.
SEARCH_SECONDS = 120.0


@dataclass(frozen=True)
class LevelConfig:
    """What shapes the levels: 6x6, one box, optimal solutions of at most 15 steps is the
    GiGPO/RAGEN setting.

    ``solution_limit`` bounds the optimal solution's length; it is not the episode's step limit
    (``max_steps`` of the env), which only truncates episodes and never changes a level. The field
    order is part of every level's seed and of the split checksums: do not reorder.
    """

    width: int = 6
    height: int = 6
    num_boxes: int = 1
    solution_limit: int = 15

    def __post_init__(self) -> None:
        for name in ("width", "height", "num_boxes", "solution_limit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"sokoban: {name} must be a whole number, got {value!r}")
        if not (4 <= self.width <= MAX_SIDE and 4 <= self.height <= MAX_SIDE):
            raise ValueError(
                f"sokoban: room must be 4x4 to {MAX_SIDE}x{MAX_SIDE}, "
                f"got {self.width}x{self.height}"
            )
        if not 1 <= self.num_boxes <= MAX_BOXES:
            raise ValueError(f"sokoban: num_boxes must be 1 to {MAX_BOXES}, got {self.num_boxes}")
        if not 1 <= self.solution_limit <= MAX_SOLUTION_LIMIT:
            raise ValueError(
                f"sokoban: solution_limit must be 1 to {MAX_SOLUTION_LIMIT}, "
                f"got {self.solution_limit}"
            )
        if self.num_boxes + 1 > (self.width - 2) * (self.height - 2):
            raise ValueError(
                f"sokoban: {self.num_boxes} boxes do not fit a {self.width}x{self.height} room"
            )


@dataclass(frozen=True)
class Level:
    """A generated level: its room, start state and the length of its optimal solution."""

    room: Room
    player: int
    boxes: frozenset[int]
    optimal_steps: int

    @property
    def layout(self) -> str:
        """The start grid as text (what the manifest pins and hashes)."""
        return render_grid(self.room, self.player, self.boxes)


def generate_level(
    seed: int, config: LevelConfig | None = None, deadline: float | None = None
) -> Level:
    """The level of ``seed``: same seed and config, same level, on every machine.

    ``ValueError`` when the setting gives no level in :data:`MAX_ATTEMPTS` attempts, or the
    ``time.monotonic()`` ``deadline`` passes first.

    Example:
        >>> level = generate_level(7)
        >>> level == generate_level(7), 1 <= level.optimal_steps <= 15
        (True, True)
    """
    config = config or LevelConfig()
    rng = random.Random(seed)
    for _ in range(MAX_ATTEMPTS):
        level = _attempt(rng, config)
        if level is not None:
            return level
        if deadline is not None and time.monotonic() > deadline:
            raise ValueError(
                f"sokoban: generating {config.width}x{config.height} levels with "
                f"{config.num_boxes} boxes took over {SEARCH_SECONDS:.0f} s; use a smaller room, "
                "fewer boxes or a higher solution_limit"
            )
    raise ValueError(
        f"sokoban: no {config.width}x{config.height} level with {config.num_boxes} boxes solvable "
        f"in {config.solution_limit} steps after {MAX_ATTEMPTS} attempts; use a larger room, "
        "fewer boxes or a higher solution_limit"
    )


def search_deadline() -> float:
    """The ``deadline`` of :func:`generate_level` for a search starting now."""
    return time.monotonic() + SEARCH_SECONDS


def _attempt(rng: random.Random, config: LevelConfig) -> Level | None:
    width, height = config.width, config.height
    floor = _topology(rng, width, height)
    cells = sorted(floor)
    if len(cells) < config.num_boxes + 1:
        return None
    chosen = rng.sample(cells, config.num_boxes + 1)
    targets = frozenset(chosen[:-1])
    walls = frozenset(cell for cell in range(width * height) if cell not in floor)
    room = Room(width, height, walls, targets)
    player, boxes = _reverse_play(rng, room, chosen[-1], targets)
    if boxes is None:
        return None
    solution = solve(room, player, boxes, max_steps=config.solution_limit)
    if solution is None:
        return None
    return Level(room=room, player=player, boxes=boxes, optimal_steps=len(solution))


def _topology(rng: random.Random, width: int, height: int) -> set[int]:
    """Floor cells carved by gym-sokoban's random walk of 3x3 stamps (border stays wall)."""
    num_steps = int(1.7 * (width + height))
    dx, dy = rng.choice(_DIRECTIONS)
    x, y = rng.randint(1, width - 2), rng.randint(1, height - 2)
    floor: set[int] = set()
    for _ in range(num_steps):
        if rng.random() < P_CHANGE_DIRECTION:
            dx, dy = rng.choice(_DIRECTIONS)
        x = max(min(x + dx, width - 2), 1)
        y = max(min(y + dy, height - 2), 1)
        mask = rng.choice(_MASKS)
        for my in range(3):
            for mx in range(3):
                cx, cy = x - 1 + mx, y - 1 + my
                if mask[my][mx] and 0 < cx < width - 1 and 0 < cy < height - 1:
                    floor.add(cy * width + cx)
    return floor


def _reverse_play(
    rng: random.Random, room: Room, player: int, targets: frozenset[int]
) -> tuple[int, frozenset[int] | None]:
    """Search backwards from the solved state and return the most scrambled state.

    Every move of the reverse game may pull the box behind the player along or leave it. Like
    gym-sokoban's reverse search we explore the reachable states exhaustively (up to
    ``REVERSE_STATES``) and keep the one whose boxes lie farthest from their targets (total
    Manhattan distance; ties drawn with ``rng``). A state with every box home is never chosen.
    """
    deltas = tuple(room.deltas().values())
    start = (player, targets)
    seen = {start}
    frontier = deque([start])
    best_score, best_states = 0, []
    while frontier and len(seen) < REVERSE_STATES:
        current_player, boxes = frontier.popleft()
        for delta in deltas:
            step_to = current_player + delta
            if step_to in room.walls or step_to in boxes:
                continue
            successors = [(step_to, boxes)]
            pulled = current_player - delta
            if pulled in boxes:
                successors.append((step_to, (boxes - {pulled}) | {current_player}))
            for state in successors:
                if state in seen:
                    continue
                seen.add(state)
                frontier.append(state)
                score = _displacement(room, state[1], targets)
                if score > best_score:
                    best_score, best_states = score, [state]
                elif score == best_score and score > 0:
                    best_states.append(state)
    if not best_states:
        return player, None
    chosen_player, chosen_boxes = rng.choice(sorted(best_states, key=_state_order))
    return chosen_player, chosen_boxes


def _state_order(state: tuple[int, frozenset[int]]) -> tuple[int, tuple[int, ...]]:
    return state[0], tuple(sorted(state[1]))


def _displacement(room: Room, boxes: frozenset[int], targets: frozenset[int]) -> int:
    """Total distance of the boxes from the targets (each box to its nearest target)."""
    return sum(min(_manhattan(room, box, target) for target in targets) for box in boxes)


def _manhattan(room: Room, a: int, b: int) -> int:
    return abs(a % room.width - b % room.width) + abs(a // room.width - b // room.width)

"""Sokoban's rules as pure functions over ``(player, boxes)`` states.

A room is a fixed grid of walls and targets; a state is the player's cell and the set of box
cells, cells numbered ``y * width + x``. Everything here is a pure function so that the env, the
solver, the generator and the fidelity benchmark's exact policy evaluation share one rule book.

Rewards follow the classic gym-sokoban env: -0.1 per step, +1 for a box pushed onto a target,
-1 for a box pushed off one, +10 when every box is on a target.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

ACTIONS: tuple[str, ...] = ("up", "down", "left", "right")

STEP_PENALTY = -0.1
BOX_ON_TARGET = 1.0
BOX_OFF_TARGET = -1.0
SOLVED_BONUS = 10.0

# Text symbols as RAGEN and verl-agent print the grid, so prompts match the papers.
WALL, FLOOR, TARGET, BOX, BOX_ON_TARGET_SYMBOL, PLAYER, PLAYER_ON_TARGET = (
    "#",
    "_",
    "O",
    "X",
    "√",
    "P",
    "S",
)


@dataclass(frozen=True)
class Room:
    """The static part of a level: its size, walls and targets.

    Example:
        >>> room, player, boxes = parse_grid("####\\n#PX#\\n#_O#\\n####")
        >>> room.width, player, sorted(boxes)
        (4, 5, [6])
    """

    width: int
    height: int
    walls: frozenset[int]
    targets: frozenset[int]

    def deltas(self) -> dict[str, int]:
        """Cell offset of each action."""
        return {"up": -self.width, "down": self.width, "left": -1, "right": 1}


def move(
    room: Room, player: int, boxes: frozenset[int], action: str
) -> tuple[int, frozenset[int], float]:
    """Apply one of :data:`ACTIONS`; returns the new player, boxes and the reward.

    Walking into a wall, or pushing a box into a wall or another box, leaves the state unchanged
    and still costs the step penalty (as in the classic env).

    Example:
        >>> room, player, boxes = parse_grid("#####\\n#PXO#\\n#####")
        >>> move(room, player, boxes, "right")
        (7, frozenset({8}), 10.9)
    """
    delta = room.deltas()[action]
    target = player + delta
    if target in room.walls:
        return player, boxes, STEP_PENALTY
    if target not in boxes:
        return target, boxes, STEP_PENALTY
    beyond = target + delta
    if beyond in room.walls or beyond in boxes:
        return player, boxes, STEP_PENALTY
    new_boxes = (boxes - {target}) | {beyond}
    reward = STEP_PENALTY
    if target in room.targets:
        reward += BOX_OFF_TARGET
    if beyond in room.targets:
        reward += BOX_ON_TARGET
        if solved(room, new_boxes):
            reward += SOLVED_BONUS
    return target, new_boxes, round(reward, 10)


def solved(room: Room, boxes: frozenset[int]) -> bool:
    """Whether every box stands on a target."""
    return boxes <= room.targets


def render_grid(room: Room, player: int, boxes: frozenset[int]) -> str:
    """The grid as text rows (``#`` wall, ``_`` floor, ``O`` target, ``X`` box, ``√`` box on
    target, ``P`` player, ``S`` player on target).

    Example:
        >>> room, player, boxes = parse_grid("####\\n#PX#\\n#_O#\\n####")
        >>> render_grid(room, player, boxes) == "####\\n#PX#\\n#_O#\\n####"
        True
    """
    cells = list(base_cells(room))
    for box in boxes:
        cells[box] = BOX_ON_TARGET_SYMBOL if box in room.targets else BOX
    cells[player] = PLAYER_ON_TARGET if player in room.targets else PLAYER
    width = room.width
    return "\n".join("".join(cells[row : row + width]) for row in range(0, len(cells), width))


@functools.lru_cache(maxsize=4096)
def base_cells(room: Room) -> tuple[str, ...]:
    """Wall, floor and target symbols of every cell, without player or boxes (a room is
    immutable: each is worked out once, not at every step's rendering)."""
    return tuple(
        WALL if cell in room.walls else TARGET if cell in room.targets else FLOOR
        for cell in range(room.width * room.height)
    )


def parse_grid(grid: str) -> tuple[Room, int, frozenset[int]]:
    """Inverse of :func:`render_grid`: the room, player cell and box cells of a text grid."""
    rows = grid.split("\n")
    width = len(rows[0])
    if any(len(row) != width for row in rows):
        raise ValueError("sokoban grid: rows differ in length")
    walls, targets, boxes = set(), set(), set()
    player = -1
    for cell, symbol in enumerate("".join(rows)):
        if symbol == WALL:
            walls.add(cell)
        elif symbol in (TARGET, BOX_ON_TARGET_SYMBOL, PLAYER_ON_TARGET):
            targets.add(cell)
        elif symbol not in (FLOOR, BOX, PLAYER):
            raise ValueError(f"sokoban grid: unknown symbol {symbol!r}")
        if symbol in (BOX, BOX_ON_TARGET_SYMBOL):
            boxes.add(cell)
        if symbol in (PLAYER, PLAYER_ON_TARGET):
            if player >= 0:
                raise ValueError("sokoban grid: more than one player")
            player = cell
    if player < 0:
        raise ValueError("sokoban grid: no player")
    if len(boxes) != len(targets):
        raise ValueError(f"sokoban grid: {len(boxes)} boxes but {len(targets)} targets")
    room = Room(len(rows[0]), len(rows), frozenset(walls), frozenset(targets))
    return room, player, frozenset(boxes)

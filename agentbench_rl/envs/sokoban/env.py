"""``agentbench/Sokoban-v0`` (text grid) and ``agentbench/VisualSokoban-v0`` (RGB image + text)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces

from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.envs.base import TextAgentEnv, Transition, text_space
from agentbench_rl.envs.sokoban.generator import MAX_SOLUTION_LIMIT, LevelConfig
from agentbench_rl.envs.sokoban.levels import (
    FIXED_SPLIT_SIZES,
    SPLITS,
    STANDARD,
    difficulty,
    fixed_splits,
    load_level,
    parse_task_id,
    task_id,
)
from agentbench_rl.envs.sokoban.render import TILE, render_image
from agentbench_rl.envs.sokoban.rules import (
    ACTIONS,
    BOX_ON_TARGET,
    SOLVED_BONUS,
    STEP_PENALTY,
    move,
    render_grid,
    solved,
)
from agentbench_rl.envs.sokoban.solver import solve

#: Bound on the episode's step limit (refused beyond it, like the level setting's bounds).
MAX_STEP_LIMIT = MAX_SOLUTION_LIMIT
_ALIASES_BY_ACTION = {
    "up": ("north", "move up", "go up", "push up", "1"),
    "down": ("south", "move down", "go down", "push down", "2"),
    "left": ("west", "move left", "go left", "push left", "3"),
    "right": ("east", "move right", "go right", "push right", "4"),
}


class _SokobanBase(TextAgentEnv[Any]):
    """Shared machinery of the text and visual Sokoban envs."""

    prompt_instruction: ClassVar[str] = (
        "You play Sokoban: push every box X onto a target O. "
        "# wall, _ floor, P you, S you on a target, √ box on a target."
    )
    action_aliases: ClassVar[dict[str, str]] = {
        alias: action for action, aliases in _ALIASES_BY_ACTION.items() for alias in aliases
    }
    default_max_steps: ClassVar[int] = 15

    def __init__(
        self,
        split: str = "test",
        max_steps: int | None = None,
        width: int = 6,
        height: int = 6,
        num_boxes: int = 1,
        solution_limit: int = STANDARD.solution_limit,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(split=split, max_steps=max_steps, render_mode=render_mode)
        if self.max_steps > MAX_STEP_LIMIT:
            raise ValueError(
                f"sokoban: max_steps must be 1 to {MAX_STEP_LIMIT}, got {self.max_steps}"
            )
        # The step limit only truncates episodes; the levels depend on the setting alone, so a
        # task id is the same level under any limit (one below solution_limit can leave some
        # levels unwinnable in time, as in RAGEN, whose step limit is also independent).
        self.level_config = LevelConfig(width, height, num_boxes, solution_limit)
        fixed_splits(self.level_config)  # a setting that gives no levels fails here, not mid-run
        self._player = 0
        self._boxes: frozenset[int] = frozenset()
        self._grid: str | None = None
        self._grid_hash: tuple[str, str] | None = None  # the grid text and its hash
        self._plan: list[str] = []
        self._plan_state: tuple[int, frozenset[int]] | None = None

    # -------------------------------------------------------------- splits
    @classmethod
    def splits(cls) -> Sequence[str]:
        """``train`` (unbounded ids), ``val`` (200 levels), ``test`` (500 levels)."""
        return SPLITS

    @classmethod
    def task_ids(cls, split: str) -> list[str]:
        """The ids of a fixed split, e.g. ``test-0000`` .. ``test-0499``."""
        if split not in FIXED_SPLIT_SIZES:
            raise ValueError(f"sokoban: split '{split}' is unbounded; evaluate on test or val")
        return [task_id(split, index) for index in range(FIXED_SPLIT_SIZES[split])]

    @classmethod
    def split_checksum(cls, split: str, config: LevelConfig | None = None) -> str:
        """Checksum of the split's manifest (standard setting unless ``config`` is given)."""
        checksums: dict[str, str] = fixed_splits(config or LevelConfig())["checksums"]
        if split not in checksums:
            raise ValueError(f"sokoban: split '{split}' has no checksum (it is unbounded)")
        return checksums[split]

    def checksum(self) -> str:
        """Checksum of this env's split for its level setting (room size, boxes, step limit)."""
        return self.split_checksum(self.split, self.level_config)

    def has_task(self, task_id: str) -> bool:
        """Whether ``task_id`` is exactly an id of this env's split (``train-<n>`` for train)."""
        if self.split != "train":
            return super().has_task(task_id)
        try:
            return parse_task_id(task_id)[0] == "train"
        except ValueError:
            return False

    @classmethod
    def task_categories(cls, split: str) -> Mapping[str, str]:
        """The difficulty of every level of a fixed split in the standard setting.

        Example:
            >>> SokobanEnv.task_categories("test")["test-0000"] in ("easy", "medium", "hard")
            True
        """
        rows = fixed_splits(STANDARD)["splits"][split]
        return {
            row["task_id"]: difficulty(row["optimal_steps"], STANDARD.solution_limit)
            for row in rows
        }

    @classmethod
    def expected_return(cls, success: bool, score: float, steps: int) -> float:
        """Standard setting (one box): a step penalty per step, plus the box reaching its target
        and the solve bonus on a success (a failure never had the box on the target).

        Example:
            >>> SokobanEnv.expected_return(True, 1.0, 3), SokobanEnv.expected_return(False, 0.0, 15)
            (10.7, -1.5)
        """
        bonus = BOX_ON_TARGET + SOLVED_BONUS if success else 0.0
        return round(STEP_PENALTY * steps + bonus, 10)

    def _sample_task_id(self) -> str:
        if self.split == "train":
            return task_id("train", int(self.np_random.integers(0, 2**31)))
        return task_id(self.split, int(self.np_random.integers(FIXED_SPLIT_SIZES[self.split])))

    # -------------------------------------------------------------- dynamics
    def _load_task(self, task: str) -> None:
        self.level = load_level(task, self.level_config)
        self.room = self.level.room
        self._player, self._boxes = self.level.player, self.level.boxes
        self._grid = None
        self._plan, self._plan_state = [], None

    def _apply(self, action: str) -> Transition:
        if action not in _ACTION_SET:
            return Transition(reward=0.0, valid=False)
        player, boxes, reward = move(self.room, self._player, self._boxes, action)
        if player != self._player:
            self._player, self._boxes, self._grid = player, boxes, None
        return Transition(reward=reward, valid=True)

    def grid_text(self) -> str:
        """The current grid as text (cached until the state changes)."""
        if self._grid is None:
            self._grid = render_grid(self.room, self._player, self._boxes)
        return self._grid

    def _state_hash(self) -> str:
        if self._grid_hash is None or self._grid_hash[0] is not self.grid_text():
            self._grid_hash = (self.grid_text(), stable_hash(self.grid_text()))
        return self._grid_hash[1]

    def admissible_actions(self) -> list[str]:
        """Always the four moves (walking into a wall is legal and changes nothing)."""
        return list(ACTIONS)

    def won(self) -> bool:
        """Every box on a target."""
        return solved(self.room, self._boxes)

    def category(self) -> str:
        """``easy``, ``medium`` or ``hard``: the optimal solution length in thirds of the
        setting's solution limit."""
        return difficulty(self.level.optimal_steps, self.level_config.solution_limit)

    def expert_action(self) -> str:
        """The next move of an optimal solution from the current state (exact BFS solver)."""
        state = (self._player, self._boxes)
        if not self._plan or self._plan_state != state:
            self._plan = solve(self.room, self._player, self._boxes) or [ACTIONS[0]]
        action = self._plan.pop(0)
        next_player, next_boxes, _ = move(self.room, self._player, self._boxes, action)
        self._plan_state = (next_player, next_boxes)
        return action


_ACTION_SET = frozenset(ACTIONS)


class SokobanEnv(_SokobanBase):
    """Sokoban with the grid as text: ``#`` wall, ``_`` floor, ``O`` target, ``X`` box,
    ``√`` box on target, ``P`` player, ``S`` player on target.

    Example:
        >>> env = SokobanEnv(split="test")
        >>> obs, info = env.reset(options={"task_id": "test-0000"})
        >>> obs.count("P") + obs.count("S")
        1
        >>> _, reward, *_ = env.step("<action>nonsense</action>")
        >>> reward
        0.0
    """

    env_name: ClassVar[str] = "sokoban"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.observation_space = text_space()

    def _observation(self) -> str:
        return self.grid_text()

    def _obs_hash(self) -> str:
        return self._state_hash()  # the text grid shows the whole state


class VisualSokobanEnv(_SokobanBase):
    """Sokoban seen as an RGB image (16-pixel tiles), with the text grid beside it.

    The observation is ``{"image": uint8 array (16*height, 16*width, 3), "text": grid}``;
    ``obs_hash`` hashes the image bytes.

    Example:
        >>> env = VisualSokobanEnv(split="test")
        >>> obs, _ = env.reset(options={"task_id": "test-0000"})
        >>> obs["image"].shape
        (96, 96, 3)
    """

    env_name: ClassVar[str] = "visual_sokoban"
    metadata: dict[str, Any] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}  # noqa: RUF012

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        config = self.level_config
        self.observation_space = spaces.Dict(
            {
                "image": spaces.Box(
                    0, 255, (config.height * TILE, config.width * TILE, 3), dtype=np.uint8
                ),
                "text": text_space(),
            }
        )
        self._image: np.ndarray | None = None
        self._image_grid: str | None = None

    def image(self) -> np.ndarray:
        """The current frame (cached until the state changes)."""
        grid = self.grid_text()
        if self._image is None or self._image_grid != grid:
            self._image, self._image_grid = render_image(grid), grid
        return self._image

    def _observation(self) -> dict[str, Any]:
        return {"image": self.image().copy(), "text": self.grid_text()}

    def _obs_hash(self) -> str:
        return stable_hash(self.image().tobytes())

    def render(self) -> Any:
        """The frame in ``rgb_array`` mode, the grid text in ``ansi`` mode."""
        if self.render_mode == "rgb_array":
            return self.image().copy()
        return super().render()

    def observation_text(self) -> str:
        """The text grid (what a text-only agent reads)."""
        return self.grid_text()

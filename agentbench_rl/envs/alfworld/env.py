"""``agentbench/ALFWorld-v0``: ALFWorld's text games, one game per task id.

The games are played by the native engine (:mod:`~agentbench_rl.envs.alfworld.native`), which
needs nothing beyond this package and the game files. TextWorld's engine stays available as
``backend="textworld"`` (the oracle the native one is tested against, step by step); it, and
the expert's replanning off the stored walkthrough (fast-downward), need the ``alfworld`` extra
(``pip install -e ".[alfworld]"``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import ClassVar

from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.envs.alfworld.data import (
    SHIPPED_SPLITS,
    SPLITS,
    GameRecord,
    load_manifest,
    read_game,
    require_split_data,
    sha256_bytes,
    split_data_dir,
)
from agentbench_rl.envs.alfworld.native import Recovery
from agentbench_rl.envs.base import TextAgentEnv, Transition, text_space
from agentbench_rl.extras import install_hint

EXTRA_HINT = install_hint("alfworld")
DEFAULT_BACKEND = "native"
_BACKEND_PACKAGES = frozenset({"textworld", "alfworld", "fast_downward", "tatsu"})

# ALFWorld's first grammar placed objects with "put X in/on Y"; the games we ship (and
# ALFWorld >= 0.3) only accept "move X to Y". Both spellings map to the accepted one.
_OLD_PUT = re.compile(r"^put (?P<obj>.+?) (?:in/on|in|on|into|onto|to) (?P<recep>.+)$")


def canonical_command(text: str) -> str:
    """The command the games accept for a normalised action text.

    Example:
        >>> canonical_command("put mug 1 in/on coffeemachine 1")
        'move mug 1 to coffeemachine 1'
        >>> canonical_command("move mug 1 to coffeemachine 1")
        'move mug 1 to coffeemachine 1'
    """
    match = _OLD_PUT.match(text)
    if match:
        return f"move {match['obj']} to {match['recep']}"
    return text


@contextlib.contextmanager
def _alfworld_data_env(data_dir: Path) -> Iterator[None]:
    # Importing alfworld creates $ALFWORLD_DATA (default ~/.cache/alfworld) and exports it;
    # point it at our data folder, which exists, and leave the caller's environment as it was.
    saved = os.environ.get("ALFWORLD_DATA")
    os.environ["ALFWORLD_DATA"] = str(data_dir)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("ALFWORLD_DATA", None)
        else:
            os.environ["ALFWORLD_DATA"] = saved


#: The engines that play the games: ``native`` (the default,
#: :mod:`~agentbench_rl.envs.alfworld.native`, this package's own reader of the game files) and
#: ``textworld`` (TextWorld's PDDL backend, the oracle the native one is tested against).
BACKENDS = ("native", "textworld")


def load_backend(data_dir: Path, name: str = DEFAULT_BACKEND) -> ModuleType:
    """Import the engine, or raise ``ImportError`` saying which extra to install.

    Example:
        >>> load_backend(split_data_dir("demo"), "native").NOTHING_HAPPENS
        'Nothing happens.'
    """
    if name not in BACKENDS:
        raise ValueError(f"alfworld: unknown backend {name!r}; choose one of {BACKENDS}")
    if name == "native":
        from agentbench_rl.envs.alfworld import native

        return native
    try:
        with _alfworld_data_env(data_dir):
            from agentbench_rl.envs.alfworld import backend
    except ImportError as problem:
        if (problem.name or "").split(".")[0] in _BACKEND_PACKAGES:
            raise ImportError(
                f"alfworld: backend='textworld' needs TextWorld and ALFWorld: {EXTRA_HINT}"
            ) from None
        raise
    return backend


class ALFWorldEnv(TextAgentEnv[str]):
    """ALFWorld's household tasks as text games.

    An episode is one game: the observation is the text ALFWorld answers with (at reset, the
    room and "Your task is to: ..."), the action is one command such as ``go to desk 1``,
    reward 1 when the task is done, at most 50 steps. ``obs_hash`` hashes the observation
    text; ``state_hash`` hashes the true facts (as TextWorld writes them), so "Nothing
    happens." in two different states gets two state hashes. Both engines give the same
    texts, admissible commands, rewards and state hashes.

    Args:
        split: ``train``, ``valid_seen`` (in-distribution eval) or ``valid_unseen``
            (out-of-distribution eval); ``demo`` (six small games of our own, one per task
            type) ships with the package and plays with no data installed.
        max_steps: step limit (default 50).
        render_mode: ``"ansi"`` or ``None``.
        data_dir: folder holding ``json_2.1.1`` (default ``$ALFWORLD_DATA`` or
            ``~/.cache/alfworld``; the ``demo`` split reads the package's own copy).
        allow_modified_games: play a game whose sha256 differs from the manifest (with a
            warning) instead of refusing it; results must record this flag.
        backend: ``native`` (default: this package's reader of the game files) or
            ``textworld`` (TextWorld's engine, needs the ``alfworld`` extra; the same
            transcripts).
        expert_recovery: how :meth:`expert_action` gets back on its plan when play left it:
            ``replan`` (default: fast-downward from the new state, TextWorld's expert) or
            ``undo`` (the inverse of each detour, newest first, then the plan again: a
            different expert, which plans only after a command with no inverse, so a noisy
            expert costs env steps instead of searches;
            :class:`~agentbench_rl.envs.alfworld.native.PlanFollower`).

    Example:
        >>> env = ALFWorldEnv(split="valid_seen")  # doctest: +SKIP
        >>> task_id = env.task_ids("valid_seen")[0]  # doctest: +SKIP
        >>> obs, info = env.reset(options={"task_id": task_id})  # doctest: +SKIP
        >>> obs.splitlines()[-1]  # doctest: +SKIP
        'Your task is to: look at alarmclock under the desklamp.'
        >>> env.step("go to desk 1")[4]["action_valid"]  # doctest: +SKIP
        True
    """

    env_name: ClassVar[str] = "alfworld"
    prompt_instruction: ClassVar[str] = (
        "You are a household agent. Complete the task described in the observation."
    )
    default_max_steps: ClassVar[int] = 50
    # TextWorld's PDDL parser and fast-downward's planner (the expert's replans, both engines)
    # are one object per process.
    thread_safe: ClassVar[bool] = False

    def __init__(
        self,
        split: str = "valid_seen",
        max_steps: int | None = None,
        render_mode: str | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        allow_modified_games: bool = False,
        backend: str = DEFAULT_BACKEND,
        expert_recovery: Recovery = "replan",
    ) -> None:
        super().__init__(split=split, max_steps=max_steps, render_mode=render_mode)
        self.observation_space = text_space()
        self.data_dir = split_data_dir(split, data_dir)
        self.allow_modified_games = allow_modified_games
        self._manifest = load_manifest(split)
        require_split_data(self.data_dir, split)
        self.backend = backend
        self._backend = load_backend(self.data_dir, backend)
        self.expert_recovery = expert_recovery
        self._game = self._backend.AlfredGame(expert_recovery)
        self._record: GameRecord | None = None
        self._feedback = ""
        #: Task ids played although their file differs from the manifest.
        self.modified_task_ids: set[str] = set()
        #: The task sentence of the current game ("Your task is to: ...").
        self.task_description = ""

    # -------------------------------------------------------------- splits
    @classmethod
    def splits(cls) -> Sequence[str]:
        """``train`` (3,553 games), ``valid_seen`` (140), ``valid_unseen`` (134) and the
        shipped ``demo`` (6).

        Example:
            >>> ALFWorldEnv.splits()
            ('train', 'valid_seen', 'valid_unseen', 'demo')
        """
        return SPLITS + SHIPPED_SPLITS

    @classmethod
    def task_ids(cls, split: str) -> list[str]:
        """Every game of a split as ``<task folder>/<trial folder>``, in manifest order.

        Example:
            >>> ALFWorldEnv.task_ids("valid_seen")[0]
            'look_at_obj_in_light-AlarmClock-None-DeskLamp-323/trial_T20190909_044715_250790'
        """
        return load_manifest(split).task_ids()

    @classmethod
    def split_checksum(cls, split: str) -> str:
        """Hash of the split's manifest (every task id and game sha256, in order).

        Example:
            >>> ALFWorldEnv.split_checksum("valid_seen")
            '4cc074d88d8cf6aa02111e8fdf50b001'
        """
        return load_manifest(split).checksum

    @classmethod
    def task_categories(cls, split: str) -> Mapping[str, str]:
        """The task type of every game of a split, from its manifest.

        Example:
            >>> ALFWorldEnv.task_categories("valid_seen")[ALFWorldEnv.task_ids("valid_seen")[0]]
            'look_at_obj_in_light'
        """
        return {game.task_id: game.task_type for game in load_manifest(split).games}

    @classmethod
    def expected_return(cls, success: bool, score: float, steps: int) -> float:
        """1 on the winning step, 0 on every other step."""
        return 1.0 if success else 0.0

    def _sample_task_id(self) -> str:
        games = self._manifest.games
        return games[int(self.np_random.integers(len(games)))].task_id

    # -------------------------------------------------------------- dynamics
    def _load_task(self, task_id: str) -> None:
        record = self._manifest.get(task_id)
        data = read_game(self.data_dir, record, allow_modified=self.allow_modified_games)
        sha = sha256_bytes(data)
        if sha != record.sha256 and task_id not in self.modified_task_ids:
            self.modified_task_ids.add(task_id)
            warnings.warn(
                f"alfworld: playing modified game {task_id} (allow_modified_games=True)",
                stacklevel=3,
            )
        compiled = self._backend.COMPILED_GAMES.get(sha, lambda: json.loads(data))
        self._feedback = self._game.start(compiled)
        self._record = record
        self.task_description = _task_sentence(self._feedback)

    def _apply(self, action: str) -> Transition:
        self._feedback, valid = self._game.step(action)
        # Winning ends the episode, so the reward is 1 exactly on the winning step.
        reward = 1.0 if self._game.won() else 0.0
        return Transition(reward=reward, valid=valid, feedback=self._feedback)

    def canonicalize(self, raw: str | bytes) -> str:
        """Extract and normalise the action, then map ``put X in/on Y`` to ``move X to Y``.

        Example:
            >>> env.canonicalize("<action>Put Mug 1 in/on Desk 1</action>")  # doctest: +SKIP
            'move mug 1 to desk 1'
        """
        return canonical_command(super().canonicalize(raw))

    # -------------------------------------------------------------- what the agent sees
    def _observation(self) -> str:
        return self._feedback

    def _obs_hash(self) -> str:
        return stable_hash(self._feedback)

    def _state_hash(self) -> str:
        return str(self._game.state_hash())

    def admissible_actions(self) -> list[str]:
        """The commands the game accepts now, sorted, without ``help``.

        Example:
            >>> env.admissible_actions()[:2]  # doctest: +SKIP
            ['go to bed 1', 'go to bed 2']
        """
        return list(self._game.admissible_commands())

    def won(self) -> bool:
        """Whether the task's goal holds.

        Example:
            >>> env.won()  # doctest: +SKIP
            False
        """
        return bool(self._game.won())

    def category(self) -> str:
        """The task type, one of :data:`~agentbench_rl.envs.alfworld.data.TASK_TYPES`.

        Example:
            >>> env.category()  # doctest: +SKIP
            'look_at_obj_in_light'
        """
        return self._record.task_type if self._record is not None else ""

    def expert_action(self) -> str:
        """The next command of the walkthrough stored in the game (replanned if play left it).

        Example:
            >>> env.expert_action()  # doctest: +SKIP
            'go to desk 1'
        """
        return str(self._game.expert_command())

    def close(self) -> None:
        """Drop the engine's game."""
        game = getattr(self, "_game", None)
        if game is not None:
            game.close()
            self._game = None
        super().close()


def _task_sentence(intro: str) -> str:
    for line in reversed(intro.splitlines()):
        if line.startswith("Your task is to:"):
            return line
    return ""

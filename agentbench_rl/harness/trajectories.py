"""``eval --save-trajectories``: every step of every episode, one JSON file per episode.

The env is wrapped in :class:`RecordingEnv`, which notes what passes through ``reset`` and
``step`` (observation, the agent's raw action, the env's canonical action, validity, reward, and
the state hash the step started from) without changing anything the agent or the harness sees.
Each episode is written to ``trajectories/seed-<seed>/<task>.json`` by the process that played it
(atomically, so a killed run leaves no torn file and a resumed one rewrites only what it replays).
Image observations (visual Sokoban) are stored as PNG data URLs, so ``agentbench-rl view`` can
show the frames without any image library.

An agent's text is recorded bounded and as valid text: an action over :data:`MAX_ACTION_CHARS`
keeps its head and says how long it was, and a lone surrogate (no UTF-8 encodes it, so the page
could not be written) is kept as its ``\\udXXX`` escape.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from agentbench_rl.core.atomic import atomic_write_text
from agentbench_rl.core.jsonfile import read_json
from agentbench_rl.envs.base import StepInfo, StepResult, TextAgentEnv
from agentbench_rl.spec.records import EpisodeRow
from agentbench_rl.spec.results_folder import ResultsFolder

#: The most characters of one action a trajectory keeps (a model's answer is a few hundred).
MAX_ACTION_CHARS = 4096
#: The largest trajectory file ``view`` reads.
MAX_FILE_BYTES = 64 * 2**20
#: The fields every episode record holds.
RECORD_FIELDS = ("task_id", "seed", "reset", "steps")


def recorded_text(text: str) -> str:
    """``text`` as a trajectory keeps it: valid UTF-8 text of at most :data:`MAX_ACTION_CHARS`
    characters (and a note of how many were cut).

    Example:
        >>> recorded_text("up" + chr(0xD800))
        'up\\\\ud800'
        >>> recorded_text("x" * 5000)[-31:]
        'x... [904 more characters, cut]'
    """
    if len(text) > MAX_ACTION_CHARS:
        cut = len(text) - MAX_ACTION_CHARS
        text = f"{text[:MAX_ACTION_CHARS]}... [{cut} more characters, cut]"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def png_data_url(image: np.ndarray) -> str:
    """An RGB ``uint8`` array as a ``data:image/png;base64,...`` URL.

    Written here (a dozen lines of the PNG format: signature, IHDR, one zlib IDAT, IEND) because
    the core install has no image library.

    Example:
        >>> png_data_url(np.zeros((1, 1, 3), dtype=np.uint8))[:30]
        'data:image/png;base64,iVBORw0K'
    """
    height, width, _ = image.shape
    rows = b"".join(b"\x00" + image[row].astype(np.uint8).tobytes() for row in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
    png += chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def observation_record(observation: Any) -> dict[str, Any]:
    """An observation as JSON: ``{"text": ...}``, plus ``"image"`` (a PNG data URL) if it has one.

    Example:
        >>> observation_record("#P_#")
        {'text': '#P_#'}
    """
    if isinstance(observation, dict):
        record: dict[str, Any] = {"text": str(observation.get("text", ""))}
        image = observation.get("image")
        if isinstance(image, np.ndarray) and image.ndim == 3:
            record["image"] = png_data_url(image)
        return record
    return {"text": str(observation)}


class RecordingEnv:
    """An env that notes every reset and step; everything else goes to the wrapped env.

    Example:
        >>> from agentbench_rl.envs import make
        >>> env = RecordingEnv(make("sokoban", split="test"))
        >>> _ = env.reset(seed=0, options={"task_id": "test-0000"})
        >>> _ = env.step("<action>up</action>")
        >>> step = env.steps[0]
        >>> step["action_raw"], step["action"], step["t"]
        ('<action>up</action>', 'up', 0)
    """

    def __init__(self, env: TextAgentEnv[Any]) -> None:
        self.env = env
        self.first: dict[str, Any] = {}
        self.steps: list[dict[str, Any]] = []
        self._state = ""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def reset(self, **kwargs: Any) -> tuple[Any, StepInfo]:
        """Reset the env and start a new record."""
        observation, info = self.env.reset(**kwargs)
        self.first = observation_record(observation)
        self.steps = []
        self._state = info["state_hash"]
        return observation, info

    def step(self, action: Any) -> StepResult:
        """Step the env and note the step."""
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.steps.append(
            {
                "t": len(self.steps),
                "state": self._state,
                "action_raw": recorded_text(action if isinstance(action, str) else repr(action)),
                "action": recorded_text(info["action_canonical"]),
                "valid": info["action_valid"],
                "reward": float(reward),
                "observation": observation_record(observation),
            }
        )
        self._state = info["state_hash"]
        return observation, reward, terminated, truncated, info


def episode_path(out: Path, task_id: str, seed: int) -> Path:
    """Where an episode's record goes (task ids with ``/``, as ALFWorld's, become folders).

    Example:
        >>> episode_path(Path("run"), "test-0003", 1).as_posix()
        'run/trajectories/seed-1/test-0003.json'
    """
    return ResultsFolder(out).trajectories / f"seed-{seed}" / f"{task_id}.json"


def write_episode(out: Path, env: RecordingEnv, row: EpisodeRow) -> None:
    """Write the record of the episode ``env`` just played (``row``: its episodes.csv row)."""
    record = {**row, "reset": env.first, "final_state": env._state, "steps": env.steps}
    path = episode_path(out, str(row["task_id"]), int(row["seed"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(record, sort_keys=True) + "\n")


def read_episodes(out: Path) -> list[dict[str, Any]]:
    """Every episode record under ``out/trajectories``, by seed then task id.

    Example:
        >>> read_episodes(Path("/nonexistent"))
        []
    """
    paths = sorted(ResultsFolder(out).trajectories.glob("seed-*/**/*.json"))
    return sorted(map(read_record, paths), key=lambda r: (r["seed"], str(r["task_id"])))


def read_record(path: Path) -> dict[str, Any]:
    """One episode record; ``ValueError`` in one line naming the file when it is too large, not
    JSON, or not an episode record."""
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ValueError(f"{path} is over {MAX_FILE_BYTES >> 20} MiB: not a trajectory we wrote")
    record = read_json(path, str(path))
    if not isinstance(record, dict):
        raise ValueError(f"{path} must hold a JSON object (an episode record)")
    missing = [name for name in RECORD_FIELDS if name not in record]
    if missing:
        raise ValueError(f"{path} lacks {', '.join(missing)} (not an episode record)")
    seed, steps = record["seed"], record["steps"]
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"{path}: 'seed' must be a whole number, got {json.dumps(seed)}")
    if not isinstance(steps, list) or not all(isinstance(step, dict) for step in steps):
        raise ValueError(f"{path}: 'steps' must be a list of step objects")
    return record

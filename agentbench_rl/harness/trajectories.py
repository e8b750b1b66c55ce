"""``eval --save-trajectories``: every step of every episode, one JSON file per episode.

The env is wrapped in :class:`RecordingEnv`, which notes what passes through ``reset`` and
``step`` (observation, the agent's raw action, the env's canonical action, validity, reward, and
the state hash the step started from) without changing anything the agent or the harness sees.
Each episode is written to ``trajectories/seed-<seed>/<task>.json`` by the process that played it
(atomically, so a killed run leaves no torn file and a resumed one rewrites only what it replays).
Image observations (visual Sokoban) are stored as PNG data URLs, so ``agentbench-rl view`` can
show the frames without any image library.
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

FOLDER = "trajectories"


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

    def __init__(self, env: Any) -> None:
        self.env = env
        self.first: dict[str, Any] = {}
        self.steps: list[dict[str, Any]] = []
        self._state = ""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset the env and start a new record."""
        observation, info = self.env.reset(**kwargs)
        self.first = observation_record(observation)
        self.steps = []
        self._state = str(info.get("state_hash", ""))
        return observation, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step the env and note the step."""
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.steps.append(
            {
                "t": len(self.steps),
                "state": self._state,
                "action_raw": action if isinstance(action, str) else repr(action),
                "action": str(info.get("action_canonical", "")),
                "valid": bool(info.get("action_valid", False)),
                "reward": float(reward),
                "observation": observation_record(observation),
            }
        )
        self._state = str(info.get("state_hash", ""))
        return observation, reward, terminated, truncated, info


def episode_path(out: Path, task_id: str, seed: int) -> Path:
    """Where an episode's record goes (task ids with ``/``, as ALFWorld's, become folders).

    Example:
        >>> episode_path(Path("run"), "test-0003", 1).as_posix()
        'run/trajectories/seed-1/test-0003.json'
    """
    return out / FOLDER / f"seed-{seed}" / f"{task_id}.json"


def write_episode(out: Path, env: RecordingEnv, row: dict[str, Any]) -> None:
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
    paths = sorted((out / FOLDER).glob("seed-*/**/*.json"))
    records = [json.loads(path.read_text("utf-8")) for path in paths]
    return sorted(records, key=lambda record: (int(record["seed"]), str(record["task_id"])))

"""``eval --save-trajectories`` records every step as played, and ``agentbench-rl view`` shows
them (frames for visual Sokoban, each task's step graph), checked in headless Chromium."""

from __future__ import annotations

import base64
import json
import os
import struct
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from agentbench_rl.core.hashing import seed_from
from agentbench_rl.envs import make
from agentbench_rl.harness.config import EvalConfig, RunOptions
from agentbench_rl.harness.evaluate import evaluate
from agentbench_rl.harness.trajectories import episode_path, read_episodes
from agentbench_rl.harness.view import render_view

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_recorded_steps_replay_to_the_same_observations_and_rewards(tmp_path: Path) -> None:
    config = EvalConfig(env="sokoban", split="val", agent="random", limit=4, seeds=[0, 1])
    recorded = EvalConfig(**{**config.__dict__, "save_trajectories": True})
    evaluate(config, tmp_path / "plain")
    evaluate(recorded, tmp_path / "recorded", RunOptions(workers=2))
    # Recording changes nothing the harness computes.
    plain_csv = (tmp_path / "plain" / "episodes.csv").read_text()
    assert (tmp_path / "recorded" / "episodes.csv").read_text() == plain_csv
    # Played in lockstep batches, every env of a batch records its own episode, byte for byte.
    evaluate(recorded, tmp_path / "batched", RunOptions(batch_size=3))
    assert (tmp_path / "batched" / "episodes.csv").read_text() == plain_csv
    trajectories = sorted((tmp_path / "recorded" / "trajectories").rglob("*.json"))
    assert len(trajectories) == 8
    for path in trajectories:
        name = path.relative_to(tmp_path / "recorded")
        assert (tmp_path / "batched" / name).read_bytes() == path.read_bytes()
    records = read_episodes(tmp_path / "recorded")
    assert len(records) == 8
    for record in records:
        # Replay the raw actions in a fresh env, seeded as the harness seeds an episode.
        env = make("sokoban", split="val")
        episode_seed = seed_from(record["seed"], record["task_id"]) % (2**31)
        observation, info = env.reset(seed=episode_seed, options={"task_id": record["task_id"]})
        assert record["reset"] == {"text": observation}
        total = 0.0
        for step in record["steps"]:
            assert step["state"] == info["state_hash"]
            observation, reward, _, _, info = env.step(step["action_raw"])
            assert step["observation"] == {"text": observation}
            assert (step["action"], step["valid"], step["reward"]) == (
                info["action_canonical"],
                info["action_valid"],
                reward,
            )
            total += reward
        assert round(total, 10) == record["return"] and bool(info["won"]) == record["success"]


def png_size(data_url: str) -> tuple[int, int]:
    png = base64.b64decode(data_url.split(",", 1)[1])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", png[16:24])


class ViewParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tasks: list[str] = []
        self.images = 0
        self.svgs = 0
        self.report = ""
        self._in_report = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "section":
            self.tasks.append(str(attributes.get("data-task")))
        self.images += tag == "img"
        self.svgs += tag == "svg"
        self._in_report = tag == "pre" and attributes.get("id") == "image-report"

    def handle_data(self, data: str) -> None:
        if self._in_report:
            self.report += data


HOSTILE_AGENT = """
import random
def act(observation, info):
    return random.Random(len(observation)).choice(info["admissible_actions"]) + "<script>x</script>"
"""


@pytest.fixture(scope="module")
def visual_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("view") / "run"
    config = EvalConfig(
        env="visual_sokoban",
        split="val",
        agent="random",
        limit=3,
        seeds=[0, 1],
        save_trajectories=True,
    )
    evaluate(config, run)
    return run


def test_view_page_has_every_task_frame_and_step_graph(visual_run: Path) -> None:
    records = read_episodes(visual_run)
    for record in records:
        frames = [record["reset"], *(step["observation"] for step in record["steps"])]
        for frame in frames:
            assert png_size(frame["image"]) == (96, 96)  # 6x6 levels of 16-pixel tiles
    page = render_view(visual_run)
    parsed = ViewParser()
    parsed.feed(page.read_text())
    assert parsed.tasks == sorted({record["task_id"] for record in records})
    assert parsed.images == sum(len(record["steps"]) + 1 for record in records)
    assert parsed.svgs == len(parsed.tasks)  # one step graph per task


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentbench_rl.cli", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )


def test_view_escapes_what_the_agent_wrote(tmp_path: Path) -> None:
    (tmp_path / "hostile.py").write_text(HOSTILE_AGENT)
    args = ["eval", "--env", "sokoban", "--split", "val", "--agent", "python:hostile:act"]
    result = _cli([*args, "--limit", "1", "--save-trajectories", "--out", "run"], tmp_path)
    assert result.returncode == 0, result.stderr
    view = _cli(["view", "run"], tmp_path)
    assert view.returncode == 0, view.stderr
    html = (tmp_path / "run" / "view.html").read_text()
    assert "<script>" not in html and "&lt;script&gt;x&lt;/script&gt;" in html
    empty = _cli(["view", str(tmp_path)], tmp_path)
    assert empty.returncode == 2 and "--save-trajectories" in empty.stderr


def test_episode_files_are_named_by_seed_and_task(visual_run: Path) -> None:
    record = read_episodes(visual_run)[0]
    assert episode_path(visual_run, record["task_id"], record["seed"]).is_file()


def test_view_frames_load_in_chromium(visual_run: Path, tmp_path: Path) -> None:
    from test_leaderboard_browser import CHROMIUM, IMAGE_REPORT, chromium

    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    page = render_view(visual_run)
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("</body>", IMAGE_REPORT + "</body>"))
    result = chromium(
        "--virtual-time-budget=10000", "--dump-dom", probe.as_uri(), profile=tmp_path / "profile"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    parsed = ViewParser()
    parsed.feed(result.stdout)
    images = json.loads(parsed.report)
    expected = sum(len(record["steps"]) + 1 for record in read_episodes(visual_run))
    assert len(images) == expected
    assert all(image["loaded"] and image["width"] == 96 for image in images)


HUGE_AGENT = """
def act(observation, info):
    return "<action>" + "u" * 1_000_000 + chr(0xD800) + "</action>"
"""


def test_huge_and_unencodable_actions_are_recorded_bounded_and_viewable(tmp_path: Path) -> None:
    (tmp_path / "huge.py").write_text(HUGE_AGENT)
    args = ["eval", "--env", "sokoban", "--split", "val", "--agent", "python:huge:act"]
    result = _cli(
        [*args, "--limit", "1", "--max-steps", "5", "--save-trajectories", "--out", "run"],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    [path] = (tmp_path / "run" / "trajectories").rglob("*.json")
    assert path.stat().st_size < 100_000  # 5 steps of 1 MB actions: 10 MB before
    step = json.loads(path.read_text())["steps"][0]
    assert step["action_raw"].endswith("more characters, cut]")
    view = _cli(["view", "run"], tmp_path)  # a lone surrogate made the page unwritable
    assert view.returncode == 0, view.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2]", "must hold a JSON object"),
        ('{"task_id": "val-0000", "reset": {}, "steps": []}', "lacks seed"),
        ('{"task_id": "val-0000", "seed": "0", "reset": {}, "steps": []}', "'seed' must be"),
        ("{oops", "is not valid JSON"),
    ],
)
def test_a_damaged_trajectory_file_is_one_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "run" / "trajectories" / "seed-0" / "val-0000.json"
    path.parent.mkdir(parents=True)
    path.write_text(content)
    view = _cli(["view", "run"], tmp_path)
    assert view.returncode == 2 and message in view.stderr and "Traceback" not in view.stderr

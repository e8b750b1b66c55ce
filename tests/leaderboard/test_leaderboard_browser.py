"""The rendered page in a real browser: Debian's chromium, headless.

The board is rendered from the repository's reference submissions plus one submission with
training curves (so every kind of plot is on the page). The test reads the DOM chromium built,
checks one table row per filed submission and per reported number, checks that every plot image
loaded (decoded, with the PNG's width), and saves a screenshot to
``test-artifacts/leaderboard-site.png``.

The page itself has no script; to learn whether images loaded, the test loads a copy of the page
with a small script appended that writes each image's state into the DOM after the load event.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from agentbench_rl.harness.config import EvalConfig
from agentbench_rl.harness.evaluate import evaluate
from agentbench_rl.leaderboard.render import render
from agentbench_rl.leaderboard.store import submit

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
WINDOW = (1280, 2400)
IMAGE_REPORT = """
<script>
window.addEventListener("load", () => {
  const report = document.createElement("pre");
  report.id = "image-report";
  report.textContent = JSON.stringify(Array.from(document.images).map((image) => ({
    src: image.getAttribute("src"),
    loaded: image.complete && image.naturalWidth > 0,
    width: image.naturalWidth,
  })));
  document.body.appendChild(report);
});
</script>
"""


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    """Run headless chromium with the flags that keep it quiet and offline."""
    command = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


class PageParser(HTMLParser):
    """The rows of each table kind (by ``data-id``), the images and the image report."""

    def __init__(self) -> None:
        super().__init__()
        kinds = ("validated-row", "trained-row", "reported-row")
        self.rows: dict[str, list[str]] = {kind: [] for kind in kinds}
        self.images: list[str] = []
        self.report = ""
        self._in_report = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "tr" and attributes.get("class") in self.rows:
            self.rows[str(attributes["class"])].append(str(attributes.get("data-id")))
        if tag == "img":
            self.images.append(str(attributes.get("src")))
        self._in_report = tag == "pre" and attributes.get("id") == "image-report"

    def handle_data(self, data: str) -> None:
        if self._in_report:
            self.report += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre":
            self._in_report = False


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository's boards plus one trained entry with curves, rendered in a scratch root."""
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    scratch = tmp_path_factory.mktemp("browser")
    root = scratch / "boards"
    shutil.copytree(
        REPO / "leaderboards",
        root,
        ignore=shutil.ignore_patterns("site", "README.md", "*.py", "__pycache__"),
    )
    run = scratch / "trained"
    evaluate(EvalConfig(env="sokoban", split="val", agent="random", seeds=[0, 1]), run)
    metadata = {
        "name": "trained with curves (browser test)",
        "estimator": "grpo",
        "training": {"iterations": 30, "rollouts": 960},
        "parameters": 1000,
        "seeds": [0, 1],
        "code_version": "test",
        "contact": "tests",
        "url": None,
    }
    (run / "metadata.json").write_text(json.dumps(metadata))
    (run / "curves.json").write_text(json.dumps({"0": {"10": 0.4, "20": 0.96}, "1": {"30": 0.9}}))
    submit(run, root)
    render(root)
    return root


def filed_ids(root: Path, trained: bool) -> list[str]:
    """Ids of the filed submissions that name a training run of this package (or do not)."""
    return sorted(
        path.parent.name
        for path in root.glob("*/*/*/metadata.json")
        if ("training_run" in json.loads(path.read_text("utf-8"))) == trained
    )


def test_page_rows_and_every_plot_load_in_chromium(site: Path, tmp_path: Path) -> None:
    page = site / "site" / "index.html"
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text("utf-8").replace("</body>", IMAGE_REPORT + "</body>"))
    result = chromium(
        "--virtual-time-budget=10000", "--dump-dom", probe.as_uri(), profile=tmp_path / "dom"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    parsed = PageParser()
    parsed.feed(result.stdout)

    assert sorted(parsed.rows["validated-row"]) == filed_ids(site, trained=False)
    assert sorted(parsed.rows["trained-row"]) == filed_ids(site, trained=True)
    reported = json.loads((REPO / "agentbench_rl/leaderboard/reported.json").read_text("utf-8"))
    assert len(parsed.rows["reported-row"]) == len(reported["rows"])

    # Two plots per board, the curves of the one board with curves, and one plot per board
    # holding runs trained here.
    plots = sorted(path.name for path in (site / "site").glob("*.png"))
    boards = {path.parent.parent.relative_to(site) for path in site.glob("*/*/*/metadata.json")}
    trained_boards = {
        path.parent.parent.relative_to(site)
        for path in site.glob("*/*/*/metadata.json")
        if "training_run" in json.loads(path.read_text("utf-8"))
    }
    assert len(plots) == 2 * len(boards) + 1 + len(trained_boards)
    assert "sokoban-val-curves.png" in plots
    assert sorted(parsed.images) == plots
    images = json.loads(parsed.report)
    assert sorted(image["src"] for image in images) == plots
    for image in images:
        png = (site / "site" / image["src"]).read_bytes()
        assert image["loaded"], image["src"]
        assert image["width"] == struct.unpack(">I", png[16:20])[0], image["src"]
    probe.unlink()


def test_screenshot_of_the_page(site: Path, tmp_path: Path) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "leaderboard-site.png"
    screenshot.unlink(missing_ok=True)
    result = chromium(
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        "--virtual-time-budget=10000",
        f"--screenshot={screenshot}",
        (site / "site" / "index.html").as_uri(),
        profile=tmp_path / "shot",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    data = screenshot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == WINDOW

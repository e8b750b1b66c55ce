"""Every shell and Python snippet of every page of the documentation site (README.md as its
home, the pages of docs/, the env cards, the boards, the baselines, CONTRIBUTING.md) runs,
verbatim.

Each doc is played like a newcomer would, top to bottom in one fresh working directory:
``# my_module.py`` blocks are written as that file, the other Python blocks run in order in one
interpreter, and every shell line runs with ``bash``. Every shell line must be classified in
``COMMANDS`` below (a new README line without a class fails the test), and the class says where
it runs: here (``run``), in the slow suite (``slow``), or, for the few lines that cannot run on a
test machine, which test covers them instead (``setup``, ``network``, ``gpu``, ``served``,
``verl``, ``openenv``).
The only edits are data locations (the placeholder ``/path/to/WebShop/data`` becomes the test
data, the ALFWorld archive the card names is placed in the working directory, ``$HOME`` is a
temporary folder) and ``--port 0`` for ``leaderboard serve`` (port 8000 may be taken).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def _site_pages() -> tuple[str, ...]:
    """Every page of the documentation site, by its path in the repository (docs/hooks.py
    says which files outside docs/ the site serves)."""
    spec = importlib.util.spec_from_file_location("site_hooks", REPO_ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    return tuple(sorted(hooks.site_pages()))


DOCS = _site_pages()

#: (pattern on the command without its comment, class). First match wins.
COMMANDS: tuple[tuple[str, str], ...] = (
    # Installing the package: what CI's .ci/run does; the extras named must exist (checked).
    (r"^pip install", "setup"),
    (r"^python -m pytest", "setup"),
    # Lint, types and CI's own scripts: what CI runs (CONTRIBUTING's commands).
    (r"^ruff |^mypy |^bash \.ci/|^mkdocs ", "setup"),
    # The recorded baselines and the campaign train for hours; their results are committed and
    # tests/train/test_train_sweep.py and tests/leaderboard/test_leaderboard_trained.py cover
    # the commands.
    (r"baselines/sokoban-tiny-cpu(-campaign)?\.yaml|setsid nohup", "campaign"),
    (r"^agentbench-rl sweep baselines/drrn-\w+-campaign\.yaml", "campaign"),
    # ALFWorld's own downloader and our default download fetch from GitHub: the download path is
    # tested against a local server in tests/envs/test_data_install.py (--url on 127.0.0.1).
    (r"^alfworld-download$", "network"),
    (r"^agentbench-rl data install alfworld$", "network"),
    # verl runs on GPUs in an environment of its own (.ci/run's verl job and the
    # tests of agentbench_rl/integrations/verl cover it).
    (r"^ray start|verl", "verl"),
    # A 1.5B model needs a GPU; the trainer is tested on the tiny model (tests/train/).
    (r"--config baselines/alfworld-qwen2\.5-1\.5b\.yaml", "gpu"),
    # vLLM needs a GPU; batched hf: agents are tested on a tiny model
    # (tests/agents/test_agents_hf.py).
    (r"engine=vllm", "gpu"),
    # A model behind a real server; the agent is tested on a local one (test_agents_openai_http).
    (r"--agent \"openai:", "served"),
    (r"^agentbench-rl leaderboard serve", "slow-serve"),
    # A served env runs until stopped; tests/integrations/test_openenv.py serves and plays it
    # (.ci/openenv), as tests/integrations/test_trl.py runs the TRL baseline's parts
    # (tests/integrations/test_trl_summary.py its summary).
    (r"^agentbench-rl serve-env|--env-server|--server|trl_sokoban_", "openenv"),
    # Three seeds on a whole split, and the leaderboard steps that file such a run: the default
    # suite runs the cheaper lines; tests/test_cli_newcomer.py covers `leaderboard init` there.
    (r"^agentbench-rl eval .*--seeds 0 1 2", "slow"),
    (r"^agentbench-rl leaderboard ", "slow"),
    # `bench gpu` without --dry-run needs a CUDA GPU; .ci/run rehearses it (.ci/gpu --dry-run).
    (r"^agentbench-rl bench gpu(?!.*--dry-run)", "gpu"),
    (r"^agentbench-rl bench ", "slow"),
    (r"^agentbench-rl train --config baselines/sokoban-quickstart\.yaml", "slow"),
    (r"^agentbench-rl train --config baselines/drrn-textcraft-quickstart\.yaml", "slow"),
    (r"^agentbench-rl train --env visual_sokoban --model tiny-vl", "slow"),
    (r"--agent '?hf:runs/", "slow"),
    (r"^agentbench-rl sweep ", "slow"),
    (r"^agentbench-rl data install alfworld --archive", "slow"),
    (r"^agentbench-rl eval --env webshop --split test --agent expert", "slow"),
    (r"^export \w+=", "env"),
    (r"^agentbench-rl ", "run"),
)
SUBSTITUTIONS = {"/path/to/WebShop/data": "{shared}/webshop"}


@dataclass(frozen=True)
class Step:
    """One thing a reader of a doc does: write a file, run Python, or run a shell line."""

    kind: str  # "file", "python" or "shell"
    text: str
    name: str = ""  # the file name ("file") or the command's class ("shell")


def classify(command: str) -> str:
    for pattern, kind in COMMANDS:
        if re.search(pattern, command):
            return kind
    raise AssertionError(f"unclassified command in the docs: {command}")


def doc_steps(path: Path) -> list[Step]:
    """The steps of a doc, in order (fenced ``bash`` and ``python`` blocks)."""
    steps = []
    for language, body in re.findall(r"^```(\w*)\n(.*?)^```", path.read_text(), re.M | re.S):
        if language == "python":
            first = body.splitlines()[0]
            match = re.fullmatch(r"# (\w+\.py)", first)
            if match:
                steps.append(Step("file", body, match.group(1)))
            else:
                steps.append(Step("python", body))
        elif language == "bash":
            for line in re.sub(r"\\\n\s*", " ", body).splitlines():  # continued lines join
                command = re.sub(r"(^|\s+)#.*$", "", line).strip()  # a comment line: none
                for part in (p.strip() for p in command.split(" && ")):
                    if part:
                        steps.append(Step("shell", part, classify(part)))
    return steps


def test_every_doc_command_is_classified_and_every_extra_exists() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    extras = set(
        tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"][
            "optional-dependencies"
        ]
    )
    for doc in DOCS:
        for step in doc_steps(REPO_ROOT / doc):
            if step.kind == "shell" and step.text.startswith("pip install"):
                for named in re.findall(r"(?:agentbench-rl|\.)\[([\w,]+)\]", step.text):
                    unknown = set(named.split(",")) - extras
                    assert not unknown, f"{doc}: `{step.text}` names no such extra {unknown}"
        text = (REPO_ROOT / doc).read_text()
        for linked in re.findall(r"`((?:docs|envs|baselines|agentbench_rl)/[\w./-]+)`", text):
            assert (REPO_ROOT / linked).exists(), f"{doc} names {linked}, which does not exist"


def _workdir(tmp_path: Path, shared: Path) -> Path:
    work = tmp_path / "work"
    (work / "baselines").mkdir(parents=True)
    for config in (REPO_ROOT / "baselines").glob("*.yaml"):
        shutil.copy(config, work / "baselines" / config.name)
    # the recorded learning result bench credit --learning reads (a checkout has it)
    learning = work / "baselines" / "results" / "learning"
    shutil.copytree(REPO_ROOT / "baselines" / "results" / "learning", learning)
    archive = shared / "alfworld" / "json_2.1.1.tar.gz"
    if archive.exists():
        (work / archive.name).symlink_to(archive)
    return work


def play(doc: str, classes: set[str], tmp_path: Path, shared: Path, alfworld: Path | None) -> None:
    """Run the steps of ``doc`` whose class is in ``classes``, in order, in one folder."""
    work = _workdir(tmp_path, shared)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "COLUMNS": "120", "HOME": str(tmp_path)}
    if alfworld is not None:
        env["ALFWORLD_DATA"] = str(alfworld)
    python: list[str] = []
    for step in doc_steps(REPO_ROOT / doc):
        if step.kind == "file":
            (work / step.name).write_text(step.text)
        elif step.kind == "python":
            python.append(step.text)
        elif step.name == "env":
            key, _, value = step.text.removeprefix("export ").partition("=")
            env[key] = value
        elif step.name in classes:
            command = step.text
            for placeholder, value in SUBSTITUTIONS.items():
                command = command.replace(placeholder, value.format(shared=shared))
            if step.name == "slow-serve":
                _serve(command, work, env)
                continue
            started = time.monotonic()
            result = subprocess.run(
                ["bash", "-c", command],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            assert result.returncode == 0, f"{doc}: `{command}` failed:\n{result.stderr[-3000:]}"
            print(f"{time.monotonic() - started:7.1f} s  {command}")  # shown by pytest -s
    if python and "run" in classes:
        code = "\n".join(python)
        result = subprocess.run(
            [sys.executable, "-c", code],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, f"{doc}: Python snippets failed:\n{result.stderr[-3000:]}"


def _serve(command: str, work: Path, env: dict[str, str]) -> None:
    """A server command runs until it says where it serves; then it is stopped."""
    process = subprocess.Popen(
        ["bash", "-c", f"exec {command} --port 0"],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + 60
        line = ""
        while time.monotonic() < deadline and "serving" not in line:
            line = process.stderr.readline()
            if not line and process.poll() is not None:
                break
        assert "serving http://127.0.0.1:" in line, f"`{command}` did not serve: {line}"
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.parametrize("doc", DOCS)
def test_doc_snippets_run(
    doc: str, tmp_path: Path, shared_data_dir: Path, alfworld_data: Path
) -> None:
    play(doc, {"run"}, tmp_path, shared_data_dir, alfworld_data)


@pytest.mark.slow
@pytest.mark.parametrize("doc", DOCS)
def test_doc_snippets_run_including_the_long_ones(
    doc: str, tmp_path: Path, shared_data_dir: Path, alfworld_data: Path
) -> None:
    play(doc, {"run", "slow", "slow-serve"}, tmp_path, shared_data_dir, alfworld_data)

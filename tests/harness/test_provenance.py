"""Provenance: the package's own commit (never the repository the user runs from), the dirty
flag, library versions, and weights fingerprints in results and checkpoints."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from agentbench_rl.core.hashing import weights_fingerprint
from agentbench_rl.harness.provenance import agent_weights_fingerprint, package_revision


def _git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_package_inside_another_repository_records_no_commit(tmp_path: Path) -> None:
    # the user's project is a git repository and the package sits in its virtual environment
    project = tmp_path / "project"
    package = project / "venv" / "site-packages" / "agentbench_rl"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (project / "train.py").write_text("")
    _git(project, "init", "-q")
    _git(project, "add", "train.py")
    _git(project, "commit", "-qm", "user code")
    assert package_revision(package) == {"git_commit": None, "git_dirty": None}


def test_package_checkout_records_its_commit_and_dirty_flag(tmp_path: Path) -> None:
    repo = tmp_path / "agentbench-rl"
    package = repo / "agentbench_rl"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "code")
    head = _git(repo, "rev-parse", "HEAD")
    (repo / "runs").mkdir()  # untracked output does not make the tree dirty
    (repo / "runs" / "x.json").write_text("{}")
    assert package_revision(package) == {"git_commit": head, "git_dirty": False}
    (repo / "README.md").write_text("a board rendered\n")  # tracked, but not code
    _git(repo, "add", "README.md")
    _git(repo, "commit", "-qm", "readme")
    head = _git(repo, "rev-parse", "HEAD")
    (repo / "README.md").write_text("a board rendered again\n")
    assert package_revision(package) == {"git_commit": head, "git_dirty": False}
    (package / "__init__.py").write_text("changed = True\n")
    assert package_revision(package) == {"git_commit": head, "git_dirty": True}


def test_weights_fingerprint_follows_the_bytes(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"abc")
    (tmp_path / "config.json").write_text("{}")
    first = weights_fingerprint(tmp_path)
    assert first is not None and len(first) == 16
    (tmp_path / "config.json").write_text('{"x": 1}')  # not a weight file
    assert weights_fingerprint(tmp_path) == first
    (tmp_path / "model.safetensors").write_bytes(b"abd")
    assert weights_fingerprint(tmp_path) != first
    assert agent_weights_fingerprint(f"hf:{tmp_path}?greedy=true") == weights_fingerprint(tmp_path)
    assert weights_fingerprint(tmp_path / "missing") is None


def test_validations_and_checkpoints_record_the_weights(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from test_train_ppo import tiny_config

    from agentbench_rl.train.ppo import train

    metrics = train(tiny_config(iterations=2, val_every=1), tmp_path / "run")
    prints = [row["val_weights"] for row in metrics]
    assert all(prints) and len(set(prints)) == 3  # the start and two updates differ
    summary = json.loads((tmp_path / "run" / "val" / "iter-0002" / "summary.json").read_text())
    record = summary["provenance"]
    assert record["agent_weights"] == prints[2]
    assert set(record["versions"]) == {"numpy", "torch", "transformers"}
    assert record["versions"]["torch"] is not None and "git_dirty" in record
    state = json.loads((tmp_path / "run" / "checkpoint" / "state.json").read_text())
    assert state["iteration"] == 2 and state["weights"] == prints[2]
    assert state["versions"] == record["versions"]


def test_a_built_package_records_its_commit(tmp_path: Path) -> None:
    """``pip install .`` (a wheel) is no checkout: its results name the commit it was built from."""
    import subprocess
    import sys
    import zipfile

    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    repo = Path(__file__).resolve().parents[2]
    built = subprocess.run(
        [*pip_wheel, str(repo), "-q", "-w", str(tmp_path / "wheel")],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "wheel").glob("*.whl")
    zipfile.ZipFile(wheel).extractall(tmp_path / "site")
    shown = subprocess.run(
        [sys.executable, "-c", "from agentbench_rl.harness.provenance import package_revision;"
         "print(package_revision()['git_commit'])"],
        cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert shown.stdout.strip() == head, shown.stderr

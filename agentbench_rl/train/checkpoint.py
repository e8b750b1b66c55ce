"""Checkpoints that resume a run exactly: weights, optimiser, every RNG state, iteration (and,
in ``state.json``, the weights' fingerprint and the code's provenance).

A checkpoint is a folder written beside its final place and swapped in with renames, so a kill at
any moment leaves either the old checkpoint or the new one (``checkpoint`` or, between the two
renames, ``.checkpoint-old``), never half of one.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentbench_rl.core.hashing import weights_fingerprint
from agentbench_rl.harness.provenance import provenance
from agentbench_rl.models.policy import Policy

CHECKPOINT = "checkpoint"
_NEW = ".checkpoint-new"
_OLD = ".checkpoint-old"


def rng_state() -> dict[str, Any]:
    """The torch, numpy and Python global RNG states."""
    return {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


def save_checkpoint(
    run: Path, policy: Policy, optimizer: torch.optim.Optimizer, iteration: int
) -> Path:
    """Write the checkpoint of ``iteration`` to ``run/checkpoint`` (atomically)."""
    run = Path(run)
    new, old, final = run / _NEW, run / _OLD, run / CHECKPOINT
    shutil.rmtree(new, ignore_errors=True)
    policy.save(new / "policy")
    torch.save(optimizer.state_dict(), new / "optimizer.pt")
    torch.save(rng_state(), new / "rng.pt")
    state = {
        "iteration": iteration,
        "weights": weights_fingerprint(new / "policy"),
        **provenance(),
    }
    (new / "state.json").write_text(json.dumps(state, indent=1) + "\n", "utf-8")
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    new.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def find_checkpoint(run: Path) -> Path | None:
    """The run's latest complete checkpoint folder, if any."""
    for name in (CHECKPOINT, _OLD):
        folder = Path(run) / name
        if (folder / "state.json").is_file():
            return folder
    return None


def checkpoint_iteration(folder: Path) -> int:
    """The iteration a checkpoint was taken after."""
    iteration: int = json.loads((folder / "state.json").read_text("utf-8"))["iteration"]
    return iteration


def load_training_state(folder: Path, optimizer: torch.optim.Optimizer) -> int:
    """Restore the optimiser and the RNG states of a checkpoint; returns its iteration.

    The weights are loaded by the caller (from ``folder / "policy"``) before the optimiser is
    built over them.
    """
    optimizer.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=False))
    set_rng_state(torch.load(folder / "rng.pt", weights_only=False))
    return checkpoint_iteration(folder)

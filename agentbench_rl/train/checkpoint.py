"""Checkpoints that resume a run exactly: weights, optimiser, every RNG state, iteration (and,
in ``state.json``, what resuming checks and the code's provenance; the layout and the checks are
:class:`~agentbench_rl.spec.run_folder.RunFolder`'s).

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

from agentbench_rl.core.hashing import sha256_file, weights_fingerprint
from agentbench_rl.harness.provenance import provenance
from agentbench_rl.models.policy import Policy
from agentbench_rl.spec.run_folder import (
    NEW_CHECKPOINT,
    OLD_CHECKPOINT,
    OPTIMIZER,
    POLICY,
    RNG,
    STATE,
    RunFolder,
    RunFolderError,
)


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
    run: RunFolder,
    policy: Policy,
    optimizer: torch.optim.Optimizer,
    iteration: int,
    identity: str,
    reference: str | None,
) -> Path:
    """Write the checkpoint of ``iteration`` to the run's ``checkpoint/`` (atomically), recording
    what resuming checks: the weights' fingerprint, the sha256 of the optimiser and RNG files, the
    run's ``identity`` hash and the fingerprint of its ``reference`` policy."""
    new, old, final = run.path / NEW_CHECKPOINT, run.path / OLD_CHECKPOINT, run.checkpoint()
    shutil.rmtree(new, ignore_errors=True)
    policy.save(new / POLICY)
    torch.save(optimizer.state_dict(), new / OPTIMIZER)
    torch.save(rng_state(), new / RNG)
    state = {
        "iteration": iteration,
        "weights": weights_fingerprint(new / POLICY),
        "files": {name: sha256_file(new / name) for name in (OPTIMIZER, RNG)},
        "run": identity,
        "reference": reference,
        **provenance(),
    }
    (new / STATE).write_text(json.dumps(state, indent=1) + "\n", "utf-8")
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    new.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def _load(path: Path) -> Any:
    try:
        return torch.load(path, weights_only=False)
    except Exception as error:  # torch raises many kinds for a damaged file; all mean one thing
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise RunFolderError(f"{path} cannot be read ({reason})") from None


def load_training_state(folder: Path, optimizer: torch.optim.Optimizer) -> None:
    """Restore the optimiser and the RNG states of a checkpoint (checked by
    :meth:`RunFolder.check_checkpoint` first); a file that cannot be loaded is a
    :class:`RunFolderError` naming it.

    The weights are loaded by the caller (from ``folder / "policy"``) before the optimiser is
    built over them.
    """
    try:
        optimizer.load_state_dict(_load(folder / OPTIMIZER))
    except (ValueError, KeyError, TypeError) as error:
        if isinstance(error, RunFolderError):
            raise
        raise RunFolderError(f"{folder / OPTIMIZER} does not fit this model ({error})") from None
    state = _load(folder / RNG)
    try:
        set_rng_state(state)
    except (KeyError, TypeError, ValueError, RuntimeError) as error:
        raise RunFolderError(f"{folder / RNG} is not an RNG state ({error})") from None

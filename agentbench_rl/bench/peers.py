"""The authors' own estimator functions, read from a verl-agent checkout when one is named.

Nothing here is vendored: the functions are compiled from the files of the checkout that
``AGENTBENCH_VERL_AGENT`` names (a clone of xlan156/verl-agent, which carries upstream's
``gigpo/core_gigpo.py`` and the ``recipe/hgpo/core_hgpo.py`` of HGPO's authors). They compute in
float32; their ``torch.float32`` casts are rewritten to ``torch.float64`` in memory, so they and
ours can agree to 1e-8. Their ``from verl import DataProto`` (a type annotation only) is given a
stand-in module, and their per-batch ``print`` is silenced. Used by
``tests/test_peer_estimators.py`` (parity) and ``bench estimators`` (their speed beside ours).

The adapters hand a ``StepBatch`` over the way verl-agent's trainer does: rows in step-major order
(every trajectory's step t before any step t + 1, as its rollout loop stacks them), the step
return and the episode score as tensors; they return advantages in the batch's row order.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from agentbench_rl.core.batch import StepBatch
from agentbench_rl.estimators.common import episode_scores, step_returns

ROOT_VARIABLE = "AGENTBENCH_VERL_AGENT"
GIGPO_FILE = "gigpo/core_gigpo.py"
HGPO_FILE = "recipe/hgpo/core_hgpo.py"
RESPONSE_TOKENS = 3  # tokens per row; the episode score sits on the last, as verl-agent does
MODES = {"mean_std": "mean_std_norm", "mean": "mean_norm"}


def peer_root() -> Path | None:
    """The verl-agent checkout ``AGENTBENCH_VERL_AGENT`` names, or ``None`` when unset."""
    root = os.environ.get(ROOT_VARIABLE)
    return Path(root) if root else None


def load_function(root: Path, relative: str, name: str) -> Callable[..., Any]:
    """Function ``name`` of ``root / relative``, compiled with float64 in place of float32.

    Raises ``FileNotFoundError`` naming the file when the checkout lacks it.
    """
    path = root / relative
    if not path.is_file():
        raise FileNotFoundError(f"{ROOT_VARIABLE}={root}: no {relative} there")
    source = path.read_text().replace("torch.float32", "torch.float64")
    stand_in = types.ModuleType("verl")
    stand_in.DataProto = object  # type: ignore[attr-defined]
    saved = sys.modules.get("verl")
    sys.modules["verl"] = stand_in
    try:
        namespace: dict[str, Any] = {"__name__": f"verl_agent_{Path(relative).stem}"}
        exec(compile(source, str(path), "exec"), namespace)
    finally:
        if saved is None:
            del sys.modules["verl"]
        else:
            sys.modules["verl"] = saved
    namespace["print"] = lambda *args, **kwargs: None  # its "Avg size of step-level group"
    function: Callable[..., Any] = namespace[name]
    return function


def _inputs(batch: StepBatch, gamma: float, invalid_penalty: float) -> dict[str, Any]:
    import torch

    order = np.lexsort((batch.traj_codes, batch.t))
    token_rewards = np.zeros((len(batch), RESPONSE_TOKENS))
    token_rewards[:, -1] = episode_scores(batch, invalid_penalty)[order]
    return {
        "order": order,
        "token_level_rewards": torch.tensor(token_rewards, dtype=torch.float64),
        "step_rewards": torch.tensor(
            step_returns(batch, gamma, invalid_penalty)[order], dtype=torch.float64
        ),
        "response_mask": torch.ones((len(batch), RESPONSE_TOKENS), dtype=torch.float64),
        "anchor_obs": np.asarray(batch.obs_key[order], dtype=object),
        "index": np.asarray(batch.group[order], dtype=object),
        "traj_index": np.asarray(batch.traj[order], dtype=object),
    }


def _in_row_order(result: Any, order: np.ndarray) -> np.ndarray:
    advantages = np.empty(len(order))
    advantages[order] = result[:, 0].numpy()
    return advantages


def run_hgpo(
    function: Callable[..., Any], batch: StepBatch, params: Mapping[str, Any]
) -> np.ndarray:
    """verl-agent's ``hgpo_advantage_estimate`` on ``batch`` with our parameter names."""
    import torch

    inputs = _inputs(batch, params.get("gamma", 0.95), params.get("invalid_penalty", 0.0))
    order = inputs.pop("order")
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # its torch.tensor(list) of scores, too
    try:
        result = function(
            inputs["token_level_rewards"],
            inputs["step_rewards"],
            inputs["response_mask"],
            inputs["anchor_obs"],
            inputs["index"],
            inputs["traj_index"],
            params.get("history_length", 2),
            epsilon=1e-6,
            mode=MODES[params.get("norm", "mean_std")],
            length_weight_alpha=params.get("alpha", 1.0),
            base_group=params.get("base_group", False),
        )
    finally:
        torch.set_default_dtype(default_dtype)
    return _in_row_order(result, order)


def run_gigpo(
    function: Callable[..., Any], batch: StepBatch, params: Mapping[str, Any]
) -> np.ndarray:
    """verl-agent's ``compute_gigpo_outcome_advantage`` (every row of a group counted, as its
    default and our ``episode_stats="rows"``) on ``batch``; returns its first output."""
    import torch

    inputs = _inputs(batch, params.get("gamma", 0.95), params.get("invalid_penalty", 0.0))
    order = inputs.pop("order")
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        result, _ = function(
            inputs["token_level_rewards"],
            inputs["step_rewards"],
            inputs["response_mask"],
            inputs["anchor_obs"],
            inputs["index"],
            inputs["traj_index"],
            epsilon=1e-6,
            step_advantage_w=params.get("omega", 1.0),
            mode=MODES[params.get("norm", "mean_std")],
        )
    finally:
        torch.set_default_dtype(default_dtype)
    return _in_row_order(result, order)


# Our estimator name -> (file, function, adapter): the peers ``bench estimators`` times.
PEERS: dict[str, tuple[str, str, Callable[..., np.ndarray]]] = {
    "gigpo": (GIGPO_FILE, "compute_gigpo_outcome_advantage", run_gigpo),
    "hgpo": (HGPO_FILE, "hgpo_advantage_estimate", run_hgpo),
}


def peer_estimator(name: str, root: Path) -> Callable[[StepBatch], np.ndarray]:
    """verl-agent's function for our estimator ``name`` at its defaults, as batch -> advantages."""
    relative, function_name, adapter = PEERS[name]
    function = load_function(root, relative, function_name)
    return lambda batch: adapter(function, batch, {})

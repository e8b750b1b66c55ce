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


def _call(
    function: Callable[..., Any],
    batch: StepBatch,
    params: Mapping[str, Any],
    *args: Any,
    **kwargs: Any,
) -> np.ndarray:
    """``function(inputs..., *args, **kwargs)`` on ``batch`` under torch's float64 default (its
    ``torch.tensor(list)`` of scores too); its advantages (the first output, when it returns
    two) in the batch's row order.

    The inputs are every verl-agent estimator's: the episode score on the last response token,
    the step return, the response mask, and the anchor observation, group and trajectory ids, in
    step-major row order.
    """
    import torch

    gamma, penalty = params.get("gamma", 0.95), params.get("invalid_penalty", 0.0)
    order = np.lexsort((batch.traj_codes, batch.t))
    token_rewards = np.zeros((len(batch), RESPONSE_TOKENS))
    token_rewards[:, -1] = episode_scores(batch, penalty)[order]
    inputs = (
        torch.tensor(token_rewards, dtype=torch.float64),
        torch.tensor(step_returns(batch, gamma, penalty)[order], dtype=torch.float64),
        torch.ones((len(batch), RESPONSE_TOKENS), dtype=torch.float64),
        np.asarray(batch.obs_key[order], dtype=object),
        np.asarray(batch.group[order], dtype=object),
        np.asarray(batch.traj[order], dtype=object),
    )
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        result = function(*inputs, *args, **kwargs)
    finally:
        torch.set_default_dtype(default_dtype)
    if isinstance(result, tuple):  # (advantages, returns)
        result = result[0]
    advantages = np.empty(len(order))
    advantages[order] = result[:, 0].numpy()
    return advantages


def run_hgpo(
    function: Callable[..., Any], batch: StepBatch, params: Mapping[str, Any]
) -> np.ndarray:
    """verl-agent's ``hgpo_advantage_estimate`` on ``batch`` with our parameter names."""
    return _call(
        function,
        batch,
        params,
        params.get("history_length", 2),
        epsilon=1e-6,
        mode=MODES[params.get("norm", "mean_std")],
        length_weight_alpha=params.get("alpha", 1.0),
        base_group=params.get("base_group", False),
    )


def run_gigpo(
    function: Callable[..., Any], batch: StepBatch, params: Mapping[str, Any]
) -> np.ndarray:
    """verl-agent's ``compute_gigpo_outcome_advantage`` (every row of a group counted, as its
    default and our ``episode_stats="rows"``) on ``batch``."""
    return _call(
        function,
        batch,
        params,
        epsilon=1e-6,
        step_advantage_w=params.get("omega", 1.0),
        mode=MODES[params.get("norm", "mean_std")],
    )


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

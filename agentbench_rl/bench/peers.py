"""The authors' own estimator functions, read from a verl-agent checkout when one is named.

Nothing here is vendored: the functions are compiled from the files of the checkout that
``AGENTBENCH_VERL_AGENT`` names: upstream verl-agent's ``gigpo/core_gigpo.py``, the
``recipe/hgpo/core_hgpo.py`` of HGPO's authors, the ``recipe/GraphGPO/core_graph.py`` of
GraphGPO's and the ``g2po/core_g2po.py`` of G2PO's (checked at xlan156/verl-agent 8ca3a46 for the
first two, zzj1111/alfworldauto 37aec78, which carries upstream's ``recipe/GraphGPO`` of PR #256,
for the third and Nala-YN/G2PO b8ffaf5 for the fourth; :data:`CHECKED_AT`). They compute in
float32; their ``torch.float32`` and ``np.float32`` are rewritten to float64 in memory, so they
and ours can agree to 1e-8. Their ``from verl
import DataProto`` (a type annotation only) and GraphGPO's plotting imports are given stand-in
modules, GraphGPO's ``from gigpo.core_gigpo import ...`` the same float64 compile of the
checkout's file, and their per-batch ``print`` is silenced. Used by
``tests/estimators/test_peer_estimators.py`` (parity) and ``bench estimators`` (their speed
beside ours).

The adapters hand a ``StepBatch`` over the way verl-agent's trainer does: rows in step-major order
(every trajectory's step t before any step t + 1, as its rollout loop stacks them) for GiGPO and
HGPO, trajectory-major for GraphGPO (its rollout loop appends each trajectory whole, and its
graph reads a trajectory's rows in that order), the step return and the episode score as
tensors; they return advantages in the batch's row order.
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
GRAPHGPO_FILE = "recipe/GraphGPO/core_graph.py"
G2PO_FILE = "g2po/core_g2po.py"
#: Where the peer files were read when the parity tests were last run, and at which commit.
CHECKED_AT = {
    GIGPO_FILE: "xlan156/verl-agent@8ca3a46",
    HGPO_FILE: "xlan156/verl-agent@8ca3a46",
    GRAPHGPO_FILE: "zzj1111/alfworldauto@37aec78 (recipe/GraphGPO of verl-agent PR #256)",
    G2PO_FILE: "Nala-YN/G2PO@b8ffaf5",
}
#: Modules the peer files import that the functions used here never touch (plotting).
STAND_INS = (
    "verl",
    "networkx",
    "matplotlib",
    "matplotlib.pyplot",
    "matplotlib.patches",
    "matplotlib.cm",
    "matplotlib.colors",
)
#: Our parameters that compute as the code computes, rounding included (``lone_row="score"``:
#: the code's value for a task group of one row, its float sums where a set of equal values
#: gives exactly 0 at our defaults), and how close the two must then be (in float64).
PARITY_PARAMS = {"lone_row": "score"}
PARITY_TOLERANCE = 1e-8
RESPONSE_TOKENS = 3  # tokens per row; the episode score sits on the last, as verl-agent does
MODES = {"mean_std": "mean_std_norm", "mean": "mean_norm"}


def peer_root() -> Path | None:
    """The verl-agent checkout ``AGENTBENCH_VERL_AGENT`` names, or ``None`` when unset."""
    root = os.environ.get(ROOT_VARIABLE)
    return Path(root) if root else None


def _placeholder(attribute: str) -> Any:
    """What a stand-in module gives for a name its importer takes (never a dunder: ``inspect``
    walks ``sys.modules`` asking for ``__file__``)."""
    if attribute.startswith("__"):
        raise AttributeError(attribute)
    return object


def load_module(root: Path, relative: str) -> types.ModuleType:
    """The module ``root / relative``, compiled with float64 in place of float32, its plotting
    and ``verl`` imports stood in for and its ``from gigpo.core_gigpo import`` served by
    the same compile of the checkout's ``gigpo/core_gigpo.py``.

    Raises ``FileNotFoundError`` naming the file when the checkout lacks it.
    """
    path = root / relative
    if not path.is_file():
        raise FileNotFoundError(f"{ROOT_VARIABLE}={root}: no {relative} there")
    source = path.read_text().replace("torch.float32", "torch.float64")
    source = source.replace("np.float32", "np.float64")
    stand_ins: dict[str, types.ModuleType] = {}
    import torch  # noqa: F401  # first, so its own imports never meet the stand-ins

    for name in STAND_INS:  # any name asked of them is a placeholder (PEP 562)
        stand_ins[name] = types.ModuleType(name)
        stand_ins[name].__getattr__ = _placeholder  # type: ignore[method-assign]
    if relative != GIGPO_FILE and "gigpo.core_gigpo" in source:
        stand_ins["gigpo"] = types.ModuleType("gigpo")
        stand_ins["gigpo.core_gigpo"] = load_module(root, GIGPO_FILE)
    saved = {name: sys.modules.get(name) for name in stand_ins}
    sys.modules.update(stand_ins)
    module = types.ModuleType(f"verl_agent_{path.stem}")
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)
    finally:
        for name, previous in saved.items():
            if previous is None:
                del sys.modules[name]
            else:
                sys.modules[name] = previous
    module.print = lambda *args, **kwargs: None  # type: ignore[attr-defined]  # per batch
    return module


def load_function(root: Path, relative: str, name: str) -> Callable[..., Any]:
    """Function ``name`` of ``root / relative`` (:func:`load_module`)."""
    function: Callable[..., Any] = getattr(load_module(root, relative), name)
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


#: The node a successful trajectory's last step leads to in GraphGPO's rollout loop.
SUCCESS_NODE = "success"


def run_graphgpo(module: Any, batch: StepBatch, params: Mapping[str, Any]) -> np.ndarray:
    """GraphGPO's recipe on ``batch``: its rollout loop's ``next_obs`` (the step's next
    observation, ``'success'`` after the last step of a trajectory of positive return, and, for
    a batch without ``next_obs_key``, a failed trajectory's own end), then
    ``ComplexGraph.from_data``, ``all_to_target_shortest_paths``,
    ``compute_graph_path_returns`` and ``compute_graphgpo_outcome_advantage``."""
    import torch

    from agentbench_rl.estimators.common import trajectory_returns

    order = batch.traj_order  # trajectory-major, each in time order
    following = batch.next_row
    last = following < 0
    episode_rewards = trajectory_returns(batch)[batch.traj_codes]
    if batch.next_obs_key is not None:
        after = np.asarray(batch.next_obs_key, dtype=object).copy()
    else:
        after = np.asarray(batch.obs_key[np.where(last, 0, following)], dtype=object).copy()
        for row in np.flatnonzero(last):
            after[row] = ("end", batch.traj[row])
    after[last & (episode_rewards > 0)] = SUCCESS_NODE
    n = len(batch)
    data = types.SimpleNamespace(
        non_tensor_batch={
            "uid": np.asarray(batch.group[order], dtype=object),
            "traj_uid": np.asarray(batch.traj[order], dtype=object),
            "anchor_obs": np.asarray(batch.obs_key[order], dtype=object),
            "next_obs": after[order],
            "text_actions": np.asarray(batch.action_key[order], dtype=object),
            "episode_rewards": episode_rewards[order],
            "rewards": batch.reward[order],
            "active_masks": np.ones(n),
            "is_action_valid": batch.valid[order],
        },
        batch={"input_ids": torch.zeros((n, 1))},
    )
    graphs = module.ComplexGraph.from_data(data, enable_similarity=False)
    module.ComplexGraph.Calculate_all_shortest_path(graphs)
    step_rewards = module.compute_graph_path_returns(
        data, graphs, params.get("gamma", 0.1), params.get("normalize_distance", False)
    )
    penalty = params.get("invalid_penalty", 0.0)
    token_rewards = np.zeros((n, RESPONSE_TOKENS))
    token_rewards[:, -1] = episode_scores(batch, penalty)[order]
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        result, _ = module.compute_graphgpo_outcome_advantage(
            torch.tensor(token_rewards, dtype=torch.float64),
            step_rewards.to(torch.float64),
            torch.ones((n, RESPONSE_TOKENS), dtype=torch.float64),
            data.non_tensor_batch["anchor_obs"],
            data.non_tensor_batch["uid"],
            data.non_tensor_batch["traj_uid"],
            epsilon=1e-6,
            step_advantage_w=params.get("step_weight", 1.0),
            episode_advantage_w=params.get("episode_weight", 1.0),
            mode=MODES[params.get("norm", "mean_std")],
        )
    finally:
        torch.set_default_dtype(default_dtype)
    advantages = np.empty(n)
    advantages[order] = result[:, 0].numpy()
    return advantages


def run_g2po(module: Any, batch: StepBatch, params: Mapping[str, Any]) -> np.ndarray:
    """G2PO's trainer steps on ``batch``: ``compute_group_aggregation_values`` (the anchor
    values and each row's next anchor, from the rows in step-major order, as verl-agent stacks
    them), then ``compute_g2po_outcome_advantage`` (its invalid-action penalty is its own 0.1;
    ours must be 0.1 for the two to agree where a row is invalid)."""
    import torch

    from agentbench_rl.estimators.common import trajectory_returns

    order = np.lexsort((batch.traj_codes, batch.t))
    n = len(batch)
    data = types.SimpleNamespace(
        non_tensor_batch={
            "uid": np.asarray(batch.group[order], dtype=object),
            "traj_uid": np.asarray(batch.traj[order], dtype=object),
            "anchor_obs": np.asarray(batch.obs_key[order], dtype=object),
            "episode_rewards": trajectory_returns(batch)[batch.traj_codes][order],
        },
        batch={"responses": torch.zeros((n, 1))},
    )
    step_rewards, group_idx, next_group_idx = module.compute_group_aggregation_values(data)
    penalty = params.get("invalid_penalty", 0.1)
    token_rewards = np.zeros((n, RESPONSE_TOKENS))
    token_rewards[:, -1] = episode_scores(batch, penalty)[order]
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        result, _ = module.compute_g2po_outcome_advantage(
            torch.tensor(token_rewards, dtype=torch.float64),
            step_rewards,
            torch.ones((n, RESPONSE_TOKENS), dtype=torch.float64),
            data.non_tensor_batch["uid"],
            data.non_tensor_batch["traj_uid"],
            group_idx,
            next_group_idx,
            batch.valid[order].astype(np.int64),
            epsilon=1e-6,
            step_advantage_w=params.get("step_weight", 1.0),
            mode=MODES[params.get("norm", "mean_std")],
        )
    finally:
        torch.set_default_dtype(default_dtype)
    advantages = np.empty(n)
    advantages[order] = result[:, 0].numpy()
    return advantages


# Our estimator name -> (file, function or None for the module, adapter): the peers
# ``bench estimators`` times.
PEERS: dict[str, tuple[str, str | None, Callable[..., np.ndarray]]] = {
    "gigpo": (GIGPO_FILE, "compute_gigpo_outcome_advantage", run_gigpo),
    "hgpo": (HGPO_FILE, "hgpo_advantage_estimate", run_hgpo),
    "graphgpo": (GRAPHGPO_FILE, None, run_graphgpo),
    "g2po": (G2PO_FILE, None, run_g2po),
}


def peer_estimator(name: str, root: Path) -> Callable[[StepBatch], np.ndarray]:
    """verl-agent's function for our estimator ``name`` at its defaults, as batch -> advantages."""
    relative, function_name, adapter = PEERS[name]
    module = load_module(root, relative)
    target = module if function_name is None else getattr(module, function_name)
    return lambda batch: adapter(target, batch, {})

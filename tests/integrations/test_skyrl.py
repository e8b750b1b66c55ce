"""Our estimators in SkyRL (issue 60): registered in ``skyrl-train``'s own advantage registry
and called through its own dispatch, ``ppo_utils.compute_advantages_and_returns``, they give our
``compute``'s values on every response token.

skyrl-train 0.3.1 needs Python 3.12; ``.ci/trainers`` makes its environment (the package without
its GPU dependencies: the registry and the dispatch are plain Python)."""

from __future__ import annotations

import numpy as np
import pytest

skyrl = pytest.importorskip(
    "skyrl_train.utils.ppo_utils", reason="needs skyrl-train (Python 3.12; .ci/trainers)"
)
torch = pytest.importorskip("torch")

from omegaconf import OmegaConf  # noqa: E402

from agentbench_rl.estimators import NAMES, compute  # noqa: E402
from agentbench_rl.integrations.skyrl import register  # noqa: E402
from agentbench_rl.integrations.token_rows import step_batch_of  # noqa: E402

GAMMA = 0.95


def step_rows(seed: int = 0) -> dict[str, object]:
    """Two task groups x 4 trajectories of 1-4 env steps, one row per step in step-major order
    (verl-agent's and our adapters' row shape), with 3 response tokens a row."""
    rng = np.random.default_rng(seed)
    trajectories = []
    for group in range(2):
        for member in range(4):
            steps = int(rng.integers(1, 5))
            won = bool(rng.random() < 0.5)
            states = [f"s{int(rng.integers(0, 3))}" for _ in range(steps)]
            rewards = [0.0] * (steps - 1) + [10.0 if won else 0.0]
            trajectories.append((f"g{group}", f"g{group}-{member}", states, rewards))
    rows = []
    for t in range(4):  # step-major
        for group, traj, states, rewards in trajectories:
            if t < len(states):
                ret = sum(r * GAMMA**k for k, r in enumerate(rewards[t:]))
                rows.append((group, traj, states[t], sum(rewards), ret, f"a{t}"))
    scores = torch.tensor([[0.0, 0.0, row[3]] for row in rows])
    return {
        "token_level_rewards": scores,
        "response_mask": torch.ones(len(rows), 3),
        "index": np.array([row[0] for row in rows]),
        "traj_index": np.array([row[1] for row in rows]),
        "anchor_obs": np.array([row[2] for row in rows]),
        "step_rewards": torch.tensor([row[4] for row in rows]),
        "actions": np.array([row[5] for row in rows]),
        "hidden": torch.tensor(rng.normal(size=(len(rows), 8)), dtype=torch.float32),
    }


@pytest.mark.parametrize("name", NAMES)
def test_skyrls_own_dispatch_gives_our_values_on_every_token(name: str) -> None:
    assert f"agentbench_{name}" in register()
    rows = step_rows()
    config = OmegaConf.create({"agentbench": {"gamma": GAMMA}})
    advantages, returns = skyrl.compute_advantages_and_returns(
        adv_estimator=f"agentbench_{name}",
        config=config,
        values=None,
        gamma=1.0,  # SkyRL's GAE's, not read
        lambd=1.0,
        **rows,
    )
    batch = step_batch_of(
        rows["token_level_rewards"],
        rows["step_rewards"],
        rows["anchor_obs"],
        rows["index"],
        rows["traj_index"],
        gamma=GAMMA,
        actions=rows["actions"],
        hidden=rows["hidden"],
    )
    ours = compute(name, batch, gamma=GAMMA) if "gamma" in _params(name) else compute(name, batch)
    expected = np.repeat(np.asarray(ours.advantages)[:, None], 3, axis=1)
    assert advantages.shape == (len(batch), 3) and torch.equal(advantages, returns)
    np.testing.assert_allclose(advantages.numpy(), expected, rtol=1e-6, atol=1e-6)


def test_without_step_keys_each_response_is_one_step_on_its_prompt() -> None:
    register(["gigpo", "grpo"])
    scores = torch.tensor([[0.0, 1.0], [0.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    index = np.array(["p", "p", "p", "q"])
    found = {
        name: skyrl.compute_advantages_and_returns(
            scores, mask, index, name, OmegaConf.create({}), values=None
        )[0]
        for name in ("agentbench_gigpo", "agentbench_grpo", "grpo")
    }
    # by hand: group p's scores 1, 0, 1 about their mean 2/3, over their std (ddof 1) 0.577;
    # the lone row of q gets 0; the mask holds
    expected = torch.tensor([1 / 3, -2 / 3, 1 / 3, 0.0]) / np.std([1, 0, 1], ddof=1)
    torch.testing.assert_close(found["agentbench_grpo"][:, 0], expected, atol=1e-4, rtol=0)
    assert found["agentbench_grpo"][2, 1] == 0.0
    # SkyRL's own GRPO gives the same here (a check of the reading, not of our code)
    torch.testing.assert_close(found["grpo"], found["agentbench_grpo"], atol=1e-4, rtol=0)
    # one step per trajectory on the prompt's anchor: GiGPO's step term repeats its episode term
    torch.testing.assert_close(found["agentbench_gigpo"], 2 * found["agentbench_grpo"])


def _params(name: str) -> dict[str, object]:
    from agentbench_rl.estimators import resolve

    return dict(resolve(name).defaults)

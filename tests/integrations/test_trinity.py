"""Our estimators as Trinity-RFT advantage functions (issue 60): filed in ``trinity-rft``'s own
``ADVANTAGE_FN`` registry and called on Trinity ``Experience`` objects, they give our
``compute``'s values on each experience's action tokens; our GiGPO, set as Trinity's GiGPO is
(γ = 1, mean-only norm), gives what Trinity's own GiGPO gives.

Runs where trinity-rft imports (``.ci/trainers``'s environment installs it without its GPU
dependencies)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("trinity.algorithm.advantage_fn", reason="needs trinity-rft (.ci/trainers)")
torch = pytest.importorskip("torch")

from trinity.algorithm.advantage_fn import ADVANTAGE_FN  # noqa: E402
from trinity.common.experience import EID, Experience  # noqa: E402

from agentbench_rl.core.batch import StepBatch  # noqa: E402
from agentbench_rl.estimators import NAMES, compute  # noqa: E402
from agentbench_rl.integrations.trinity import register  # noqa: E402

# (task, run, states visited, won): two tasks of three runs; state "s1" recurs across runs
RUNS = [
    (0, 0, ["s0", "s1", "s2"], True),
    (0, 1, ["s0", "s1"], False),
    (0, 2, ["s0", "s3", "s1", "s2"], True),
    (1, 0, ["t0"], True),
    (1, 1, ["t0", "t1"], False),
    (1, 2, ["t0", "t1", "t2"], True),
]


def experiences(step_rewards: bool) -> list[Experience]:
    """One experience per step, in an order that is not step-major (Trinity's is arbitrary)."""
    out = []
    for task, run, states, won in RUNS:
        for step, state in enumerate(states):
            last = step == len(states) - 1
            info = {"env_state_hash": state, "action": f"go{step}"}
            if step_rewards:
                info["step_reward"] = 1.0 if (last and won) else -0.1
            out.append(
                Experience(
                    eid=EID(batch=0, task=task, run=run, step=step),
                    tokens=[1, 2, 3, 4],
                    prompt_length=2,
                    action_mask=[True, True],
                    reward=1.0 if won else 0.0,
                    info=info,
                )
            )
    return out[::-1]


def expected_batch(exps: list[Experience], gamma: float, step_rewards: bool) -> StepBatch:
    """The batch by hand: the rows, their rewards, their next states."""
    records = []
    for exp in exps:
        task, run, step = exp.eid.task, exp.eid.run, exp.eid.step
        states, won = next((s, w) for t, r, s, w in RUNS if (t, r) == (task, run))
        last = step == len(states) - 1
        if step_rewards:
            reward = 1.0 if (last and won) else -0.1
        else:
            reward = (1.0 if won else 0.0) if last else 0.0
        total = sum(1.0 if (i == len(states) - 1 and won) else -0.1 for i in range(len(states)))
        success = (total if step_rewards else float(won)) > 0
        following = states[step + 1] if not last else ("success" if success else None)
        records.append(
            {"group": f"0/{task}", "traj": f"0/{task}\0000/{task}/{run}", "t": step,
             "reward": reward, "obs_key": states[step], "state_key": states[step],
             "action_key": f"go{step}", "valid": True, "success": success,
             "next_obs_key": following or f"end\0000/{task}\0000/{task}/{run}"}
        )  # fmt: skip
    return StepBatch.from_records(records)


@pytest.mark.parametrize("name", NAMES)
def test_trinitys_registry_gives_our_values_on_the_action_tokens(name: str) -> None:
    assert f"agentbench_{name}" in register()
    if name == "bipace":  # it needs hidden states, which Trinity's experiences do not carry
        pytest.skip("BiPACE needs hidden states")
    exps = experiences(step_rewards=True)
    params = {"gamma": 0.9} if "gamma" in _defaults(name) else {}
    function = ADVANTAGE_FN.get(f"agentbench_{name}")(**params)
    done, metrics = function(exps)
    assert done is exps and f"agentbench_{name}/dose" in metrics
    batch = expected_batch(exps, 0.9, step_rewards=True)
    ours = compute(name, batch, **params).advantages
    got = np.array([float(exp.advantages[0]) for exp in exps])
    np.testing.assert_allclose(got, ours, rtol=1e-6, atol=1e-6)
    assert all(torch.equal(exp.advantages, exp.returns) for exp in exps)


def test_our_gigpo_set_as_trinitys_gives_trinitys_gigpo() -> None:
    """Trinity's GiGPO takes the episode term's mean over a task's trajectories (one vote each)
    and divides by 1 + ε; verl-agent's, our default, over its rows. Set so, they agree."""
    register(["gigpo"])
    ours = experiences(step_rewards=False)
    theirs = experiences(step_rewards=False)
    as_trinity = {"gamma": 1.0, "norm": "mean", "episode_stats": "trajectories"}
    ADVANTAGE_FN.get("agentbench_gigpo")(**as_trinity)(ours)
    ADVANTAGE_FN.get("gigpo")(gamma=1.0, fnorm="none")(theirs)
    np.testing.assert_allclose(  # to Trinity's ε = 1e-6 in its divisor
        [float(e.advantages[0]) for e in ours],
        [float(e.advantages[0]) for e in theirs],
        atol=1e-5,
    )


def _defaults(name: str) -> dict[str, object]:
    from agentbench_rl.estimators import resolve

    return dict(resolve(name).defaults)

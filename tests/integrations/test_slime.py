"""slime's custom advantage function (issue 60): on a ``rollout_data`` of slime's documented keys
(``response_lengths``, ``kl``; it writes ``advantages`` and ``returns``, one tensor per sample),
every estimator gives each response token its step's advantage from our ``compute``; the path
slime loads names every registered estimator."""

from __future__ import annotations

import importlib
import random
from typing import Any

import numpy as np
import pytest
import torch
from test_verl_parts import SUPPORTED, verl_rows

from agentbench_rl.estimators import REGISTRY, EstimatorSpec, StepBatch, available, compute
from agentbench_rl.integrations.slime import STEPS_KEY, advantages


def slime_samples(seed: int) -> list[dict[str, Any]]:
    """verl's test rows (two Sokoban groups of four random members) as slime samples: the step
    record with its group and member."""
    return [
        {**row["record"], "group": row["uid"], "member": row["session"]} for row in verl_rows(seed)
    ]


@pytest.mark.parametrize("name", SUPPORTED)
def test_every_token_gets_its_steps_advantage_from_compute(name: str) -> None:
    samples = slime_samples(seed=2)
    random.Random(0).shuffle(samples)  # slime's order is its own
    reference = StepBatch.from_records(
        [
            {**{k: v for k, v in s.items() if k not in ("member", "success", "steps")}}
            | {"traj": f"{s['group']}/{s['member']}"}
            for s in samples
        ]
    )
    params = {"invalid_penalty": 0.1} if "invalid_penalty" in REGISTRY[name].defaults else {}
    expected = compute(name, reference, **params).advantages
    lengths = [1 + index % 4 for index in range(len(samples))]
    data: dict[str, Any] = {
        "response_lengths": lengths,
        "kl": [torch.zeros(length) for length in lengths],
        STEPS_KEY: samples,
    }
    advantages(None, data, estimator=EstimatorSpec(name, params), reward="env")
    assert [len(tensor) for tensor in data["advantages"]] == lengths
    for tensor, value in zip(data["advantages"], expected, strict=True):
        assert tensor.dtype == torch.float32
        np.testing.assert_allclose(tensor.numpy(), value, rtol=1e-6, atol=1e-6)
    assert all(
        torch.equal(a, r) and a is not r
        for a, r in zip(data["advantages"], data["returns"], strict=True)
    )


def test_the_path_slime_loads_names_every_estimator() -> None:
    module = importlib.import_module("agentbench_rl.integrations.slime")
    for name in available():
        assert callable(getattr(module, name))
    with pytest.raises(AttributeError):
        module.no_such_estimator  # noqa: B018


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        (None, "'agentbench_steps' must hold one step record per sample"),
        ([{"group": "g", "member": 0}], "one step record per sample \\(2 samples, 1 records\\)"),
        ([{"group": "g"}, {"group": "g", "member": 1}], "sample 0's step record needs"),
    ],
)
def test_a_sample_without_its_step_record_is_one_line(steps: Any, message: str) -> None:
    data = {"response_lengths": [1, 1], STEPS_KEY: steps}
    with pytest.raises(ValueError, match=message):
        advantages(None, data, estimator=EstimatorSpec("grpo"))

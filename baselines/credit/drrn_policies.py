"""The DRRN policies behind the credit sets of the DRRN campaigns (docs/benchmarks.md, "Learning
on the real envs"): for each env, GRPO seed 0 of its campaign at the start (iteration 0) and at
mid-training, saved as policy folders that ``hf:`` agents load.

    python baselines/credit/drrn_policies.py textcraft sokoban alfworld

writes ``baselines/credit/models/drrn-<env>-start`` and ``drrn-<env>-mid``, each with its start
record (the weights' fingerprint and the machine that made them), and they ship: a DRRN stores
its embedding tables as the rows moved from its seeded init, so the start takes 0.1 MB and the
mid-training policy about 1 MB. The start is the campaign's random init (seed 0); the
mid-training policy is the campaign's GRPO seed 0 at the iteration named in :data:`MIDDLE`,
which the campaign's own run passes through bit for bit on the CPU that trained it and
statistically elsewhere (training's float reductions follow the CPU), so the shipped weights,
not this script, are what the credit sets' journals resume with. ALFWorld needs
``ALFWORLD_DATA``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from agentbench_rl.harness.provenance import machine
from agentbench_rl.spec.run_folder import POLICY, record_start
from agentbench_rl.train.config import TrainConfig, load_config
from agentbench_rl.train.ppo import initial_policy, train

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "baselines" / "credit" / "models"
#: The iteration of each campaign's mid-training policy: half its budget.
MIDDLE = {"textcraft": 75, "sokoban": 125, "alfworld": 50}


def campaign_config(env: str, iterations: int | None = None) -> TrainConfig:
    """GRPO seed 0 of the env's campaign (``iterations``: cut there)."""
    overrides = ["estimator=grpo", "seed=0"]
    if iterations is not None:
        overrides.append(f"iterations={iterations}")
    return load_config(ROOT / "baselines" / f"drrn-{env}-campaign.yaml", overrides)


def save_policies(env: str) -> None:
    """Write the env's start and mid-training policies (module docstring)."""
    config = campaign_config(env)
    config.use_torch_threads()
    policy, _ = initial_policy(config, "cpu", None)
    start = MODELS / f"drrn-{env}-start"
    policy.save(start)
    record_start(start, machine(config.torch_threads))
    with tempfile.TemporaryDirectory() as scratch:
        run = Path(scratch) / "run"
        train(campaign_config(env, MIDDLE[env]), run)
        target = MODELS / f"drrn-{env}-mid"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(run / "checkpoint" / POLICY, target)
    record_start(target, machine(config.torch_threads))
    print(f"{env}: {start} and {target}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("envs", nargs="+", choices=sorted(MIDDLE))
    for name in parser.parse_args().envs:
        save_policies(name)

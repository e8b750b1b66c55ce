"""Training: PPO-clip with any advantage estimator (``ppo.py``), behaviour cloning (``bc.py``),
checkpoints (``checkpoint.py``) and sweeps (``sweep.py``); vLLM rollouts come from
:mod:`agentbench_rl.models.vllm_engine`.
The policy, its batched forward and the tiny CPU model live one layer down, in
:mod:`agentbench_rl.models`; episodes are played by :mod:`agentbench_rl.rollout.episode`.

Everything here needs the ``train`` extra (torch, transformers, tokenizers, pyyaml), imported
when used, so the core package installs and imports without it.
"""

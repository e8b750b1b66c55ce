"""Training at scale on verl (``agentbench-rl train --engine verl``; the ``verl`` extra).

- ``agent_loop.py``: verl agent loop; one group member plays one episode, one sample per step;
- ``advantages.py``: verl rows -> ``StepBatch`` -> ``estimators.compute`` (no verl import);
- ``trainer.py``: verl's v1 sync trainer with that advantage step;
- ``config.py``: our config -> verl's Hydra config, checked by verl's ``validate_config``;
- ``data.py``: ``agentbench-rl verl-data``, a split's tasks as verl's parquet dataset;
- ``launcher.py``: the run folder, verl's ``run_ppo``, checkpoints -> Hugging Face folders.

The home trainer (``agentbench_rl.train``) stays the reference for CPU runs and exact resume.
"""

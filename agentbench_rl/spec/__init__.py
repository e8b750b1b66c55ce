"""The typed declaration of a run, one layer above :mod:`agentbench_rl.core`: the folder a
training run lives in (:class:`~agentbench_rl.spec.run_folder.RunFolder`), its layout, lock,
metrics journal and finish record, spelled once for the trainer, sweeps, the verl launcher and
the leaderboard's ``file-runs``."""

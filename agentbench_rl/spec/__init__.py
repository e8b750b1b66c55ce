"""The declaration of a run's folders, one layer above :mod:`agentbench_rl.core`: the folder a
training run lives in (:class:`~agentbench_rl.spec.run_folder.RunFolder`: layout, lock, metrics
journal, checkpoint record, finish) and the folder of an evaluation
(:class:`~agentbench_rl.spec.results_folder.ResultsFolder`: layout and lock), each spelled once
for every module that writes or reads it."""

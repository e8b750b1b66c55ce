"""The credit benchmark: frozen rollout batches with their true advantages (``sets.py``: the
format, and the exact sets of the learning testbed's MDPs; ``bench fidelity --export-set``
writes the Monte-Carlo ones), any estimator scored on them in seconds (``score.py``, run by
``bench.py``) and the estimators' board (``board.py``)."""

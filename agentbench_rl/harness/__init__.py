"""The seeded evaluation: ``EvalConfig`` and ``RunOptions`` (``harness/config.py``),
``evaluate`` (``harness/evaluate.py``), statistics, provenance and the figures of the results
files."""

"""The bottom layer: stable hashes, ``StepBatch`` and ``StepRecord``, the step graph, atomic
files, the folder lock, strict JSON, printable text, plugin lookup and the package version (see
CONTRIBUTING.md, "How the pieces depend on each other")."""

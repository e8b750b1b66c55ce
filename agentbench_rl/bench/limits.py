"""The largest runs the truth and credit-set commands take, in a module of its own so that the
command line checks its flags against them before importing the work.

Beyond them a batch's arrays and its journal outgrow a machine's memory before any work is
done (``bench fidelity --tasks 10**9`` raised ``MemoryError``); a run that needs more is
several runs.
"""

from __future__ import annotations

#: Tasks of a batch, trajectories per task, continuations per visited prefix, episodes stepped
#: at once.
TRUTH_LIMITS = {"tasks": 1024, "group_size": 256, "continuations": 4096, "parallel": 4096}

"""``--limit N``: a seeded sample of N tasks, stratified by category, not the first N.

Splits are sorted lists, and sorted lists are not random: TextCraft's first 20 test tasks are
all depth 1 (100% for the expert-free agents that fail deeper ones), ALFWorld's first 10 are all
one task type. A quick look must look like the split, so the sample takes from each category in
proportion to its size (largest remainders break ties; every category with a share of at least
one task gets one), draws within a category with a fixed seed, and returns the tasks in split
order. The sample depends only on (env, split, N), never on the evaluation seeds, so runs with
different seeds compare on the same tasks.
"""

from __future__ import annotations

import math
import random

from agentbench_rl.core.hashing import seed_from

#: The sample is part of the evaluation's definition: fixed, not a user's seed.
SAMPLE_SEED = 0


def stratified_sample(categories: dict[str, str], limit: int, seed: int = SAMPLE_SEED) -> list[str]:
    """``limit`` tasks drawn in proportion to their categories' sizes, in the input order.

    Example:
        >>> tasks = {f"t{i}": ("a" if i < 8 else "b") for i in range(10)}
        >>> sample = stratified_sample(tasks, 5)
        >>> len(sample), sum(tasks[t] == "b" for t in sample)  # 5 * 2/10 = 1 task of b
        (5, 1)
    """
    order = list(categories)
    if limit >= len(order):
        return order
    groups: dict[str, list[str]] = {}
    for task in order:
        groups.setdefault(categories[task], []).append(task)
    shares = {name: limit * len(members) / len(order) for name, members in groups.items()}
    counts = {name: math.floor(share) for name, share in shares.items()}
    by_remainder = sorted(groups, key=lambda name: (-(shares[name] - counts[name]), name))
    for name in by_remainder[: limit - sum(counts.values())]:
        counts[name] += 1
    chosen: set[str] = set()
    for name in sorted(groups):
        rng = random.Random(seed_from(seed, name))
        chosen.update(rng.sample(groups[name], counts[name]))
    return [task for task in order if task in chosen]

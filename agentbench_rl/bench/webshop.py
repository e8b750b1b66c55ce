"""WebShop speed: searches per second, env steps per second, and search index build times.

Measured in one process (one core) on the 1k catalogue: searches are the 500 test instructions
against the BM25 index; steps are an agent that searches its goal's instruction and then clicks
uniformly among the clickables, timed inside ``env.step`` only. Index build times are for the 1k
catalogue and for 100,000 synthetic products whose texts match the 1k catalogue's length (about
125 words) over a Zipf-distributed vocabulary.
"""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from agentbench_rl.envs.webshop.search import SearchIndex, product_document

#: The project's WebShop targets (one core, 1k catalogue).
TARGETS = {"searches_per_s": 1_000.0, "steps_per_s": 2_000.0}
SYNTHETIC_PRODUCTS = 100_000
_VOCABULARY = 50_000
_MEAN_WORDS = 125


def synthetic_documents(count: int, seed: int = 0) -> list[tuple[str, str]]:
    """``count`` (asin, text) pairs of made-up products: pseudo-words drawn from a Zipf law.

    Example:
        >>> docs = synthetic_documents(3)
        >>> [asin for asin, _ in docs]
        ['S000000000', 'S000000001', 'S000000002']
    """
    rng = np.random.default_rng(seed)
    syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "ber", "don", "gel", "pra"]
    words = [
        "".join(rng.choice(syllables, size=int(rng.integers(1, 4)))) + str(index % 7)
        for index in range(_VOCABULARY)
    ]
    weights = 1.0 / np.arange(1, _VOCABULARY + 1) ** 1.1
    weights /= weights.sum()
    lengths = np.maximum(5, rng.geometric(1.0 / _MEAN_WORDS, size=count))
    picks = rng.choice(_VOCABULARY, size=int(lengths.sum()), p=weights)
    documents, start = [], 0
    for index, length in enumerate(lengths):
        text = " ".join(words[word] for word in picks[start : start + length])
        documents.append((f"S{index:09d}", text))
        start += length
    return documents


def time_searches(env: Any, seconds: float = 2.0) -> float:
    """Searches per second: the test instructions against the env's index."""
    queries = [goal.instruction_text.lower() for goal in env.world.goals[:500]]
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        for query in queries:
            env.world.index.search(query)
        done += len(queries)
    return done / (time.perf_counter() - started)


def time_steps(env: Any, steps: int = 20_000, seed: int = 0) -> float:
    """Env steps per second for an agent that searches its instruction, then clicks at random."""
    rng = random.Random(seed)
    tasks = env.split_task_ids()
    done, elapsed, episode = 0, 0.0, 0
    while done < steps:
        _, info = env.reset(options={"task_id": tasks[episode % len(tasks)]})
        episode += 1
        over = False
        while not over and done < steps:
            actions = info["admissible_actions"]
            if "search[...]" in actions:
                action = f"search[{env.goal.instruction_text.lower()}]"
            else:
                action = rng.choice(actions)
            tick = time.perf_counter()
            _, _, terminated, truncated, info = env.step(action)
            elapsed += time.perf_counter() - tick
            done += 1
            over = terminated or truncated
    return done / elapsed


def time_index_build(documents: list[tuple[str, str]]) -> float:
    """Seconds to build an in-memory BM25 index of ``documents``."""
    started = time.perf_counter()
    SearchIndex.build(documents)
    return time.perf_counter() - started


def report(console: Console) -> None:
    """Print the WebShop table (needs the ``webshop`` extra and ``$WEBSHOP_DATA``)."""
    from agentbench_rl.envs import make

    env: Any = make("webshop", split="test")
    real = [(product.asin, product_document(product)) for product in env.world.catalogue.products]
    rows = [
        ("searches/s (1k catalogue, test instructions)", time_searches(env), "searches_per_s"),
        ("env steps/s (search, then random clicks)", time_steps(env), "steps_per_s"),
    ]
    table = Table(title="WebShop (one process)")
    for column in ("measure", "value", "target"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    for label, value, key in rows:
        table.add_row(label, f"{value:,.0f}", f">= {TARGETS[key]:,.0f}")
    table.add_row(f"index build, {len(real):,} products", f"{time_index_build(real):.2f} s", "")
    synthetic = synthetic_documents(SYNTHETIC_PRODUCTS)
    table.add_row(
        f"index build, {SYNTHETIC_PRODUCTS:,} synthetic products",
        f"{time_index_build(synthetic):.1f} s",
        "",
    )
    console.print(table)

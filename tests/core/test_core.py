"""Core contracts: stable hashing, the action canonicaliser, the step graph."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from agentbench_rl.core.actions import canonicalize_action, extract_action, normalize_text
from agentbench_rl.core.batch import StepBatch
from agentbench_rl.core.graph import TERMINAL, StepGraph
from agentbench_rl.core.hashing import seed_from, stable_hash, tuple_hash


def test_stable_hash_is_blake2b_of_canonical_bytes() -> None:
    expected = hashlib.blake2b(b"go to desk 1", digest_size=16).hexdigest()
    assert stable_hash("go to desk 1") == expected
    assert stable_hash(b"\x00\xff") == hashlib.blake2b(b"\x00\xff", digest_size=16).hexdigest()
    # Dicts hash by content, not insertion order.
    assert stable_hash({"a": 1, "b": [2, 3]}) == stable_hash({"b": [2, 3], "a": 1})
    assert stable_hash({"a": 1}) == hashlib.blake2b(b'{"a":1}', digest_size=16).hexdigest()


def test_stable_hash_equal_across_processes_with_different_hash_seeds() -> None:
    code = (
        "from agentbench_rl.core.hashing import stable_hash, seed_from;"
        "print(stable_hash(['x', {'k': 1}]), seed_from(3, 'test-0001'))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": salt, "PATH": ""},
        ).stdout
        for salt in ("1", "2")
    }
    assert outputs == {f"{stable_hash(['x', {'k': 1}])} {seed_from(3, 'test-0001')}\n"}


def test_tuple_hash_cannot_be_fooled_by_separators() -> None:
    assert tuple_hash(("a|b", "c")) != tuple_hash(("a", "b|c"))
    assert tuple_hash(("a", "b")) == stable_hash(["a", "b"])


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("<think>push it</think><action> Move  UP </action>", "move up"),
        ("<action>left</action> then <action>Right</action>", "right"),  # the last block wins
        ("  Go   To\tDesk 1\n", "go to desk 1"),
        ("", ""),
        ("<ACTION>Down</ACTION>", "down"),
        ("<action>draft <action>Up</action>", "up"),  # the innermost opening tag counts
        ("<action>" * 50_000 + "left", "<action>" * 50_000 + "left"),  # no closing tag: all text
    ],
)
def test_canonicalize_action_extracts_lowercases_and_collapses(raw: str, expected: str) -> None:
    assert canonicalize_action(raw) == expected.lower()


def test_canonicalize_action_resolves_aliases_and_survives_junk() -> None:
    aliases = {"north": "up", "move up": "up"}
    assert canonicalize_action("<action>North</action>", aliases) == "up"
    assert canonicalize_action("MOVE  up", aliases) == "up"
    assert canonicalize_action(b"\xff\xfeleft", aliases) == "\ufffd\ufffdleft"
    assert extract_action("no tags").tagged is False
    assert normalize_text("A\u00a0B") == "a b"  # non-breaking space is whitespace too


def _record(traj: str, t: int, state: str, action: str, reward: float) -> dict[str, object]:
    return {
        "group": "g",
        "traj": traj,
        "t": t,
        "reward": reward,
        "obs_key": state,
        "state_key": state,
        "action_key": action,
        "valid": True,
    }


def test_step_graph_counts_visits_returns_and_successors_by_hand() -> None:
    # Two trajectories from state A:
    #   a: A -up-> B -left-> end, rewards 0, 1      returns-to-go (gamma 1): 1, 1
    #   b: A -up-> C -up-> end,   rewards 0, 0      returns-to-go: 0, 0
    batch = StepBatch.from_records(
        [
            _record("a", 0, "A", "up", 0.0),
            _record("a", 1, "B", "left", 1.0),
            _record("b", 0, "A", "up", 0.0),
            _record("b", 1, "C", "up", 0.0),
        ]
    )
    graph = StepGraph.from_batch(batch)["g"]
    assert graph.node_visits == {"A": 2, "B": 1, "C": 1}
    edge = graph.edges[("A", "up")]
    assert edge.visits == 2
    assert edge.mean_return == pytest.approx(0.5)  # (1 + 0) / 2
    assert edge.successors == {"B": 1, "C": 1}
    assert graph.edges[("B", "left")].successors == {TERMINAL: 1}
    summary = graph.summary()
    # 3 states, 3 edges (A-up, B-left, C-up), each state has one action; B and C seen once.
    assert summary == {
        "nodes": 3,
        "edges": 3,
        "branching_factor": 1.0,
        "singleton_state_share": pytest.approx(2 / 3),
    }
    payload = json.loads(graph.to_json())
    assert [node["state"] for node in payload["nodes"]] == ["A", "B", "C"]
    dot = graph.to_dot()
    assert dot.startswith("digraph step_graph {") and '"A" -> "B"' in dot
    assert 'label="up x1 R=0.50"' in dot


def test_step_graph_discounts_returns() -> None:
    batch = StepBatch.from_records(
        [_record("a", 0, "A", "up", 0.0), _record("a", 1, "B", "up", 1.0)]
    )
    graph = StepGraph.from_batch(batch, gamma=0.5)["g"]
    assert graph.edges[("A", "up")].mean_return == pytest.approx(0.5)  # 0 + 0.5 * 1

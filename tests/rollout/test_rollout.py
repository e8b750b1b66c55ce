"""Group rollouts: the PettingZoo group env and the rows it produces."""

from __future__ import annotations

import pytest
from pettingzoo.test import parallel_api_test

from agentbench_rl.agents.simple import ExpertAgent, RandomAgent
from agentbench_rl.envs.sokoban.levels import load_level
from agentbench_rl.envs.spec import EnvSpec
from agentbench_rl.rollout.group import GroupEnv, rollout_group


def test_group_env_passes_the_pettingzoo_parallel_api_test() -> None:
    parallel_api_test(GroupEnv(EnvSpec(name="sokoban", split="test"), group_size=3), num_cycles=40)
    visual = EnvSpec(name="visual_sokoban", split="val")
    parallel_api_test(GroupEnv(visual, group_size=2), num_cycles=20)


def test_every_member_gets_the_same_task() -> None:
    group = GroupEnv(EnvSpec(name="sokoban", split="val"), group_size=4)
    observations, infos = group.reset(seed=11)
    assert len({info["task_id"] for info in infos.values()}) == 1
    assert len(set(observations.values())) == 1
    with pytest.raises(ValueError, match="no action for member_1"):
        group.step({"member_0": "up"})


def test_expert_group_rows_are_the_optimal_solution() -> None:
    group = GroupEnv(EnvSpec(name="sokoban", split="test"), group_size=2)
    rollout = rollout_group(group, ExpertAgent(), "test-0000", seed=0)
    # test-0000 is solved in 3 steps (left, left, up): 2 members x 3 rows.
    assert len(rollout.records) == 6
    member_rows = [r for r in rollout.records if r["traj"] == "test-0000/member_0"]
    assert [r["action_key"] for r in member_rows] == ["left", "left", "up"]
    assert [r["reward"] for r in member_rows] == [-0.1, -0.1, 10.9]
    assert all(r["success"] for r in rollout.records)
    assert rollout.outcomes["test-0000/member_1"]["steps"] == load_level("test-0000").optimal_steps
    graph = rollout.graph()
    # Both members walk the same path: 3 states, each visited twice, one action each.
    assert graph.summary() == {
        "nodes": 3,
        "edges": 3,
        "branching_factor": 1.0,
        "singleton_state_share": 0.0,
    }


def test_random_group_rollout_is_seeded_and_batches() -> None:
    group = GroupEnv(EnvSpec(name="sokoban", split="test"), group_size=8)
    first = rollout_group(group, RandomAgent(), "test-0005", seed=3, group="g0")
    second = rollout_group(group, RandomAgent(), "test-0005", seed=3, group="g0")
    assert first.records == second.records
    batch = first.batch()
    assert batch.n_groups == 1 and batch.n_trajs == 8
    assert len(batch) == sum(outcome["steps"] for outcome in first.outcomes.values())
    # Members draw independently: not all eight trajectories are the same action sequence.
    sequences = {
        tuple(r["action_key"] for r in first.records if r["traj"] == traj)
        for traj in {r["traj"] for r in first.records}
    }
    assert len(sequences) > 1
    # Rows before a step carry that step's state; the first row of each member is the start.
    starts = {r["state_key"] for r in first.records if r["t"] == 0}
    assert len(starts) == 1


def test_bench_rollout_times_the_loop_against_the_same_episodes_on_bare_envs() -> None:
    """The loop's episodes replay on bare envs step for step (same resets, same answers), so the
    two rates time the same work."""
    pytest.importorskip("torch")
    from agentbench_rl.bench.rollout import bare_replay, loop_iteration, measure
    from agentbench_rl.envs.spec import EnvSpec
    from agentbench_rl.rollout.workers import LocalEnvPool

    env = EnvSpec(name="sokoban", split="train")
    pool = LocalEnvPool(env, 4)
    try:
        batch = loop_iteration(pool, env, 0, 2)
    finally:
        pool.close()
    bare = [env.make() for _ in range(4)]
    _, steps = bare_replay(bare, batch, 0)
    assert steps == len(batch)
    figures = measure(env, repeats=1, workers=1, tasks=2, group=2)
    assert figures["loop_rows_per_s"] > 0 and figures["bare_steps_per_s"] > 0
    assert figures["overhead"] == pytest.approx(
        figures["bare_steps_per_s"] / figures["loop_rows_per_s"] - 1
    )


def test_bench_rollout_profiles_what_the_loop_adds_to_the_bare_env() -> None:
    """The profile sets the loop's calls beside the bare replay's: prompts are built in the loop
    only (one a row), the env's step in both."""
    pytest.importorskip("torch")
    from agentbench_rl.bench.rollout import profile_loop
    from agentbench_rl.envs.spec import EnvSpec

    found = profile_loop(EnvSpec(name="sokoban", split="train"), tasks=2, group=2, top=1000)
    assert found.rows > 0 and found.loop_us > found.bare_us > 0
    calls = {name: (loop, bare) for name, _, loop, bare in found.heaviest}
    prompt = [figures for name, figures in calls.items() if name.endswith("(build_prompt)")]
    assert prompt == [(1.0, 0.0)]
    step = [figures for name, figures in calls.items() if name.startswith("envs/base.py")]
    assert step and all(loop > 0 and bare > 0 for loop, bare in step)

"""``--limit N`` evaluates a seeded sample stratified by category, and says so."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from agentbench_rl.envs import make, task_categories_of
from agentbench_rl.harness.config import EvalConfig
from agentbench_rl.harness.evaluate import evaluate
from agentbench_rl.harness.sampling import stratified_sample


def test_hand_worked_allocation() -> None:
    # 6 a, 3 b, 1 c; limit 5: shares 3.0, 1.5, 0.5 -> floors 3, 1, 0 and one task left for the
    # largest remainder, a tie of b and c at 0.5 broken by name: b. So 3 a, 2 b, 0 c.
    categories = {f"t{i}": "a" if i < 6 else "b" if i < 9 else "c" for i in range(10)}
    sample = stratified_sample(categories, 5)
    assert Counter(categories[t] for t in sample) == {"a": 3, "b": 2}
    assert sample == sorted(sample, key=lambda t: int(t[1:]))  # split order kept
    assert stratified_sample(categories, 5) == sample  # seeded
    assert stratified_sample(categories, 50) == list(categories)


def test_textcraft_sample_covers_the_depths_in_proportion() -> None:
    env = make("textcraft", split="test")
    ids = env.task_ids("test")
    categories = task_categories_of(env, "test", ids)
    sizes = Counter(categories.values())
    sample = stratified_sample(categories, 20)
    counts = Counter(categories[t] for t in sample)
    assert len(sample) == 20
    for depth, size in sizes.items():
        assert abs(counts[depth] - 20 * size / len(ids)) < 1, depth
    # The first 20 tasks of the sorted split, what --limit took before, are one depth only.
    assert len({categories[t] for t in ids[:20]}) == 1 < len(counts)


def test_limit_runs_the_sample_and_announces_it(tmp_path: Path) -> None:
    from io import StringIO

    from rich.console import Console

    stream = StringIO()
    config = EvalConfig(env="textcraft", split="test", agent="expert", limit=20, seeds=[0, 1])
    summary = evaluate(config, tmp_path / "run", console=Console(file=stream, width=200))
    assert "a sample of 20 of the 200 tasks" in stream.getvalue()
    assert summary.complete_split is False
    env = make("textcraft", split="test")
    expected = stratified_sample(task_categories_of(env, "test", env.task_ids("test")), 20)
    episodes = (tmp_path / "run" / "episodes.csv").read_text().splitlines()[1:]
    assert [line.split(",")[0] for line in episodes] == expected * 2  # both seeds, same tasks


class _PlayedCategories:
    """An env that knows a task's category only after a reset on it (as WebShop)."""

    def __init__(self) -> None:
        self.resets: list[str] = []

    def task_categories(self, split: str) -> None:
        return None

    def reset(self, seed: int, options: dict[str, str]) -> None:
        self.resets.append(options["task_id"])

    def category(self) -> str:
        return "odd" if int(self.resets[-1][1:]) % 2 else "even"


def test_categories_come_from_resets_where_the_env_has_no_map() -> None:
    env = _PlayedCategories()
    categories = task_categories_of(env, "test", ["t1", "t2", "t3"])
    assert categories == {"t1": "odd", "t2": "even", "t3": "odd"}
    assert env.resets == ["t1", "t2", "t3"]


def test_categories_restrict_the_tasks_before_the_limit(tmp_path: Path) -> None:
    from io import StringIO

    import pytest
    from rich.console import Console

    env = make("textcraft", split="test")
    categories = task_categories_of(env, "test", env.task_ids("test"))
    shallow = {t: c for t, c in categories.items() if c in ("depth-1", "depth-2")}
    config = EvalConfig(
        env="textcraft", split="test", agent="expert", categories=["depth-1", "depth-2"]
    )
    assert config.tasks() == list(shallow)  # every depth-1/2 goal, in split order
    assert 0 < len(shallow) < len(categories)
    config.limit = 10
    # the sample is stratified over the chosen categories only
    assert config.tasks() == stratified_sample(shallow, 10)
    stream = StringIO()
    summary = evaluate(config, tmp_path / "run", console=Console(file=stream, width=200))
    assert "10 of the 200 tasks (categories depth-1, depth-2" in stream.getvalue()
    assert summary.complete_split is False
    assert summary.config["categories"] == ["depth-1", "depth-2"]
    with pytest.raises(ValueError, match="no task of split 'test' is in"):
        EvalConfig(env="textcraft", split="test", agent="expert", categories=["depth-9"]).tasks()


def test_eval_takes_categories_on_the_command_line(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from agentbench_rl.cli import app

    out = tmp_path / "run"
    args = ["eval", "--env", "textcraft", "--split", "test", "--agent", "expert"]
    result = CliRunner().invoke(
        app,
        [
            *args,
            "--category",
            "depth-1",
            "--category",
            "depth-2",
            "--limit",
            "4",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text("utf-8"))
    assert summary["config"]["categories"] == ["depth-1", "depth-2"]
    refused = CliRunner().invoke(app, [*args, "--category", "depth-9", "--out", str(out / "x")])
    assert refused.exit_code != 0 and "no task of split 'test' is in" in refused.output

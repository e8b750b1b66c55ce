"""An env travels whole (issue 62, point 5): below the doors, no function takes an env as loose
parts (``env`` or ``env_name`` beside ``env_kwargs`` or ``env_options``) and no class declares
it so; it takes an :class:`~agentbench_rl.envs.spec.EnvSpec`. The doors are where a user's loose
values come in and become one.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "agentbench_rl"
NAMES = {"env", "env_name"}
OPTIONS = {"env_kwargs", "env_options", "env_option"}
#: Where a loose env group is the door itself, with the reason.
DOORS = {
    ("train/config.py", "TrainConfig"): "the train config file's flat keys (env, env_kwargs) are "
    "what a user writes; train_env() and val_env() make its EnvSpecs",
}


def loose_groups(source: str) -> list[str]:
    """The functions and classes of ``source`` that take or declare a loose env group."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            names = {arg.arg for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
        elif isinstance(node, ast.ClassDef):
            names = {
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            }
        else:
            continue
        if names & NAMES and names & OPTIONS:
            found.append(node.name)
    return found


def test_no_loose_env_group_below_the_doors() -> None:
    loose = sorted(
        f"{path.relative_to(PACKAGE).as_posix()}: {name}"
        for path in PACKAGE.rglob("*.py")
        for name in loose_groups(path.read_text("utf-8"))
        if (path.relative_to(PACKAGE).as_posix(), name) not in DOORS
    )
    assert loose == [], "take an EnvSpec, not its parts:\n" + "\n".join(loose)
    assert all(reason.strip() for reason in DOORS.values())


def test_the_check_finds_a_loose_group() -> None:
    source = (
        "def play(env, agent, env_kwargs=None): ...\n"
        "class Settings:\n    env_name: str\n    env_options: dict\n"
        "def fine(spec, env_kwargs): ...\n"
    )
    assert loose_groups(source) == ["play", "Settings"]

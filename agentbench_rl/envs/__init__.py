"""The environments, registered with Gymnasium under the ``agentbench/`` namespace.

``ENVS`` maps each short name (used on the command line) to its Gymnasium id and entry point;
entry points are strings so that importing the package does not import every backend (ALFWorld's
TextWorld, WebShop's search index) until that env is made.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from agentbench_rl.core.plugins import ENV_GROUP, installed
from agentbench_rl.envs.base import TextAgentEnv


@dataclass(frozen=True)
class EnvEntry:
    """One registered environment."""

    name: str
    gym_id: str
    entry_point: str


ENVS: dict[str, EnvEntry] = {
    entry.name: entry
    for entry in (
        EnvEntry("sokoban", "agentbench/Sokoban-v0", "agentbench_rl.envs.sokoban.env:SokobanEnv"),
        EnvEntry(
            "visual_sokoban",
            "agentbench/VisualSokoban-v0",
            "agentbench_rl.envs.sokoban.env:VisualSokobanEnv",
        ),
        EnvEntry(
            "alfworld", "agentbench/ALFWorld-v0", "agentbench_rl.envs.alfworld.env:ALFWorldEnv"
        ),
        EnvEntry(
            "textcraft", "agentbench/TextCraft-v0", "agentbench_rl.envs.textcraft.env:TextCraftEnv"
        ),
        EnvEntry("webshop", "agentbench/WebShop-v0", "agentbench_rl.envs.webshop.env:WebShopEnv"),
    )
}


def register_env(name: str, gym_id: str, entry_point: str) -> EnvEntry:
    """Add an environment: its short name, Gymnasium id and ``module:Class`` entry point.

    The built-ins are listed in :data:`ENVS`; anything registered here is the same to the CLI,
    the harness, the trainer and the shared test suites (``tests/envs/test_env_contract.py``).

    Example:
        >>> entry = register_env("sokoban_copy", "agentbench/SokobanCopy-v0",
        ...                      "agentbench_rl.envs.sokoban.env:SokobanEnv")
        >>> make("sokoban_copy", split="val").split
        'val'
        >>> del ENVS["sokoban_copy"]; del gym.registry["agentbench/SokobanCopy-v0"]
    """
    for entry in ENVS.values():
        if name == entry.name or gym_id == entry.gym_id:
            raise ValueError(f"env '{name}' ({gym_id}) is already registered")
    entry = EnvEntry(name, gym_id, entry_point)
    ENVS[name] = entry
    register_all()
    return entry


def register_all() -> None:
    """Register every env with Gymnasium (idempotent)."""
    for entry in ENVS.values():
        if entry.gym_id not in gym.registry:
            gym.register(id=entry.gym_id, entry_point=entry.entry_point)


def evaluation_split(name: str) -> str:
    """The split an env is evaluated on by default: the first of test, valid_seen, val it has.

    Example:
        >>> evaluation_split("alfworld"), evaluation_split("sokoban")
        ('valid_seen', 'test')
    """
    splits = env_class(resolve(name).name).splits()
    for split in ("test", "valid_seen", "val"):
        if split in splits:
            return split
    return splits[0]


def resolve(name: str) -> EnvEntry:
    """The entry for a short name (``sokoban``) or a Gymnasium id (``agentbench/Sokoban-v0``),
    else an installed env plugin of that name (:mod:`agentbench_rl.core.plugins`), registered
    on first use as ``agentbench-plugin/<name>``.

    Example:
        >>> resolve("agentbench/Sokoban-v0").name
        'sokoban'
    """
    for entry in ENVS.values():
        if name in (entry.name, entry.gym_id):
            return entry
    plugins = installed(ENV_GROUP)
    if name in plugins:
        entry = register_env(name, f"agentbench-plugin/{name}", plugins[name].value)
        if entry.gym_id not in gym.registry:
            gym.register(id=entry.gym_id, entry_point=entry.entry_point)
        return entry
    known = ", ".join([*sorted(ENVS), *sorted(set(plugins) - set(ENVS))])
    raise ValueError(f"unknown env '{name}' (choose from {known})")


def env_class(name: str) -> type[TextAgentEnv[Any]]:
    """The env class behind a short name or Gymnasium id, imported on demand (once per entry
    point: every rollout step's prompt asks for its env's class)."""
    entry_point = resolve(name).entry_point
    cls = _CLASSES.get(entry_point)
    if cls is None:
        module_name, class_name = entry_point.split(":")
        module = __import__(module_name, fromlist=[class_name])
        cls = _CLASSES[entry_point] = getattr(module, class_name)
    return cls


_CLASSES: dict[str, type[TextAgentEnv[Any]]] = {}


def task_categories_of(env: Any, split: str, tasks: Sequence[str]) -> dict[str, str]:
    """The category of every task: from the env's ``task_categories(split)`` where it knows them
    without playing, else its ``category()`` after a reset on each task.

    Example:
        >>> task_categories_of(make("sokoban", split="test"), "test", ["test-0000"])
        {'test-0000': 'easy'}
    """
    known = env.task_categories(split)
    if known is not None:
        return {task: str(known[task]) for task in tasks}
    categories = {}
    for task in tasks:
        env.reset(seed=0, options={"task_id": task})
        categories[task] = str(env.category())
    return categories


def tasks_of_categories(
    categories: Mapping[str, str], ids: Sequence[str], wanted: Sequence[str], field: str, split: str
) -> list[str]:
    """The ids whose category (in ``categories``) is one of ``wanted``, in order;
    ``ValueError`` naming ``field`` and the split's categories when none is.

    Example:
        >>> tasks_of_categories({"a": "easy", "b": "hard"}, ["a", "b"], ["hard"], "categories", "x")
        ['b']
    """
    keep = set(wanted)
    kept = [task for task in ids if categories.get(task) in keep]
    if not kept:
        raise ValueError(
            f"{field}: no task of split '{split}' is in {sorted(keep)} "
            f"(it has {', '.join(sorted(set(categories.values())))})"
        )
    return kept


def unknown_options(cls: type, options: dict[str, Any]) -> str | None:
    """Why an env class cannot take these keyword options (``None``: it can): the names its
    constructor does not declare, and those it does.

    Example:
        >>> unknown_options(env_class("textcraft"), {"colour": 1})
        "takes no option 'colour' (it takes max_steps, render_mode, split)"
    """
    names: set[str] = set()
    for owner in cls.__mro__:  # a constructor taking **kwargs hands them to its parent's
        if "__init__" not in vars(owner):
            continue
        parameters = inspect.signature(vars(owner)["__init__"]).parameters
        names |= {name for name, p in parameters.items() if p.kind is p.KEYWORD_ONLY}
        names |= {name for name, p in parameters.items() if p.kind is p.POSITIONAL_OR_KEYWORD}
        if not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
            break
    else:
        return None
    known = sorted(names - {"self"})
    unknown = sorted(set(options) - set(known))
    if not unknown:
        return None
    shown = ", ".join(f"'{name}'" for name in unknown)
    return f"takes no option {shown} (it takes {', '.join(known)})"


def make(name: str, **kwargs: Any) -> TextAgentEnv[Any]:
    """Make an env by short name or Gymnasium id, unwrapped (no Gymnasium checker wrappers).

    Example:
        >>> env = make("sokoban", split="val")
        >>> env.split
        'val'
    """
    return env_class(name)(**kwargs)

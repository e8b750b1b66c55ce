"""Plugins: what other packages add to the three registries (envs, agents, estimators) through
Python entry points, looked up the one way.

A package declares, in its ``pyproject.toml``::

    [project.entry-points."agentbench_rl.envs"]
    my_maze = "my_package.maze:MazeEnv"          # a TextAgentEnv subclass
    [project.entry-points."agentbench_rl.agents"]
    my_agent = "my_package.agent:MyAgent"        # what python:my_package.agent:MyAgent names
    [project.entry-points."agentbench_rl.estimators"]
    my_estimator = "my_package.adv:my_estimator" # an estimator function

and after ``pip install`` the name works wherever a built-in one does (``--env my_maze``,
``--agent my_agent``, ``estimator=my_estimator``). Every registry resolves a name the same way:
its built-ins first, then the installed entry point of that name, loaded only when asked for;
a name that is neither is refused listing both.

Example:
    >>> installed("agentbench_rl.no-such-group")
    {}
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
from typing import Any

ENV_GROUP = "agentbench_rl.envs"
AGENT_GROUP = "agentbench_rl.agents"
ESTIMATOR_GROUP = "agentbench_rl.estimators"


def installed(group: str) -> dict[str, importlib.metadata.EntryPoint]:
    """The installed entry points of ``group`` by name, not loaded (the first of a name wins,
    as Python's own lookup does)."""
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for point in importlib.metadata.entry_points(group=group):
        found.setdefault(point.name, point)
    return found


def import_attribute(module_name: str, attribute: str, what: str) -> Any:
    """``module.attribute`` (dotted attributes reach nested ones) of a ``python:module:name``
    spec, the working directory importable as the command line's is; ``ValueError`` naming
    ``what`` (``agent 'python:m:f'``) when the module does not import or lacks the name.

    Example:
        >>> import_attribute("os.path", "join", "spec 'python:os.path:join'")("a", "b")
        'a/b'
    """
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as problem:
        raise ValueError(f"{what}: cannot import module '{module_name}' ({problem})") from None
    except Exception as problem:  # user code failing at import time
        raise ValueError(
            f"{what}: importing '{module_name}' raised {type(problem).__name__}: {problem}"
        ) from None
    target: Any = module
    for name in attribute.split("."):
        if not hasattr(target, name):
            raise ValueError(f"{what}: module '{module_name}' has no '{attribute}'")
        target = getattr(target, name)
    return target

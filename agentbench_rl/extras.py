"""Optional dependencies, checked before any work: a missing one is named with its extra.

A core install (``pip install agentbench-rl``) must fail fast and clearly where a feature needs
an extra, not with ``No module named 'torch'`` mid-run or after an hour of episodes. Commands call
:func:`require` first; the check only looks the modules up (nothing heavy is imported).
"""

from __future__ import annotations

import importlib.util

#: What each feature needs: (modules, the pip command that installs them).
NEEDS: dict[str, tuple[tuple[str, ...], str]] = {
    "train": (
        ("torch", "transformers", "tokenizers", "yaml"),
        "pip install torch==2.13.0 && pip install 'agentbench-rl[train]'",
    ),
    "hf": (
        ("torch", "transformers"),
        "pip install torch==2.13.0 && pip install 'agentbench-rl[train]'",
    ),
    "parquet": (("pyarrow",), "pip install 'agentbench-rl[parquet]'"),
    "plot": (("matplotlib",), "pip install 'agentbench-rl[plot]'"),
}


def missing_modules(modules: tuple[str, ...]) -> list[str]:
    """The modules of ``modules`` that cannot be imported here.

    Example:
        >>> missing_modules(("json", "no_such_module_xyz"))
        ['no_such_module_xyz']
    """
    missing = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def require(feature: str, what: str) -> None:
    """Raise ``ImportError`` (one line: what is missing, what to install) unless ``feature``'s
    modules are importable.

    Example:
        >>> require("parquet", "--episodes-format parquet")  # pyarrow is installed here
    """
    modules, install = NEEDS[feature]
    missing = missing_modules(modules)
    if missing:
        raise ImportError(f"{what} needs {', '.join(missing)}, which is not installed: {install}")

"""Optional dependencies, checked before any work: a missing one is named with its extra.

A core install (``pip install -e .`` in a clone) must fail fast and clearly where a feature needs
an extra, not with ``No module named 'torch'`` mid-run or after an hour of episodes. Commands call
:func:`require` first; the check only looks the modules up (nothing heavy is imported).
"""

from __future__ import annotations

import importlib.util


def install_hint(extra: str) -> str:
    """The command that installs an extra, as a user of a clone runs it (the package is not on
    PyPI); the ``train`` and ``verl`` extras get the CPU torch pin first; ``vllm`` is vLLM's
    CUDA build (it brings its own torch) on a GPU machine, its CPU build elsewhere.

    Example:
        >>> install_hint("plot")
        'pip install -e ".[plot]"'
    """
    command = f'pip install -e ".[{extra}]"'
    if extra == "vllm":
        return f"{command} on a GPU machine; on a CPU, vLLM's CPU build: VLLM_VENV=DIR .ci/vllm"
    if extra in ("train", "verl"):
        return f"pip install torch==2.13.0 && {command}"
    return command


#: What each feature needs: (modules, the extra that installs them).
NEEDS: dict[str, tuple[tuple[str, ...], str]] = {
    "train": (("torch", "transformers", "tokenizers", "yaml"), "train"),
    "hf": (("torch", "transformers"), "train"),
    "parquet": (("pyarrow",), "parquet"),
    "plot": (("matplotlib",), "plot"),
    "vllm": (("vllm",), "vllm"),
    "openenv": (("openenv",), "openenv"),
    "ors": (("ors",), "openenv"),
    "trl": (("trl",), "trl"),
}


def extra_of(module: str | None) -> str | None:
    """The extra that installs ``module`` (a dotted name: its top package counts), if any.

    Example:
        >>> extra_of("transformers.models"), extra_of("json")
        ('train', None)
    """
    top = (module or "").split(".")[0]
    return next((extra for modules, extra in NEEDS.values() if top in modules), None)


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
    modules, extra = NEEDS[feature]
    missing = missing_modules(modules)
    if missing:
        raise ImportError(
            f"{what} needs {', '.join(missing)}, which is not installed: {install_hint(extra)}"
        )

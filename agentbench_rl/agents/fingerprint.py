"""What an agent spec resolves to, as a short hash, so ``--resume`` can refuse a changed agent.

An evaluation's episodes must all come from one agent. The spec string alone does not say that:
``python:my_module:my_policy`` names a file the user keeps editing, and ``hf:runs/x/policy`` a
folder whose weights training overwrites. The fingerprint hashes what the spec points at:

- ``python:module:attr``: the source file of the module (the module is imported, as the harness
  does anyway);
- ``hf:<folder>``: every weight and config file of the folder (``hf:<hub id>``: the id, since
  nothing is downloaded to compare);
- ``random``, ``expert``, ``openai:...``: the spec and the package version (their behaviour is
  the package's, or the server's, which no local file pins).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
from pathlib import Path

from agentbench_rl.core.version import __version__

_CHUNK = 1 << 20
# Files of a model folder that decide what the model does (weights, config, tokenizer, and our
# own sampling settings); READMEs and optimiser states do not.
_MODEL_SUFFIXES = (".safetensors", ".bin", ".json", ".model", ".txt")


def _hash_files(paths: list[Path], root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        with path.open("rb") as stream:
            while chunk := stream.read(_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()[:16]


def agent_fingerprint(spec: str) -> str:
    """A short hash of what ``spec`` runs, prefixed by what was hashed.

    Example:
        >>> agent_fingerprint("python:agentbench_rl.agents.simple:RandomAgent")[:7]
        'source:'
        >>> agent_fingerprint("random") == agent_fingerprint("random")
        True
    """
    if spec.startswith("python:"):
        module_name = spec.split(":")[1]
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        source = getattr(importlib.import_module(module_name), "__file__", None)
        if source is not None and Path(source).is_file():
            return "source:" + _hash_files([Path(source)], Path(source).parent)
    if spec.startswith("hf:"):
        folder = Path(spec.removeprefix("hf:").partition("?")[0]).expanduser()
        if folder.is_dir():
            files = [p for p in folder.rglob("*") if p.is_file() and p.suffix in _MODEL_SUFFIXES]
            return "weights:" + _hash_files(files, folder)
    text = f"{spec}\0{__version__}"
    return "spec:" + hashlib.sha256(text.encode()).hexdigest()[:16]

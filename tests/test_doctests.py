"""Every example in every docstring of the package runs and prints what it says."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import agentbench_rl

#: Optional extras a module may need; without them its examples are skipped, not failed.
OPTIONAL = (
    "torch",
    "transformers",
    "yaml",
    "ray",
    "vllm",
    "textworld",
    "alfworld",
    "spacy",
    # the verl integration's examples run in the verl environment (tests/integrations/test_verl.py)
    "verl",
    "transfer_queue",
    # the served envs' examples run in the openenv environment (tests/integrations/test_openenv.py)
    "openenv",
    "ors",  # the Open Reward Standard's server, likewise (tests/integrations/test_ors.py)
    "aiohttp",  # the ORS client's transport (ors-sdk brings it), likewise
    "trl",  # TRL's trainer with our credit, likewise (tests/integrations/test_trl.py)
    # Trinity-RFT's registry, in .ci/trainers' environment (tests/integrations/test_trinity.py)
    "trinity",
    "skyrl_train",  # SkyRL's registry, likewise (tests/integrations/test_skyrl.py)
)

MODULES = sorted(
    info.name for info in pkgutil.walk_packages(agentbench_rl.__path__, prefix="agentbench_rl.")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as missing:
        if missing.name and missing.name.split(".")[0] in OPTIONAL:
            pytest.skip(f"needs the optional package {missing.name}")
        raise
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} failing example(s) in {name}"

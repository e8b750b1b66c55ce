"""What a results folder was made with, beyond its config: the agent's fingerprint.

``--resume`` continues a run only with the agent that started it; the fingerprint of
:func:`agentbench_rl.agents.fingerprint.agent_fingerprint` is written to ``agent.json`` when the
run starts and compared on every resume, so episodes of two versions of an agent never mix.
"""

from __future__ import annotations

import json
from pathlib import Path

from agentbench_rl.agents.fingerprint import agent_fingerprint
from agentbench_rl.harness.results import atomic_write_text

AGENT_FILE = "agent.json"


def record_agent(out: Path, spec: str) -> str:
    """Write (fresh run) or check (resumed run) ``out/agent.json``; return the fingerprint.

    Raises:
        ValueError: the folder holds episodes of a different agent.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> record_agent(folder, "random") == record_agent(folder, "random")
        True
    """
    fingerprint = agent_fingerprint(spec)
    path = out / AGENT_FILE
    if path.exists():
        try:
            stored = json.loads(path.read_text("utf-8")).get("fingerprint")
        except (json.JSONDecodeError, AttributeError):
            raise ValueError(f"{path}: not a JSON object; remove it to start over") from None
        if stored != fingerprint:
            raise ValueError(
                f"--resume: the agent {spec} changed since {out} was started (fingerprint "
                f"{fingerprint}, was {stored}); its episodes would mix two agents: "
                "restore the agent or choose another --out"
            )
        return fingerprint
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"agent": spec, "fingerprint": fingerprint}, indent=1) + "\n"
    atomic_write_text(path, text)
    return fingerprint

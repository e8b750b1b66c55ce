"""What a results folder was made with, beyond its config: the agent's and the data's fingerprints.

``--resume`` continues a run only with the agent that started it; the fingerprint of
:func:`agentbench_rl.agents.fingerprint.agent_fingerprint` is written to ``agent.json`` when the
run starts and compared on every resume, so episodes of two versions of an agent never mix.

The data an env reads from outside the package (ALFWorld's game files, WebShop's catalogue) are
fingerprinted too (:func:`data_fingerprint`), with whether the fingerprint equals the one the
package pins: a run on modified data (``--allow-modified-games``) says so in ``summary.json``
and on the leaderboard.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentbench_rl.agents.fingerprint import agent_fingerprint
from agentbench_rl.core.atomic import atomic_write_text
from agentbench_rl.core.hashing import sha256_file, stable_hash
from agentbench_rl.spec.results_folder import ResultsFolder


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
    path = ResultsFolder(out).agent_file
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


def data_fingerprint(env_name: str, env: Any, split: str) -> dict[str, Any] | None:
    """``{"fingerprint": ..., "pinned": bool}`` of the external data ``env`` plays, else ``None``.

    ALFWorld: the split's manifest checksum recomputed from the installed game files (``pinned``
    when it equals the shipped manifest's). WebShop: a hash of the data files read, ``pinned``
    when every file the split manifest pins has its sha256.

    Example:
        >>> from agentbench_rl.envs import make
        >>> data_fingerprint("sokoban", make("sokoban", split="test"), "test") is None
        True
    """
    if env_name == "alfworld":
        from agentbench_rl.envs.alfworld.data import load_manifest

        manifest = load_manifest(split)
        games = []
        for game in manifest.games:
            path = Path(env.data_dir) / game.path
            games.append([game.task_id, sha256_file(path) if path.is_file() else "missing"])
        fingerprint = stable_hash({"split": split, "games": games})
        return {"fingerprint": fingerprint, "pinned": fingerprint == manifest.checksum}
    if env_name == "webshop":
        from agentbench_rl.envs.webshop.world import shipped_manifest

        files = dict(env.world.catalogue.files)
        pinned = shipped_manifest()["data_sha256"]
        return {
            "fingerprint": stable_hash(sorted(files.items())),
            "pinned": all(files.get(name) == sha for name, sha in pinned.items()),
        }
    return None

"""Stable hashes of observations, states and keys.

Python's ``hash()`` is salted per process, so every key that crosses a process boundary (worker
results, step graphs, leaderboard files) is a blake2b digest of canonical bytes instead.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

DIGEST_SIZE = 16  # 128 bits: collision-free in practice for any batch we will ever build
#: The files of a model folder that hold its weights (what :func:`weights_fingerprint` reads).
WEIGHT_SUFFIXES = (".safetensors", ".bin")


def canonical_bytes(value: Any) -> bytes:
    """Encode ``value`` as bytes that depend only on its content.

    ``bytes`` pass through, ``str`` is UTF-8 encoded, everything else is JSON with sorted keys and
    no whitespace, so ``{"a": 1, "b": 2}`` and ``{"b": 2, "a": 1}`` encode alike while
    ``("a", "bc")`` and ``("ab", "c")`` do not.

    Example:
        >>> canonical_bytes(["a", 1])
        b'["a",1]'
    """
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8"
    )


def stable_hash(value: Any) -> str:
    """Hex blake2b digest of ``canonical_bytes(value)``; equal across processes and machines.

    Example:
        >>> stable_hash("You are in the kitchen.") == stable_hash("You are in the kitchen.")
        True
        >>> len(stable_hash(b"\\x00\\x01"))
        32
    """
    return hashlib.blake2b(canonical_bytes(value), digest_size=DIGEST_SIZE).hexdigest()


def tuple_hash(parts: tuple[Any, ...] | list[Any]) -> str:
    """Hash of a sequence of keys, as a JSON list, so no separator inside a key can fool it.

    Example:
        >>> tuple_hash(("a|b", "c")) != tuple_hash(("a", "b|c"))
        True
    """
    return stable_hash(list(parts))


def seed_from(*parts: Any) -> int:
    """A 63-bit integer seed derived from ``parts`` (e.g. a base seed and a task id).

    Used wherever one random stream must not depend on the order work is scheduled in.

    Example:
        >>> seed_from(0, "test-0001") == seed_from(0, "test-0001")
        True
    """
    digest = hashlib.blake2b(canonical_bytes(list(parts)), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in chunks.

    Example:
        >>> import tempfile, pathlib
        >>> file = pathlib.Path(tempfile.mkdtemp()) / "empty"
        >>> _ = file.write_bytes(b"")
        >>> sha256_file(file)[:12]
        'e3b0c44298fc'
    """
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def weights_fingerprint(folder: Path) -> str | None:
    """A sha256 (first 16 hex digits) over the names and bytes of a model folder's weight files
    (``*.safetensors``, ``*.bin``); ``None`` when the folder holds none.

    Example:
        >>> weights_fingerprint(Path("no-such-folder")) is None
        True
    """
    folder = Path(folder)
    if not folder.is_dir():
        return None
    files = sorted(p for p in folder.iterdir() if p.suffix in WEIGHT_SUFFIXES and p.is_file())
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode("utf-8") + b"\0")
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]

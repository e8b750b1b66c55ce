"""Episode tables: written atomically (CSV or Parquet by suffix) and read back."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from agentbench_rl.core.atomic import atomic_write_bytes, atomic_write_text
from agentbench_rl.extras import install_hint


def write_episodes(episodes: pd.DataFrame, path: Path) -> None:
    """Write the episodes table as CSV or Parquet (by suffix), atomically.

    Parquet needs ``pyarrow``; without it the error says how to get it.
    """
    path = Path(path)
    if path.suffix == ".csv":
        atomic_write_text(path, episodes.to_csv(index=False, lineterminator="\n"))
        return
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ValueError(f"Parquet output needs pyarrow: {install_hint('parquet')}") from None
    buffer = episodes.to_parquet(index=False)
    assert buffer is not None
    atomic_write_bytes(path, buffer)


def read_episodes(path: Path) -> pd.DataFrame:
    """Read an episodes table written by :func:`write_episodes`."""
    path = Path(path)
    return pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)

"""Records cross typed (issue 62): ``bench/`` and ``integrations/`` hold at most
:data:`LIMIT` ``dict[str, Any]`` annotations. A new bench figure or adapter record is a
``TypedDict`` (as ``bench.estimators.SpeedFigures`` or ``bench.truth.FidelityReport``), a
pydantic model or a dataclass; what is left is JSON as a third party hands it over (the
trainers' batches, a protocol's bodies).
"""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "agentbench_rl"
#: Occurrences after issue 62 (the audit's line count, ``grep -c``, fell from 121 to 53):
#: lower it when you type one more, never raise it.
LIMIT = 54
UNTYPED = re.compile(r"dict\[str, Any\]")


def untyped_annotations() -> dict[str, int]:
    """``dict[str, Any]`` occurrences per module of ``bench/`` and ``integrations/``."""
    counts = {}
    for folder in ("bench", "integrations"):
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            found = len(UNTYPED.findall(path.read_text(encoding="utf-8")))
            if found:
                counts[str(path.relative_to(PACKAGE))] = found
    return counts


def test_bench_and_integrations_do_not_grow_untyped_records() -> None:
    counts = untyped_annotations()
    worst = sorted(counts.items(), key=lambda item: -item[1])[:5]
    assert sum(counts.values()) <= LIMIT, (
        f"{sum(counts.values())} dict[str, Any] in bench/ and integrations/ (at most {LIMIT}): "
        f"type the new record; the most: {worst}"
    )


def test_the_count_sees_a_planted_annotation(tmp_path: Path) -> None:
    planted = "def f(x: dict[str, Any]) -> dict[str, Any]:\n    return x\n"
    assert len(UNTYPED.findall(planted)) == 2

"""``bench gpu``'s machinery on the CPU: sections cut at their limit or failing report an error
and the others go on, the report renders every section, bad input is one line. (The whole
script is rehearsed with tiny models by ``.ci/gpu --dry-run`` in CI.)"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from agentbench_rl.bench import gpu
from agentbench_rl.models.architectures import ARCHITECTURES


def test_a_section_past_its_limit_is_cut_and_named(tmp_path: Path) -> None:
    lines: list[str] = []
    outcome = gpu.run_section("tests", gpu.Settings(dry_run=True), 0.5, lines.append)
    # pytest's start alone takes longer than half a second
    assert outcome.get("error") == "cut at its limit of 0.5 s" and "figures" not in outcome
    assert outcome["seconds"] < 10
    assert lines[0].startswith("== tests") and "error" in lines[-1]


def test_a_failing_section_reports_its_last_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    # an unknown section: the section process exits 2 with argparse's message
    outcome = gpu.run_section("nope", gpu.Settings(dry_run=True), 30, lambda line: None)
    assert outcome.get("error") == "exit status 2"
    assert any("invalid choice" in line for line in outcome.get("tail", []))


def test_run_refuses_unknown_sections_and_a_missing_gpu(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown section"):
        gpu.run(tmp_path, dry_run=True, sections=["train", "warp"])
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA GPU"):
            gpu.run(tmp_path, dry_run=False)
    assert not list(tmp_path.iterdir())  # nothing written before the checks


def _record() -> gpu.GpuRecord:
    train_row: gpu.TrainRow = {
        "rows": 192.0,
        "prompt_tokens_mean": 612.4,
        "response_tokens": 24576,
        "rollout_s": 10.0,
        "rollout_tokens_per_s": 2457.6,
        "estimator_s": 0.01,
        "update_s": 3.5,
        "weights_gb": 0.99,
        "peak_gb": 12.5,
        "first_approx_kl": 1e-5,
        "first_clipfrac": 0.0,
    }
    bipace_row: gpu.BipaceRow = {
        "figures": {
            "rows": 32.0,
            "base_iteration_s": 8.0,
            "candidate_extra_s": 0.4,
            "candidate_extra_percent": 5.0,
        },
        "hidden_size": 3584,
        "layers": 28,
        "peak_gb": 70.0,
    }
    return {
        "dry_run": False,
        "machine": {
            "gpu": "NVIDIA H200",
            "python": "3.12.3",
            "torch": "2.11.0",
            "cuda": "13.0",
            "transformers": "5.17.0",
            "date": "2026-12-04 16:00 UTC",
            "git_commit": "a" * 40,
            "git_dirty": False,
        },
        "sections": {
            "tests": {
                "seconds": 40.0,
                "figures": {
                    "summary": "1 failed, 3 passed",
                    "exit_status": 1,
                    "failed": ["tests/models/test_gpu.py::x"],
                    "seconds": 39.0,
                },
            },
            "train": {"seconds": 90.0, "figures": {"qwen2.5-0.5b sokoban": train_row}},
            "bipace": {"seconds": 80.0, "figures": {"qwen2.5-7b": bipace_row}},
            "eval": {
                "seconds": 30.0,
                "figures": {
                    "episodes": 64,
                    "seconds": 12.0,
                    "episodes_per_s": 5.33,
                    "tokens_per_s": 2048.0,
                    "agent_calls": 192,
                    "peak_gb": 2.0,
                },
            },
            "vision": {"seconds": 50.0, "error": "cut at its limit of 50 s", "tail": ["last line"]},
        },
    }


def test_the_report_shows_every_section() -> None:
    text = gpu.markdown(_record())
    assert "NVIDIA H200" in text and "a" * 40 in text
    assert "| qwen2.5-0.5b sokoban | 192 | 612 | 10.0 | 2,458 | 3.5 | 0.99 | 12.50 " in text
    assert "| qwen2.5-7b | 3584 | 28 | 32 | 8.00 | 0.400 | +5.0 | 70.00 |" in text
    assert "| 64 | 12.0 | 5.33 | 2,048 | 2.00 |" in text
    assert "- failed: `tests/models/test_gpu.py::x`" in text
    assert "error: cut at its limit of 50 s" in text and "last line" in text


def test_the_published_shapes() -> None:
    """The numbers of the published config.json files (Qwen2.5-0.5B: 494M parameters with
    tied embeddings; 7B: 7.6B untied)."""

    def parameters(name: str) -> int:
        shape = ARCHITECTURES[name]
        head = shape.hidden_size // shape.heads
        kv = shape.kv_heads * head
        attention = (
            shape.hidden_size * shape.hidden_size
            + shape.hidden_size  # q with bias
            + 2 * (shape.hidden_size * kv + kv)  # k, v with bias
            + shape.hidden_size * shape.hidden_size  # o
        )
        mlp = 3 * shape.hidden_size * shape.intermediate_size
        norms = 2 * shape.hidden_size
        embeddings = shape.vocab_size * shape.hidden_size * (1 if shape.tie_embeddings else 2)
        return shape.layers * (attention + mlp + norms) + embeddings + shape.hidden_size

    assert round(parameters("qwen2.5-0.5b") / 1e6) == 494
    assert round(parameters("qwen2.5-1.5b") / 1e8) == 15
    assert round(parameters("qwen2.5-7b") / 1e8) == 76

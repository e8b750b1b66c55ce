"""The trainer's side of vLLM's workers: a worker extension (vLLM's documented way for an RL
trainer to reach into its inference workers, ``LLM(worker_extension_cls=...)``) that loads the
policy's new weights in place.

vLLM's own in-place reload (the worker's ``reload_weights``) loads checkpoint-format tensors and
re-runs each layer's post-load processing. One thing it leaves stale on the CPU build (vLLM
0.32): with tied embeddings the LM head's packed GEMM copy of the embedding matrix, which the
CPU kernels keep beside the shared weight, so the engine would sample from the new body and the
old head. :meth:`PolicyWeightSync.load_policy_weights` repacks it; on a GPU that processing is a
no-op, so both builds run one code path. This module is imported inside vLLM's engine process:
it imports nothing of ours that is heavy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: What ``LLM(worker_extension_cls=...)`` is given.
EXTENSION = "agentbench_rl.models.vllm_worker.PolicyWeightSync"


class PolicyWeightSync:
    """Mixed into vLLM's worker class by vLLM (so ``self`` is the worker; it may declare no
    attribute the worker has)."""

    def load_policy_weights(self, items: Sequence[tuple[str, Any]]) -> int:
        """Load ``(Hugging Face name, tensor)`` pairs in place; returns how many were given."""
        worker: Any = self
        worker.reload_weights(weights_iterator=list(items), is_checkpoint_format=True)
        model = worker.model_runner.model
        head = getattr(model, "lm_head", None)
        method = getattr(head, "quant_method", None)
        if method is not None and hasattr(method, "process_weights_after_loading"):
            method.process_weights_after_loading(head)  # the CPU build's packed tied head
        return len(items)

"""Models: loading Hugging Face and tiny models, scoring, generation and hidden-state capture.

This layer sits below the agents and the trainer: ``agents.hf`` plays a loaded policy in the
harness, ``train`` optimises one, and neither imports the other. :mod:`~agentbench_rl.models.policy`
holds the :class:`~agentbench_rl.models.policy.Policy` (batched act in ``choose`` and
``generate`` mode, the training-side forward, save and load), which
:mod:`~agentbench_rl.agents.policy` (one layer up) plays as a harness agent (``hf:`` agents and the
trainer's validation both use it); :mod:`~agentbench_rl.models.tiny` builds the
few-million-parameter CPU model and its tokenizer.

Everything here needs the ``train`` extra (torch, transformers, tokenizers), imported when used,
so the core package installs and imports without it.
"""

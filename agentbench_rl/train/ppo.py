"""PPO-clip with any step-level advantage estimator: the loop of the GiGPO paper and verl-agent.

One file, top to bottom (CleanRL style). Per iteration:

1. draw N tasks of the train split and play G trajectories on each, all N*G in lockstep with one
   batched forward per step (``rollout/batched.py``); every step is one training row whose prompt
   is the observation, the last ``history`` steps and the admissible actions;
2. rewards: ``success_reward`` (10) at the end of a won trajectory (``reward="success"``, the
   papers' ``10 * won``) or the env's own reward (``reward="env"``);
3. the estimator turns the ``StepBatch`` into one advantage per row (``estimators.compute``,
   with the trainer's ``gamma`` and the invalid-action penalty 0.1 passed to estimators that take
   them), optionally cut to a matched dose (``advantage_dose``) and divided by their batch
   standard deviation (``advantage_norm``); every token of a row's answer gets the row's
   advantage. Each iteration logs the dose, the share of rows with a non-zero advantage
   (``adv/dose``, and ``adv/trained_dose`` after the cut), and the scale (``adv/raw_abs_mean``);
4. PPO-clip on the answer tokens' log-probs, token-mean over the minibatch (in ``choose`` mode
   the one "token" of a row is the action, its probability the softmax of the admissible
   actions' scores, so ρ, the KL and the entropy are those of the action distribution):

   ``ρ_t = π_θ(y_t | x, y_<t) / π_old(y_t | x, y_<t)``
   ``L_clip = −min(ρ_t A, clip(ρ_t, 1−ε, 1+ε) A)``           (PPO, Schulman et al. 2017, eq. 7)
   ``L_KL = exp(r_t) − r_t − 1, r_t = log π_ref − log π_θ``   (the low-variance "k3" estimator of
   KL(π_θ‖π_ref), Schulman 2020, as GRPO, GiGPO and verl's ``low_var_kl``; as there, r_t is
   clamped to ±20 and the term to ±10, and padded positions are masked before the exponential)
   ``L = mean_tokens(L_clip + β·L_KL − c_H·H(π_θ(·|x, y_<t)))``, ε = 0.2, β = 0.01.

   This is the objective the GiGPO paper optimises (its PPO-style clipped surrogate over the
   group-in-group advantages A = A^E + ω·A^S, with a KL penalty to the reference policy);
5. every ``val_every`` iterations, validation on the val split through the harness
   (``harness.evaluate`` with the policy as an ``hf:`` agent); metrics to ``metrics.jsonl``
   (and TensorBoard when installed); a checkpoint every ``checkpoint_every`` iterations, at the
   end, and at exit (Ctrl-C or SIGTERM finish the iteration and checkpoint it first).

Iteration 0 is the start of RL (after behaviour cloning, when enabled): it is validated, never
trained. ``--resume`` continues from the last checkpoint; task draws, sampling and minibatch
order are seeded from (seed, iteration), the optimiser and RNG states come from the checkpoint,
so a killed and resumed run ends with the same numbers as one that never stopped.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress

from agentbench_rl.agents.policy import PolicyAgent
from agentbench_rl.core import heap
from agentbench_rl.core.atomic import atomic_write_text
from agentbench_rl.core.hashing import seed_from, stable_hash, weights_fingerprint
from agentbench_rl.estimators.common import dose, match_dose, normalize_advantages
from agentbench_rl.estimators.registry import EstimatorSpec
from agentbench_rl.harness.provenance import machine
from agentbench_rl.models.drrn import build_drrn
from agentbench_rl.models.policy import (
    Policy,
    choice_logprobs,
    load_pretrained,
    pack,
    resolve_device,
    response_logprobs,
    text_layers,
)
from agentbench_rl.models.tiny import TOKENIZER_VERSION, build_tiny
from agentbench_rl.models.vision import build_tiny_vl, load_image_processor
from agentbench_rl.progress import LineProgress, progress_display
from agentbench_rl.rollout.batched import (
    BatchPolicy,
    RolloutBatch,
    rollout_groups,
    training_rewards,
)
from agentbench_rl.rollout.scripted import tokenizer_texts
from agentbench_rl.rollout.workers import EnvPool, LocalEnvPool
from agentbench_rl.spec.records import MetricsRow, with_figures
from agentbench_rl.spec.run_folder import (
    DONE_FILE,
    POLICY,
    RunFolder,
    RunFolderError,
    check_start,
    record_start,
)
from agentbench_rl.train.bc import behaviour_cloning, expert_rows
from agentbench_rl.train.checkpoint import load_training_state, save_checkpoint
from agentbench_rl.train.config import TrainConfig, dump_config, read_run_config

if TYPE_CHECKING:
    from agentbench_rl.models.vllm_engine import VLLMActor

TIMING_PREFIX = "time/"  # metrics that depend on the machine, not on the seed
KL_CLAMP = 10.0  # bound of one token's k3 KL term, as verl's low_var_kl


# ---------------------------------------------------------------------- the policy and its start
def make_policy(
    model: Any, tokenizer: Any, config: TrainConfig, image_processor: Any = None
) -> Policy:
    """Wrap a model in a :class:`Policy` with the config's prompt and sampling settings
    (``image_processor``: a vision-language model's)."""
    layers = text_layers(model)
    return Policy(
        model,
        tokenizer,
        config.prompt_config(),
        temperature=config.temperature,
        top_p=config.top_p,
        max_new_tokens=config.max_new_tokens,
        max_prompt_tokens=config.max_prompt_tokens,
        forward_batch_size=config.forward_batch_size,
        # a model shallower than the configured layer (the tiny one) uses its last layer
        hidden_layer=config.hidden_layer if config.hidden_layer <= layers + 1 else 1,
        image_processor=image_processor,
    )


def load_policy(folder: Path, config: TrainConfig, device: str) -> Policy:
    """A policy saved by :meth:`Policy.save` (checkpoint, BC result or reference)."""
    model, tokenizer = load_pretrained(str(folder), dtype=config.dtype, device=device)
    return make_policy(model, tokenizer, config, load_image_processor(str(folder)))


def bc_key(config: TrainConfig) -> str:
    """Hash of everything the BC result depends on (the folder name in ``bc.cache_dir``): the
    config's warm-start identity and the tokenizer's version."""
    return stable_hash({**config.warm_start_identity(), "tokenizer": TOKENIZER_VERSION})[:16]


def initial_policy(
    config: TrainConfig, device: str, progress: Progress | LineProgress | None
) -> tuple[Policy, dict[str, float]]:
    """The policy RL starts from: the tiny model, the DRRN or a Hugging Face one, after
    behaviour cloning when ``bc.enabled``. A BC result in ``bc.cache_dir`` (its folder named by
    the warm start's identity) is reused, its weights checked against its start record; a
    campaign that ships its start there starts from the same weights on any machine (BC's float
    sums differ between CPUs)."""
    cache = Path(config.bc.cache_dir) / bc_key(config) if config.bc.cache_dir else None
    if config.bc.enabled and cache is not None and (cache / DONE_FILE).is_file():
        check_start(cache)
        stats = json.loads((cache / DONE_FILE).read_text("utf-8"))
        return load_policy(cache, config, device), stats
    warm_seed = config.warm_start_seed()
    image_processor = None
    if config.model == "drrn":
        model, tokenizer = build_drrn(config.drrn, warm_seed)
        model = model.to(device)
    elif config.model in ("tiny", "tiny-vl"):
        sizes = config.tiny if config.model == "tiny" else config.tiny_vl
        texts = tokenizer_texts(
            config.train_env(), config.prompt_config(), sizes.tokenizer_episodes, warm_seed
        )
        if config.model == "tiny":
            model, tokenizer = build_tiny(texts, config.tiny, warm_seed)
        else:
            model, tokenizer, image_processor = build_tiny_vl(texts, config.tiny_vl, warm_seed)
        model = model.to(device)
    else:
        model, tokenizer = load_pretrained(config.model, dtype=config.dtype, device=device)
        image_processor = load_image_processor(config.model)
    policy = make_policy(model, tokenizer, config, image_processor)
    if not config.bc.enabled:
        return policy, {}
    rows = expert_rows(
        config.train_env(),
        config.prompt_config(),
        config.bc.episodes,
        seed_from(warm_seed, "bc-tasks"),
    )
    bar = progress.add_task("behaviour cloning", total=None) if progress else None

    def advance(done: int, total: int) -> None:
        if progress is not None and bar is not None:
            progress.update(bar, completed=done, total=total)

    stats = behaviour_cloning(
        policy, rows, config.bc, warm_seed, config.forward_batch_size, on_step=advance
    )
    if progress is not None and bar is not None:
        progress.remove_task(bar)
    if cache is not None:
        staging = cache.with_name(cache.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        policy.save(staging)
        (staging / DONE_FILE).write_text(json.dumps(stats) + "\n", "utf-8")
        record_start(staging, machine(config.torch_threads))
        shutil.rmtree(cache, ignore_errors=True)
        staging.rename(cache)
    return policy, stats


def make_pool(config: TrainConfig) -> EnvPool:
    """N*G train envs, in this process, on Ray actors (``backend``) or served (``env_server``)."""
    size = config.n_tasks * config.group_size
    if config.env_server is not None:
        if config.backend == "ray":
            raise ValueError(
                "env_server: served envs are stepped from this process (backend local)"
            )
        return LocalEnvPool.of([config.train_env().make(config.env_server) for _ in range(size)])
    if config.backend == "ray":
        from agentbench_rl.rollout.ray_workers import RayEnvPool

        return RayEnvPool(
            config.train_env(), size, workers=config.env_workers, address=config.ray_address
        )
    return LocalEnvPool(config.train_env(), size)


def iteration_rollout(
    pool: EnvPool, actor: BatchPolicy, config: TrainConfig, iteration: int, capture_hidden: bool
) -> RolloutBatch:
    """The rollouts of one iteration: G trajectories on each of N train tasks, in lockstep.

    Tasks, env seeds and the sampler are seeded from (seed, iteration) alone, so every
    estimator of one seed draws the same tasks at an iteration (paired runs).
    """
    tasks = config.train_env().draw_tasks(
        config.n_tasks, seed_from(config.seed, "tasks", iteration), what="train_categories"
    )
    sampler = torch.Generator().manual_seed(seed_from(config.seed, "rollout", iteration) % 2**63)
    return rollout_groups(
        pool,
        actor,
        config.env,
        config.prompt_config(),
        tasks,
        config.group_size,
        seed_from(config.seed, "env", iteration),
        sampler,
        capture_hidden=capture_hidden,
    )


# ---------------------------------------------------------------------- the PPO update
def ppo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor | None,
    entropy: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    n_tokens: int,
    clip_ratio: float,
    kl_coef: float,
    entropy_coef: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The token-mean PPO-clip loss of one chunk (its share of a minibatch of ``n_tokens``).

    All tensors are (rows, tokens); ``advantages`` is the row's advantage on each token.
    Returns the loss to backpropagate and the chunk's sums for the statistics.
    """
    real = mask
    mask = mask.float()
    # Padded positions hold arbitrary log-probs (the padding fill, the model's score of the pad
    # token): zero them before any exponential, since inf * 0 is NaN in the loss and the grads.
    log_ratio = torch.where(real, logprobs - old_logprobs, 0.0)
    ratio = torch.exp(log_ratio)
    clipped = torch.clamp(ratio, 1.0 - clip_ratio, 1.0 + clip_ratio)
    pg = -torch.minimum(ratio * advantages, clipped * advantages)  # PPO eq. 7, negated
    loss_tokens = pg
    with torch.no_grad():
        stats = {
            "pg_loss": float((pg * mask).sum()),
            "clipfrac": float((((ratio - 1.0).abs() > clip_ratio).float() * mask).sum()),
            "approx_kl": float(((ratio - 1.0 - log_ratio) * mask).sum()),  # k3 of KL(old‖new)
        }
    if ref_logprobs is not None:
        # verl's low_var_kl: the log-ratio clamped to ±20 before the exponential and the k3
        # value to ±10, so one token the policy has moved far from the reference cannot
        # dominate the batch; how often the clamp acts is logged (``ppo/kl_clamped``).
        log_ref_ratio = torch.where(real, ref_logprobs - logprobs, 0.0).clamp(-20.0, 20.0)
        raw_kl = torch.exp(log_ref_ratio) - log_ref_ratio - 1.0  # k3: unbiased, always >= 0
        kl = raw_kl.clamp(-KL_CLAMP, KL_CLAMP)
        loss_tokens = loss_tokens + kl_coef * kl
        stats["kl"] = float((kl.detach() * mask).sum())
        stats["kl_clamped"] = float(((raw_kl.detach().abs() > KL_CLAMP).float() * mask).sum())
    if entropy is not None:
        loss_tokens = loss_tokens - entropy_coef * entropy
        stats["entropy"] = float((entropy.detach() * mask).sum())
    loss = (loss_tokens * mask).sum() / n_tokens
    stats["loss"] = float(loss.detach()) * n_tokens
    return loss, stats


def padded(values: list[np.ndarray], width: int, device: torch.device | str) -> torch.Tensor:
    """Right-pad per-row float arrays into a (rows, width) tensor."""
    out = torch.zeros((len(values), width), dtype=torch.float32)
    for row, value in enumerate(values):
        out[row, : len(value)] = torch.from_numpy(np.asarray(value, dtype=np.float32))
    return out.to(device)


def row_logprobs(
    model: Any,
    rollout: RolloutBatch,
    rows: Sequence[int],
    pad_id: int,
    temperature: float,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Log-probs of ``rows``' answers under ``model``: (rows, tokens) with their mask, and the
    entropies when asked. In ``choose`` mode (the rollout holds ``choices``) each row is one
    "token", the chosen action under the softmax over its admissible actions; else the answer's
    tokens."""
    device = next(model.parameters()).device
    prompts = [rollout.prompt_ids[i] for i in rows]
    if rollout.choices:
        logprobs, entropy = choice_logprobs(
            model,
            prompts,
            [rollout.choices[i] for i in rows],
            [rollout.chosen[i] for i in rows],
            pad_id,
            temperature,
            with_entropy,
        )
        mask = torch.ones((len(rows), 1), dtype=torch.bool, device=device)
        return logprobs[:, None], None if entropy is None else entropy[:, None], mask
    packed = pack(prompts, [rollout.response_ids[i] for i in rows], pad_id, device)
    logprobs, token_entropy = response_logprobs(model, packed, temperature, with_entropy)
    return logprobs, token_entropy, packed.response_mask


def row_tokens(rollout: RolloutBatch, row: int) -> int:
    """How many log-probs a row trains: 1 in ``choose`` mode (the action), else its tokens."""
    return 1 if rollout.choices else len(rollout.response_ids[row])


@torch.no_grad()
def reference_logprobs(
    reference: Any, rollout: RolloutBatch, policy: Policy, temperature: float
) -> list[np.ndarray]:
    """The frozen reference's log-probs of every row's answer (see :func:`row_logprobs`)."""
    out: list[np.ndarray] = []
    size = policy.forward_batch_size
    for start in range(0, len(rollout), size):
        rows = list(range(start, min(start + size, len(rollout))))
        logprobs, _, _ = row_logprobs(reference, rollout, rows, policy.pad_id, temperature)
        for k, i in enumerate(rows):
            out.append(logprobs[k, : row_tokens(rollout, i)].cpu().numpy())
    return out


def engine_logprobs(
    learner: Learner, rollout: RolloutBatch, config: TrainConfig
) -> dict[str, float]:
    """With a rollout engine (vLLM): the old log-probs PPO's ratio divides by become the torch
    policy's own, recomputed on the sampled tokens (as verl recomputes them), and the engine's
    are kept as a check: their largest and mean gap to the torch ones show that the engine serves
    the weights pushed after the last update (a push that did nothing shows as a gap of the size
    of that update). With ``top_p < 1`` the engine's are of the nucleus, not comparable: no gap.
    """
    recomputed = reference_logprobs(
        learner.policy.model, rollout, learner.policy, config.temperature
    )
    engine = rollout.logprobs
    rollout.logprobs = recomputed
    if config.top_p < 1.0:
        return {}
    gaps = np.concatenate([np.abs(a - b) for a, b in zip(engine, recomputed, strict=True)])
    return {
        "engine/logprob_gap_max": float(gaps.max()),
        "engine/logprob_gap_mean": float(gaps.mean()),
    }


def ppo_update(
    policy: Policy,
    optimizer: torch.optim.Optimizer,
    rollout: RolloutBatch,
    advantages: np.ndarray,
    ref_logprobs: list[np.ndarray] | None,
    config: TrainConfig,
    generator: torch.Generator,
) -> dict[str, float]:
    """``ppo_epochs`` passes over the rows in shuffled minibatches of ``minibatch_size`` rows;
    each minibatch is one optimiser step (gradients accumulated over forward chunks)."""
    model = policy.model
    model.train()
    device = policy.device
    sums: dict[str, float] = {}
    tokens_seen = 0
    grad_norms = []
    for _ in range(config.ppo_epochs):
        order = torch.randperm(len(rollout), generator=generator).tolist()
        for start in range(0, len(order), config.minibatch_size):
            minibatch = order[start : start + config.minibatch_size]
            n_tokens = sum(row_tokens(rollout, i) for i in minibatch)
            optimizer.zero_grad()
            for offset in range(0, len(minibatch), config.forward_batch_size):
                rows = minibatch[offset : offset + config.forward_batch_size]
                logprobs, entropy, mask = row_logprobs(
                    model,
                    rollout,
                    rows,
                    policy.pad_id,
                    config.temperature,
                    with_entropy=config.entropy_coef > 0,
                )
                width = logprobs.shape[1]
                old = padded([rollout.logprobs[i] for i in rows], width, device)
                ref = (
                    padded([ref_logprobs[i] for i in rows], width, device)
                    if ref_logprobs is not None
                    else None
                )
                row_advantages = torch.tensor(
                    advantages[rows], dtype=torch.float32, device=device
                ).unsqueeze(1)
                loss, stats = ppo_loss(
                    logprobs,
                    old,
                    ref,
                    entropy,
                    row_advantages.expand_as(logprobs),
                    mask,
                    n_tokens,
                    config.clip_ratio,
                    config.kl_coef,
                    config.entropy_coef,
                )
                loss.backward()
                for key, value in stats.items():
                    sums[key] = sums.get(key, 0.0) + value
            grad_norm = float(
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
            )
            if not np.isfinite(grad_norm):  # a step would make every weight NaN
                raise FloatingPointError(
                    f"ppo: the gradient is not finite (norm {grad_norm}); no update was "
                    "applied, the run's last checkpoint is kept (--resume continues from it)"
                )
            grad_norms.append(grad_norm)
            optimizer.step()
            tokens_seen += n_tokens
    model.eval()
    metrics = {f"ppo/{key}": value / max(1, tokens_seen) for key, value in sums.items()}
    metrics["ppo/grad_norm"] = float(np.mean(grad_norms)) if grad_norms else 0.0
    metrics["ppo/tokens"] = float(tokens_seen / max(1, config.ppo_epochs))
    return metrics


# ---------------------------------------------------------------------- validation and logging
def validate(policy: Policy, config: TrainConfig, run: RunFolder, iteration: int) -> MetricsRow:
    """Evaluate the policy on the val split through the harness: the in-memory policy plays as
    the ``hf:`` agent of the weights also saved in ``run/val-policy`` (so the results name a
    folder that replays them); results in ``run/val/iter-NNNN``, and with a training panel
    the panel's in ``run/val/panel-NNNN``. Episodes play in lockstep
    batches of ``forward_batch_size`` (one batched forward per step), which changes no number."""
    from agentbench_rl.harness.config import RunOptions
    from agentbench_rl.harness.evaluate import evaluate

    folder = run.validation_policy
    policy.save(folder)
    row: MetricsRow = {}
    evaluations = [("val", config.validation_eval(folder), run.validation(iteration))]
    panel = config.panel_eval(folder)
    if panel is not None:
        evaluations.append(("panel", panel, run.validation(iteration, "panel")))
    for prefix, eval_config, out in evaluations:
        summary = evaluate(
            eval_config,
            out,
            RunOptions(resume=True, batch_size=config.forward_batch_size),
            agent=PolicyAgent(eval_config.agent, policy, greedy=config.val_greedy),
        )
        row.update(summary.validation_figures(config.val_greedy, prefix))
    return row


def rollout_metrics(rollout: RolloutBatch) -> MetricsRow:
    """Success, return, length and invalid rate of the iteration's trajectories, and the share
    of groups whose trajectories all succeeded or all failed (``train/uniform_groups``: with the
    success reward their episode returns are equal, so an episode-level advantage is 0 there).

    Example:
        >>> from agentbench_rl.rollout.batched import RolloutEpisode
        >>> from agentbench_rl.rollout.episode import EpisodeOutcome
        >>> batch = RolloutBatch(episodes=[
        ...     RolloutEpisode(g, k, EpisodeOutcome("t", "c", s, float(s), 2, 10.0 * s, 0, 0))
        ...     for k, (g, s) in enumerate([(0, True), (0, False), (1, False), (1, False)])])
        >>> rollout_metrics(batch)["train/uniform_groups"]  # group 1 all failed
        0.5
    """
    ended = [episode.outcome for episode in rollout.episodes]
    steps = sum(outcome.steps for outcome in ended)
    lengths = [len(response) for response in rollout.response_ids]
    outcomes: dict[int, set[bool]] = {}
    for episode in rollout.episodes:
        outcomes.setdefault(episode.group, set()).add(episode.outcome.success)
    return {
        "train/success": float(np.mean([outcome.success for outcome in ended])),
        "train/uniform_groups": float(np.mean([len(seen) == 1 for seen in outcomes.values()])),
        "train/return": float(np.mean([outcome.episode_return for outcome in ended])),
        "train/episode_length": float(np.mean([outcome.steps for outcome in ended])),
        "train/invalid_rate": float(sum(o.invalid_actions for o in ended) / max(1, steps)),
        "train/rows": float(len(rollout)),
        "train/response_tokens": float(np.mean(lengths)) if lengths else 0.0,
    }


def _json_ready(row: MetricsRow) -> MetricsRow:
    """The row's JSON values (numpy scalars as Python numbers; anything else left out)."""
    ready: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, bool | int | float | str) or value is None:
            ready[key] = value
    return cast(MetricsRow, ready)


@dataclass(frozen=True)
class StartPoint:
    """Where a run starts or resumes: its checkpoint (``None``: from the start), the iteration
    the checkpoint was taken after, the metrics rows up to that iteration, and the fingerprint
    of the reference the checkpoint was checked against (``None``: not read yet)."""

    checkpoint: Path | None = None
    iteration: int = 0
    metrics: tuple[MetricsRow, ...] = ()
    reference_weights: str | None = None
    #: The last iteration the metrics held when a resumed run found no checkpoint (it trains
    #: again from iteration 0, and says so); ``None`` otherwise.
    lost_iterations: int | None = None
    #: Whether the folder held a run (a resumed run says where it goes on; a fresh one not).
    held: bool = False

    def resume_line(self, run: RunFolder) -> str:
        """What ``train --resume`` says of where it goes on."""
        if self.checkpoint is not None:
            return f"resuming {run.path} from iteration {self.iteration} (its checkpoint)"
        if self.lost_iterations:
            return (
                f"--resume: {run.path} has no checkpoint although its metrics reach iteration "
                f"{self.lost_iterations}: training again from iteration 0"
            )
        return f"--resume: {run.path} holds no checkpoint yet: training from iteration 0"


def _prepare_run(config: TrainConfig, run: RunFolder, resume: bool) -> StartPoint:
    """Check the run folder, then write its ``config.yaml``; called holding the folder's lock.

    Every check comes before the first write, so a refused start or resume changes nothing. A
    folder holding no run (rule 2 of :mod:`~agentbench_rl.spec.run_folder`: a failed start's
    ``config.yaml`` at most) starts afresh, and so does a resumed run that never checkpointed.
    """
    point = StartPoint()
    stored = run.config_file
    run.check_continuation(resume, lambda: config.identity_changes(read_run_config(stored)))
    if run.holds_run():
        metrics = run.read_metrics()
        checkpoint = run.latest_checkpoint()
        if checkpoint is not None:
            reference = weights_fingerprint(run.reference) if config.kl_coef > 0 else None
            state = run.check_checkpoint(checkpoint, config.identity_hash(), reference)
            if state.iteration > config.iterations:
                raise ValueError(
                    f"--resume: the checkpoint is of iteration {state.iteration}, past this "
                    f"config's {config.iterations} iterations"
                )
            if metrics.last_iteration is None or metrics.last_iteration < state.iteration:
                raise RunFolderError(
                    f"{run.metrics_file} ends at iteration {metrics.last_iteration} but the "
                    f"checkpoint is of iteration {state.iteration}: rows were lost, so the run "
                    "cannot resume exactly"
                )
            kept = tuple(metrics.rows[: state.iteration + 1])
            point = StartPoint(checkpoint, state.iteration, kept, reference, held=True)
        else:
            point = StartPoint(lost_iterations=metrics.last_iteration, held=True)
    # Checked: from here on the folder is rewritten. What lies past the start point belongs to
    # iterations that are done again, and a fresh start keeps nothing of an earlier attempt.
    run.restart(point.checkpoint is not None, point.iteration)
    atomic_write_text(run.config_file, dump_config(config))
    return point


class GracefulStop:
    """Ctrl-C or SIGTERM during training: finish the iteration, checkpoint it, then stop.

    A second signal stops at once (the handlers in place before are back after the first).
    Only the main thread can take signals; elsewhere (a Ray task) this does nothing.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for number in (signal.SIGINT, signal.SIGTERM):
                self._previous[number] = signal.signal(number, self._request)

    def _request(self, number: int, frame: Any) -> None:
        self.requested = True
        self.release()

    def release(self) -> None:
        """Put the previous handlers back."""
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}


def _tensorboard(folder: Path) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter(str(folder))


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)


# ---------------------------------------------------------------------- the loop
def train(
    config: TrainConfig,
    out: Path,
    resume: bool = False,
    console: Console | None = None,
) -> list[MetricsRow]:
    """Run (or, with ``resume``, continue) one training run into ``out``; returns its metrics.

    ``out`` receives ``config.yaml``, ``metrics.jsonl`` (one object per iteration),
    ``checkpoint/``, ``reference/``, ``val/iter-NNNN/`` (the harness's results) and, when the run
    finished, ``done.json``.
    """
    config.check()
    if config.engine == "vllm" and config.action_mode != "generate":
        raise ValueError("engine vllm samples free text: use action_mode generate")
    config.check_installed()
    run = RunFolder(out)
    made_folder = not run.path.exists()
    try:
        with run.lock():  # one process trains a run folder (a second stops, naming the holder)
            return _train(config, run, resume, console)
    except BaseException:
        run.remove_start(made_folder)  # a start that failed leaves nothing behind
        raise


@dataclass
class Learner:
    """What an iteration trains with: the policy and its optimiser, the frozen reference (and its
    weights' fingerprint, which checkpoints record), and the actor that samples rollouts (the
    policy itself, or the vLLM engine holding its weights)."""

    policy: Policy
    optimizer: torch.optim.Optimizer
    reference: Any
    reference_weights: str | None
    actor: BatchPolicy
    engine: VLLMActor | None


def setup_learner(
    config: TrainConfig,
    run: RunFolder,
    point: StartPoint,
    device: str,
    progress: Progress | LineProgress,
) -> tuple[Learner, dict[str, float]]:
    """The learner at the start point (the checkpoint's, or the initial policy after BC), and the
    warm start's statistics (empty when resuming)."""
    start_stats: dict[str, float] = {}
    if point.checkpoint is not None:
        policy = load_policy(point.checkpoint / POLICY, config, device)
    else:
        policy, start_stats = initial_policy(config, device, progress)
    optimizer = torch.optim.Adam(policy.model.parameters(), lr=config.learning_rate)
    reference, reference_weights = None, None
    if config.kl_coef > 0:
        reference_weights = point.reference_weights  # read when the checkpoint was checked
        if not run.reference.is_dir():
            policy.save(run.reference)
            reference_weights = None
        reference = load_policy(run.reference, config, device).model.eval()
        for parameter in reference.parameters():
            parameter.requires_grad_(False)
        if reference_weights is None:  # hashed once: a 7B reference is 15 GB to read
            reference_weights = weights_fingerprint(run.reference)
    if point.checkpoint is not None:
        load_training_state(point.checkpoint, optimizer)
    engine: VLLMActor | None = None
    if config.engine == "vllm":
        from agentbench_rl.models.vllm_engine import EngineSettings, VLLMActor

        settings = EngineSettings(config.dtype, config.vllm_gpu_memory_utilization, config.seed)
        engine = VLLMActor(policy, settings)
    actor: BatchPolicy = engine if engine is not None else policy
    learner = Learner(policy, optimizer, reference, reference_weights, actor, engine)
    return learner, start_stats


class MetricsLog:
    """The run's metrics journal while it trains: the rows up to the start point, then one row per
    iteration, each fsynced as it is written (and copied to TensorBoard when installed). The file
    is cut to the start point only when the first new row is written, so a start that fails
    before that leaves the journal as it was."""

    def __init__(self, run: RunFolder, rows: list[MetricsRow], writer: Any) -> None:
        self.run, self.rows, self.writer = run, rows, writer
        self._cut = False

    def append(self, row: MetricsRow) -> None:
        """Record one iteration's row."""
        row = _json_ready(row)
        if not self._cut:
            self.run.write_metrics(self.rows)
            self._cut = True
        with open(self.run.metrics_file, "a", encoding="utf-8") as stream:
            stream.write(json.dumps(row, sort_keys=True) + "\n")
            stream.flush()
            os.fsync(stream.fileno())
        self.rows.append(row)
        if self.writer is not None:
            for key, value in row.items():
                if isinstance(value, int | float) and key != "iteration":
                    self.writer.add_scalar(key, value, row["iteration"])

    def close(self) -> None:
        """Close the TensorBoard writer, if any."""
        if self.writer is not None:
            self.writer.close()


def train_iteration(
    config: TrainConfig,
    learner: Learner,
    pool: EnvPool,
    estimator: EstimatorSpec,
    iteration: int,
) -> MetricsRow:
    """Steps 2-4 of the module docstring for one iteration; returns its metrics row."""
    began = time.perf_counter()
    # 2. rollouts: G trajectories on each of N train tasks, in lockstep
    rollout = iteration_rollout(pool, learner.actor, config, iteration, config.needs_hidden())
    rolled = time.perf_counter()

    # 3. rewards and advantages
    rewards = training_rewards(rollout, config.reward, config.success_reward)
    batch = rollout.step_batch(rewards, with_hidden=config.needs_hidden())
    result = estimator.compute(batch)
    raw = np.asarray(result.advantages, dtype=np.float64)
    trained = raw
    if config.advantage_dose is not None:
        trained = match_dose(raw, config.advantage_dose, seed_from(config.seed, "dose", iteration))
    advantages = normalize_advantages(trained, config.advantage_norm)
    estimated = time.perf_counter()

    # 4. PPO-clip against the sampling policy, KL to the frozen reference
    policy = learner.policy
    engine_stats = engine_logprobs(learner, rollout, config) if learner.engine else {}
    ref_logprobs = (
        reference_logprobs(learner.reference, rollout, policy, config.temperature)
        if learner.reference is not None
        else None
    )
    shuffler = torch.Generator().manual_seed(
        seed_from(config.seed, "minibatches", iteration) % 2**63
    )
    update = ppo_update(
        policy, learner.optimizer, rollout, advantages, ref_logprobs, config, shuffler
    )
    if learner.engine is not None:
        learner.engine.sync()  # push the new weights to the rollout engine
    updated = time.perf_counter()
    row: MetricsRow = {
        "iteration": iteration,
        **rollout_metrics(rollout),
        "adv/raw_mean": float(raw.mean()),
        "adv/raw_std": float(raw.std()),
        "adv/raw_abs_mean": float(np.abs(raw).mean()),
        "adv/dose": dose(raw),
        "adv/trained_dose": dose(trained),
        "adv/mean": float(advantages.mean()),
        "adv/std": float(advantages.std()),
        "adv/min": float(advantages.min()),
        "adv/max": float(advantages.max()),
    }
    named = {f"est/{k}": v for k, v in result.diagnostics.items()} | update | engine_stats
    timed: MetricsRow = {
        "time/rollout_s": rolled - began,
        "time/estimator_s": estimated - rolled,
        "time/update_s": updated - estimated,
    }
    return {**with_figures(row, named), **timed}


def _train(
    config: TrainConfig, run: RunFolder, resume: bool, console: Console | None
) -> list[MetricsRow]:
    device = resolve_device(config.device)  # a missing GPU is refused before any write
    point = _prepare_run(config, run, resume)
    if point.held and console is not None:
        console.print(escape(point.resume_line(run)), highlight=False, soft_wrap=True)
    _seed_everything(config.seed)
    config.use_torch_threads()
    with progress_display(console) as progress, heap.iterations():
        # 1. the policy, its optimiser and the frozen reference
        learner, start_stats = setup_learner(config, run, point, device, progress)
        pool = make_pool(config)
        estimator, identity = config.estimator_spec(), config.identity_hash()
        metrics = MetricsLog(run, list(point.metrics), _tensorboard(run.tensorboard))
        label = f"{config.env} {config.estimator} seed {config.seed}"
        bar = progress.add_task(label, total=config.iterations, completed=point.iteration, every=1)
        stop = GracefulStop()
        try:
            if point.iteration == 0 and not metrics.rows:  # iteration 0: validated, not trained
                began = time.perf_counter()
                row: MetricsRow = {
                    **with_figures({"iteration": 0}, start_stats),  # bc/... of the warm start
                    **validate(learner.policy, config, run, 0),
                }
                metrics.append({**row, "time/val_s": time.perf_counter() - began})
            for iteration in range(point.iteration + 1, config.iterations + 1):
                began = time.perf_counter()
                row = train_iteration(config, learner, pool, estimator, iteration)  # 2-4
                # 5. validation, metrics, checkpoint
                last = iteration == config.iterations
                if iteration % config.val_every == 0 or last:
                    validated = time.perf_counter()
                    row.update(validate(learner.policy, config, run, iteration))
                    row["time/val_s"] = time.perf_counter() - validated
                row["time/iteration_s"] = time.perf_counter() - began
                metrics.append(row)
                if iteration % config.checkpoint_every == 0 or last or stop.requested:
                    save_checkpoint(
                        run,
                        learner.policy,
                        learner.optimizer,
                        iteration,
                        identity,
                        learner.reference_weights,
                    )
                if stop.requested and not last:
                    raise KeyboardInterrupt  # checkpointed: --resume continues from here
                heap.settle()  # what lives on (the run's caches) out of the collector's scans
                shown = f" val {row['val_success']:.2f}" if "val_success" in row else ""
                progress.update(bar, completed=iteration, description=label + shown)
        finally:
            stop.release()
            pool.close()
            metrics.close()
    final = run.latest_checkpoint()
    run.write_done(config.iterations, run.read_state(final).iteration if final else None)
    return metrics.rows


def comparable(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The metric rows without timings: what two runs of one config must agree on."""
    return [{k: v for k, v in row.items() if not k.startswith(TIMING_PREFIX)} for row in metrics]

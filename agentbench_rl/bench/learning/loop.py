"""The learning loop of ``bench learning``: sample, estimate, update, evaluate J exactly.

Per (MDP, estimator) job, all seeds advance together (one table of logits per seed, stacked):

1. each seed draws its random numbers for the iteration from ``seed_from("learning", mdp,
   seed, iteration)``: the tasks, one uniform per (trajectory, step) for the action and one for
   the outcome, the observation variants, the hidden-state noise and the minibatch keys. They do
   not depend on the estimator, so two estimators whose policies agree play the same
   trajectories (common random numbers) and their paired difference has less noise;
2. every trajectory of every seed is played in lockstep, by inverse-CDF sampling with those
   uniforms (vectorised over trajectories);
3. the rows go into one ``StepBatch`` (group = (seed, task draw)), exactly the columns the real
   envs produce, and ``compute(name, batch, **params)`` gives the advantages; every estimator
   statistic is per group, so batching the seeds changes nothing. The ``oracle`` label is no
   estimator: it trains on the exact ``A_t(s, a)`` of the policy that played the batch
   (``mdp.exact_advantages``, undiscounted as J is, or ``oracle:gamma=0.95``), which only an
   MDP whose model is known can give, so it lives here and not in the registry. It is the
   headroom: an estimator's gain over GRPO reads as a share of the oracle's;
4. PPO-clip (``ppo.py``) updates each seed's table;
5. J(π) of every seed by exact dynamic programming (``mdp.exact_success``).

A job's result depends only on its MDP, estimator, seeds and settings, never on the number of
workers or the order jobs run in.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from agentbench_rl.bench.learning.family import FAMILY
from agentbench_rl.bench.learning.mdp import (
    FiniteMDP,
    HiddenFeatures,
    exact_advantages,
    exact_success,
    softmax,
)
from agentbench_rl.bench.learning.ppo import PPOSettings, Rows, TabularAdam, ppo_update
from agentbench_rl.core.batch import StepBatch
from agentbench_rl.core.hashing import seed_from
from agentbench_rl.estimators import EstimatorParams, compute, runnable
from agentbench_rl.spec.assignments import parse_named
from agentbench_rl.train.config import TrainConfig


@dataclass(frozen=True)
class Learner:
    """What one learning run trains with, under a label: a registry estimator and the
    parameters it runs with, or the :data:`ORACLE` (a label of the testbed, not an estimator).

    Example:
        >>> learner = Learner.parse("gigpo:anchor=state,omega=0.5")
        >>> learner.label, learner.name, learner.params
        ('gigpo:anchor=state,omega=0.5', 'gigpo', {'anchor': 'state', 'omega': 0.5})
    """

    label: str
    name: str
    params: EstimatorParams = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> Learner:
        """``name`` or ``name:key=value,key=value`` (read by
        :func:`~agentbench_rl.spec.assignments.parse_named`), labelled by the text as typed.

        Example:
            >>> Learner.parse("gigpo:anchor=state,omega=0.5").params
            {'anchor': 'state', 'omega': 0.5}
        """
        name, params = parse_named(text)
        return cls(text, name, params)


#: The label of the exact advantage of the current policy (see the module docstring, step 3).
ORACLE = "oracle"
# The optional batch columns the testbed's rows carry: an estimator that needs another is left out.
PROVIDED_COLUMNS = ("hidden",)
# Configuration, not logic: runs besides an estimator's defaults. GiGPO keyed by the true state
# is the oracle of the aliasing claim.
EXTRA_RUNS: dict[str, tuple[str, ...]] = {"gigpo": ("gigpo:anchor=state",)}


def default_estimators() -> tuple[str, ...]:
    """Every registered estimator (entry points included) whose needs the testbed provides, at
    its documented defaults, each followed by its :data:`EXTRA_RUNS`; then the oracle.

    Example:
        >>> default_estimators()[:4], default_estimators()[-1]
        (('grpo', 'rloo', 'gigpo', 'gigpo:anchor=state'), 'oracle')
    """
    return (
        *(
            label
            for name in runnable(PROVIDED_COLUMNS)
            for label in (name, *EXTRA_RUNS.get(name, ()))
        ),
        ORACLE,
    )


def check_oracle_params(params: EstimatorParams) -> None:
    """The oracle takes ``gamma`` in [0, 1] and nothing else; ``ValueError`` naming the problem.

    Example:
        >>> check_oracle_params({"gamma": 0.95})
    """
    unknown = sorted(set(params) - {"gamma"})
    if unknown:
        raise ValueError(f"oracle: unknown parameter(s) {', '.join(unknown)}; accepted: gamma")
    gamma = params.get("gamma", 1.0)
    if isinstance(gamma, bool) or not isinstance(gamma, int | float) or not 0 <= gamma <= 1:
        raise ValueError(f"oracle: gamma must be a number in [0, 1], got {gamma!r}")


def oracle_advantages(
    mdp: FiniteMDP, policies: np.ndarray, played: Played, gamma: float = 1.0
) -> np.ndarray:
    """The exact ``A_t(s_t, a_t)`` of every played row under its seed's policy."""
    table = exact_advantages(mdp, policies, gamma)
    return table[played.seed, played.t, played.state, played.action]


@dataclass(frozen=True)
class LearningConfig:
    """Settings of a run; every job's result file carries them.

    ``group_size`` is the trainer's G; ``tasks`` the task draws per iteration (N).
    """

    iterations: int = 100
    tasks: int = 4
    group_size: int = TrainConfig().group_size
    ppo: PPOSettings = field(default_factory=PPOSettings)
    hidden: HiddenFeatures = field(default_factory=HiddenFeatures)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


@dataclass(frozen=True)
class SeedDraws:
    """One seed's random numbers for one iteration (see the module docstring, step 1)."""

    tasks: np.ndarray  # (N,) task index
    action: np.ndarray  # (N·G, H) uniforms
    outcome: np.ndarray  # (N·G, H) uniforms
    variant: np.ndarray  # (N·G, H) observation variant
    noise: np.ndarray  # (N·G, H, dim) hidden-state noise
    order: np.ndarray  # (N·G, H) minibatch keys

    @classmethod
    def draw(cls, mdp: FiniteMDP, seed: int, iteration: int, config: LearningConfig) -> SeedDraws:
        """The draws of ``seed`` at ``iteration`` (independent of the estimator)."""
        rng = np.random.default_rng(seed_from("learning", mdp.name, seed, iteration))
        trajs, horizon = config.tasks * config.group_size, mdp.horizon
        return cls(
            tasks=rng.integers(0, len(mdp.starts), size=config.tasks),
            action=rng.random((trajs, horizon)),
            outcome=rng.random((trajs, horizon)),
            variant=rng.integers(0, mdp.obs_variants, size=(trajs, horizon)),
            noise=rng.standard_normal((trajs, horizon, config.hidden.dim)),
            order=rng.random((trajs, horizon)),
        )


def inverse_cdf(probabilities: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """One draw per row of a (n, k) probability matrix, from uniforms in [0, 1).

    Example:
        >>> inverse_cdf(np.array([[0.2, 0.8], [0.2, 0.8]]), np.array([0.1, 0.5])).tolist()
        [0, 1]
    """
    cumulative = np.cumsum(probabilities, axis=1)
    return np.minimum((uniforms[:, None] >= cumulative).sum(axis=1), probabilities.shape[1] - 1)


@dataclass(frozen=True)
class Played:
    """The rows of one iteration over all seeds (one entry per step)."""

    seed: np.ndarray  # index into the seed stack
    traj: np.ndarray
    t: np.ndarray
    state: np.ndarray
    action: np.ndarray
    landed: np.ndarray  # the state the step led to
    reward: np.ndarray
    logprob: np.ndarray
    variant: np.ndarray
    next_variant: np.ndarray  # the variant the next observation is rendered with
    last_action: np.ndarray  # −1 at t = 0
    noise: np.ndarray  # (rows, dim)
    order: np.ndarray  # minibatch key


def play(mdp: FiniteMDP, policies: np.ndarray, draws: list[SeedDraws], group_size: int) -> Played:
    """Play every trajectory of every seed in lockstep (vectorised over trajectories).

    Example:
        >>> mdp = FAMILY["lucky_rare"]()
        >>> config = LearningConfig(tasks=2, group_size=3)
        >>> draws = [SeedDraws.draw(mdp, seed, 1, config) for seed in (0, 1)]
        >>> played = play(mdp, softmax(mdp.initial_logits)[None].repeat(2, axis=0), draws, 3)
        >>> sorted(set(played.traj.tolist())), int(played.t.max()) < mdp.horizon
        ([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], True)
    """
    per_seed = len(draws[0].action)
    seed_of = np.repeat(np.arange(len(draws)), per_seed)
    starts = np.concatenate([np.repeat(mdp.starts[d.tasks], group_size) for d in draws])
    action_u = np.concatenate([d.action for d in draws])
    outcome_u = np.concatenate([d.outcome for d in draws])
    variant = np.concatenate([d.variant for d in draws])
    noise = np.concatenate([d.noise for d in draws])
    order = np.concatenate([d.order for d in draws])
    state = starts.copy()
    last = np.full(len(state), -1)
    alive = np.ones(len(state), dtype=bool)
    parts: list[dict[str, np.ndarray]] = []
    for t in range(mdp.horizon):
        trajs = np.flatnonzero(alive)
        if trajs.size == 0:
            break
        here = state[trajs]
        probs = policies[seed_of[trajs], mdp.context[here]]
        action = inverse_cdf(probs, action_u[trajs, t])
        outcome = inverse_cdf(mdp.probability[here, action], outcome_u[trajs, t])
        landed = mdp.successor[here, action, outcome]
        parts.append(
            {
                "seed": seed_of[trajs],
                "traj": trajs,
                "t": np.full(trajs.size, t),
                "state": here,
                "action": action,
                "landed": landed,
                "reward": mdp.reward[here, action, outcome],
                "logprob": np.log(probs[np.arange(trajs.size), action]),
                "variant": variant[trajs, t],
                "next_variant": variant[trajs, min(t + 1, mdp.horizon - 1)],
                "last_action": last[trajs],
                "noise": noise[trajs, t],
                "order": order[trajs, t],
            }
        )
        state[trajs], last[trajs] = landed, action
        alive[trajs] = ~mdp.terminal[landed]
    return Played(**{key: np.concatenate([p[key] for p in parts]) for key in parts[0]})


def step_batch(
    mdp: FiniteMDP, played: Played, group_size: int, hidden: HiddenFeatures
) -> StepBatch:
    """The rows as the real envs give them: group = (seed, task draw), keys as strings.

    Example:
        >>> mdp = FAMILY["sparse_anchors"]()
        >>> config = LearningConfig(tasks=2, group_size=3)
        >>> draws = [SeedDraws.draw(mdp, 0, 1, config)]
        >>> played = play(mdp, softmax(mdp.initial_logits)[None], draws, 3)
        >>> batch = step_batch(mdp, played, 3, config.hidden)
        >>> batch.n_groups, batch.n_trajs, batch.hidden.shape[1]
        (2, 6, 32)
    """
    obs_key, next_obs_key = mdp.obs_key[played.state], mdp.obs_key[played.landed]
    if mdp.obs_variants > 1:  # a noisy rendering: the text differs with the flavour line
        obs_key = obs_key + np.char.add("/", played.variant.astype(str)).astype(object)
        next_obs_key = next_obs_key + np.char.add("/", played.next_variant.astype(str)).astype(
            object
        )
    return StepBatch(
        group=played.traj // group_size,
        traj=played.traj,
        t=played.t,
        reward=played.reward,
        obs_key=obs_key,
        state_key=mdp.state_key[played.state],
        action_key=np.array(mdp.actions, dtype=object)[played.action],
        valid=np.ones(len(played.t), dtype=bool),
        hidden=hidden.embed(mdp.features[played.state], played.last_action, played.noise),
        next_obs_key=next_obs_key,
    )


def minibatches(played: Played, n_seeds: int, count: int) -> np.ndarray:
    """Minibatch of each row: its rank among its seed's rows by the row's key, in ``count``
    near-equal slices.

    Example:
        >>> mdp = FAMILY["lucky_rare"]()
        >>> config = LearningConfig(tasks=2, group_size=4)
        >>> draws = [SeedDraws.draw(mdp, 0, 1, config)]
        >>> played = play(mdp, softmax(mdp.initial_logits)[None], draws, 4)
        >>> sizes = np.bincount(minibatches(played, 1, 4))
        >>> len(sizes), int(sizes.max() - sizes.min()) <= 1  # four near-equal slices
        (4, True)
    """
    order = np.lexsort((played.order, played.seed))
    sizes = np.bincount(played.seed, minlength=n_seeds)
    first = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order)) - first[played.seed[order]]
    return rank * count // sizes[played.seed]


@dataclass(frozen=True)
class JobResult:
    """Curves J(π) (seeds, iterations + 1) and the estimator's diagnostics, means over
    iterations (each iteration's batch holds every seed)."""

    curves: np.ndarray
    diagnostics: dict[str, float]


def run_job(mdp_name: str, spec: Learner, seeds: list[int], config: LearningConfig) -> JobResult:
    """Train one estimator on one MDP for every seed; J after every iteration.

    Example:
        >>> config = LearningConfig(iterations=2, tasks=2, group_size=4)
        >>> result = run_job("lucky_rare", Learner("grpo", "grpo"), [0, 1], config)
        >>> result.curves.shape
        (2, 3)
    """
    mdp = FAMILY[mdp_name]()
    adam = TabularAdam(
        np.repeat(mdp.initial_logits[None], len(seeds), axis=0),
        betas=config.ppo.betas,
        eps=config.ppo.adam_eps,
    )
    curves = np.zeros((len(seeds), config.iterations + 1))
    curves[:, 0] = exact_success(mdp, softmax(adam.logits))
    totals: dict[str, float] = {}
    for iteration in range(1, config.iterations + 1):
        draws = [SeedDraws.draw(mdp, seed, iteration, config) for seed in seeds]
        played = play(mdp, softmax(adam.logits), draws, config.group_size)
        if spec.name == ORACLE:
            advantages = oracle_advantages(mdp, softmax(adam.logits), played, **spec.params)
            diagnostics = {"singleton_rate": 0.0, "mean_group_size": 0.0}
        else:
            batch = step_batch(mdp, played, config.group_size, config.hidden)
            result = compute(spec.name, batch, **spec.params)
            advantages, diagnostics = result.advantages, result.diagnostics
        rows = Rows(
            seed=played.seed,
            context=mdp.context[played.state],
            action=played.action,
            old_logprob=played.logprob,
            minibatch=minibatches(played, len(seeds), config.ppo.minibatches),
        )
        ppo_update(adam, rows, advantages, config.ppo)
        curves[:, iteration] = exact_success(mdp, softmax(adam.logits))
        for key in ("singleton_rate", "mean_group_size"):
            totals[key] = totals.get(key, 0.0) + diagnostics[key]
    return JobResult(curves, {key: v / config.iterations for key, v in totals.items()})

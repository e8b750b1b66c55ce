"""Our training config -> verl's Hydra config, and the settings our verl code reads at run time.

``agentbench-rl train --engine verl`` maps :class:`~agentbench_rl.train.config.TrainConfig` onto
verl's own ``ppo_trainer`` config (composed from verl's package, checked by verl's
``validate_config``):

==========================  =====================================================================
ours                        verl
==========================  =====================================================================
n_tasks                     data.train_batch_size (tasks per step)
group_size                  actor_rollout_ref.rollout.n (verl repeats each task n times = group)
max_prompt/new_tokens       data.max_prompt_length / data.max_response_length
temperature, top_p          actor_rollout_ref.rollout.temperature / top_p
kl_coef                     actor.use_kl_loss, actor.kl_loss_coef, kl_loss_type=low_var_kl
clip_ratio, entropy_coef    actor.clip_ratio, actor.entropy_coeff (token-mean aggregation)
learning_rate, max_grad..   actor.optim.lr, actor.optim.clip_grad
minibatch_size (rows)       actor.ppo_mini_batch_size = minibatch_size / group_size (verl counts
                            tasks and multiplies by n)
forward_batch_size          the micro-batch sizes per GPU
iterations                  trainer.total_training_steps
checkpoint_every            trainer.save_freq
seed                        data.seed, actor.data_loader_seed, rollout.seed
estimator (+params), gamma, algorithm.adv_estimator=agentbench: the advantage step of
invalid_penalty, reward,    ``trainer.AgentBenchTrainer`` computes them with our estimators
success_reward,             (these settings travel in ``agent_loop.yaml``), then
advantage_norm              ``normalize_advantages`` over the batch's rows, as the home trainer
train_categories            the rows of ``verl-data/train.parquet`` (tasks of those categories)
val_limit                   the rows of ``verl-data/val.parquet``
val_greedy, val_seeds       refused unless at their defaults (see below)
==========================  =====================================================================

One difference in kind from the home trainer: verl draws each step's tasks from its seeded,
shuffled dataset without replacement within an epoch (``data.seed``), where the home trainer
draws them with replacement from ``(seed, iteration)``; env resets follow the home trainer's
rule (``agent_loop.reset_seed``).

Validation runs through our harness on exported checkpoints (``--agent hf:``), not inside
verl (``trainer.test_freq=-1``), so leaderboard numbers keep coming from the harness; settings
that only shape the home trainer's validation (:data:`VALIDATION_SETTINGS`) are refused rather
than silently ignored. Anything
else of verl's is set with ``verl.KEY=VALUE`` overrides (``verl.trainer.n_gpus_per_node=8``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from agentbench_rl.train.config import TrainConfig

#: The name our agent loop is registered under (``actor_rollout_ref.rollout.agent``).
AGENT_NAME = "agentbench"
#: The name of the advantage estimator verl's config names (computed by our trainer subclass).
ADV_ESTIMATOR = "agentbench"
AGENT_LOOP_FILE = "agent_loop.yaml"
AGENT_LOOP_TARGET = "agentbench_rl.integrations.verl.agent_loop.AgentBenchAgentLoop"
VERL_OVERRIDE_PREFIX = "verl."
#: Our validation settings that only the home trainer carries out (verl's run validates
#: nothing: its checkpoints are evaluated through the harness afterwards); set to anything but
#: their defaults, the verl engine refuses them rather than ignore them.
VALIDATION_SETTINGS = ("val_greedy", "val_seeds")


def _plain(value: Any) -> Any:
    """A Hydra/OmegaConf node as plain Python (dicts and lists), anything else as it is."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf
    except ImportError:
        return value
    if isinstance(value, DictConfig | ListConfig):
        return OmegaConf.to_container(value, resolve=True)
    return value


def check_verl_config(config: TrainConfig) -> TrainConfig:
    """``config``, checked for what verl cannot do (before any work); the config itself is
    what verl's workers read (:func:`write_agent_loop_file`).

    Example:
        >>> from agentbench_rl.train.config import TrainConfig
        >>> check_verl_config(TrainConfig(env="sokoban", estimator="grpo")).estimator
        'grpo'
    """
    config.check()
    if config.needs_hidden():
        raise ValueError(
            f"estimator '{config.estimator}' needs the actor's hidden state of every step, which "
            "the verl engine does not provide: verl 0.9's rollout servers return token ids and "
            "log-probs only and its actor workers have no forward that returns hidden states "
            "(it would take a custom actor-worker method, one extra forward per step row); "
            "train it with the home trainer (engine hf or vllm)"
        )
    if config.env == "visual_sokoban":
        raise ValueError(
            "engine verl sends text prompts only; visual_sokoban's images would be dropped "
            "(train vision-language policies with the home trainer)"
        )
    if config.action_mode != "generate":
        raise ValueError("engine verl samples free text: use action_mode generate")
    if config.advantage_dose is not None:
        raise ValueError("advantage_dose: the dose-matched comparison runs on the home trainer")
    defaults = type(config)(env=config.env)
    changed = [
        name for name in VALIDATION_SETTINGS if getattr(config, name) != getattr(defaults, name)
    ]
    if changed:
        raise ValueError(
            f"engine verl does not validate while training (trainer.test_freq=-1), so "
            f"{', '.join(changed)} would be ignored: drop them and evaluate the exported "
            "checkpoints through the harness (agentbench-rl eval --agent 'hf:FOLDER?greedy=true' "
            "--seeds 0 1 2)"
        )
    return config


def write_agent_loop_file(config: TrainConfig, folder: Path) -> Path:
    """Write the agent-loop file verl reads (``agent_loop_config_path``), carrying the whole
    training config to every Ray process (no plugin or environment variable has to reach the
    workers); returns its path."""
    path = Path(folder) / AGENT_LOOP_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {"name": AGENT_NAME, "_target_": AGENT_LOOP_TARGET, "config": config.to_dict()}
    path.write_text(yaml.safe_dump([entry], sort_keys=False), "utf-8")
    return path


def train_config_of(values: Any) -> TrainConfig:
    """The training config an agent-loop entry carries (a mapping or a Hydra node), checked as
    it is read."""
    from agentbench_rl.train.config import config_from_dict

    return config_from_dict(_plain(values))


def read_agent_loop_config(path: str | Path) -> TrainConfig:
    """The training config of the ``agentbench`` entry of an agent-loop file."""
    entries = yaml.safe_load(Path(path).read_text("utf-8")) or []
    for entry in entries:
        if entry.get("name") == AGENT_NAME:
            if "config" not in entry:
                raise ValueError(
                    f"{path}: written by an older agentbench-rl (no training config); "
                    "launch the run again with agentbench-rl train --engine verl --resume"
                )
            return train_config_of(entry["config"])
    raise ValueError(f"{path}: no agent loop named '{AGENT_NAME}'")


def split_overrides(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split ``key=value`` overrides into ours and verl's (``verl.`` prefix, removed).

    Example:
        >>> split_overrides(["seed=1", "verl.trainer.nnodes=2"])
        (['seed=1'], ['trainer.nnodes=2'])
    """
    ours, theirs = [], []
    for override in overrides:
        if override.startswith(VERL_OVERRIDE_PREFIX):
            theirs.append(override.removeprefix(VERL_OVERRIDE_PREFIX))
        else:
            ours.append(override)
    return ours, theirs


def verl_overrides(config: TrainConfig, run: Path, data: Mapping[str, Path]) -> list[str]:
    """Hydra overrides of verl's ``ppo_trainer`` config for one run (see the module table).

    ``data`` holds the ``train`` and ``val`` parquet files of ``agentbench-rl verl-data``.

    Example:
        >>> from agentbench_rl.train.config import TrainConfig
        >>> overrides = verl_overrides(TrainConfig(n_tasks=4, group_size=8), Path("run"),
        ...                            {"train": Path("t.parquet"), "val": Path("v.parquet")})
        >>> "data.train_batch_size=4" in overrides, "actor_rollout_ref.rollout.n=8" in overrides
        (True, True)
    """
    run = Path(run).resolve()
    actor = "actor_rollout_ref.actor"
    rollout = "actor_rollout_ref.rollout"
    mini_batch = max(1, config.minibatch_size // config.group_size)
    micro = config.forward_batch_size
    name = f"{config.env}-{config.estimator}-seed{config.seed}"
    return [
        f"data.train_files={Path(data['train']).resolve()}",
        f"data.val_files={Path(data['val']).resolve()}",
        f"data.train_batch_size={config.n_tasks}",
        f"data.max_prompt_length={config.max_prompt_tokens}",
        f"data.max_response_length={config.max_new_tokens}",
        f"data.seed={config.seed}",
        "data.filter_overlong_prompts=false",
        "data.dataloader_num_workers=0",
        f"actor_rollout_ref.model.path={config.model}",
        f"{actor}.optim.lr={config.learning_rate}",
        f"{actor}.optim.clip_grad={config.max_grad_norm}",
        f"{actor}.ppo_mini_batch_size={mini_batch}",
        f"{actor}.ppo_micro_batch_size_per_gpu={micro}",
        f"{actor}.ppo_epochs={config.ppo_epochs}",
        f"{actor}.clip_ratio={config.clip_ratio}",
        f"{actor}.entropy_coeff={config.entropy_coef}",
        "actor_rollout_ref.actor.loss_agg_mode=token-mean",
        f"{actor}.use_kl_loss={str(config.kl_coef > 0).lower()}",
        f"{actor}.kl_loss_coef={config.kl_coef}",
        f"{actor}.kl_loss_type=low_var_kl",
        f"{actor}.data_loader_seed={config.seed}",
        f"{actor}.checkpoint.save_contents=[model,optimizer,extra,hf_model]",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={micro}",
        f"{rollout}.log_prob_micro_batch_size_per_gpu={micro}",
        f"{rollout}.name=vllm",
        f"{rollout}.n={config.group_size}",
        f"{rollout}.temperature={config.temperature}",
        f"{rollout}.top_p={config.top_p}",
        f"{rollout}.seed={config.seed}",
        f"{rollout}.agent.default_agent_loop={AGENT_NAME}",
        f"{rollout}.agent.agent_loop_config_path={run / AGENT_LOOP_FILE}",
        f"algorithm.adv_estimator={ADV_ESTIMATOR}",
        f"algorithm.gamma={config.gamma}",
        "algorithm.use_kl_in_reward=false",
        "critic.enable=false",
        f"trainer.total_training_steps={config.iterations}",
        f"trainer.save_freq={config.checkpoint_every}",
        "trainer.test_freq=-1",
        "trainer.val_before_train=false",
        f"trainer.default_local_dir={run / 'checkpoints'}",
        "trainer.project_name=agentbench-rl",
        f"trainer.experiment_name={name}",
        "trainer.logger=[console]",
        "trainer.use_v1=true",
        "trainer.v1.trainer_mode=sync",
    ]


def compose(overrides: Sequence[str]) -> DictConfig:
    """verl's own ``ppo_trainer`` config with ``overrides``, checked by verl's
    ``validate_config`` (a bad value raises ``ValueError`` naming verl's complaint)."""
    import verl.trainer
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    folder = Path(verl.trainer.__file__).parent / "config"
    try:
        with initialize_config_dir(config_dir=str(folder), version_base=None):
            config = hydra_compose(config_name="ppo_trainer", overrides=list(overrides))
        validate_config(
            config=config,
            use_reference_policy=need_reference_policy(config),
            use_critic=need_critic(config),
        )
    except (HydraException, OmegaConfBaseException, AssertionError, ValueError) as problem:
        first = str(problem).strip().splitlines()[0] if str(problem).strip() else repr(problem)
        raise ValueError(f"verl config: {first}") from None
    return config


def check_supported(verl_config: Any) -> None:
    """Reject verl settings our advantage step does not carry out (it replaces verl's, which
    is where the KL-in-reward penalty and rollout importance weights would be applied)."""
    algorithm = verl_config.algorithm
    if algorithm.get("use_kl_in_reward", False):
        raise ValueError("engine verl: algorithm.use_kl_in_reward is not supported (KL is a loss)")
    correction = algorithm.get("rollout_correction") or {}
    for key in ("rollout_is", "rollout_rs"):
        if correction.get(key) is not None:
            raise ValueError(f"engine verl: algorithm.rollout_correction.{key} is not supported")

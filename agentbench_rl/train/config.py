"""The trainer's configuration: every number of the method is a field with its default.

Defaults are the GiGPO paper's / verl-agent's settings (G = 8 trajectories on each of N = 16
tasks per iteration, PPO clip 0.2, low-variance KL 0.01 to the frozen reference, invalid-action
penalty 0.1, success reward 10, gamma 0.95). A config comes from a YAML file (``baselines/*.yaml``)
plus ``key=value`` overrides (``bc.epochs=3``, ``estimator_params.omega=0.5``); the values of
overrides are parsed as YAML scalars, so ``val_limit=null`` and ``lr=1e-4`` do what they say.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo

from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.envs import tasks_of_categories
from agentbench_rl.envs.spec import EnvSpec
from agentbench_rl.estimators.common import AdvantageNorm
from agentbench_rl.estimators.registry import EstimatorSpec
from agentbench_rl.estimators.registry import resolve as resolve_estimator
from agentbench_rl.extras import install_hint, missing_modules
from agentbench_rl.models.drrn_features import DRRNConfig
from agentbench_rl.models.hub import check_loadable
from agentbench_rl.models.tiny import TinyModelConfig, TinyVLConfig
from agentbench_rl.prompting import ActionMode, PromptConfig
from agentbench_rl.rollout.batched import Reward
from agentbench_rl.spec.assignments import parse_assignment
from agentbench_rl.spec.typed import (
    Flag,
    Number,
    Seed,
    Spec,
    Text,
    Whole,
    did_you_mean,
    section_of,
)

if TYPE_CHECKING:
    from agentbench_rl.harness.config import EvalConfig

#: Field metadata of a setting that changes no number of a run: where or how fast it runs, or
#: how long it goes on. :meth:`TrainConfig.identity` leaves these out, so a run may resume with
#: other values of them (another Ray address, more iterations) but with nothing else changed.
RUN_OPTION = {"changes_numbers": False}
#: Field metadata of a setting the warm start depends on (the tiny model's tokenizer and init,
#: behaviour cloning): :func:`warm_start_identity` is these fields of the identity, and a cached
#: BC result is reused only where they all agree.
WARM_START = {"warm_start": True}
#: Field metadata of a setting added after runs were recorded, whose default does what those
#: runs did: at its default it is left out of the identity, so their identity hashes, resumes
#: and BC cache keys stay what they were; any other value is in it as usual.
ADDED_LATER = {"identity_at_default": False}
#: The version of the config format. 1: the flat keys every run folder, sweep file and
#: leaderboard entry written so far holds (a file without ``config_version`` is of version 1).
CONFIG_VERSION = 1

#: The sections of a run's declaration, in the order the class declares its fields:
#: ``train --show-config`` prints the config so, each under its heading. A file keeps flat keys
#: (``config_version`` 1: what every run folder, sweep file and override already spells), so a
#: section is a heading, not a level of nesting; ``tests/train/test_train_config.py`` holds this
#: table and the class together.
SECTIONS: dict[str, tuple[str, ...]] = {
    "the run": (
        *("config_version", "env", "env_kwargs", "estimator", "estimator_params", "model"),
        *("seed", "iterations"),
    ),
    "rollouts": (
        *("n_tasks", "group_size", "train_split", "train_categories", "train_panel"),
        *("max_steps", "history"),
        *("history_observations", "instruction", "action_mode", "temperature", "top_p"),
        *("max_new_tokens", "max_prompt_tokens", "forward_batch_size"),
    ),
    "rewards and the estimator": (
        *("reward", "success_reward", "invalid_penalty", "gamma", "hidden_layer"),
        *("advantage_norm", "advantage_dose"),
    ),
    "PPO-clip": (
        *("learning_rate", "clip_ratio", "kl_coef", "entropy_coef", "ppo_epochs"),
        *("minibatch_size", "max_grad_norm"),
    ),
    "validation and checkpoints": (
        *("val_every", "val_split", "val_limit", "val_categories", "val_seeds", "val_greedy"),
        "checkpoint_every",
    ),
    "where it runs": (
        *("backend", "ray_address", "env_workers", "env_server", "engine"),
        *("vllm_gpu_memory_utilization", "device", "dtype", "torch_threads"),
    ),
    "the tiny models and the warm start": ("tiny", "tiny_vl", "drrn", "bc"),
}

Positive = Annotated[Whole, Field(ge=1)]
#: The largest counts a run takes (a typo of a few digits is refused before any work, not
#: found out hours later): iterations, tasks and trajectories per iteration, Ray env actors,
#: steps and tokens of an episode.
MAX_ITERATIONS = 1_000_000
MAX_TASKS = 100_000
MAX_GROUP = 4_096
MAX_ENV_WORKERS = 1_024
MAX_STEPS = 100_000
MAX_TOKENS = 1_048_576
Fraction = Annotated[Number, Field(ge=0, le=1)]
NonNegative = Annotated[Number, Field(ge=0)]
Backend = Literal["local", "ray"]
Engine = Literal["hf", "vllm"]
DType = Literal["float32", "bfloat16", "float16"]
#: The models a run builds on the spot (``model:``), and the config section each one reads.
BUILT_MODELS = {"tiny": "tiny", "tiny-vl": "tiny_vl", "drrn": "drrn"}


def _field(default: Any, *metadata: Mapping[str, Any], **kwargs: Any) -> Any:
    """A field's default (a callable: a factory, for the mutable ones) and its metadata."""
    extra = {key: value for entry in metadata for key, value in entry.items()} or None
    if callable(default):
        return Field(default_factory=default, json_schema_extra=extra, **kwargs)
    return Field(default, json_schema_extra=extra, **kwargs)


class BCConfig(Spec):
    """Behaviour cloning on the expert's trajectories before RL (the tiny model needs it)."""

    enabled: Flag = _field(False, WARM_START)
    episodes: Positive = _field(500, WARM_START)  # expert episodes on train tasks
    epochs: Positive = _field(2, WARM_START)
    learning_rate: NonNegative = _field(1e-3, WARM_START)
    batch_size: Positive = _field(64, WARM_START)  # rows per optimiser step
    # What is fitted: "tokens", the answer's token-mean likelihood; "choice" (choose mode
    # only), the policy's own probability of the expert's action among the admissible ones,
    # so every other choice is pushed down too (a WebShop page's "next >" is never the expert's
    # click, and the token loss never lowers it below the product links it must beat).
    loss: Literal["tokens", "choice"] = _field("tokens", WARM_START, ADDED_LATER)
    # reuse a BC result across runs that share its settings
    cache_dir: Text | None = _field(None, RUN_OPTION)
    # Seed of the warm start (tiny model's init and tokenizer, BC tasks and order); None: the
    # run's seed. A fixed value gives every seed of a sweep one warm start: seeds differ in RL.
    seed: Seed | None = _field(None, WARM_START)


class TrainConfig(Spec):
    """One training run: env x estimator x model x seed and every setting of the method.

    Every field is typed, and its range or choices are part of its type: a wrong value is
    refused when it comes in (``TrainConfig(clip_ratio=1.5)``: ``clip_ratio must be < 1, got
    1.5``). :meth:`check` adds what needs the registries (the env's splits and options, the
    estimator's parameters). Fields marked :data:`RUN_OPTION` change no number; those marked
    :data:`WARM_START` are what the warm start depends on.

    Example:
        >>> TrainConfig(estimator="grpo", seed=3).identity()["seed"]
        3
    """

    config_version: Literal[1] = _field(CONFIG_VERSION, RUN_OPTION)
    env: Text = _field("sokoban", WARM_START)
    env_kwargs: dict[str, Any] = _field(dict, WARM_START)
    estimator: Text = "gigpo"
    estimator_params: dict[str, Any] = _field(dict)
    model: Text = _field("tiny", WARM_START)
    seed: Seed = 0
    # a resumed run may go on longer
    iterations: Annotated[Whole, Field(ge=1, le=MAX_ITERATIONS)] = _field(150, RUN_OPTION)

    # rollouts
    n_tasks: Annotated[Whole, Field(ge=1, le=MAX_TASKS)] = 16  # N train tasks per iteration
    group_size: Annotated[Whole, Field(ge=1, le=MAX_GROUP)] = 8  # G trajectories on each task
    train_split: Text = _field("train", WARM_START)
    # Train (and behaviour-clone) only on tasks of these categories (the env's category(), such
    # as TextCraft's "depth-1"); empty: every task of the split.
    train_categories: list[Text] = _field(list, WARM_START)
    # A fixed panel: train (and behaviour-clone) on this many tasks of the train split (of
    # train_categories), drawn once (envs.spec.PANEL_SEED), the same for every run and seed; each
    # validation then also plays the panel (``panel_...`` metrics). None: the whole split.
    train_panel: Annotated[Whole, Field(ge=1, le=MAX_TASKS)] | None = _field(
        None, WARM_START, ADDED_LATER
    )
    # the env's step limit when None
    max_steps: Annotated[Whole, Field(ge=1, le=MAX_STEPS)] | None = _field(None, WARM_START)
    history: Annotated[Whole, Field(ge=0)] = _field(2, WARM_START)
    history_observations: Flag = _field(True, WARM_START)
    instruction: Text | None = _field(None, WARM_START)  # None: the env's prompt_instruction
    action_mode: ActionMode = _field("generate", WARM_START)
    temperature: Annotated[Number, Field(gt=0)] = 1.0
    top_p: Annotated[Number, Field(gt=0, le=1)] = 1.0
    max_new_tokens: Annotated[Whole, Field(ge=1, le=MAX_TOKENS)] = 256
    # longer prompts lose their oldest tokens
    max_prompt_tokens: Annotated[Whole, Field(ge=1, le=MAX_TOKENS)] = _field(2048, WARM_START)
    forward_batch_size: Positive = 64  # rows per batched forward (choose mode: rows x actions)

    # rewards and the estimator
    reward: Reward = "success"  # "success": success_reward at a won episode's end; "env"
    success_reward: Number = 10.0
    invalid_penalty: NonNegative = 0.1
    gamma: Fraction = 0.95
    hidden_layer: Positive = 12  # BiPACE: residual stream at layer -hidden_layer, last prompt
    # "none" (the papers'): the estimator's advantages as they are. "batch_std": divided by their
    # standard deviation over the iteration's rows (mean and signs kept), so the fixed KL and
    # entropy weights mean the same for every estimator (their raw scales differ up to ~4x).
    advantage_norm: AdvantageNorm = "none"
    # A dose-matched comparison (estimators.common.match_dose): of the rows with a non-zero
    # advantage, a seeded uniform draw of this share of the iteration's rows keeps its value,
    # the others train with 0, before advantage_norm; so every estimator trains as many rows.
    # None: every row as the estimator gave it.
    advantage_dose: Annotated[Number, Field(gt=0, le=1)] | None = _field(None, ADDED_LATER)

    # PPO-clip
    learning_rate: NonNegative = 1e-6
    clip_ratio: Annotated[Number, Field(gt=0, lt=1)] = 0.2
    kl_coef: NonNegative = 0.01
    entropy_coef: NonNegative = 0.001
    ppo_epochs: Positive = 1
    minibatch_size: Positive = 256  # rows per optimiser step
    max_grad_norm: Annotated[Number, Field(gt=0)] = 1.0

    # validation, checkpoints, logging
    val_every: Positive = 5
    val_split: Text = "val"
    val_limit: Positive | None = None  # a seeded sample of N tasks, stratified (None: all)
    # Validate only on tasks of these categories (the harness's ``categories``; TextCraft trained
    # on depth-1/2 goals is validated on those); empty: every category of the val split.
    val_categories: list[Text] = _field(list)
    val_seeds: list[Seed] = _field(lambda: [0], min_length=1)  # one evaluation per seed
    # True: validation takes the most likely action (choose mode: the best score; generate:
    # greedy decoding), so a point measures the policy, not the sampling noise of one draw per
    # step; False: sampled at ``temperature``, as in training. Recorded in each metrics row.
    val_greedy: Flag = False
    checkpoint_every: Positive = 5

    # where things run
    backend: Backend = _field("local", RUN_OPTION)  # env workers: "local" or "ray"
    ray_address: Text | None = _field(None, RUN_OPTION)
    env_workers: Annotated[Whole, Field(ge=1, le=MAX_ENV_WORKERS)] = _field(2, RUN_OPTION)
    # The train split served there (agentbench-rl serve-env): rollouts step it over the wire
    env_server: Text | None = _field(None, RUN_OPTION)
    engine: Engine = "hf"  # rollout generation: "hf" (generate / batched scoring) or "vllm"
    vllm_gpu_memory_utilization: Annotated[Number, Field(gt=0, le=1)] = _field(0.5, RUN_OPTION)
    device: Text = "auto"  # "auto": cuda when present, else cpu
    dtype: DType = _field("float32", WARM_START)
    # CPU threads (0: torch's default). A warm-start setting: the float reductions follow the
    # thread count, so BC on 1, 2 and 4 threads ends at losses 0.2265, 0.2971 and 0.2353 on the
    # campaign file's rows, and a BC cache made at one count must not serve another.
    torch_threads: Annotated[Whole, Field(ge=0)] = _field(1, WARM_START)

    tiny: TinyModelConfig = _field(TinyModelConfig, WARM_START)
    tiny_vl: TinyVLConfig = _field(TinyVLConfig, WARM_START)  # model: tiny-vl
    drrn: DRRNConfig = _field(DRRNConfig, WARM_START, ADDED_LATER)  # model: drrn
    bc: BCConfig = _field(BCConfig)

    def check(self) -> None:
        """Refuse, in one line naming the field, what the types cannot see: an unknown env (an
        alias becomes the env's name), split, category or env option, an unknown estimator or
        parameter."""
        from agentbench_rl.envs import env_class, resolve, unknown_options

        entry = resolve(self.env)
        self.env = entry.name
        splits = env_class(self.env).splits()
        for name in ("train_split", "val_split"):
            if getattr(self, name) not in splits:
                raise ValueError(
                    f"{name}: env '{self.env}' has no split '{getattr(self, name)}' "
                    f"(choose from {', '.join(splits)})"
                )
        self.estimator_spec()  # the estimator's name and parameters, before any work
        for name, split in (
            ("train_categories", self.train_split),
            ("val_categories", self.val_split),
        ):
            wanted = getattr(self, name)
            if not wanted:
                continue
            try:
                env_class(self.env).task_ids(split)
            except ValueError:  # an unbounded split: the task draw says what is wrong
                continue
            known = env_class(self.env).task_categories(split)
            if known is not None:
                tasks_of_categories(known, list(known), wanted, name, split)
        unknown = unknown_options(env_class(self.env), self.env_kwargs)
        if unknown:
            raise ValueError(f"env_kwargs: env '{self.env}' {unknown}")
        if self.bc.loss == "choice" and self.action_mode != "choose":
            raise ValueError("bc.loss: 'choice' needs action_mode: choose")
        if self.model == "drrn" and self.action_mode != "choose":
            raise ValueError("model: drrn scores admissible actions: use action_mode: choose")
        if self.model == "drrn" and self.bc.enabled and self.bc.loss != "choice":
            raise ValueError("bc.loss: model drrn writes no tokens: use bc.loss: choice")
        if self.env_server is not None and self.backend == "ray":
            raise ValueError("env_server: served envs are stepped from this process, not Ray")

    def check_installed(self) -> None:
        """Refuse, in one line naming the extra, a run whose engine or backend is not installed
        here, and a Hugging Face model that is neither a local folder nor in the local cache
        when the hub is switched off (``HF_HUB_OFFLINE``): before any work or download."""
        needs = {
            "engine vllm": ("vllm", self.engine == "vllm"),
            "backend ray": ("ray", self.backend == "ray"),
            "env_server": ("openenv", self.env_server is not None),
        }
        for what, (extra, used) in needs.items():
            if used and missing_modules((extra,)):
                raise ImportError(
                    f"{what} needs {extra}, which is not installed: {install_hint(extra)}"
                )
        if self.model not in BUILT_MODELS:
            check_loadable(self.model)

    def train_env(self) -> EnvSpec:
        """The env the run trains (and behaviour-clones) on: its panel when ``train_panel``."""
        env = EnvSpec(
            name=self.env,
            split=self.train_split,
            kwargs=self.env_kwargs,
            categories=tuple(self.train_categories),
            max_steps=self.max_steps,
        )
        if self.train_panel is None:
            return env
        return env.panel_of(self.train_panel, what="train_panel")

    def val_env(self) -> EnvSpec:
        """The env the run validates on."""
        return EnvSpec(
            name=self.env,
            split=self.val_split,
            kwargs=self.env_kwargs,
            categories=tuple(self.val_categories),
            max_steps=self.max_steps,
        )

    def prompt_config(self) -> PromptConfig:
        """The prompt settings the policy is trained (and evaluated) with."""
        return PromptConfig(
            history=self.history,
            history_observations=self.history_observations,
            mode=self.action_mode,
            instruction=self.instruction,
        )

    def warm_start_seed(self) -> int:
        """The seed of the model's start (``bc.seed`` when BC sets one, else ``seed``)."""
        if self.bc.enabled and self.bc.seed is not None:
            return self.bc.seed
        return self.seed

    def estimator_spec(self) -> EstimatorSpec:
        """The estimator and its parameters, checked against its declaration: the trainer's
        ``gamma`` and ``invalid_penalty`` where the estimator takes them, then
        ``estimator_params`` on top. Raises ``ValueError`` for an unknown estimator, parameter
        name or value.

        Example:
            >>> TrainConfig(estimator="rloo").estimator_spec().params  # RLOO has no gamma
            {'invalid_penalty': 0.1}
        """
        accepted = resolve_estimator(self.estimator).params
        params: dict[str, Any] = {}
        if "gamma" in accepted:
            params["gamma"] = self.gamma
        if "invalid_penalty" in accepted:
            params["invalid_penalty"] = self.invalid_penalty
        params.update(self.estimator_params)
        return EstimatorSpec(self.estimator, params)

    def needs_hidden(self) -> bool:
        """Whether the estimator declares that it needs the actor's hidden states."""
        return "hidden" in resolve_estimator(self.estimator).needs

    def use_torch_threads(self) -> None:
        """Give torch this config's ``torch_threads`` CPU threads (0: leave torch's default);
        training, its benches and the replay of its validation all run on the same count."""
        if self.torch_threads > 0:
            import torch

            torch.set_num_threads(self.torch_threads)

    def validation_eval(self, policy: Path) -> EvalConfig:
        """The harness evaluation that validates the weights saved in ``policy``: the val split,
        seeds, limit and step limit of this config, greedy when ``val_greedy``. The trainer's
        validation and the leaderboard's replay of it (``leaderboard file-runs``) both use it.

        Example:
            >>> TrainConfig(val_greedy=True).validation_eval(Path("run/val-policy")).agent
            'hf:run/val-policy?greedy=true'
        """
        from agentbench_rl.harness.config import EvalConfig

        return EvalConfig(
            env=self.val_env(),
            agent=f"hf:{policy}" + ("?greedy=true" if self.val_greedy else ""),
            seeds=list(self.val_seeds),
            limit=self.val_limit,
        )

    def panel_eval(self, policy: Path) -> EvalConfig | None:
        """With ``train_panel``, the evaluation of the weights in ``policy`` on the training
        panel (every panel task, the validation's seeds and greediness); else ``None``.

        Example:
            >>> config = TrainConfig(env="textcraft", val_split="test", train_panel=4)
            >>> len(config.panel_eval(Path("run/val-policy")).tasks())
            4
        """
        if self.train_panel is None:
            return None
        return self.validation_eval(policy).model_copy(
            update={"env": self.train_env(), "limit": None}
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (what ``config.yaml`` of a run holds)."""
        return self.model_dump()

    def identity(self) -> dict[str, Any]:
        """The settings that change the run's numbers: every field but the run options
        (:data:`RUN_OPTION`). Resuming, the leaderboard's check of a run, the verl launcher and
        the BC cache (:func:`warm_start_identity`) compare these, and checkpoints record their
        hash (:meth:`identity_hash`).

        Example:
            >>> a, b = TrainConfig(), TrainConfig(backend="ray", iterations=300)
            >>> a.identity() == b.identity(), "backend" in a.identity()
            (True, False)
        """
        return _identity(self)

    def identity_hash(self) -> str:
        """A 16-hex-digit hash of :meth:`identity` (what a checkpoint records as ``run``)."""
        return stable_hash(self.identity())[:16]

    def identity_changes(self, other: TrainConfig, with_iterations: bool = False) -> list[str]:
        """The dotted names of the settings that change numbers and differ between the two, and
        ``iterations`` too where ``with_iterations`` (a finished run filed as a sweep's cell,
        verl's data files: there the length is part of what the run is).

        Example:
            >>> TrainConfig(seed=1).identity_changes(TrainConfig(seed=2, bc=BCConfig(epochs=3)))
            ['bc.epochs', 'seed']
            >>> TrainConfig().identity_changes(TrainConfig(iterations=3), with_iterations=True)
            ['iterations']
        """
        changed = _differences(self.identity(), other.identity())
        if with_iterations and self.iterations != other.iterations:
            changed.append("iterations")
        return changed

    def warm_start_identity(self) -> dict[str, Any]:
        """The part of :meth:`identity` the warm start depends on (fields marked
        :data:`WARM_START`, the model section in use only, the seed of the warm start): two
        runs whose warm-start identities agree start from the same weights.

        Example:
            >>> a = TrainConfig(seed=1, learning_rate=1e-4, bc=BCConfig(enabled=True, seed=0))
            >>> b = TrainConfig(seed=2, bc=BCConfig(enabled=True, seed=0))
            >>> a.warm_start_identity() == b.warm_start_identity()  # RL settings differ only
            True
        """
        values = _warm_start(self)
        # the model section in use only (a hub model keeps ``tiny``, as its cached starts do)
        used = BUILT_MODELS.get(self.model, "tiny")
        for section in BUILT_MODELS.values():
            if section != used:
                values.pop(section, None)
        if not self.train_categories:  # BC results cached before the field existed stay valid
            values.pop("train_categories")
        values["seed"] = self.warm_start_seed()
        return values


def _marked(info: FieldInfo, mark: str, default: bool) -> bool:
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    return bool(extra.get(mark, default))


def _left_out_at_default(info: FieldInfo, value: Any) -> bool:
    """An :data:`ADDED_LATER` setting at its default: the identity leaves it out."""
    return not _marked(info, "identity_at_default", True) and value == info.default


def _identity(model: BaseModel) -> dict[str, Any]:
    """Every field of ``model`` but the run options (and :data:`ADDED_LATER` ones at their
    default), sections by the same rule."""
    return {
        name: _identity(value) if isinstance(value, BaseModel) else copy.deepcopy(value)
        for name, info in type(model).model_fields.items()
        if _marked(info, "changes_numbers", True)
        for value in (getattr(model, name),)
        if not _left_out_at_default(info, value)
    }


def _warm_start(model: BaseModel) -> dict[str, Any]:
    """The identity of the fields marked :data:`WARM_START`; in an unmarked section, of its
    marked fields (BC's settings but its cache folder)."""
    values: dict[str, Any] = {}
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        if _left_out_at_default(info, value):
            continue
        if _marked(info, "warm_start", False):
            values[name] = (
                _identity(value) if isinstance(value, BaseModel) else copy.deepcopy(value)
            )
        elif isinstance(value, BaseModel) and (inner := _warm_start(value)):
            values[name] = inner
    return values


def _differences(mine: dict[str, Any], theirs: dict[str, Any], prefix: str = "") -> list[str]:
    changed = []
    for key in sorted(set(mine) | set(theirs)):
        a, b = mine.get(key), theirs.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            changed += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            changed.append(f"{prefix}{key}")
    return changed


def config_from_dict(values: Mapping[str, Any]) -> TrainConfig:
    """A :class:`TrainConfig` from a (possibly nested) mapping; unknown keys, wrong types and
    values out of range raise ``ValueError`` in one line naming the key.

    Example:
        >>> config_from_dict({"estimator": "grpo", "bc": {"epochs": 3}}).bc.epochs
        3
    """
    return TrainConfig.read(values)


def apply_overrides(config: TrainConfig, overrides: Sequence[str]) -> TrainConfig:
    """``config`` with ``key=value`` overrides applied (dotted keys reach nested fields and dict
    entries), checked as a whole: a new config, ``config`` is left as it was.

    Example:
        >>> config = apply_overrides(TrainConfig(), ["bc.epochs=3", "estimator_params.omega=0.5",
        ...                                          "val_limit=null", "learning_rate=1e-4"])
        >>> config.bc.epochs, config.estimator_params, config.val_limit, config.learning_rate
        (3, {'omega': 0.5}, None, 0.0001)
    """
    values = config.model_dump()
    for override in overrides:
        key, value = parse_assignment(override, "override", dotted=True)
        parts = key.split(".")
        target: Any = values
        model: type[BaseModel] | None = TrainConfig
        for depth, part in enumerate(parts):
            name = ".".join(parts[: depth + 1])
            if model is not None and part not in model.model_fields:
                raise ValueError(
                    f"unknown config key '{name}'{did_you_mean(part, model.model_fields, name)}"
                )
            section = section_of(model, part) if model is not None else None
            if depth == len(parts) - 1:
                if section is not None:
                    raise ValueError(f"override {key}: set its fields ({key}.NAME=value)")
                target[part] = value
            elif model is None and part not in target:  # a new entry of a dict field
                target = target.setdefault(part, {})
            elif not isinstance(target.get(part), dict):
                raise ValueError(
                    f"unknown config key '{name}.{parts[depth + 1]}' ({name} is not a section)"
                )
            else:
                target, model = target[part], section
    return TrainConfig.read(values)


def read_yaml_mapping(path: Path, what: str = "config file") -> dict[str, Any]:
    """A YAML file holding a mapping (an empty file: ``{}``); ``ValueError`` with one line
    naming the file and the problem.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "c.yaml"
        >>> _ = path.write_text("seed: [1")
        >>> try:
        ...     read_yaml_mapping(path)
        ... except ValueError as error:
        ...     print(str(error).split(path.parent.name)[-1])
        /c.yaml is not valid YAML (line 1, column 9: expected ',' or ']', but got '<stream end>')
    """
    import yaml

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{what} {path} not found")
    if not path.is_file():
        raise ValueError(f"{what} {path} is not a file")
    try:
        loaded = yaml.safe_load(path.read_text("utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ValueError(f"{path} is not valid YAML ({where}{problem})") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ValueError(f"{path}: expected a YAML mapping, got {type(loaded).__name__}")
    return loaded


def read_run_config(path: Path) -> TrainConfig:
    """The config a run folder's ``config.yaml`` holds (fields added since take their defaults);
    ``ValueError`` with one line naming the file."""
    try:
        stored = read_yaml_mapping(path)
    except FileNotFoundError:
        raise ValueError(f"{path} is missing") from None
    if not stored:
        raise ValueError(
            f"{path} is empty: the run's declaration is lost, so it cannot be resumed "
            "(train it afresh in another --out)"
        )
    try:
        return config_from_dict(stored)
    except ValueError as problem:
        message = str(problem)
        raise ValueError(message if str(path) in message else f"{path}: {message}") from None


def load_config(
    path: Path | None, overrides: Sequence[str] = (), values: Mapping[str, Any] | None = None
) -> TrainConfig:
    """Read a YAML config (``None``: the defaults), set ``values`` (typed, as the command line's
    flags give them: never re-read as YAML text, so ``--model 2024`` stays a folder name), then
    apply ``key=value`` overrides; a section's values merge into it.

    A sweep file's ``base`` section is accepted too, so one file serves ``train --config`` and
    ``sweep``.

    Example:
        >>> load_config(None, ["seed=2"], {"model": "2024", "bc": {"enabled": True}}).model
        '2024'
    """
    loaded: dict[str, Any] = {}
    if path is not None:
        loaded = read_yaml_mapping(Path(path))
        loaded = dict(loaded.get("base", loaded)) if "grid" in loaded else loaded
    merged = dict(loaded)
    for key, value in (values or {}).items():
        section = merged.get(key)
        merged[key] = (
            {**section, **value} if isinstance(section, dict) and isinstance(value, dict) else value
        )
    return apply_overrides(config_from_dict(merged), overrides)


def dump_config(config: TrainConfig) -> str:
    """The config as YAML text (sorted keys): what a run folder's ``config.yaml`` holds."""
    import yaml

    return yaml.safe_dump(config.to_dict(), sort_keys=True)


def show_config(config: TrainConfig) -> str:
    """The config as YAML text by section, each under a ``# heading`` (:data:`SECTIONS`); it
    reads back as the same flat mapping.

    Example:
        >>> print(show_config(TrainConfig()).splitlines()[0])
        # the run
    """
    import yaml

    values = config.to_dict()
    blocks = []
    for heading, names in SECTIONS.items():
        section = {name: values[name] for name in names}
        blocks.append(f"# {heading}\n" + yaml.safe_dump(section, sort_keys=False))
    return "\n".join(blocks)

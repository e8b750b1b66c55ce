"""The trainer's configuration: every number of the method is a field with its default.

Defaults are the GiGPO paper's / verl-agent's settings (G = 8 trajectories on each of N = 16
tasks per iteration, PPO clip 0.2, low-variance KL 0.01 to the frozen reference, invalid-action
penalty 0.1, success reward 10, gamma 0.95). A config comes from a YAML file (``baselines/*.yaml``)
plus ``key=value`` overrides (``bc.epochs=3``, ``estimator_params.omega=0.5``); the values of
overrides are parsed as YAML scalars, so ``val_limit=null`` and ``lr=1e-4`` do what they say.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import math
import os
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.envs import tasks_of_categories
from agentbench_rl.estimators.common import ADVANTAGE_NORMS
from agentbench_rl.extras import install_hint, missing_modules
from agentbench_rl.models.tiny import TinyModelConfig, TinyVLConfig
from agentbench_rl.prompting import ACTION_MODES, PromptConfig
from agentbench_rl.rollout.batched import REWARDS

if TYPE_CHECKING:
    from agentbench_rl.harness.evaluate import EvalConfig

#: Field metadata of a setting that changes no number of a run: where or how fast it runs, or
#: how long it goes on. :meth:`TrainConfig.identity` leaves these out, so a run may resume with
#: other values of them (another Ray address, more iterations) but with nothing else changed.
RUN_OPTION = {"changes_numbers": False}


@dataclass
class BCConfig:
    """Behaviour cloning on the expert's trajectories before RL (the tiny model needs it)."""

    enabled: bool = False
    episodes: int = 500  # expert episodes on train tasks
    epochs: int = 2
    learning_rate: float = 1e-3
    batch_size: int = 64  # rows per optimiser step
    # reuse a BC result across runs that share its settings
    cache_dir: str | None = field(default=None, metadata=RUN_OPTION)
    # Seed of the warm start (tiny model's init and tokenizer, BC tasks and order); None: the
    # run's seed. A fixed value gives every seed of a sweep one warm start: seeds differ in RL.
    seed: int | None = None


@dataclass
class TrainConfig:
    """One training run: env x estimator x model x seed and every setting of the method."""

    env: str = "sokoban"
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    estimator: str = "gigpo"
    estimator_params: dict[str, Any] = field(default_factory=dict)
    model: str = "tiny"
    seed: int = 0
    iterations: int = field(default=150, metadata=RUN_OPTION)  # a resumed run may go on longer

    # rollouts
    n_tasks: int = 16  # N tasks of the train split per iteration
    group_size: int = 8  # G trajectories on each task
    train_split: str = "train"
    # Train (and behaviour-clone) only on tasks of these categories (the env's category(), such
    # as TextCraft's "depth-1"); empty: every task of the split.
    train_categories: list[str] = field(default_factory=list)
    max_steps: int | None = None  # the env's step limit when None
    history: int = 2
    history_observations: bool = True
    instruction: str | None = None  # None: the env's own line (its prompt_instruction)
    action_mode: str = "generate"
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    max_prompt_tokens: int = 2048  # longer prompts lose their oldest tokens
    forward_batch_size: int = 64  # rows per batched forward (choose mode: rows x actions)

    # rewards and the estimator
    reward: str = "success"  # "success": success_reward at a won episode's end; "env": env reward
    success_reward: float = 10.0
    invalid_penalty: float = 0.1
    gamma: float = 0.95
    hidden_layer: int = 12  # BiPACE: residual stream at layer -hidden_layer, last prompt token
    # "none" (the papers'): the estimator's advantages as they are. "batch_std": divided by their
    # standard deviation over the iteration's rows (mean and signs kept), so the fixed KL and
    # entropy weights mean the same for every estimator (their raw scales differ up to ~4x).
    advantage_norm: str = "none"

    # PPO-clip
    learning_rate: float = 1e-6
    clip_ratio: float = 0.2
    kl_coef: float = 0.01
    entropy_coef: float = 0.001
    ppo_epochs: int = 1
    minibatch_size: int = 256  # rows per optimiser step
    max_grad_norm: float = 1.0

    # validation, checkpoints, logging
    val_every: int = 5
    val_split: str = "val"
    val_limit: int | None = None  # a seeded sample of N tasks, stratified (None: all)
    # Validate only on tasks of these categories (the harness's ``categories``; TextCraft trained
    # on depth-1/2 goals is validated on those); empty: every category of the val split.
    val_categories: list[str] = field(default_factory=list)
    val_seeds: list[int] = field(default_factory=lambda: [0])  # one evaluation per seed
    # True: validation takes the most likely action (choose mode: the best score; generate:
    # greedy decoding), so a point measures the policy, not the sampling noise of one draw per
    # step; False: sampled at ``temperature``, as in training. Recorded in each metrics row.
    val_greedy: bool = False
    checkpoint_every: int = 5

    # where things run
    backend: str = field(default="local", metadata=RUN_OPTION)  # env workers: "local" or "ray"
    ray_address: str | None = field(default=None, metadata=RUN_OPTION)
    env_workers: int = field(default=2, metadata=RUN_OPTION)  # Ray env actors
    engine: str = "hf"  # rollout generation: "hf" (generate / batched scoring) or "vllm"
    vllm_gpu_memory_utilization: float = field(default=0.5, metadata=RUN_OPTION)
    device: str = "auto"  # "auto": cuda when present, else cpu
    dtype: str = "float32"
    torch_threads: int = 1  # CPU threads (0: torch's default); small models run best on one

    tiny: TinyModelConfig = field(default_factory=TinyModelConfig)
    tiny_vl: TinyVLConfig = field(default_factory=TinyVLConfig)  # model: tiny-vl
    bc: BCConfig = field(default_factory=BCConfig)

    def validate(self) -> None:
        """Raise ``ValueError`` with one line naming the first bad field."""
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
        self.estimator_kwargs()  # the estimator's name and parameters, before any work
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
        if self.action_mode not in ACTION_MODES:
            raise ValueError(f"action_mode '{self.action_mode}' (choose from generate, choose)")
        choices = {
            "reward": REWARDS,
            "backend": ("local", "ray"),
            "engine": ("hf", "vllm"),
            "dtype": ("float32", "bfloat16", "float16"),
            "advantage_norm": ADVANTAGE_NORMS,
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{name} '{getattr(self, name)}' (choose from {', '.join(allowed)})"
                )
        positive = (
            "iterations",
            "n_tasks",
            "group_size",
            "max_new_tokens",
            "max_prompt_tokens",
            "forward_batch_size",
            "ppo_epochs",
            "minibatch_size",
            "val_every",
            "checkpoint_every",
            "env_workers",
            "hidden_layer",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.history < 0:
            raise ValueError(f"history must be >= 0, got {self.history}")
        if not 0 < self.clip_ratio < 1:
            raise ValueError(f"clip_ratio must be in (0, 1), got {self.clip_ratio}")
        for name in ("kl_coef", "entropy_coef", "invalid_penalty", "learning_rate"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0 <= self.gamma <= 1:
            raise ValueError(f"gamma must be in [0, 1], got {self.gamma}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if not self.val_seeds:
            raise ValueError("val_seeds: give at least one seed")
        for name, value in _numbers(self):
            if not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value}")
        if self.model == "tiny":
            self.tiny.check("tiny")
        elif self.model == "tiny-vl":
            self.tiny_vl.check("tiny_vl")
        unknown = unknown_options(env_class(self.env), self.env_kwargs)
        if unknown:
            raise ValueError(f"env_kwargs: env '{self.env}' {unknown}")

    def check_installed(self) -> None:
        """Refuse, in one line naming the extra, a run whose engine or backend is not installed
        here, and a Hugging Face model that is neither a local folder nor in the local cache
        when the hub is switched off (``HF_HUB_OFFLINE``): before any work or download."""
        needs = {
            "engine vllm": ("vllm", self.engine == "vllm"),
            "backend ray": ("ray", self.backend == "ray"),
        }
        for what, (extra, used) in needs.items():
            if used and missing_modules((extra,)):
                raise ImportError(
                    f"{what} needs {extra}, which is not installed: {install_hint(extra)}"
                )
        if self.model in ("tiny", "tiny-vl") or Path(self.model).expanduser().is_dir():
            return
        from huggingface_hub import try_to_load_from_cache

        if isinstance(try_to_load_from_cache(self.model, "config.json"), str):
            return
        where = f"model {self.model} is neither a local folder nor in the Hugging Face cache"
        if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
            raise ValueError(f"{where}, and HF_HUB_OFFLINE is set: download it or give its folder")
        reachable, reason = _hub_reachable()
        if not reachable:  # one quick look, instead of the loader's minute of retries
            raise ValueError(f"{where}, and the hub cannot be reached ({reason})")

    def prompt_config(self) -> PromptConfig:
        """The prompt settings the policy is trained (and evaluated) with."""
        mode = typing.cast(typing.Any, self.action_mode)
        return PromptConfig(
            history=self.history,
            history_observations=self.history_observations,
            mode=mode,
            instruction=self.instruction,
        )

    def warm_start_seed(self) -> int:
        """The seed of the model's start (``bc.seed`` when BC sets one, else ``seed``)."""
        if self.bc.enabled and self.bc.seed is not None:
            return self.bc.seed
        return self.seed

    def estimator_kwargs(self) -> dict[str, Any]:
        """The estimator's parameters, checked against its declaration: the trainer's ``gamma``
        and ``invalid_penalty`` where the estimator takes them, then ``estimator_params`` on top.
        Raises ``ValueError`` for an unknown estimator, parameter name or value.

        Example:
            >>> TrainConfig(estimator="rloo").estimator_kwargs()  # RLOO has no gamma
            {'invalid_penalty': 0.1}
        """
        from agentbench_rl.estimators import resolve

        accepted = resolve(self.estimator).params
        params: dict[str, Any] = {}
        if "gamma" in accepted:
            params["gamma"] = self.gamma
        if "invalid_penalty" in accepted:
            params["invalid_penalty"] = self.invalid_penalty
        params.update(self.estimator_params)
        resolve(self.estimator).check_params(params)
        return params

    def needs_hidden(self) -> bool:
        """Whether the estimator declares that it needs the actor's hidden states."""
        from agentbench_rl.estimators import resolve

        return "hidden" in resolve(self.estimator).needs

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
        from agentbench_rl.harness.evaluate import EvalConfig

        return EvalConfig(
            env=self.env,
            split=self.val_split,
            agent=f"hf:{policy}" + ("?greedy=true" if self.val_greedy else ""),
            seeds=list(self.val_seeds),
            limit=self.val_limit,
            max_steps=self.max_steps,
            env_kwargs=dict(self.env_kwargs),
            categories=list(self.val_categories) or None,
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (what ``config.yaml`` of a run holds)."""
        return asdict(self)

    def identity(self) -> dict[str, Any]:
        """The settings that change the run's numbers: every field but the run options
        (:data:`RUN_OPTION`). Resuming, the leaderboard's check of a run and the verl launcher
        compare these, and checkpoints record their hash (:meth:`identity_hash`).

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


def _hub_reachable(timeout: float = 5.0) -> tuple[bool, str]:
    """Whether the Hugging Face hub answers at all within ``timeout`` (any HTTP answer counts:
    a gated model's 401 still means the hub is there), and why not."""
    import urllib.error
    import urllib.request

    from huggingface_hub import constants

    try:
        urllib.request.urlopen(constants.ENDPOINT, timeout=timeout).close()
    except urllib.error.HTTPError:
        return True, ""
    except (OSError, ValueError) as error:
        return False, str(getattr(error, "reason", error))
    return True, ""


def _numbers(instance: Any, prefix: str = "") -> list[tuple[str, float]]:
    """Every float field, nested ones by dotted name."""
    found = []
    for item in dataclasses.fields(instance):
        value = getattr(instance, item.name)
        if dataclasses.is_dataclass(value):
            found += _numbers(value, f"{prefix}{item.name}.")
        elif isinstance(value, float):
            found.append((f"{prefix}{item.name}", value))
    return found


def _identity(instance: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for item in dataclasses.fields(instance):
        if not item.metadata.get("changes_numbers", True):
            continue
        value = getattr(instance, item.name)
        values[item.name] = (
            _identity(value) if dataclasses.is_dataclass(value) else copy.deepcopy(value)
        )
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


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _is_dataclass_type(kind: Any) -> bool:
    return isinstance(kind, type) and dataclasses.is_dataclass(kind)


def _build(cls: type, values: Mapping[str, Any], where: str) -> Any:
    """Instantiate dataclass ``cls`` from a mapping, recursing into nested dataclasses."""
    if not isinstance(values, Mapping):
        raise ValueError(f"{where or 'config'}: expected a mapping, got {values!r}")
    types_ = _field_types(cls)
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in types_:
            raise ValueError(
                f"unknown config key '{where}{key}'{_did_you_mean(key, types_, where)}"
            )
        kind = types_[key]
        if _is_dataclass_type(kind):
            kwargs[key] = _build(kind, value, f"{where}{key}.")
        else:
            kwargs[key] = _coerce(value, kind, f"{where}{key}")
    return cls(**kwargs)


def config_from_dict(values: Mapping[str, Any]) -> TrainConfig:
    """A :class:`TrainConfig` from a (possibly nested) mapping; unknown keys raise.

    Example:
        >>> config_from_dict({"estimator": "grpo", "bc": {"epochs": 3}}).bc.epochs
        3
    """
    config: TrainConfig = _build(TrainConfig, values, "")
    return config


def _coerce(value: Any, kind: Any, key: str) -> Any:
    """Check a value against the field's type (ints and number strings become floats)."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(kind)
        if value is None and type(None) in options:
            return None
        for option in options:
            if option is type(None):
                continue
            try:
                return _coerce(value, option, key)
            except ValueError:
                continue
        raise ValueError(f"{key}: {value!r} is not a {kind}")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is float and isinstance(value, str):  # YAML 1.1 reads 1e-4 as a string
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"{key}: {value!r} is not a number") from None
    if kind is Any:
        return value
    base = origin or kind
    if base is bool and not isinstance(value, bool):
        raise ValueError(f"{key}: {value!r} is not true/false")
    if base is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"{key}: {value!r} is not an integer")
    if isinstance(base, type) and not isinstance(value, base):
        raise ValueError(f"{key}: {value!r} is not a {base.__name__}")
    return value


def apply_overrides(config: TrainConfig, overrides: Sequence[str]) -> TrainConfig:
    """Apply ``key=value`` overrides (dotted keys reach nested fields and dict entries).

    Example:
        >>> config = apply_overrides(TrainConfig(), ["bc.epochs=3", "estimator_params.omega=0.5",
        ...                                          "val_limit=null", "learning_rate=1e-4"])
        >>> config.bc.epochs, config.estimator_params, config.val_limit, config.learning_rate
        (3, {'omega': 0.5}, None, 0.0001)
    """
    import yaml  # the train extra's; imported here so the config's defaults need no extra

    for override in overrides:
        key, sep, text = override.partition("=")
        if not sep or not key:
            raise ValueError(f"override '{override}': expected key=value")
        try:
            value = yaml.safe_load(text) if text else ""
        except yaml.YAMLError:
            value = text
        parts = key.split(".")
        target: Any = config
        for depth, part in enumerate(parts[:-1]):
            if isinstance(target, dict):
                target = target.setdefault(part, {})
            elif dataclasses.is_dataclass(target) and hasattr(target, part):
                target = getattr(target, part)
            else:
                known = _field_types(type(target)) if dataclasses.is_dataclass(target) else {}
                hint = _did_you_mean(part, known, ".".join(parts[:depth]) + "." if depth else "")
                raise ValueError(f"unknown config key '{'.'.join(parts[: depth + 1])}'{hint}")
        last = parts[-1]
        if isinstance(target, dict):
            target[last] = value
        elif dataclasses.is_dataclass(target) and last in _field_types(type(target)):
            kind = _field_types(type(target))[last]
            if _is_dataclass_type(kind):
                raise ValueError(f"override {key}: set its fields ({key}.NAME=value)")
            setattr(target, last, _coerce(value, kind, key))
        else:
            known = _field_types(type(target)) if dataclasses.is_dataclass(target) else {}
            hint = _did_you_mean(last, known, key[: len(key) - len(last)])
            raise ValueError(f"unknown config key '{key}'{hint}")
    return config


def _did_you_mean(key: str, known: Mapping[str, Any], prefix: str = "") -> str:
    """`` (did you mean 'x'?)`` for the closest known key, else the list of known keys.

    Example:
        >>> _did_you_mean("lerning_rate", {"learning_rate": float, "seed": int})
        " (did you mean 'learning_rate'?)"
    """
    close = difflib.get_close_matches(key, list(known), n=1)
    if close:
        return f" (did you mean '{prefix}{close[0]}'?)"
    return f" (known: {', '.join(sorted(known))})" if known else ""


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
        return config_from_dict(read_yaml_mapping(path))
    except FileNotFoundError:
        raise ValueError(f"{path} is missing") from None
    except ValueError as problem:
        message = str(problem)
        raise ValueError(message if str(path) in message else f"{path}: {message}") from None


def load_config(path: Path | None, overrides: Sequence[str] = ()) -> TrainConfig:
    """Read a YAML config (``None``: the defaults) and apply ``key=value`` overrides.

    A sweep file's ``base`` section is accepted too, so one file serves ``train --config`` and
    ``sweep``.
    """
    values: dict[str, Any] = {}
    if path is not None:
        loaded = read_yaml_mapping(Path(path))
        values = dict(loaded.get("base", loaded)) if "grid" in loaded else loaded
    return apply_overrides(config_from_dict(values), overrides)


def dump_config(config: TrainConfig) -> str:
    """The config as YAML text (sorted keys)."""
    import yaml

    return yaml.safe_dump(config.to_dict(), sort_keys=True)

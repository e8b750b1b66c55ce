"""``agentbench-rl train --engine verl``: prepare a run folder and run verl's own ``run_ppo``.

The run folder receives ``config.yaml`` (our config), ``agent_loop.yaml`` (what our agent loop
and advantage step read in every Ray process), ``verl-data/{train,val}.parquet`` (the task
lists), ``verl_config.yaml`` (verl's composed and validated config) and verl's checkpoints under
``checkpoints/global_step_N``; :func:`hf_checkpoint` turns one into a Hugging Face folder that
``agentbench-rl eval --agent hf:FOLDER`` evaluates through the harness.

Our code reaches verl's processes without a ``verl.plugins`` entry point on purpose: verl loads
plugins on ``import verl`` but logs a failing one only at DEBUG, so a broken install would train
with verl's defaults in silence. Instead the agent loop is named in ``agent_loop.yaml`` (verl
imports its ``_target_`` and fails loudly when it cannot) and the trainer subclass runs in our
own task runner (verl's ``TaskRunnerV1`` with the trainer class swapped).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentbench_rl.core.atomic import atomic_write_text
from agentbench_rl.extras import install_hint
from agentbench_rl.integrations.verl.config import (
    check_supported,
    check_verl_config,
    compose,
    verl_overrides,
    write_agent_loop_file,
)
from agentbench_rl.integrations.verl.data import split_tasks, write_split
from agentbench_rl.spec.run_folder import RunFolder

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from agentbench_rl.train.config import TrainConfig

VERL_CONFIG_FILE = "verl_config.yaml"
DATA_FOLDER = "verl-data"
CHECKPOINTS = "checkpoints"


def data_sizes(config: TrainConfig) -> dict[str, int | None]:
    """Rows per split: every task of a fixed split (``val_limit`` of the val split); an
    unbounded train split gets one fresh task per row of the whole run (n_tasks x iterations).

    Example:
        >>> from agentbench_rl.train.config import TrainConfig
        >>> data_sizes(TrainConfig(n_tasks=4, iterations=10, val_limit=8))
        {'train': 40, 'val': 8}
    """
    return {"train": config.n_tasks * config.iterations, "val": config.val_limit}


def prepare_run(
    config: TrainConfig, run: Path, verl_extra: Sequence[str] = (), resume: bool = False
) -> DictConfig:
    """Write the run folder's files and return verl's validated config (module docstring)."""
    from omegaconf import OmegaConf

    from agentbench_rl.train.config import dump_config, read_run_config

    run = Path(run)
    check_verl_config(config)  # rejects what verl cannot do, before any work
    ours = dump_config(config)
    folder = RunFolder(run)
    config_file = folder.config_file
    # verl's data files hold n_tasks x iterations rows: here the length changes numbers too;
    # verl keeps its own checkpoints, so a written config is what holds a run here
    folder.check_continuation(
        resume,
        lambda: config.identity_changes(read_run_config(config_file), with_iterations=True),
        held=config_file.exists(),
    )
    # verl's val data holds the whole val split: verl does not validate while training here
    envs = {
        "train": config.train_env(),
        "val": config.val_env().model_copy(update={"categories": ()}),
    }
    data = {part: run / DATA_FOLDER / f"{part}.parquet" for part in envs}
    sizes = data_sizes(config)
    split_tasks(envs["train"], sizes["train"])  # refuses what cannot be drawn
    # verl checks its config before anything is written
    verl_config = compose([*verl_overrides(config, run, data), *verl_extra])
    check_supported(verl_config)
    run.mkdir(parents=True, exist_ok=True)
    for part, env in envs.items():
        try:
            write_split(env, data[part], sizes[part])
        except ValueError:  # an unbounded val split: as many tasks as one step plays
            write_split(env, data[part], config.n_tasks)
    write_agent_loop_file(config, run)
    atomic_write_text(run / VERL_CONFIG_FILE, OmegaConf.to_yaml(verl_config))
    atomic_write_text(config_file, ours)
    return verl_config


def task_runner_class() -> Any:
    """verl's ``TaskRunnerV1`` (a Ray actor) that builds :class:`AgentBenchTrainer`."""
    import ray
    from verl.trainer.main_ppo import TaskRunnerV1

    class AgentBenchTaskRunner(TaskRunnerV1.__ray_actor_class__):
        """``TaskRunnerV1.run`` with our trainer class (verl picks its class by mode name)."""

        def run(self, config: Any) -> None:
            import transfer_queue as tq
            from omegaconf import OmegaConf
            from verl.utils.logging_utils import configure_verl_logging

            from agentbench_rl.integrations.verl.trainer import AgentBenchTrainer

            configure_verl_logging()
            config.transfer_queue.enable = True
            OmegaConf.resolve(config)
            self.config = config
            tq.init(config.transfer_queue)
            succeeded = False
            try:
                self.trainer = AgentBenchTrainer(config=config)
                self.trainer.init()
                self.init_agent_loop_manager()
                self.trainer.fit(self.agent_loop_manager)
                succeeded = True
            finally:
                try:
                    tracking = getattr(self.trainer, "logger", None)
                    if tracking is not None:
                        tracking.finish(exit_code=0 if succeeded else 1)
                finally:
                    tq.close()

    return ray.remote(AgentBenchTaskRunner)


def train_verl(
    config: TrainConfig, out: Path, verl_extra: Sequence[str] = (), resume: bool = False
) -> Path:
    """Prepare ``out`` and train there with verl (needs the ``verl`` extra and GPUs)."""
    try:
        # the imports every verl process needs: fail here, in one line, not in a Ray worker
        import agentbench_rl.integrations.verl.agent_loop
        import agentbench_rl.integrations.verl.trainer  # noqa: F401
    except ImportError as missing:
        raise ImportError(
            f"engine verl needs the verl extra: {install_hint('verl')} ({missing})"
        ) from None
    from verl.trainer.main_ppo import run_ppo
    from verl.utils.device import auto_set_device

    made_folder = not Path(out).exists()
    with RunFolder(out).lock():  # one process trains a run folder
        try:
            verl_config = prepare_run(config, out, verl_extra, resume)
        except BaseException:
            if made_folder:  # a start refused before any work leaves nothing behind
                shutil.rmtree(out, ignore_errors=True)
            raise
        auto_set_device(verl_config)
        run_ppo(verl_config, task_runner_class=task_runner_class())
    return Path(out)


def checkpoint_steps(run: Path) -> list[int]:
    """The steps of verl's checkpoints in a run folder, oldest first."""
    folder = Path(run) / CHECKPOINTS
    steps = []
    for path in folder.glob("global_step_*") if folder.is_dir() else []:
        suffix = path.name.removeprefix("global_step_")
        if suffix.isdigit():
            steps.append(int(suffix))
    return sorted(steps)


def _has_weights(folder: Path) -> bool:
    return (folder / "config.json").is_file() and any(
        folder.glob(pattern) for pattern in ("*.safetensors", "*.bin")
    )


def hf_checkpoint(run: Path, step: int | None = None) -> Path:
    """A Hugging Face folder of a verl checkpoint (the last one by default), for ``hf:``.

    verl saves the actor's full weights in ``global_step_N/actor/huggingface`` (the launcher
    asks for ``hf_model`` in ``checkpoint.save_contents``); a checkpoint without them is merged
    from its FSDP shards by verl's own ``verl.model_merger`` into ``global_step_N/hf``.
    """
    steps = checkpoint_steps(run)
    if not steps:
        raise FileNotFoundError(f"{run} holds no verl checkpoint ({CHECKPOINTS}/global_step_N)")
    if step is None:
        step = steps[-1]
    if step not in steps:
        raise FileNotFoundError(
            f"{run} has no checkpoint of step {step} (steps: {', '.join(map(str, steps))})"
        )
    actor = Path(run) / CHECKPOINTS / f"global_step_{step}" / "actor"
    for folder in (actor / "huggingface", actor.parent / "hf"):
        if _has_weights(folder):
            return folder
    target = actor.parent / "hf"
    command = [
        sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp",
        "--local_dir", str(actor), "--target_dir", str(target),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not _has_weights(target):
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ValueError(f"verl.model_merger could not convert {actor}: {last[0]}")
    return target

"""The verl engine against verl 0.9's own code (the ``verl`` extra; run with ``-m verl``).

CI builds a separate environment with ``agentbench-rl[verl]`` and runs these there; in the main
environment they are skipped (verl pins other versions of transformers than ours). Everything
runs on the CPU: the agent loop plays real Sokoban and TextCraft groups against the local
OpenAI-style test server, and the advantage step round-trips through verl's real storage
(TransferQueue on a local Ray) and verl's own batch padding.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.verl
verl = pytest.importorskip(
    "verl", reason='needs the verl extra (pip install -e ".[verl]"; run with -m verl)'
)
torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from omegaconf import OmegaConf  # noqa: E402
from test_agents_openai_http import TinyChatServer, serve  # noqa: E402

from agentbench_rl.agents.openai_http import ChatClient  # noqa: E402
from agentbench_rl.core.batch import StepBatch  # noqa: E402
from agentbench_rl.envs.spec import EnvSpec  # noqa: E402
from agentbench_rl.estimators import REGISTRY  # noqa: E402
from agentbench_rl.integrations.verl.advantages import RECORD_KEY  # noqa: E402
from agentbench_rl.integrations.verl.config import read_agent_loop_config  # noqa: E402
from agentbench_rl.integrations.verl.launcher import prepare_run  # noqa: E402
from agentbench_rl.models.policy import Policy  # noqa: E402
from agentbench_rl.models.tiny import TinyModelConfig, build_tiny  # noqa: E402
from agentbench_rl.prompting import PromptConfig, build_prompt  # noqa: E402
from agentbench_rl.rollout.batched import training_reward  # noqa: E402
from agentbench_rl.rollout.scripted import tokenizer_texts  # noqa: E402
from agentbench_rl.train.config import TrainConfig  # noqa: E402

SUPPORTED = [name for name in REGISTRY if name != "bipace"]
CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}\n{% endfor %}"


# ---------------------------------------------------------------------- why the subclass exists
def test_a_registered_verl_estimator_sees_no_step_keys() -> None:
    """verl's own compute_advantage hands a registered estimator rewards, mask, config and the
    group index only: no obs/state/action keys, no validity, no step index."""
    from verl import DataProto
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est
    from verl.trainer.ppo.ray_trainer import compute_advantage

    seen: list[dict[str, Any]] = []

    def spy(**kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        seen.append(kwargs)
        zeros = torch.zeros_like(kwargs["token_level_rewards"])
        return zeros, zeros

    name = "agentbench_test_spy"
    if name not in ADV_ESTIMATOR_REGISTRY:
        register_adv_est(name)(spy)
    ADV_ESTIMATOR_REGISTRY[name] = spy
    data = DataProto.from_dict(
        tensors={
            "token_level_rewards": torch.zeros(2, 3),
            "response_mask": torch.ones(2, 3, dtype=torch.int64),
        },
        non_tensors={
            "uid": np.array(["u", "u"], dtype=object),
            "obs_key": np.array(["o0", "o1"], dtype=object),
            "extra_fields": np.array([{RECORD_KEY: {"t": 0}}] * 2, dtype=object),
        },
    )
    compute_advantage(data, adv_estimator=name, config=OmegaConf.create({}))
    assert len(seen) == 1
    assert set(seen[0]) == {"token_level_rewards", "response_mask", "config", "index"}


# ---------------------------------------------------------------------- config and data
@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    folder = tmp_path_factory.mktemp("verl-run")
    config = TrainConfig(
        env="sokoban",
        estimator="gigpo",
        model=str(folder / "model"),  # composing and validating never loads it
        n_tasks=2,
        group_size=4,
        minibatch_size=8,
        forward_batch_size=2,
        max_steps=3,
        iterations=3,
        val_split="val",
        val_limit=4,
    )
    verl_config = prepare_run(config, folder, ["trainer.n_gpus_per_node=1"])
    return folder, verl_config


def test_config_composes_and_passes_verl_validation(run: tuple[Path, Any]) -> None:
    import pandas as pd

    folder, verl_config = run
    assert verl_config.actor_rollout_ref.rollout.n == 4
    assert verl_config.data.train_batch_size == 2
    assert verl_config.actor_rollout_ref.actor.ppo_mini_batch_size == 2  # 8 rows / group of 4
    assert verl_config.actor_rollout_ref.actor.kl_loss_type == "low_var_kl"
    assert verl_config.trainer.v1.trainer_mode == "sync"
    assert verl_config.algorithm.adv_estimator == "agentbench"
    carried = read_agent_loop_config(
        verl_config.actor_rollout_ref.rollout.agent.agent_loop_config_path
    )
    assert carried.estimator == "gigpo" and carried.train_env().make_kwargs() == {"max_steps": 3}
    assert carried.estimator_spec().params == {"gamma": 0.95, "invalid_penalty": 0.1}
    train = pd.read_parquet(folder / "verl-data" / "train.parquet")
    assert len(train) == 2 * 3 and train.loc[0, "extra_info"]["task_id"] == "train-0"
    assert (folder / "verl_config.yaml").is_file() and (folder / "config.yaml").is_file()
    with pytest.raises(FileExistsError, match="--resume"):
        prepare_run(TrainConfig(env="sokoban"), folder)


def test_the_trainer_is_verls_sync_trainer_reading_our_config(run: tuple[Path, Any]) -> None:
    """verl compares the mode string literally: any name but "sync" would give the async
    replay buffer; the training config comes from the run's agent_loop.yaml."""
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    from agentbench_rl.integrations.verl.trainer import AgentBenchTrainer

    trainer = AgentBenchTrainer(run[1])
    assert isinstance(trainer, PPOTrainerSync) and trainer.trainer_mode == "sync"
    assert type(trainer.replay_buffer) is ReplayBuffer
    assert trainer.train_config.estimator == "gigpo" and trainer.train_config.env == "sokoban"


def test_bad_verl_override_is_one_clear_error(tmp_path: Path) -> None:
    config = TrainConfig(env="sokoban", model="m", n_tasks=3, group_size=1)
    with pytest.raises(ValueError, match="verl config"):  # 3 rows over 2 GPUs
        prepare_run(config, tmp_path, ["trainer.n_gpus_per_node=2"])


def test_verl_settings_our_advantage_step_skips_are_rejected(tmp_path: Path) -> None:
    config = TrainConfig(env="sokoban", model="m", n_tasks=2, group_size=4, minibatch_size=8)
    for override in (
        "algorithm.use_kl_in_reward=true",
        "algorithm.rollout_correction.rollout_is=token",
    ):
        with pytest.raises(ValueError, match="not supported"):
            prepare_run(config, tmp_path / override[:20], ["trainer.n_gpus_per_node=1", override])


def test_train_engine_verl_errors_are_one_line(tmp_path: Path) -> None:
    """Through the CLI: our overrides and verl's (``verl.`` prefix) reach their configs, and a
    bad one stops before any work with one line."""
    import subprocess
    import sys

    def train(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "agentbench_rl.cli", "train", "--engine", "verl"]
        return subprocess.run(
            [*command, "--env", "sokoban", "--model", "m", "--out", str(tmp_path / "r"), *args],
            capture_output=True, text=True, timeout=300, check=False,
            env={**os.environ, "COLUMNS": "200"},
        )  # fmt: skip

    done = train("--estimator", "bipace")
    assert done.returncode == 2 and "needs the actor's hidden state" in done.stderr
    done = train("n_tasks=3", "group_size=1", "minibatch_size=1", "verl.trainer.n_gpus_per_node=2")
    assert done.returncode == 2 and "verl config:" in done.stderr and "divisible" in done.stderr
    assert not (tmp_path / "r").exists()


def test_train_categories_and_advantage_norm_reach_the_run(tmp_path: Path) -> None:
    # Before, both were dropped: verl trained on every category with raw advantages.
    import pandas as pd

    from agentbench_rl.envs import env_class

    config = TrainConfig(
        env="textcraft", model="m", n_tasks=2, group_size=4, minibatch_size=8, iterations=2,
        val_split="test", train_categories=["depth-1"], advantage_norm="batch_std",
    )  # fmt: skip
    verl_config = prepare_run(config, tmp_path / "run", ["trainer.n_gpus_per_node=1"])
    train = pd.read_parquet(tmp_path / "run" / "verl-data" / "train.parquet")
    known = env_class("textcraft").task_categories("train")
    assert {known[info["task_id"]] for info in train["extra_info"]} == {"depth-1"}
    path = verl_config.actor_rollout_ref.rollout.agent.agent_loop_config_path
    assert read_agent_loop_config(path).advantage_norm == "batch_std"
    with pytest.raises(ValueError, match="val_greedy"):
        prepare_run(TrainConfig(env="sokoban", val_greedy=True), tmp_path / "greedy")
    with pytest.raises(ValueError, match="train_categories: sokoban's split 'train'"):
        prepare_run(TrainConfig(env="sokoban", train_categories=["easy"]), tmp_path / "cats")
    assert not (tmp_path / "greedy").exists() and not (tmp_path / "cats").exists()


def test_bipace_is_rejected_with_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"hidden state.*custom actor-worker method"):
        prepare_run(TrainConfig(env="sokoban", estimator="bipace"), tmp_path)
    assert not (tmp_path / "config.yaml").exists()  # rejected before any work


# ---------------------------------------------------------------------- the agent loop
class ChatServerManager:
    """verl's ``LLMServerClient.generate`` (token ids in, token ids out) over an OpenAI-style
    chat server: the prompt ids are decoded into the user message, the answer is tokenized."""

    def __init__(self, base_url: str, tokenizer: Any) -> None:
        self.client = ChatClient(base_url, retries=0)
        self.tokenizer = tokenizer
        self.prompts: list[str] = []

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        text = self.tokenizer.decode(prompt_ids, skip_special_tokens=True)
        self.prompts.append(text)
        answer = await asyncio.to_thread(
            self.client.chat, "tiny", text, temperature=sampling_params["temperature"], seed=0
        )
        ids = self.tokenizer(answer, add_special_tokens=False)["input_ids"]
        return TokenOutput(token_ids=ids, log_probs=[-1.0] * len(ids), extra_fields={})


@pytest.fixture(scope="module")
def tiny() -> Policy:
    prompt = PromptConfig(mode="generate")
    small = TinyModelConfig(
        hidden_size=32, layers=1, heads=2, kv_heads=1, intermediate_size=64, tokenizer_episodes=2
    )
    model, tokenizer = build_tiny(
        tokenizer_texts(
            EnvSpec(name="sokoban", split="train"), prompt, small.tokenizer_episodes, 0
        ),
        small,
        0,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return Policy(model, tokenizer, prompt, hidden_layer=1, max_new_tokens=6)


@pytest.fixture
def server(tiny: Policy) -> Iterator[TinyChatServer]:
    yield from serve(tiny)


def play_group(
    verl_config: Any, tiny: Policy, manager: ChatServerManager, config: TrainConfig,
    task_id: str, split: str, size: int, folder: Path,
) -> list[list[Any]]:  # fmt: skip
    """Run ``size`` sessions of our agent loop on one task, concurrently, built the way verl's
    worker builds it: registered from an ``agent_loop.yaml``, instantiated by Hydra."""
    import hydra
    from verl.experimental.agent_loop.agent_loop import (
        DictConfigWrap,
        ToolListWrap,
        _agent_loop_registry,
    )
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from agentbench_rl.integrations.verl.config import AGENT_NAME, write_agent_loop_file

    for entry in OmegaConf.load(write_agent_loop_file(config, folder)):  # verl's own reading
        _agent_loop_registry[entry.name] = entry

    def loop() -> Any:
        return hydra.utils.instantiate(
            config=_agent_loop_registry[AGENT_NAME],
            trainer_config=DictConfigWrap(config=verl_config),
            server_manager=manager,
            tokenizer=tiny.tokenizer,
            processor=None,
            hf_model_type=None,
            dataset_cls=RLHFDataset,
            data_config=DictConfigWrap(verl_config.data),
            tools=ToolListWrap([]),
        )

    sampling = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": True}
    row = {"extra_info": {"task_id": task_id, "split": split}, "global_steps": 1}

    async def main() -> list[list[Any]]:
        return list(
            await asyncio.gather(*(loop().run(sampling, session_id=i, **row) for i in range(size)))
        )

    return asyncio.run(main())


@pytest.mark.parametrize(("env", "split", "task"), [("sokoban", "val", "val-0002"),
                                                     ("textcraft", "test", None),
                                                     ("alfworld", "valid_seen", None)])  # fmt: skip
def test_agent_loop_plays_a_group_against_an_openai_style_server(
    env: str, split: str, task: str | None, run: tuple[Path, Any], tiny: Policy,
    server: TinyChatServer, tmp_path: Path, request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    from agentbench_rl.envs import env_class

    task_id = task or env_class(env).task_ids(split)[0]
    env_kwargs: dict[str, Any] = {}
    if env == "alfworld":  # the native engine: the verl env needs no TextWorld
        env_kwargs["data_dir"] = str(request.getfixturevalue("alfworld_data"))
    config = TrainConfig(
        env=env, env_kwargs=env_kwargs, max_steps=3, val_split=split, history=1, reward="success"
    )
    manager = ChatServerManager(server.base_url, tiny.tokenizer)
    group = play_group(run[1], tiny, manager, config, task_id, split, 3, tmp_path)

    assert len(group) == 3
    first = [outputs[0].extra_fields[RECORD_KEY] for outputs in group]
    assert len({record["obs_key"] for record in first}) == 1  # one start for the whole group
    assert len({record["state_key"] for record in first}) == 1
    from agentbench_rl.envs import make

    start, info = make(env, split=split, **env_kwargs).reset(options={"task_id": task_id})
    expected = build_prompt(env, start, [], info["admissible_actions"], config.prompt_config())
    assert manager.prompts.count(expected + "\n") >= 3  # every member's first prompt, verbatim
    # the tokens verl trains on are the tokens the harness's hf: agent reads
    assert all(outputs[0].prompt_ids == tiny.encode_prompt(expected) for outputs in group)
    for outputs in group:
        records = [output.extra_fields[RECORD_KEY] for output in outputs]
        assert [record["t"] for record in records] == list(range(len(records)))
        assert 1 <= len(records) <= 3
        assert all(record["steps"] == len(records) for record in records)
        assert len({record["success"] for record in records}) == 1
        assert all(record["task_id"] == task_id for record in records)
        for output in outputs:
            assert output.response_mask == [1] * len(output.response_ids)
            assert output.response_logprobs == [-1.0] * len(output.response_ids)
        final = outputs[-1]
        assert final.reward_score == sum(training_reward(r, "success", 10.0) for r in records)
        assert final.extra_fields["reward_extra_info"]["steps"] == len(records)


# ---------------------------------------------------------------------- storage round trip
def group_rows(env: str, split: str, task_id: str, size: int, seed: int) -> list[dict[str, Any]]:
    """Real step records of one group (random agents), as our agent loop writes them."""
    from agentbench_rl.agents.simple import RandomAgent
    from agentbench_rl.rollout.group import GroupEnv, rollout_group

    group = GroupEnv(EnvSpec(name=env, split=split, max_steps=4), group_size=size)
    rollout = rollout_group(group, RandomAgent(), task_id, seed=seed)
    steps = {traj: outcome["steps"] for traj, outcome in rollout.outcomes.items()}
    return [
        {**{key: record[key] for key in ("t", "reward", "obs_key", "state_key", "action_key",
                                            "next_obs_key")},
         "valid": bool(record["valid"]), "success": record["success"],
         "steps": steps[record["traj"]], "member": int(record["traj"].rsplit("_", 1)[1])}
        for record in rollout.records
    ]  # fmt: skip


@pytest.fixture(scope="module")
def storage() -> Iterator[None]:
    """A local Ray with verl's TransferQueue (4 CPUs and one storage unit: 2 CPUs deadlock)."""
    import ray
    import transfer_queue as tq

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    folder = Path(verl.__file__).parent / "trainer" / "config" / "transfer_queue"
    config = OmegaConf.load(folder / "transfer_queue.yaml")
    config.enable = True
    config.backend.SimpleStorage.num_data_storage_units = 1
    tq.init(config)
    try:
        yield
    finally:
        tq.close()
        ray.shutdown()


def test_advantages_through_verl_storage_equal_compute(
    storage: None, run: tuple[Path, Any], tiny: Policy, server: TinyChatServer, tmp_path: Path
) -> None:
    """Sessions go through verl's own post-processing into its storage (one group played by
    our agent loop, two by random agents), verl pads the batch, rows are shuffled; the
    advantages our trainer writes back equal ``compute`` on the rows."""
    import transfer_queue as tq
    from transfer_queue import KVBatchMeta
    from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput
    from verl.trainer.ppo.padding_utils import upsample_batch_to_divisible_size
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ

    from agentbench_rl.integrations.verl.trainer import AgentBenchTrainer

    worker = object.__new__(AgentLoopWorkerTQ.__ray_actor_class__)  # no model, no servers
    worker.reward_loop_worker_handles, worker.distillation_enabled = None, False
    worker.processor = None
    groups = {"uid-a": ("sokoban", "val", "val-0001"), "uid-b": ("textcraft", "test", None)}
    truth: dict[str, dict[str, Any]] = {}  # verl key -> record with its group and trajectory

    async def put_all() -> None:
        from agentbench_rl.envs import env_class

        for uid, (env, split, task) in groups.items():
            task_id = task or env_class(env).task_ids(split)[1]
            rows = group_rows(env, split, task_id, size=3, seed=7)
            for member in range(3):
                records = [r for r in rows if r["member"] == member]
                outputs = []
                for index, record in enumerate(records):
                    length = 2 + (index % 3)
                    outputs.append(
                        AgentLoopOutput(
                            prompt_ids=[5] * 4, response_ids=[7] * length,
                            response_mask=[1] * length, response_logprobs=[-0.5] * length,
                            metrics=AgentLoopMetrics(), extra_fields={RECORD_KEY: record},
                        )
                    )  # fmt: skip
                    truth[f"{uid}_{member}_{index}"] = {**record, "group": uid,
                                                        "traj": f"{uid}/{member}"}  # fmt: skip
                outputs[-1].reward_score = 1.0  # verl copies it (and the info) to every output
                outputs[-1].extra_fields["reward_extra_info"] = {"success": 1.0}
                await worker._agent_loop_postprocess(
                    outputs, False, uid=uid, session_id=member, global_steps=1,
                    raw_prompt=[{"role": "user", "content": "x"}],
                )  # fmt: skip

    asyncio.run(put_all())
    # verl copied the last output's reward_score onto every output of a session: per-step
    # rewards could not have travelled there (hence the step records)
    scores = tq.kv_batch_get(keys=sorted(truth), partition_id="train", select_fields=["rm_scores"])
    assert all(row[-1].item() == 1.0 for row in scores["rm_scores"].unbind())

    config = TrainConfig(env="sokoban", max_steps=3)
    manager = ChatServerManager(server.base_url, tiny.tokenizer)
    played = play_group(run[1], tiny, manager, config, "val-0004", "val", 3, tmp_path)

    async def put_played() -> None:
        for member, outputs in enumerate(played):
            for index, output in enumerate(outputs):
                record = output.extra_fields[RECORD_KEY]
                truth[f"uid-c_{member}_{index}"] = {**record, "group": "uid-c",
                                                    "traj": f"uid-c/{member}"}  # fmt: skip
            await worker._agent_loop_postprocess(
                outputs, False, uid="uid-c", session_id=member, global_steps=1,
                raw_prompt=[{"role": "user", "content": "x"}],
            )  # fmt: skip

    asyncio.run(put_played())
    listing = tq.kv_list("train")["train"]
    keys = sorted(listing)
    assert set(keys) == set(truth)
    random.Random(0).shuffle(keys)
    batch = KVBatchMeta(partition_id="train", keys=keys, tags=[listing[key] for key in keys])
    multiple = len(truth) + 5  # verl's own padding: 5 rows that copy the first row's fields
    batch = upsample_batch_to_divisible_size(batch, multiple, eos_token_id=0)
    assert sum(bool(tag.get("is_padding")) for tag in batch.tags) == 5

    reference = StepBatch.from_records(
        [{k: v for k, v in truth[key].items() if k not in ("member", "steps", "task_id")} | {
            "reward": training_reward(truth[key], "success", 10.0)} for key in truth]
    )  # fmt: skip
    order = {key: i for i, key in enumerate(truth)}
    trainer = object.__new__(AgentBenchTrainer)
    for name in SUPPORTED:
        trainer.train_config = TrainConfig(env="sokoban", estimator=name)
        metrics: dict[str, float] = {}
        trainer._compute_advantage(batch, metrics)
        data = tq.kv_batch_get(keys=batch.keys, partition_id="train",
                               select_fields=["advantages", "response_mask"])  # fmt: skip
        expected = trainer.train_config.estimator_spec().compute(reference).advantages
        for key, tag, values, mask in zip(batch.keys, batch.tags, data["advantages"].unbind(),
                                          data["response_mask"].unbind(), strict=True):  # fmt: skip
            assert values.shape == mask.shape
            want = 0.0 if tag.get("is_padding") else expected[order[key]]
            np.testing.assert_allclose(values.numpy(), want, rtol=1e-6, atol=1e-6, err_msg=name)
        assert metrics["agentbench/rows"] == len(truth)


def test_docstring_examples_of_the_verl_modules() -> None:
    import doctest
    import importlib

    for name in ("advantages", "agent_loop", "config", "data", "launcher", "trainer"):
        module = importlib.import_module(f"agentbench_rl.integrations.verl.{name}")
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, f"{result.failed} failing example(s) in {name}"


# ---------------------------------------------------------------------- end to end, on a GPU
SMOKE_MODEL = os.environ.get("AGENTBENCH_SMOKE_MODEL", "Qwen/Qwen2.5-0.5B-Instruct")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_end_to_end_on_a_gpu(tmp_path: Path) -> None:
    """A few verl steps of GiGPO on Sokoban with Qwen2.5-0.5B (needs verl's vllm extra and the
    model, AGENTBENCH_SMOKE_MODEL or the Hugging Face cache), then the last checkpoint is
    evaluated through the harness as an ``hf:`` agent."""
    import subprocess
    import sys

    run = tmp_path / "run"
    train = [
        sys.executable, "-m", "agentbench_rl.cli", "train", "--engine", "verl",
        "--env", "sokoban", "--estimator", "gigpo", "--model", SMOKE_MODEL, "--out", str(run),
        "iterations=2", "n_tasks=2", "group_size=4", "max_steps=3", "max_new_tokens=64",
        "max_prompt_tokens=1024", "minibatch_size=8", "forward_batch_size=4",
        "checkpoint_every=2", "dtype=bfloat16",
        "verl.trainer.n_gpus_per_node=1",
        "verl.actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "verl.actor_rollout_ref.rollout.gpu_memory_utilization=0.4",
        "verl.actor_rollout_ref.rollout.agent.num_workers=2",
        "verl.transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
    ]  # fmt: skip
    done = subprocess.run(train, capture_output=True, text=True, timeout=1500, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    from agentbench_rl.integrations.verl.launcher import checkpoint_steps, hf_checkpoint

    assert checkpoint_steps(run) == [2]
    folder = hf_checkpoint(run)
    evaluate = [
        sys.executable, "-m", "agentbench_rl.cli", "eval", "--env", "sokoban", "--split", "val",
        "--agent", f"hf:{folder}", "--limit", "2", "--max-steps", "3", "--out", str(tmp_path / "e"),
    ]  # fmt: skip
    done = subprocess.run(evaluate, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "e" / "summary.json").is_file()


def test_a_reward_score_without_reward_extra_info_breaks_verl_storage() -> None:
    """Why our last output always carries ``reward_extra_info``: verl's post-processing copies
    it from the last output to the others and fails without it."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ

    worker = object.__new__(AgentLoopWorkerTQ.__ray_actor_class__)
    worker.reward_loop_worker_handles, worker.distillation_enabled = None, False
    worker.processor = None
    outputs = [
        AgentLoopOutput(prompt_ids=[1], response_ids=[2], response_mask=[1],
                        metrics=AgentLoopMetrics())
        for _ in range(2)
    ]  # fmt: skip
    outputs[-1].reward_score = 1.0
    with pytest.raises(KeyError, match="reward_extra_info"):
        asyncio.run(worker._agent_loop_postprocess(outputs, False, uid="u", session_id=0))

"""The seeded evaluation: every task of a split, once per seed, into a results folder.

An episode depends only on (env, task, agent, seed): the env and the agent are both seeded from
``seed_from(seed, task_id)``, so the order episodes run in (one worker or many, fresh or resumed)
never changes a number, nor does playing them in lockstep batches (``--batch-size``, one agent
call per step of a batch) or sending an ``openai:`` agent's requests concurrently
(``--concurrency``). Finished episodes go to a journal as they arrive (one JSON line each,
flushed), which is what ``--resume`` reads; the final files are written atomically, sorted by seed
and task order, so equal runs give byte-identical files.
"""

from __future__ import annotations

import copy
import json
import multiprocessing
import os
from collections.abc import Iterator, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.markup import escape

import agentbench_rl
from agentbench_rl.agents import load_agent
from agentbench_rl.agents.base import Agent, BatchAgent
from agentbench_rl.core.atomic import atomic_write_text
from agentbench_rl.core.text import printable
from agentbench_rl.envs import env_class, resolve
from agentbench_rl.envs.base import TextAgentEnv
from agentbench_rl.envs.spec import EnvSpec
from agentbench_rl.extras import require
from agentbench_rl.harness.agent_errors import AgentRaised, GuardedAgent, GuardedBatchAgent
from agentbench_rl.harness.fingerprints import data_fingerprint, record_agent
from agentbench_rl.harness.provenance import provenance
from agentbench_rl.harness.sampling import stratified_sample
from agentbench_rl.harness.stats import summarize
from agentbench_rl.harness.trajectories import RecordingEnv, write_episode
from agentbench_rl.progress import progress_display
from agentbench_rl.rollout.episode import (
    AgentRows,
    EpisodeSlot,
    Lockstep,
    drive,
    episode_seed,
    play,
)
from agentbench_rl.spec.journal import read_journal
from agentbench_rl.spec.records import EvaluationSummary
from agentbench_rl.spec.results_folder import ResultsFolder, write_episodes

EPISODE_COLUMNS = (
    "task_id",
    "category",
    "seed",
    "success",
    "score",
    "steps",
    "return",
    "invalid_actions",
)
MAX_SEED = 2**32 - 1
#: The most worker processes an evaluation starts (each holds its envs and agent, hundreds of
#: MB for a model); fewer where there are fewer batches of jobs than that.
MAX_WORKERS = 64


@dataclass
class EvalConfig:
    """Everything that defines an evaluation (stored in ``config.json`` and the summary)."""

    env: str
    split: str
    agent: str
    seeds: list[int] = field(default_factory=lambda: [0])
    limit: int | None = None
    max_steps: int | None = None
    episodes_format: str = "csv"
    save_trajectories: bool = False
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    # Only the tasks of these categories (such as TextCraft's "depth-1"), before ``limit``
    # samples; None: every category. A plain None default, so folders written before the field
    # existed resume as they were.
    categories: list[str] | None = None

    def validate(self) -> TextAgentEnv[Any]:
        """Raise ``ValueError`` with one line naming the first problem; return the env made to
        check the env options (the caller may keep it rather than make another)."""
        entry = resolve(self.env)
        self.env = entry.name
        cls = env_class(entry.name)
        if self.split not in cls.splits():
            raise ValueError(
                f"env '{entry.name}' has no split '{self.split}' "
                f"(choose from {', '.join(cls.splits())})"
            )
        cls.task_ids(self.split)  # raises for unbounded splits
        load_agent(self.agent)
        if not self.seeds:
            raise ValueError("give at least one seed")
        for seed in self.seeds:
            if not 0 <= seed <= MAX_SEED:
                raise ValueError(f"seed {seed} is out of range (0 .. {MAX_SEED})")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds repeat: {self.seeds}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit must be >= 1, got {self.limit}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"--max-steps must be >= 1, got {self.max_steps}")
        if self.episodes_format not in ("csv", "parquet"):
            raise ValueError(f"episodes format '{self.episodes_format}' (choose csv or parquet)")
        if self.episodes_format == "parquet":
            require("parquet", "--episodes-format parquet")
        try:
            return self.make_env()
        except TypeError as problem:  # an env option the env does not take
            raise ValueError(f"env '{self.env}': {problem}") from None

    def env_spec(self) -> EnvSpec:
        """The env this evaluation plays."""
        return EnvSpec(
            name=self.env,
            split=self.split,
            kwargs=self.env_kwargs,
            categories=tuple(self.categories or ()),
            max_steps=self.max_steps,
        )

    def make_env(self, server: str | None = None) -> TextAgentEnv[Any]:
        """A fresh env of this evaluation (with ``server``, the one served there)."""
        return self.env_spec().make(server)

    def tasks(self, env: TextAgentEnv[Any] | None = None) -> list[str]:
        """The task ids evaluated, in split order: the whole split (its tasks of ``categories``
        when given), or with ``limit`` a seeded sample of those stratified by category (see
        :mod:`agentbench_rl.harness.sampling`), for which ``env`` (made if not given) tells each
        task's category.

        Example:
            >>> config = EvalConfig("textcraft", "test", "random", categories=["depth-1"], limit=3)
            >>> len(config.tasks())
            3
        """
        ids = env_class(self.env).task_ids(self.split)
        if not self.categories and (not self.limit or self.limit >= len(ids)):
            return ids
        categorised = self.env_spec().categorised(env)
        if not self.limit or self.limit >= len(categorised):
            return list(categorised)
        return stratified_sample(categorised, self.limit)


def parse_env_options(options: list[str]) -> dict[str, Any]:
    """``["data_dir=/d", "num_products=100"]`` -> ``{"data_dir": "/d", "num_products": 100}``.

    Values are read as JSON where they parse (numbers, booleans, null), else kept as text;
    ``NaN`` and ``Infinity`` are refused (no env option means "no limit" by them).

    Example:
        >>> parse_env_options(["width=8", "data_dir=/data/webshop"])
        {'width': 8, 'data_dir': '/data/webshop'}
    """
    parsed: dict[str, Any] = {}
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or not key.isidentifier():
            raise ValueError(f"--env-option '{option}': expected KEY=VALUE")
        try:
            parsed[key] = json.loads(value, parse_constant=_no_constant)
        except json.JSONDecodeError:
            parsed[key] = value
        except ValueError:
            raise ValueError(f"--env-option '{option}': {value} is not a finite number") from None
    return parsed


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def run_episode(env: TextAgentEnv[Any], agent: Any, task_id: str, seed: int) -> dict[str, Any]:
    """Play one episode through the episode driver and return its row of ``episodes.csv``."""
    slot = EpisodeSlot(task_id, episode_seed(seed, task_id))
    return play([env], [slot], [agent], [slot.seed]).episodes[0].outcome().row(seed)


class BatchPlayer:
    """The envs and the agent of one process, playing (task, seed) jobs in lockstep batches of
    up to ``batch_size`` episodes (``eval --batch-size``): one agent call per step of a batch.

    A batched agent (``hf:``, ``openai:``: see :class:`~agentbench_rl.agents.base.BatchAgent`)
    answers the whole batch; a single-step agent is instantiated once per row (``copy.copy`` of
    an agent object given), each playing its row as it would play alone. Since every episode is
    seeded from (seed, task) only, a batch's episodes come out exactly as sequential ones.

    Example:
        >>> config = EvalConfig(env="sokoban", split="test", agent="random")
        >>> player = BatchPlayer(config, batch_size=2)
        >>> rows = list(player.play([("test-0000", 0), ("test-0001", 0), ("test-0002", 0)]))
        >>> sorted(row["task_id"] for row in rows) == ["test-0000", "test-0001", "test-0002"]
        True
    """

    def __init__(
        self,
        config: EvalConfig,
        batch_size: int = 1,
        concurrency: int = 1,
        agent: Agent | BatchAgent | None = None,
        out: Path | None = None,
        prepared: Agent | BatchAgent | None = None,
        env_server: str | None = None,
    ) -> None:
        self.batch_size, self.spec = batch_size, config.agent
        # With --save-trajectories every env records its episode, written to OUT as it ends.
        self.out = out if config.save_trajectories else None
        self.envs: list[Any] = [config.make_env(env_server) for _ in range(batch_size)]
        if self.out is not None:
            self.envs = [RecordingEnv(env) for env in self.envs]
        # ``prepared``: the first agent of config.agent, already loaded by evaluate's check.
        if agent is not None:
            first = agent
        else:
            first = prepared if prepared is not None else load_agent(config.agent)
        if concurrency > 1:
            if not hasattr(first, "concurrency"):
                raise ValueError(f"--concurrency: agent '{config.agent}' sends no requests")
            first.concurrency = concurrency
        # Every agent call is guarded: an agent that raises stops the run naming a task of it.
        if isinstance(first, BatchAgent):
            self.agent: BatchAgent = GuardedBatchAgent(first)
        else:
            others = [
                copy.copy(first) if agent is not None else load_agent(config.agent)
                for _ in range(batch_size - 1)
            ]
            self.agent = AgentRows(
                [GuardedAgent(row_agent, row) for row, row_agent in enumerate([first, *others])]
            )

    def play(self, jobs: Sequence[tuple[str, int]]) -> Iterator[dict[str, Any]]:
        """Play every job; yields each episode's row as the episode ends (its trajectory
        written first with ``--save-trajectories``). An agent that raises stops the play with
        an :class:`~agentbench_rl.harness.agent_errors.AgentError` naming the row's task, or,
        for a batched agent, the first live episode of the batch."""
        for start in range(0, len(jobs), self.batch_size):
            batch = jobs[start : start + self.batch_size]
            envs = self.envs[: len(batch)]
            slots = [EpisodeSlot(task, episode_seed(seed, task)) for task, seed in batch]
            lock = Lockstep.of_envs(envs, slots)
            try:
                self.agent.begin_episodes(envs, [slot.seed for slot in slots])
                for index in drive(lock, self.agent):
                    row = lock.episodes[index].outcome().row(batch[index][1])
                    if self.out is not None:
                        write_episode(self.out, envs[index], row)
                    yield row
            except AgentRaised as raised:
                where = raised.row if raised.row is not None else (lock.live or [0])[0]
                task_id, seed = batch[where]
                raise raised.error(self.spec, task_id, seed) from None


# Worker processes keep their envs and agent for all their episodes (envs can be slow to make).
_worker_state: dict[str, Any] = {}


def _init_worker(
    config: EvalConfig, batch_size: int, concurrency: int, out: Path, env_server: str | None
) -> None:
    _worker_state["player"] = BatchPlayer(
        config, batch_size, concurrency, out=out, env_server=env_server
    )


def _worker_batch(jobs: list[tuple[str, int]]) -> list[dict[str, Any]]:
    return list(_worker_state["player"].play(jobs))


def _run_jobs(
    config: EvalConfig,
    jobs: list[tuple[str, int]],
    workers: int,
    agent: Agent | BatchAgent | None,
    batch_size: int,
    concurrency: int,
    out: Path,
    prepared: Agent | BatchAgent | None = None,
    env_server: str | None = None,
) -> Iterator[dict[str, Any]]:
    batch_size = min(batch_size, len(jobs))
    if workers == 1 or len(jobs) <= batch_size:
        player = BatchPlayer(config, batch_size, concurrency, agent, out, prepared, env_server)
        yield from player.play(jobs)
        return
    batches = [jobs[start : start + batch_size] for start in range(0, len(jobs), batch_size)]
    # spawn, not fork: the parent runs a progress-bar thread, and forking threads can deadlock.
    context = multiprocessing.get_context("spawn")
    initargs = (config, batch_size, concurrency, out, env_server)
    workers = min(workers, len(batches))  # a worker with no batch would only load the agent
    with context.Pool(workers, initializer=_init_worker, initargs=initargs) as pool:
        chunksize = max(1, 4 // batch_size)
        for rows in pool.imap_unordered(_worker_batch, batches, chunksize=chunksize):
            yield from rows


def _prepare_folder(
    config: EvalConfig, folder: ResultsFolder, resume: bool, console: Console | None
) -> list[dict[str, Any]]:
    """Check the results folder and return the episodes already done (for ``--resume``)."""
    defaults = {
        item.name: item.default for item in fields(EvalConfig) if item.default is not MISSING
    }
    resumed = folder.prepare(
        asdict(config), defaults, resume, EPISODE_COLUMNS, config.episodes_format
    )
    if resumed.duplicates:
        message = (
            f"{folder.journal_file}: {resumed.duplicates} episodes were recorded "
            "twice; each counts once (the first record is kept)"
        )
        (console or Console(stderr=True)).print(
            f"warning: {escape(printable(message))}", highlight=False
        )
    return resumed.done


def evaluate(
    config: EvalConfig,
    out: Path,
    workers: int = 1,
    resume: bool = False,
    console: Console | None = None,
    agent: Agent | BatchAgent | None = None,
    batch_size: int | None = None,
    concurrency: int = 1,
    env_server: str | None = None,
) -> dict[str, Any]:
    """Run (or finish) the evaluation and write ``episodes.csv`` and ``summary.json`` to ``out``.

    ``batch_size`` episodes play in lockstep per process (:class:`BatchPlayer`; default: the
    ``concurrency``, else 1); ``concurrency`` caps the requests an ``openai:`` agent has in
    flight. Neither changes a number of the results, nor do ``workers``, nor ``env_server``
    (the episodes play on envs that ``agentbench-rl serve-env`` serves there, and come out
    byte for byte as local ones): they are not part of the config, and a run may be resumed
    with other values.

    ``agent``, when given, plays instead of a fresh ``load_agent(config.agent)`` (a policy already
    in memory, such as the trainer's; ``config.agent`` still names it in the results); it needs
    ``workers=1``.

    Example:
        >>> import tempfile
        >>> config = EvalConfig(env="sokoban", split="test", agent="expert", limit=3)
        >>> summary = evaluate(config, Path(tempfile.mkdtemp()) / "run")
        >>> summary["success"]["mean"]
        1.0
    """
    env = config.validate()
    if env_server is not None:  # the server answers and serves this env, before anything is written
        config.make_env(env_server).close()
    if not 1 <= workers <= MAX_WORKERS:
        raise ValueError(f"--workers must be in 1 .. {MAX_WORKERS}, got {workers}")
    if concurrency < 1:
        raise ValueError(f"--concurrency must be >= 1, got {concurrency}")
    if concurrency > 1 and agent is None and not config.agent.startswith("openai:"):
        raise ValueError(f"--concurrency applies to openai: agents, not '{config.agent}'")
    batch_size = concurrency if batch_size is None else batch_size
    if batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1, got {batch_size}")
    if agent is not None and workers != 1:
        raise ValueError("an agent object plays in this process only: use workers=1")
    # Load what the agent loads (an hf: model) before anything is written: a model that cannot
    # load is one ValueError naming it, not an agent error on the first episode. With workers,
    # each worker loads its own copy and this one is dropped.
    prepared: Agent | BatchAgent | None = agent if agent is not None else load_agent(config.agent)
    prepare = getattr(prepared, "prepare", None)
    if callable(prepare):
        prepare()
    if workers > 1:
        prepared = None
    out = Path(out)
    with ResultsFolder(out).lock():  # one run writes a results folder at a time
        return _evaluate_in(
            config,
            env,
            out,
            workers,
            resume,
            console,
            agent,
            batch_size,
            concurrency,
            prepared,
            env_server,
        )


def _evaluate_in(
    config: EvalConfig,
    env: TextAgentEnv[Any],
    out: Path,
    workers: int,
    resume: bool,
    console: Console | None,
    agent: Agent | BatchAgent | None,
    batch_size: int,
    concurrency: int,
    prepared: Agent | BatchAgent | None,
    env_server: str | None,
) -> dict[str, Any]:
    """:func:`evaluate` in a results folder it holds the lock of."""
    folder = ResultsFolder(out)
    done = _prepare_folder(config, folder, resume, console)
    fingerprint = record_agent(out, config.agent)
    tasks = config.tasks(env)
    total = len(env.task_ids(config.split))
    if len(tasks) < total and console is not None:
        if config.categories:
            what = f"categories {', '.join(config.categories)}"
            if config.limit:
                what += f"; --limit {config.limit}, seeded, stratified by category"
            message = f"{len(tasks)} of the {total} tasks ({what}), not the whole split"
        else:
            message = (
                f"--limit {config.limit}: a sample of {len(tasks)} of the {total} tasks "
                "(seeded, stratified by category), not the whole split"
            )
        console.print(message, highlight=False)
    order = {task: index for index, task in enumerate(tasks)}
    finished = {(row["task_id"], int(row["seed"])) for row in done}
    jobs = [(task, seed) for seed in config.seeds for task in tasks if (task, seed) not in finished]
    rows = [row for row in done if row["task_id"] in order and int(row["seed"]) in config.seeds]
    if console is not None and resume and rows:
        episodes_total = len(tasks) * len(config.seeds)
        console.print(
            f"resuming: {len(rows)} of {episodes_total} episodes done"
            if jobs
            else f"complete: all {episodes_total} episodes were done (the result files are "
            "written again from them)",
            highlight=False,
        )

    if jobs:
        with (
            read_journal(folder.journal_file, EPISODE_COLUMNS).append_to(
                folder.journal_file
            ) as journal,
            progress_display(console) as progress,
        ):
            bar = progress.add_task(
                escape(f"{config.env}/{config.split} {config.agent}"),
                total=len(tasks) * len(config.seeds),
                completed=len(rows),
            )
            played = _run_jobs(
                config, jobs, workers, agent, batch_size, concurrency, out, prepared, env_server
            )
            for row in played:
                journal.write(json.dumps(row, sort_keys=True) + "\n")
                journal.flush()
                rows.append(row)
                progress.advance(bar)
            os.fsync(journal.fileno())

    episodes = pd.DataFrame(rows, columns=list(EPISODE_COLUMNS))
    episodes["_order"] = episodes["task_id"].map(order)
    episodes = (
        episodes.sort_values(["seed", "_order"], kind="stable")
        .drop(columns="_order")
        .reset_index(drop=True)
    )
    episodes = episodes.astype(
        {
            "seed": "int64",
            "success": "bool",
            "score": "float64",
            "steps": "int64",
            "return": "float64",
            "invalid_actions": "int64",
            "category": "str",
        }
    )
    write_episodes(episodes, folder.episodes_file(config.episodes_format))

    origin = provenance(config.agent)
    data = data_fingerprint(config.env, env, config.split)
    record = EvaluationSummary(
        env=config.env,
        split=config.split,
        agent=config.agent,
        seeds=list(config.seeds),
        split_checksum=env.results_checksum(env.checksum()),
        complete_split=len(tasks) == len(env.task_ids(config.split)),
        non_string_actions=sum(int(row.get("non_string_actions", 0)) for row in rows),
        config=asdict(config),
        package_version=agentbench_rl.__version__,
        git_commit=origin.pop("git_commit"),
        provenance=origin,
        agent_fingerprint=fingerprint,
        **({"data": data} if data is not None else {}),
    )
    summary = record.to_json(summarize(episodes))
    atomic_write_text(folder.summary_file, json.dumps(summary, indent=1, sort_keys=False) + "\n")
    folder.journal_file.unlink(missing_ok=True)
    return summary

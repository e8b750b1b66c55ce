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
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.markup import escape

from agentbench_rl.agents import load_agent
from agentbench_rl.agents.base import Agent, BatchAgent
from agentbench_rl.core.atomic import atomic_write_text
from agentbench_rl.core.text import printable
from agentbench_rl.core.version import __version__
from agentbench_rl.envs.base import TextAgentEnv
from agentbench_rl.harness.agent_errors import AgentRaised, GuardedAgent, GuardedBatchAgent
from agentbench_rl.harness.config import EvalConfig, RunOptions
from agentbench_rl.harness.fingerprints import data_fingerprint, record_agent
from agentbench_rl.harness.provenance import provenance
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
from agentbench_rl.spec.records import EPISODE_COLUMNS, EpisodeRow, Evaluation, EvaluationSummary
from agentbench_rl.spec.results_folder import ResultsFolder, write_episodes


def run_episode(env: TextAgentEnv[Any], agent: Any, task_id: str, seed: int) -> EpisodeRow:
    """Play one episode through the episode driver and return its row of ``episodes.csv``."""
    slot = EpisodeSlot(task_id, episode_seed(seed, task_id))
    return play([env], [slot], [agent], [slot.seed]).episodes[0].outcome().row(seed)


class BatchPlayer:
    """The envs and the agent of one process, playing (task, seed) jobs in lockstep batches of
    up to ``lockstep`` episodes (``eval --batch-size``): one agent call per step of a batch.

    A batched agent (``hf:``, ``openai:``: see :class:`~agentbench_rl.agents.base.BatchAgent`)
    answers the whole batch; a single-step agent is instantiated once per row (``copy.copy`` of
    an agent object given), each playing its row as it would play alone. Since every episode is
    seeded from (seed, task) only, a batch's episodes come out exactly as sequential ones.

    Example:
        >>> config = EvalConfig(env="sokoban", split="test", agent="random")
        >>> player = BatchPlayer(config, RunOptions(batch_size=2))
        >>> rows = list(player.play([("test-0000", 0), ("test-0001", 0), ("test-0002", 0)]))
        >>> sorted(row["task_id"] for row in rows) == ["test-0000", "test-0001", "test-0002"]
        True
    """

    def __init__(
        self,
        config: EvalConfig,
        options: RunOptions,
        *,
        agent: Agent | BatchAgent | None = None,
        out: Path | None = None,
        prepared: Agent | BatchAgent | None = None,
    ) -> None:
        self.batch_size, self.spec = options.lockstep, config.agent
        # With --save-trajectories every env records its episode, written to OUT as it ends.
        self.out = out if config.save_trajectories else None
        self.envs: list[Any] = [config.env.make(options.env_server) for _ in range(self.batch_size)]
        if self.out is not None:
            self.envs = [RecordingEnv(env) for env in self.envs]
        # ``prepared``: the first agent of config.agent, already loaded by evaluate's check.
        if agent is not None:
            first = agent
        else:
            first = prepared if prepared is not None else load_agent(config.agent)
        if options.concurrency > 1:
            if not hasattr(first, "concurrency"):
                raise ValueError(f"--concurrency: agent '{config.agent}' sends no requests")
            first.concurrency = options.concurrency
        # Every agent call is guarded: an agent that raises stops the run naming a task of it.
        if isinstance(first, BatchAgent):
            self.agent: BatchAgent = GuardedBatchAgent(first)
        else:
            others = [
                copy.copy(first) if agent is not None else load_agent(config.agent)
                for _ in range(self.batch_size - 1)
            ]
            self.agent = AgentRows(
                [GuardedAgent(row_agent, row) for row, row_agent in enumerate([first, *others])]
            )

    def play(self, jobs: Sequence[tuple[str, int]]) -> Iterator[EpisodeRow]:
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


def _init_worker(config: EvalConfig, options: RunOptions, out: Path) -> None:
    _worker_state["player"] = BatchPlayer(config, options, out=out)


def _worker_batch(jobs: list[tuple[str, int]]) -> list[EpisodeRow]:
    return list(_worker_state["player"].play(jobs))


def _run_jobs(
    config: EvalConfig,
    jobs: list[tuple[str, int]],
    options: RunOptions,
    out: Path,
    agent: Agent | BatchAgent | None,
    prepared: Agent | BatchAgent | None,
) -> Iterator[EpisodeRow]:
    options = options.model_copy(update={"batch_size": min(options.lockstep, len(jobs))})
    batch_size = options.lockstep
    if options.workers == 1 or len(jobs) <= batch_size:
        player = BatchPlayer(config, options, agent=agent, out=out, prepared=prepared)
        yield from player.play(jobs)
        return
    batches = [jobs[start : start + batch_size] for start in range(0, len(jobs), batch_size)]
    # spawn, not fork: the parent runs a progress-bar thread, and forking threads can deadlock.
    context = multiprocessing.get_context("spawn")
    workers = min(options.workers, len(batches))  # a worker with no batch would only load the agent
    with context.Pool(workers, initializer=_init_worker, initargs=(config, options, out)) as pool:
        chunksize = max(1, 4 // batch_size)
        for rows in pool.imap_unordered(_worker_batch, batches, chunksize=chunksize):
            yield from rows


def _prepare_folder(
    config: EvalConfig, folder: ResultsFolder, resume: bool, console: Console | None
) -> list[EpisodeRow]:
    """Check the results folder and return the episodes already done (for ``--resume``)."""
    resumed = folder.prepare(
        config.record(),
        EvalConfig.record_defaults(),
        resume,
        EPISODE_COLUMNS,
        EvalConfig.PRESENTATION,
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
    options: RunOptions | None = None,
    *,
    console: Console | None = None,
    agent: Agent | BatchAgent | None = None,
) -> Evaluation:
    """Run (or finish) the evaluation and write ``episodes.csv`` and ``summary.json`` to ``out``;
    returns the summary, typed. ``options`` (:class:`RunOptions`: workers, batching, concurrency,
    resuming, a served env) change no number of the results; they are not part of the config.

    ``agent``, when given, plays instead of a fresh ``load_agent(config.agent)`` (a policy already
    in memory, such as the trainer's; ``config.agent`` still names it in the results); it needs
    one worker.

    Example:
        >>> import tempfile
        >>> config = EvalConfig(env="sokoban", split="test", agent="expert", limit=3)
        >>> summary = evaluate(config, Path(tempfile.mkdtemp()) / "run")
        >>> summary.success.mean, summary.n_episodes
        (1.0, 3)
    """
    options = options if options is not None else RunOptions()
    env = config.checked_env(load=agent is None)
    tasks = config.tasks(env)  # an unknown category is refused before anything is written
    if options.env_server is not None:  # the server serves this env, before anything is written
        config.env.make(options.env_server).close()
    if options.concurrency > 1 and agent is None and not config.agent.startswith("openai:"):
        raise ValueError(f"--concurrency applies to openai: agents, not '{config.agent}'")
    if agent is not None and options.workers != 1:
        raise ValueError("an agent object plays in this process only: use workers=1")
    # Load what the agent loads (an hf: model) before anything is written: a model that cannot
    # load is one ValueError naming it, not an agent error on the first episode. With workers,
    # each worker loads its own copy and this one is dropped.
    prepared: Agent | BatchAgent | None = agent if agent is not None else load_agent(config.agent)
    prepare = getattr(prepared, "prepare", None)
    if callable(prepare):
        prepare()
    if options.workers > 1:
        prepared = None
    out = Path(out)
    with ResultsFolder(out).lock():  # one run writes a results folder at a time
        return _evaluate_in(config, env, tasks, out, options, console, agent, prepared)


def _evaluate_in(
    config: EvalConfig,
    env: TextAgentEnv[Any],
    tasks: list[str],
    out: Path,
    options: RunOptions,
    console: Console | None,
    agent: Agent | BatchAgent | None,
    prepared: Agent | BatchAgent | None,
) -> Evaluation:
    """:func:`evaluate` in a results folder it holds the lock of, playing ``tasks``."""
    folder = ResultsFolder(out)
    done = _prepare_folder(config, folder, options.resume, console)
    fingerprint = record_agent(out, config.agent)
    total = len(tasks) if config.env.panel else len(env.task_ids(config.env.split))
    if config.env.panel and console is not None:
        console.print(f"a panel of {len(tasks)} tasks, not the whole split", highlight=False)
    if len(tasks) < total and console is not None:
        if config.env.categories:
            what = f"categories {', '.join(config.env.categories)}"
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
    if console is not None and options.resume and rows:
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
                escape(f"{config.env.name}/{config.env.split} {config.agent}"),
                total=len(tasks) * len(config.seeds),
                completed=len(rows),
            )
            played = _run_jobs(config, jobs, options, out, agent, prepared)
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
    data = data_fingerprint(config.env.name, env, config.env.split)
    record = EvaluationSummary(
        env=config.env.name,
        split=config.env.split,
        agent=config.agent,
        seeds=list(config.seeds),
        split_checksum=env.results_checksum(config.env.checksum(env)),
        complete_split=not config.env.panel and len(tasks) == total,
        non_string_actions=sum(int(row.get("non_string_actions", 0)) for row in rows),
        config=config.record(),
        package_version=__version__,
        git_commit=origin.pop("git_commit"),
        provenance=origin,
        agent_fingerprint=fingerprint,
        **({"data": data} if data is not None else {}),
    )
    summary = record.to_json(summarize(episodes))
    atomic_write_text(folder.summary_file, json.dumps(summary, indent=1, sort_keys=False) + "\n")
    folder.journal_file.unlink(missing_ok=True)
    return Evaluation.of(summary)

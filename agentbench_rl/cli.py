"""The ``agentbench-rl`` command.

Sub-commands import their machinery lazily so that ``agentbench-rl --help`` stays instant and a
missing optional extra only matters to the command that needs it. Every user error (unknown env,
split, agent, bad seed) exits with one line naming the problem, never a traceback.
"""

from __future__ import annotations

import errno
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core
from rich.markup import escape

from agentbench_rl.core.text import printable
from agentbench_rl.envs import ENVS
from agentbench_rl.envs.install import DEFAULT_MAX_BYTES
from agentbench_rl.extras import install_hint, require
from agentbench_rl.progress import console_for

app = typer.Typer(
    name="agentbench-rl",
    help="Text-agent environments, advantage estimators and a seeded evaluation harness.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
bench_app = typer.Typer(
    help="Benchmarks: speed of envs and estimators, estimator fidelity, learning on exact MDPs."
)
data_app = typer.Typer(help="Install benchmark data that cannot ship with the package.")
leaderboard_app = typer.Typer(help="Leaderboards: validate, submit, render and view submissions.")


def _print_version(value: bool) -> None:
    if value:
        import agentbench_rl
        from agentbench_rl.harness.provenance import package_revision

        commit = package_revision()["git_commit"]
        suffix = f" (commit {commit[:12]})" if commit else ""
        console_for().print(f"agentbench-rl {agentbench_rl.__version__}{suffix}", highlight=False)
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version; exit."
        ),
    ] = False,
) -> None:
    """Text-agent environments, advantage estimators and a seeded evaluation harness."""


app.add_typer(bench_app, name="bench")
app.add_typer(data_app, name="data")
app.add_typer(leaderboard_app, name="leaderboard")

# Typer's help gives every option a type column ("<bool>", "<integer>"); the help texts and
# defaults already say what an option takes, so the column is dropped (an explicit metavar stays).
typer.core.TyperOption.display_type_rich = lambda self, ctx: self.metavar  # type: ignore[method-assign]

console = console_for(stderr=True)
ENV_HELP = f"Env: {', '.join(ENVS)} (or a Gymnasium id)"


def _fail(message: str) -> None:
    _error_line(message)
    raise typer.Exit(code=2)


def _error_line(message: str) -> None:
    """``error: MESSAGE`` on stderr, one line: the message may echo user or server text, so it
    is never markup and its control characters are escaped."""
    _line("[bold red]error:[/]", message)


def _warning_line(message: str) -> None:
    """``warning: MESSAGE`` on stderr, as :func:`_error_line` writes errors."""
    _line("[yellow]warning:[/]", message)


def _line(label: str, message: str) -> None:
    console.print(f"{label} {escape(printable(message))}", highlight=False, soft_wrap=True)


@app.command("eval")
def eval_command(
    env: Annotated[str, typer.Option(help=f"{ENV_HELP}.")] = "sokoban",
    agent: Annotated[
        str,
        typer.Option(
            help="random, expert, rule (WebShop), hf:MODEL, openai:URL#MODEL, python:module:attr."
        ),
    ] = "random",
    out: Annotated[
        Path | None,
        typer.Option(
            help="Results folder (episodes.csv, summary.json); default results/ENV-SPLIT-AGENT."
        ),
    ] = None,
    split: Annotated[
        str | None,
        typer.Option(
            help="Standard split; default the env's evaluation split (test; ALFWorld valid_seen)."
        ),
    ] = None,
    seeds: Annotated[
        list[int] | None,
        typer.Option(help="Seeds; repeat or list: --seeds 0 1 2 (default: 0)."),
    ] = None,
    workers: Annotated[int, typer.Option(help="Episode worker processes.")] = 1,
    batch_size: Annotated[
        int | None,
        typer.Option(
            help="Episodes stepped in lockstep per worker, one agent call per step "
            "(hf: agents answer them in one forward). Default: the concurrency."
        ),
    ] = None,
    concurrency: Annotated[
        int, typer.Option(help="openai: agents: requests in flight at most.")
    ] = 1,
    limit: Annotated[
        int | None, typer.Option(help="A seeded sample of N tasks, stratified by category.")
    ] = None,
    resume: Annotated[bool, typer.Option(help="Continue an interrupted run in OUT.")] = False,
    max_steps: Annotated[int | None, typer.Option(help="Override the env's step limit.")] = None,
    episodes_format: Annotated[str, typer.Option(help="csv or parquet.")] = "csv",
    env_option: Annotated[
        list[str] | None,
        typer.Option(help="Env constructor argument KEY=VALUE (JSON value), repeatable."),
    ] = None,
    allow_modified_games: Annotated[
        bool, typer.Option(help="ALFWorld: play games whose checksum differs (recorded).")
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="On an agent error, print its traceback.")
    ] = False,
    save_trajectories: Annotated[
        bool,
        typer.Option(
            "--save-trajectories", help="Write every step to OUT/trajectories (see view)."
        ),
    ] = False,
    env_server: Annotated[
        str | None,
        typer.Option(
            help="Play on the env served at this URL (serve-env); the same results as local."
        ),
    ] = None,
) -> None:
    """Evaluate an agent on every task of a standard split, once per seed."""
    from agentbench_rl.envs import evaluation_split
    from agentbench_rl.harness.agent_errors import AgentError
    from agentbench_rl.harness.evaluate import EvalConfig, evaluate, parse_env_options

    try:
        if split is None:
            split = evaluation_split(env)
        env_kwargs = parse_env_options(env_option or [])
        if allow_modified_games:
            env_kwargs["allow_modified_games"] = True
        config = EvalConfig(
            env=env,
            split=split,
            agent=agent,
            seeds=list(seeds) if seeds else [0],
            limit=limit,
            max_steps=max_steps,
            episodes_format=episodes_format,
            env_kwargs=env_kwargs,
            save_trajectories=save_trajectories,
        )
        config.validate()
        if out is None:
            agent_label = agent.replace(":", "_").replace("/", "_")
            out = Path("results") / f"{config.env}-{split}-{agent_label}"
        summary = evaluate(
            config,
            out,
            workers=workers,
            resume=resume,
            console=console,
            batch_size=batch_size,
            concurrency=concurrency,
            env_server=env_server,
        )
    except AgentError as problem:
        if debug:
            console.print(problem.trace, markup=False, highlight=False, end="")
        _fail(str(problem))
        return
    except (
        ValueError,
        FileExistsError,
        FileNotFoundError,
        ImportError,
        ConnectionError,
    ) as problem:
        _fail(str(problem))
        return
    from agentbench_rl.harness.report import print_summary

    print_summary(summary, console_for())
    console.print(
        escape(f"results in {out}/ (episodes.{episodes_format}, summary.json)"),
        highlight=False,
        soft_wrap=True,
    )


@app.command("serve-env")
def serve_env_command(
    env: Annotated[str, typer.Option(help=f"{ENV_HELP}.")] = "sokoban",
    split: Annotated[
        str | None, typer.Option(help="Standard split; default the env's evaluation split.")
    ] = None,
    host: Annotated[
        str, typer.Option(help="Address to bind (127.0.0.1: this machine only).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port.")] = 8000,
    max_steps: Annotated[int | None, typer.Option(help="Override the env's step limit.")] = None,
    env_option: Annotated[
        list[str] | None,
        typer.Option(help="Env constructor argument KEY=VALUE (JSON value), repeatable."),
    ] = None,
    max_sessions: Annotated[int, typer.Option(min=1, help="Sessions (envs) at once.")] = 64,
    idle_timeout: Annotated[
        float, typer.Option(min=1, help="Seconds a session may idle before it is closed.")
    ] = 600.0,
    max_message_bytes: Annotated[
        int, typer.Option(min=1024, help="Largest request or WebSocket message.")
    ] = 1 << 20,
) -> None:
    """Serve an env over OpenEnv's protocol (WebSocket sessions; needs the openenv extra)."""
    from agentbench_rl.envs import evaluation_split
    from agentbench_rl.envs.spec import EnvSpec
    from agentbench_rl.harness.evaluate import parse_env_options

    try:
        from agentbench_rl.integrations.openenv.server import serve
    except ImportError:
        _fail("serve-env needs openenv-core: pip install 'agentbench-rl[openenv]'")
        return
    try:
        spec = EnvSpec(
            name=env,
            split=split or evaluation_split(env),
            kwargs=parse_env_options(env_option or []),
            max_steps=max_steps,
        )
        console.print(
            escape(f"serving {spec.name}/{spec.split} on http://{host}:{port} (Ctrl-C stops)"),
            highlight=False,
            soft_wrap=True,
        )
        serve(
            spec,
            host=host,
            port=port,
            max_sessions=max_sessions,
            idle_timeout=idle_timeout,
            max_message_bytes=max_message_bytes,
        )
    except (ValueError, TypeError) as problem:
        _fail(str(problem))


@app.command("view")
def view_command(
    run: Annotated[Path, typer.Argument(help="Results folder of eval --save-trajectories.")],
) -> None:
    """Render what the agent did (steps, frames, step graphs) as RUN/view.html."""
    from agentbench_rl.harness.view import render_view

    try:
        page = render_view(run)
    except ValueError as problem:
        _fail(str(problem))
        return
    console.print(escape(f"wrote {page} (open it in a browser)"), highlight=False, soft_wrap=True)


@app.command("train")
def train_command(
    overrides: Annotated[
        list[str] | None, typer.Argument(help="key=value config overrides (bc.epochs=3).")
    ] = None,
    env: Annotated[str | None, typer.Option(help=f"{ENV_HELP}.")] = None,
    estimator: Annotated[
        str | None, typer.Option(help="Estimator name (`agentbench-rl estimators` lists them).")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="tiny, tiny-vl, or a Hugging Face model id or path.")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Run seed.")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML config (e.g. baselines/*.yaml).")] = (
        None
    ),
    out: Annotated[
        Path | None, typer.Option(help="Run folder; default runs/ENV-ESTIMATOR-MODEL-seedS.")
    ] = None,
    bc: Annotated[bool, typer.Option("--bc", help="Behaviour cloning before RL.")] = False,
    backend: Annotated[str | None, typer.Option(help="Env workers: local or ray.")] = None,
    resume: Annotated[bool, typer.Option(help="Continue the run in OUT.")] = False,
    show_config: Annotated[
        bool,
        typer.Option(
            "--show-config", help="Print every config key with its value (after overrides); exit."
        ),
    ] = False,
    engine: Annotated[
        str | None,
        typer.Option(
            help="hf or vllm (the home trainer), or verl (verl's trainer on GPUs; "
            "verl.KEY=VALUE overrides go to verl's config)."
        ),
    ] = None,
) -> None:
    """Train a policy with PPO-clip and any advantage estimator (see baselines/)."""
    try:
        require("train", "train")
        from agentbench_rl.train.config import load_config

        flags: dict[str, Any] = {"env": env, "estimator": estimator, "model": model, "seed": seed}
        flags["backend"] = backend
        if engine not in (None, "verl"):
            flags["engine"] = engine
        values = {key: value for key, value in flags.items() if value is not None}
        if bc:
            values["bc"] = {"enabled": True}
        ours, verl_extra = list(overrides or []), list[str]()
        if engine == "verl":
            from agentbench_rl.integrations.verl.config import split_overrides

            ours, verl_extra = split_overrides(ours)
        train_config = load_config(config, ours, values)
        train_config.check()
        if show_config:
            from agentbench_rl.train.config import show_config as sectioned

            console_for().print(sectioned(train_config), end="", markup=False, highlight=False)
            return
        if out is None:
            label = train_config.model.rstrip("/").rsplit("/", 1)[-1]
            name = f"{train_config.env}-{train_config.estimator}-{label}-seed{train_config.seed}"
            out = Path("runs") / name
        if engine == "verl":
            from agentbench_rl.integrations.verl.launcher import hf_checkpoint, train_verl

            train_verl(train_config, out, verl_extra, resume=resume)
            console.print(f"run in {out}/; evaluate with --agent hf:{hf_checkpoint(out)}")
            return
        from agentbench_rl.train.ppo import train

        metrics = train(train_config, out, resume=resume, console=console)
    except (
        ValueError,
        FileExistsError,
        FileNotFoundError,
        ImportError,
        FloatingPointError,  # a non-finite gradient: nothing applied, the last checkpoint kept
    ) as problem:
        _fail(str(problem))
        return
    last = next((row for row in reversed(metrics) if "val_success" in row), None)
    if last is not None:
        console.print(
            f"validation success {last['val_success']:.3f} at iteration {last['iteration']}"
        )
    console.print(escape(f"run in {out}/ (metrics.jsonl, checkpoint/, val/)"))


@app.command("verl-data")
def verl_data_command(
    out: Annotated[Path, typer.Argument(help="Parquet file to write.")],
    env: Annotated[str, typer.Option(help="Env short name or Gymnasium id.")] = "sokoban",
    split: Annotated[str, typer.Option(help="Split whose tasks become rows.")] = "train",
    size: Annotated[
        int | None, typer.Option(help="First N tasks; required for unbounded splits.")
    ] = None,
) -> None:
    """Write a split's task list as verl's parquet dataset (one row per task)."""
    try:
        from agentbench_rl.integrations.verl.data import write_split

        if out.is_dir():
            raise ValueError(f"{out} is a folder; give the parquet file to write")
        rows = write_split(env, split, out, size)
    except (ValueError, ImportError) as problem:
        _fail(str(problem))
        return
    except OSError as problem:
        _fail(f"cannot write {out} ({problem.strerror or problem})")
        return
    console.print(f"{rows} tasks of {env} {split} in {out}")


@app.command("verl-export")
def verl_export_command(
    run: Annotated[Path, typer.Argument(help="Run folder of train --engine verl.")],
    step: Annotated[int | None, typer.Option(help="Checkpoint step (default: the last).")] = None,
) -> None:
    """Print the Hugging Face folder of a verl checkpoint (converted when needed)."""
    try:
        from agentbench_rl.integrations.verl.launcher import hf_checkpoint

        folder = hf_checkpoint(run, step)
    except ImportError as problem:
        _fail(f"verl-export needs the verl extra ({problem}): {install_hint('verl')}")
        return
    except (FileNotFoundError, RuntimeError) as problem:
        _fail(str(problem))
        return
    print(folder)
    console.print(f"evaluate with: agentbench-rl eval --agent hf:{folder}")


@app.command("sweep")
def sweep_command(
    file: Annotated[Path, typer.Argument(help="Sweep file (baselines/*.yaml).")],
    overrides: Annotated[
        list[str] | None, typer.Argument(help="key=value overrides for every run.")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Results folder (default: the file's out).")] = (
        None
    ),
    runner: Annotated[str, typer.Option(help="auto (Ray if installed), ray or sequential.")] = (
        "auto"
    ),
    summary_only: Annotated[
        bool, typer.Option(help="Only rebuild the summary and plot from finished runs.")
    ] = False,
) -> None:
    """Run a grid of training runs (resumable; finished runs are skipped) and summarise it."""
    try:
        require("train", "sweep")
        require("plot", "sweep (its success plot)")
        from agentbench_rl.train.sweep import load_sweep, run_sweep, summarize_sweep

        sweep = load_sweep(file, out)
        if summary_only:
            summarize_sweep(sweep, overrides or [], console)
        else:
            run_sweep(sweep, overrides or [], runner=runner, console=console)
    except (ValueError, FileExistsError, FileNotFoundError, ImportError) as problem:
        _fail(str(problem))
        return
    console.print(
        escape(f"summary in {sweep.out / sweep.name}/ (summary.md, summary.json, success.png)")
    )


@app.command("estimators")
def estimators_command(
    name: Annotated[str | None, typer.Argument(help="One estimator (default: all).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The declarations as JSON.")] = False,
) -> None:
    """The estimators with their parameters (type, default, accepted values, help) and the
    batch columns they need, as each declares itself at registration."""
    import json

    from rich.table import Table

    from agentbench_rl.estimators import available, resolve

    try:
        declared = [resolve(one) for one in ([name] if name else available())]
    except ValueError as problem:
        _fail(str(problem))
        return
    if as_json:
        print(json.dumps([estimator.schema() for estimator in declared], indent=1, default=str))
        return
    out = console_for()
    for estimator in declared:
        columns = [f"needs {c}" for c in sorted(estimator.needs)]
        columns += [f"uses {c}" for c in sorted(estimator.uses)]
        title = estimator.name + (f" ({', '.join(columns)})" if columns else "")
        table = Table(title=title, caption=estimator.summary, title_justify="left")
        for column in ("parameter", "type", "default", "accepts", "help"):
            table.add_column(column, overflow="fold")
        for param in estimator.params.values():
            schema = param.schema()
            table.add_row(
                param.name, schema["type"], repr(param.default), schema["accepts"], schema["help"]
            )
        out.print(table)


@bench_app.command("envs")
def bench_envs(
    env: Annotated[list[str] | None, typer.Option(help="Envs to measure (default: all).")] = None,
    steps: Annotated[int, typer.Option(min=1, help="Steps to time per env.")] = 20_000,
    server: Annotated[
        bool,
        typer.Option(
            "--server", help="Served (serve-env, 1 and 32 sessions) against in-process steps/s."
        ),
    ] = False,
) -> None:
    """Steps per second and reset time of each env, as a table."""
    from agentbench_rl.bench.envs import run as run_envs
    from agentbench_rl.bench.envs import run_served

    try:
        if server:
            for name in env or ["sokoban"]:
                run_served(name, steps=steps, console=console_for())
        else:
            run_envs(env or None, steps=steps, console=console_for())
    except ImportError:
        _fail("bench envs --server needs openenv-core: pip install 'agentbench-rl[openenv]'")
    except (ValueError, RuntimeError) as problem:
        _fail(str(problem))


@bench_app.command("alfworld")
def bench_alfworld(
    games: Annotated[int, typer.Option(min=1, help="valid_seen games to time.")] = 12,
    workers: Annotated[
        int | None, typer.Option(min=1, help="Parallel workers (default: CPUs, at most 8).")
    ] = None,
) -> None:
    """ALFWorld's native engine against TextWorld per call (time, memory), and worker scaling."""
    from agentbench_rl.bench.alfworld import report

    try:
        report(console_for(), games=games, workers=workers)
    except (ImportError, FileNotFoundError) as problem:  # no TextWorld, or no game files
        _fail(str(problem))


@bench_app.command("estimators")
def bench_estimators(
    quick: Annotated[bool, typer.Option(help="Smaller sizes, for a smoke run.")] = False,
) -> None:
    """Rows per second of every estimator at 1k, 10k and 100k rows, against a per-row baseline."""
    from agentbench_rl.bench.estimators import run as run_estimators

    run_estimators(quick=quick, console=console_for())


@bench_app.command("fidelity")
def bench_fidelity(
    seeds: Annotated[int, typer.Option(help="Seeds per MDP (exact MDPs).")] = 20,
    out: Annotated[Path, typer.Option(help="Folder for the tables and the PNG.")] = Path(
        "fidelity"
    ),
    env: Annotated[
        str | None,
        typer.Option(help="A real env: score against a Monte-Carlo truth instead of the MDPs."),
    ] = None,
    agent: Annotated[str, typer.Option(help="The policy (--env): any agent spec.")] = "random",
    split: Annotated[str, typer.Option(help="The split the tasks come from (--env).")] = "train",
    tasks: Annotated[int, typer.Option(help="Tasks in the batch (--env).")] = 8,
    group_size: Annotated[int, typer.Option(help="Trajectories per task (--env).")] = 8,
    continuations: Annotated[
        int, typer.Option(help="K: continuations per visited prefix (--env).")
    ] = 64,
    seed: Annotated[int, typer.Option(help="Seed of the batch and the truth (--env).")] = 0,
    max_steps: Annotated[
        int | None, typer.Option(help="Step limit (--env; default: the env's).")
    ] = None,
    parallel: Annotated[
        int, typer.Option(help="Episodes stepped at once (--env); the numbers do not change.")
    ] = 64,
    env_option: Annotated[
        list[str] | None,
        typer.Option(help="key=value passed to the env (--env; repeat), e.g. data_dir=DIR."),
    ] = None,
) -> None:
    """How well each estimator recovers the true advantage A(s,a): on MDPs where it is known
    exactly, or (--env) on a real env against a Monte-Carlo estimate; resumes from --out."""
    try:
        require("plot", "bench fidelity")
        if env is None:
            from agentbench_rl.bench.fidelity import run as run_fidelity

            run_fidelity(seeds=seeds, out=out, console=console_for())
            return
        from agentbench_rl.bench.truth import TruthSettings
        from agentbench_rl.bench.truth import run as run_truth
        from agentbench_rl.harness.evaluate import parse_env_options

        settings = TruthSettings(
            env=env,
            env_options=parse_env_options(env_option or []),
            agent=agent,
            split=split,
            tasks=tasks,
            group_size=group_size,
            continuations=continuations,
            seed=seed,
            max_steps=max_steps,
        )
        run_truth(settings, out, console_for(), parallel=parallel)
    except (ValueError, ImportError, FileNotFoundError) as problem:
        _fail(str(problem))


@bench_app.command("learning")
def bench_learning(
    mdp: Annotated[
        list[str] | None, typer.Option(help="MDP of the family (repeat; default: all).")
    ] = None,
    estimator: Annotated[
        list[str] | None,
        typer.Option(
            help="Estimator, as name or name:key=value,... (repeat; default: every registered "
            "estimator whose needs the testbed provides, and gigpo:anchor=state)."
        ),
    ] = None,
    seeds: Annotated[int, typer.Option(help="Paired seeds per MDP and estimator.")] = 20,
    iterations: Annotated[int, typer.Option(help="PPO iterations per run.")] = 100,
    workers: Annotated[int, typer.Option(help="Processes (one job per MDP x estimator).")] = 1,
    param: Annotated[
        list[str] | None,
        typer.Option(help="key=value for every selected estimator that takes key (repeat)."),
    ] = None,
    out: Annotated[Path, typer.Option(help="Folder for the table, CSV, JSON and PNG.")] = Path(
        "learning"
    ),
) -> None:
    """Which estimator learns fastest: PPO on small exact MDPs, J(π) by dynamic programming."""
    from agentbench_rl.bench.learning.bench import run as run_learning

    try:
        require("plot", "bench learning (it plots the curves)")
        run_learning(
            mdp,
            estimator,
            seeds,
            out,
            console_for(),
            iterations=iterations,
            workers=workers,
            params=param or [],
        )
    except (ValueError, ImportError) as problem:
        _fail(str(problem))


@bench_app.command("eval")
def bench_eval(
    levels: Annotated[
        int, typer.Option(min=1, help="Sokoban val levels the hf: agent plays.")
    ] = 200,
    batch_size: Annotated[int, typer.Option(min=1, help="hf: episodes per lockstep batch.")] = 50,
    episodes: Annotated[int, typer.Option(min=1, help="Episodes the openai: agent plays.")] = 64,
    concurrency: Annotated[int, typer.Option(min=1, help="openai: requests in flight.")] = 32,
    latency_ms: Annotated[float, typer.Option(help="Server latency per request.")] = 50.0,
    max_steps: Annotated[
        int | None, typer.Option(help="openai: episodes' step limit (default: the env's).")
    ] = None,
    repeats: Annotated[int, typer.Option(min=1, help="Alternating runs of each side.")] = 3,
) -> None:
    """Batched hf: evaluation vs the trainer's rollout, and openai: concurrency C vs 1."""
    try:
        require("train", "bench eval")
        from agentbench_rl.bench.eval import run as run_eval
    except ImportError as problem:
        _fail(str(problem))
        return
    try:
        run_eval(
            console_for(),
            levels=levels,
            batch_size=batch_size,
            episodes=episodes,
            concurrency=concurrency,
            latency=latency_ms / 1000,
            max_steps=max_steps,
            repeats=repeats,
        )
    except ValueError as problem:
        _fail(str(problem))


@bench_app.command("train")
def bench_train(
    config: Annotated[Path | None, typer.Option(help="YAML config or sweep file.")] = None,
    repeats: Annotated[int, typer.Option(min=1, help="A/B repetitions of the rollout.")] = 6,
    versus: Annotated[
        str | None,
        typer.Option(help="Time an iteration of the config's model against this model instead."),
    ] = None,
    candidate: Annotated[
        str | None,
        typer.Option(
            help="Estimator whose extra cost over the config's estimator is measured "
            "(default: bipace)."
        ),
    ] = None,
    overrides: Annotated[
        list[str] | None, typer.Argument(help="key=value config overrides.")
    ] = None,
) -> None:
    """An estimator's extra cost per training iteration over the config's (default: BiPACE over
    GiGPO), or (--versus) one model's iteration cost against another's on the same config
    (needs the train extra)."""

    def measure() -> None:
        require("train", "bench train")
        from agentbench_rl.bench.train import run as run_train

        run_train(config, overrides or [], repeats, console_for(), versus, candidate)

    _with_train_extra(measure)


@bench_app.command("engines")
def bench_engines(
    model: Annotated[
        Path | None, typer.Option(help="A saved policy folder (default: the tiny model).")
    ] = None,
    env: Annotated[
        str, typer.Option(help="Env whose first test tasks are the prompts.")
    ] = "sokoban",
    rows: Annotated[int, typer.Option(min=1, help="Prompts in the batch.")] = 32,
    max_new_tokens: Annotated[int, typer.Option(min=1, help="Tokens per answer.")] = 32,
    repeats: Annotated[int, typer.Option(min=1, help="Alternating runs of each engine.")] = 3,
) -> None:
    """Tokens per second of rollout generation with transformers and with vLLM on one batch
    (needs the train and vllm extras; on a CPU, vLLM's CPU build: .ci/vllm)."""

    def measure() -> None:
        require("train", "bench engines")
        require("vllm", "bench engines")
        from agentbench_rl.bench.engines import run as run_engines

        run_engines(console_for(), model, env, rows, max_new_tokens, repeats)

    _with_train_extra(measure)


@bench_app.command("bipace-epsilon")
def bench_bipace_epsilon(
    config: Annotated[Path | None, typer.Option(help="YAML config or sweep file.")] = None,
    batches: Annotated[int, typer.Option(min=1, help="Iterations of rollouts to pool.")] = 3,
    epsilon: Annotated[
        list[float] | None, typer.Option(help="Values of ε (repeatable; default: a grid).")
    ] = None,
    overrides: Annotated[
        list[str] | None, typer.Argument(help="key=value config overrides.")
    ] = None,
) -> None:
    """BiPACE's cluster purity and singleton rate per ε on the config's own rollouts."""

    def measure() -> None:
        from agentbench_rl.bench.bipace_epsilon import EPSILONS
        from agentbench_rl.bench.bipace_epsilon import run as run_epsilon

        run_epsilon(config, overrides or [], batches, epsilon or EPSILONS, console_for())

    _with_train_extra(measure)


@bench_app.command("gpu")
def bench_gpu(
    out: Annotated[Path, typer.Option(help="Folder for gpu.json, gpu.md and gpu.log.")] = Path(
        "gpu"
    ),
    dry_run: Annotated[
        bool, typer.Option(help="Rehearse every section on the CPU with tiny models.")
    ] = False,
    section: Annotated[
        list[str] | None,
        typer.Option(help="Only these sections (repeatable): tests, train, bipace, eval, vision."),
    ] = None,
    scale: Annotated[
        float, typer.Option(min=0.1, max=10.0, help="Multiply every section's time limit.")
    ] = 1.0,
) -> None:
    """The GPU figures in one run: the gpu tests, a bf16 training iteration at 0.5B and 1.5B,
    BiPACE's cost at 1.5B and 7B, batched hf: evaluation and Qwen2.5-VL-3B (random weights of the
    published shapes; nothing downloaded). .ci/gpu runs it on a lent machine."""

    def measure() -> None:
        require("train", "bench gpu")
        from agentbench_rl.bench.gpu import run as run_gpu

        run_gpu(out, dry_run, section, scale)

    _with_train_extra(measure)


def _with_train_extra(measure: Callable[[], None]) -> None:
    """Run a bench that needs the train extra: a missing extra or a bad config is one line."""
    try:
        measure()
    except ImportError as problem:
        message = str(problem)
        _fail(message if "pip install" in message else f"{message}; {install_hint('train')}")
    except (ValueError, FileNotFoundError) as problem:
        _fail(str(problem))


@data_app.command("install")
def data_install(
    name: Annotated[str, typer.Argument(help="Data set to install: alfworld or webshop.")],
    archive: Annotated[
        Path | None,
        typer.Option(help="ALFWorld: a local zip or tar.gz (default: download the official zip)."),
    ] = None,
    source: Annotated[
        str | None,
        typer.Option(help="WebShop: folder or base URL holding the original files."),
    ] = None,
    url: Annotated[str | None, typer.Option(help="ALFWorld: download from this URL.")] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(help="Target folder (default $ALFWORLD_DATA / $WEBSHOP_DATA, or the cache)."),
    ] = None,
    max_bytes: Annotated[
        int, typer.Option(help="Refuse to download or unpack more than this many bytes.")
    ] = DEFAULT_MAX_BYTES,
    allow_modified_games: Annotated[
        bool, typer.Option(help="Install even if files differ from the shipped manifests.")
    ] = False,
) -> None:
    """Install benchmark data: staged, checked against the manifests, then swapped in."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    if name not in ("alfworld", "webshop"):
        _fail(f"unknown data set '{name}' (choose from alfworld, webshop)")
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  console=console, transient=True) as progress:  # fmt: skip
        tasks: dict[str, Any] = {}

        def show(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = progress.add_task(phase, total=None)
            progress.update(tasks[phase], completed=done, total=total or None)

        try:
            summary = _install(
                name, archive, source, url, data_dir, max_bytes, allow_modified_games, show
            )
        except ValueError as problem:
            progress.stop()
            _fail(str(problem))
            return
    console.print(escape(summary), highlight=False)


def _install(
    name: str,
    archive: Path | None,
    source: str | None,
    url: str | None,
    data_dir: Path | None,
    max_bytes: int,
    allow_modified: bool,
    show: Any,
) -> str:
    """Run the installer of ``name``; return what to print."""
    if name == "webshop":
        from agentbench_rl.envs.webshop.install import install_webshop

        if source is None:
            raise ValueError("webshop: give --source FOLDER or --source URL (see envs/webshop)")
        return install_webshop(source, data_dir, max_bytes, allow_modified, show).summary()
    from agentbench_rl.envs.alfworld.data import OFFICIAL_URL, install_archive, install_from_url

    if archive is not None:
        report = install_archive(
            archive, data_dir, progress=show, max_bytes=max_bytes, allow_modified=allow_modified
        )
    else:
        report = install_from_url(
            url or OFFICIAL_URL,
            data_dir,
            progress=show,
            max_bytes=max_bytes,
            allow_modified=allow_modified,
        )
    return f"installed {report.extracted} files into {report.data_dir}\n{report.summary()}"


_LEADERBOARD_ROOT = Path("leaderboards")


@leaderboard_app.command("validate")
def leaderboard_validate(
    folder: Annotated[Path, typer.Argument(help="Results folder of eval plus metadata.json.")],
) -> None:
    """Recompute every figure of a submission from its episodes; name the first problem."""
    from agentbench_rl.leaderboard.render import percent
    from agentbench_rl.leaderboard.validate import validate_submission

    try:
        submission = validate_submission(folder)
    except ValueError as problem:
        _fail(str(problem))
        return
    success = submission.figures["success"]
    low, high = success["ci95"]
    console_for().print(
        escape(
            f"valid: {submission.env}/{submission.split}, {submission.metadata.name}, "
            f"success {percent(success['mean'])}% [{percent(low)}, {percent(high)}], "
            f"{submission.figures['n_episodes']} episodes, "
            f"seeds {sorted(submission.metadata.seeds)}"
        ),
        highlight=False,
        soft_wrap=True,
    )


@leaderboard_app.command("init")
def leaderboard_init(
    folder: Annotated[Path, typer.Argument(help="Results folder of eval.")],
    name: Annotated[
        str | None, typer.Option(help="Name on the board (default: the agent spec).")
    ] = None,
    contact: Annotated[
        str | None, typer.Option(help="Who answers questions (default: a placeholder).")
    ] = None,
    url: Annotated[str | None, typer.Option(help="Paper, model card or code.")] = None,
) -> None:
    """Write FOLDER/metadata.json from the run, with placeholders for you to complete."""
    from agentbench_rl.core.jsonfile import read_json
    from agentbench_rl.leaderboard.schema import FILL_IN, METADATA_FILE, metadata_template
    from agentbench_rl.spec.results_folder import ResultsFolder

    target = folder / METADATA_FILE
    try:
        if target.exists():
            raise ValueError(f"{target} exists already; edit it instead")
        summary = read_json(ResultsFolder(folder).summary_file)
        if not isinstance(summary, dict) or "agent" not in summary or "seeds" not in summary:
            raise ValueError(f"{ResultsFolder(folder).summary_file} is not an eval summary")
    except (ValueError, OSError) as problem:
        _fail(str(problem))
        return
    import json

    from agentbench_rl.core.atomic import atomic_write_text

    if summary.get("complete_split") is False:  # a --limit sample: no board takes it
        sample = (
            f"{folder} is a sample, not the whole split (eval --limit); validate refuses it: "
            "rerun eval without --limit to submit"
        )
        _warning_line(sample)
    metadata = metadata_template(summary)
    given = {"name": name, "contact": contact, "url": url}
    metadata |= {key: value for key, value in given.items() if value is not None}
    atomic_write_text(target, json.dumps(metadata, indent=1) + "\n")
    to_fill = [key for key, value in metadata.items() if str(value).startswith(FILL_IN)]
    fields = f"fill in {', '.join(to_fill)}" if to_fill else "check it"
    console.print(
        escape(
            f"wrote {target}: {fields} (and estimator, training and parameters for a trained "
            f"model), then run agentbench-rl leaderboard validate {folder}"
        ),
        highlight=False,
        soft_wrap=True,
    )


@leaderboard_app.command("submit")
def leaderboard_submit(
    folder: Annotated[Path, typer.Argument(help="Results folder of eval plus metadata.json.")],
    root: Annotated[Path, typer.Option(help="The leaderboards folder.")] = _LEADERBOARD_ROOT,
) -> None:
    """Validate a submission and file it under ROOT/<env>/<split>/ (never overwriting one)."""
    from agentbench_rl.leaderboard.store import submit

    try:
        filed = submit(folder, root)
    except ValueError as problem:
        _fail(str(problem))
        return
    console.print(
        escape(f"filed as {filed}/; run agentbench-rl leaderboard render to update the boards"),
        highlight=False,
        soft_wrap=True,
    )


@leaderboard_app.command("render")
def leaderboard_render(
    root: Annotated[Path, typer.Option(help="The leaderboards folder.")] = _LEADERBOARD_ROOT,
) -> None:
    """Write ROOT/README.md and the static site ROOT/site/ from the filed submissions."""
    from agentbench_rl.leaderboard.render import render

    try:
        require("plot", "leaderboard render")
        written = render(root, on_skip=_warning_line)
    except (ValueError, ImportError) as problem:
        _fail(str(problem))
        return
    except OSError as problem:
        _fail(f"cannot write the boards under {root} ({problem.strerror or problem})")
        return
    console.print(
        escape(f"wrote {len(written)} files: {written[0]}, {written[1]} and the plots"),
        highlight=False,
        soft_wrap=True,
    )


@leaderboard_app.command("file-runs")
def leaderboard_file_runs(
    sweep: Annotated[Path, typer.Argument(help="The sweep file the runs were trained from.")],
    overrides: Annotated[
        list[str] | None, typer.Argument(help="The key=value overrides the sweep ran with.")
    ] = None,
    runs_root: Annotated[
        Path | None, typer.Option(help="Where the runs are (the sweep's --out; default: its out).")
    ] = None,
    root: Annotated[Path, typer.Option(help="The leaderboards folder.")] = _LEADERBOARD_ROOT,
    split: Annotated[
        str | None, typer.Option(help="Split to file on (default: the env's evaluation split).")
    ] = None,
) -> None:
    """Evaluate the final checkpoint of every finished run of a sweep and file it on the board
    ("Trained here"), after replaying the run's final validation; runs already filed are
    skipped, so rerun it whenever more runs have finished. Then render the boards."""
    from rich.table import Table

    try:
        require("train", "leaderboard file-runs")
        require("plot", "leaderboard file-runs (it renders the boards)")
        from agentbench_rl.leaderboard.render import percent, render
        from agentbench_rl.leaderboard.trained import file_runs
        from agentbench_rl.train.sweep import load_sweep

        where = runs_root or load_sweep(sweep).out
        done, problems = file_runs(
            sweep,
            where,
            root,
            overrides or [],
            split,
            on_step=lambda message: console.print(escape(message), highlight=False),
        )
        written = render(root)
    except (ValueError, FileNotFoundError, ImportError) as problem:
        _fail(str(problem))
        return
    table = Table(title=f"finished runs of {escape(str(sweep))} under {escape(str(where))}")
    for header in ("run", "val % trainer", "val % harness", "episodes differing", "test %", ""):
        table.add_column(header)
    for item in done:
        table.add_row(
            escape(f"{item.run.parent.name}/{item.run.name}"),
            percent(item.val_success),
            percent(item.val_success_harness),
            "—" if item.val_episodes_differing is None else str(item.val_episodes_differing),
            percent(item.test_success),
            escape(("filed as " if item.filed else "on the board as ") + item.submission.name),
        )
    console.print(table)
    for line in problems:
        _error_line(line)
    console.print(escape(f"rendered {written[0]} and {written[1]}"), highlight=False)
    if problems:
        raise typer.Exit(code=1)


@leaderboard_app.command("serve")
def leaderboard_serve(
    root: Annotated[Path, typer.Option(help="The leaderboards folder.")] = _LEADERBOARD_ROOT,
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port on 127.0.0.1 (0: any free port).")
    ] = 8000,
) -> None:
    """Serve the rendered site locally until Ctrl-C."""
    from agentbench_rl.leaderboard.serve import make_server, site_url

    try:
        server = make_server(root, port=port)
    except ValueError as problem:
        _fail(str(problem))
        return
    except OSError as problem:
        if problem.errno == errno.EADDRINUSE:
            _fail(f"port {port} on 127.0.0.1 is taken; pass another --port (--port 0: a free one)")
        else:
            _fail(f"cannot serve on port {port} ({problem.strerror or problem})")
        return
    console.print(
        escape(f"serving {site_url(server)} (Ctrl-C stops)"), highlight=False, soft_wrap=True
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


_INTEGER = re.compile(r"^-?\d+$")
INTERRUPTED = 130  # the shell's code for a process ended by SIGINT
RESUMABLE_COMMANDS = ("eval", "train", "sweep")


def expand_list_options(args: Sequence[str], options: Sequence[str] = ("--seeds",)) -> list[str]:
    """Rewrite ``--seeds 0 1 2`` as ``--seeds 0 --seeds 1 --seeds 2``.

    Click gives an option one value per occurrence; the design's CLI takes a list after one flag,
    so integers that follow a list option are folded into repeated flags before parsing.

    Example:
        >>> expand_list_options(["eval", "--seeds", "0", "1", "--env", "sokoban"])
        ['eval', '--seeds', '0', '--seeds', '1', '--env', 'sokoban']
    """
    expanded: list[str] = []
    current: str | None = None  # the list option whose values are being read
    pending: str | None = None  # that option, while it has no value yet
    for arg in args:
        if current is not None and _INTEGER.match(arg):
            expanded += [current, arg]
            pending = None
            continue
        if pending is not None:
            expanded.append(pending)  # a list option with no value: let click report it
        current = pending = arg if arg in options else None
        if current is None:
            expanded.append(arg)
    if pending is not None:
        expanded.append(pending)
    return expanded


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``agentbench-rl`` command: user errors exit 2 with one line."""
    args = expand_list_options(sys.argv[1:] if argv is None else argv)
    try:
        code = app(args=args, prog_name="agentbench-rl", standalone_mode=False)
    except typer.TyperException as problem:  # usage errors: unknown option, missing value, ...
        format_message = getattr(problem, "format_message", None)
        message = format_message() if callable(format_message) else str(problem)
        if "'--seeds'" in message and any("," in arg for arg in args):
            message += " (give seeds separated by spaces: --seeds 0 1 2)"
        _error_line(message)
        sys.exit(getattr(problem, "exit_code", 2))
    except (typer.Abort, KeyboardInterrupt):
        code = INTERRUPTED
    if code == INTERRUPTED:  # Typer turns Ctrl-C into exit code 130 before we see it
        resumable = bool(args) and args[0] in RESUMABLE_COMMANDS
        console.print(
            "interrupted; rerun with --resume to continue" if resumable else "interrupted"
        )
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()

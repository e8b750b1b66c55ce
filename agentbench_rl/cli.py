"""The ``agentbench-rl`` command.

Sub-commands import their machinery lazily so that ``agentbench-rl --help`` stays instant and a
missing optional extra only matters to the command that needs it. Every user error (unknown env,
split, agent, bad seed, a missing file or extra, a full disk) exits with one line naming the
problem, never a traceback: commands raise, and :func:`main` alone turns
:data:`USER_ERRORS` into that line (:func:`user_message`).
"""

from __future__ import annotations

import errno
import functools
import inspect
import re
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core
from pydantic import ValidationError
from rich.markup import escape

from agentbench_rl.bench.credit.settings import MDP_SET_TASKS, CreditBench
from agentbench_rl.bench.limits import TRUTH_LIMITS
from agentbench_rl.bench.truth_settings import TruthSettings
from agentbench_rl.core.text import printable
from agentbench_rl.envs.install import DEFAULT_MAX_BYTES
from agentbench_rl.envs.remote import ServerGone
from agentbench_rl.envs.spec import EnvSpec
from agentbench_rl.extras import extra_of, install_hint, require
from agentbench_rl.harness.config import EvalConfig, RunOptions
from agentbench_rl.integrations.serving import DEFAULT_PORT
from agentbench_rl.progress import console_for
from agentbench_rl.spec.doors import Door, option_of
from agentbench_rl.spec.typed import one_line

#: The errors a command ends on with one line and exit status 2, wherever they are raised: bad
#: input, a missing file, folder, extra or server, a full disk, a gradient that is not finite
#: (nothing applied; the run's last checkpoint kept).
USER_ERRORS = (ValueError, OSError, ImportError, FloatingPointError)
#: The commands that continue where they stopped, each with how: ``eval`` and ``train`` take
#: ``--resume``; a sweep skips its finished runs and resumes the others whenever it runs.
RESUMABLE_COMMANDS = {
    "eval": "rerun with --resume",
    "train": "rerun with --resume",
    "sweep": "run the same sweep again",
}


class _Commands(typer.core.TyperGroup):
    """The command group: a user error raised anywhere in a command (:data:`USER_ERRORS`) ends
    it with one line (:func:`user_message`), here and nowhere else."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except USER_ERRORS as problem:
            _error_line(user_message(problem, ctx.invoked_subcommand))
            raise typer.Exit(code=2) from None


app = typer.Typer(
    cls=_Commands,
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
        from agentbench_rl.core.version import __version__
        from agentbench_rl.harness.provenance import package_revision

        commit = package_revision()["git_commit"]
        suffix = f" (commit {commit[:12]})" if commit else ""
        console_for().print(f"agentbench-rl {__version__}{suffix}", highlight=False)
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


def with_doors(
    *doors: Door, defaults: Mapping[str, Any] | None = None
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A command whose options for ``doors`` are derived from the declarations' fields (one per
    field: ``--name``, the field's description as help; each old name a hidden option), before
    the command's own; the command gets what was given as ``inputs`` (name or old name -> value,
    ``None`` where not given), for :func:`~agentbench_rl.spec.doors.read_inputs`. ``defaults``
    are the command line's own defaults where a field has none (``eval --env`` is sokoban).
    """
    defaults = defaults or {}
    options = [
        option
        for door in doors
        for option in (
            _door_option(door, door.name, defaults.get(door.name)),
            *(_door_option(door, alias, None, hidden=True) for alias in door.aliases),
        )
    ]
    names = [option.name for option in options]

    def derive(command: Callable[..., None]) -> Callable[..., None]:
        own = inspect.signature(command, eval_str=True).parameters

        @functools.wraps(command)
        def run(**given: Any) -> None:
            command(inputs={name: given.pop(name) for name in names}, **given)

        run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            options
            + [
                param.replace(kind=inspect.Parameter.KEYWORD_ONLY)
                for param in own.values()
                if param.name != "inputs"
            ]
        )
        return run

    return derive


def _door_option(door: Door, name: str, default: Any, hidden: bool = False) -> inspect.Parameter:
    """The option ``--name`` of one door (a flag for true/false, repeatable for a list)."""
    option = option_of(name)
    if door.value is bool and door.default is True:  # a flag on by default can be turned off
        option += f"/--no-{option.removeprefix('--')}"
    declared = typer.Option(option, help=door.help, hidden=hidden, show_default=not hidden)
    if door.value is bool:
        annotation: Any = Annotated[bool, declared]
        default = bool(door.default if default is None else default)
    else:
        value: Any = list[door.value] if door.many else door.value  # type: ignore[name-defined]
        annotation = Annotated[value | None, declared]
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


#: The env option's help where a command does not derive it: the EnvSpec field's description.
ENV_HELP = EnvSpec.model_fields["name"].description


def made_by() -> dict[str, Any]:
    """What a made artefact (a credit set) records of how it was made: the package's commit
    (and whether its code differed), the date and this command line."""
    import datetime
    import shlex

    from agentbench_rl.harness.provenance import package_revision

    revision = package_revision()
    return {
        "commit": revision.get("git_commit"),
        "dirty": revision.get("git_dirty"),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "command": shlex.join(["agentbench-rl", *sys.argv[1:]]),
    }


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
@with_doors(
    *EvalConfig.doors(), *RunOptions.doors(), defaults={"env": "sokoban", "agent": "random"}
)
def eval_command(
    inputs: dict[str, Any],
    out: Annotated[
        Path | None,
        typer.Option(
            help="Results folder (episodes.csv, summary.json); default results/ENV-SPLIT-AGENT."
        ),
    ] = None,
    allow_modified_games: Annotated[
        bool,
        typer.Option(
            "--allow-modified-games", help="ALFWorld: play games whose checksum differs (recorded)."
        ),
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="On an agent error, print its traceback.")
    ] = False,
) -> None:
    """Evaluate an agent on every task of a standard split, once per seed."""
    from agentbench_rl.harness.agent_errors import AgentError
    from agentbench_rl.harness.config import read_evaluation
    from agentbench_rl.harness.evaluate import evaluate

    modified = {"allow_modified_games": True} if allow_modified_games else None
    config, options = read_evaluation(inputs, env_kwargs=modified)
    out = out if out is not None else config.default_folder()
    try:
        summary = evaluate(config, out, options, console=console)
    except AgentError as problem:
        if debug:
            console.print(problem.trace, markup=False, highlight=False, end="")
        _fail(str(problem))
        return
    from agentbench_rl.harness.report import print_summary

    print_summary(summary, console_for())
    console.print(
        escape(f"results in {out}/ (episodes.{config.episodes_format}, summary.json)"),
        highlight=False,
        soft_wrap=True,
    )


#: The env fields ``serve-env`` takes no option for, with the reason (the doors' conformance test
#: reads this).
SERVE_ENV_INTERNAL = {
    "categories": "a server serves its split whole; a client chooses the tasks it plays",
    "panel": "a training run's fixed tasks, set by the trainer",
}


@app.command("serve-env")
@with_doors(
    *EnvSpec.doors(without=SERVE_ENV_INTERNAL),
    defaults={"env": "sokoban"},
)
def serve_env_command(
    inputs: dict[str, Any],
    host: Annotated[
        str, typer.Option(help="Address to bind (127.0.0.1: this machine only).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port.")] = DEFAULT_PORT,
    token: Annotated[
        str | None,
        typer.Option(
            help="Require Authorization: Bearer TOKEN on every request (default: the "
            "AGENTBENCH_SERVER_TOKEN variable; clients send the same variable's value)."
        ),
    ] = None,
    max_sessions: Annotated[int, typer.Option(min=1, help="Sessions (envs) at once.")] = 64,
    max_detached_sessions: Annotated[
        int, typer.Option(min=1, help="Of those, sessions made over HTTP without a connection.")
    ] = 4,
    idle_timeout: Annotated[
        float, typer.Option(min=1, help="Seconds a session may go without playing.")
    ] = 600.0,
    max_message_bytes: Annotated[
        int, typer.Option(min=1024, help="Largest request or WebSocket message.")
    ] = 1 << 20,
    body_timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds a request body may take to arrive.")
    ] = 10.0,
    protocol: Annotated[
        str,
        typer.Option(
            help="openenv (WebSocket sessions) or ors (the Open Reward Standard: HTTP, splits, "
            "task lists, a session per task; clients use ors+http://HOST:PORT)."
        ),
    ] = "openenv",
) -> None:
    """Serve an env over OpenEnv's protocol or the Open Reward Standard (the openenv extra)."""
    from agentbench_rl.core.net import is_loopback
    from agentbench_rl.spec.doors import read_inputs

    if protocol not in ("openenv", "ors"):
        raise ValueError(f"--protocol {protocol!r} (choose from openenv, ors)")
    require(protocol, "serve-env")
    from agentbench_rl.integrations.guard import check_session_limits, server_token

    spec, _ = EnvSpec.from_record(read_inputs(EnvSpec.doors(), inputs))
    secret = server_token(token)
    check_session_limits(max_sessions, max_detached_sessions)

    def ready(url: str) -> None:
        if secret is None and not is_loopback(host):
            _warning_line(
                f"serving beyond this machine ({host}) without a token: anyone who reaches "
                "the port plays; pass --token or set AGENTBENCH_SERVER_TOKEN"
            )
        line = f"serving {spec.name}/{spec.split} on {url} (Ctrl-C stops)"
        console.print(escape(line), highlight=False, soft_wrap=True)

    if protocol == "ors":
        from agentbench_rl.integrations.ors import serve_ors

        serve_ors(
            spec,
            host=host,
            port=port,
            ready=ready,
            max_sessions=max_sessions,
            max_message_bytes=max_message_bytes,
            body_timeout=body_timeout,
            token=secret,
        )
        return
    from agentbench_rl.integrations.openenv.server import serve

    serve(
        spec,
        host=host,
        port=port,
        ready=ready,
        max_sessions=max_sessions,
        max_detached_sessions=max_detached_sessions,
        idle_timeout=idle_timeout,
        max_message_bytes=max_message_bytes,
        body_timeout=body_timeout,
        token=secret,
    )


@app.command("view")
def view_command(
    run: Annotated[Path, typer.Argument(help="Results folder of eval --save-trajectories.")],
) -> None:
    """Render what the agent did (steps, frames, step graphs) as RUN/view.html."""
    from agentbench_rl.harness.view import render_view

    page = render_view(run)
    console.print(escape(f"wrote {page} (open it in a browser)"), highlight=False, soft_wrap=True)


@app.command("train")
def train_command(
    overrides: Annotated[
        list[str] | None, typer.Argument(help="key=value config overrides (bc.epochs=3).")
    ] = None,
    env: Annotated[str | None, typer.Option(help=ENV_HELP)] = None,
    estimator: Annotated[
        str | None, typer.Option(help="Estimator name (`agentbench-rl estimators` lists them).")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="tiny, tiny-vl, drrn, or a Hugging Face model id or path.")
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
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in OUT.")] = False,
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
    last = next((row for row in reversed(metrics) if "val_success" in row), None)
    if last is not None:
        line = f"validation success {last['val_success']:.3f} at iteration {last['iteration']}"
        if "panel_success" in last:  # a training panel: where the run started and where it is
            line += (
                f"; training panel {metrics[0].get('panel_success', 0.0):.3f} at the start, "
                f"{last['panel_success']:.3f} now"
            )
        console.print(line)
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
    from agentbench_rl.integrations.verl.data import write_split

    if out.is_dir():
        raise ValueError(f"{out} is a folder; give the parquet file to write")
    spec = EnvSpec(name=env, split=split)
    rows = write_split(spec, out, size)
    console.print(
        escape(
            f"wrote {out}: {rows} rows, one per task of {spec.name}/{split} (columns data_source, "
            "prompt, agent_name, reward_model, extra_info.task_id); give it to verl as "
            f"data.train_files={out}, whose agent loop plays each task"
        ),
        highlight=False,
        soft_wrap=True,
    )


@app.command("verl-export")
def verl_export_command(
    run: Annotated[Path, typer.Argument(help="Run folder of train --engine verl.")],
    step: Annotated[int | None, typer.Option(help="Checkpoint step (default: the last).")] = None,
) -> None:
    """Print the Hugging Face folder of a verl checkpoint (converted when needed)."""
    from agentbench_rl.integrations.verl.launcher import hf_checkpoint

    folder = hf_checkpoint(run, step)
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
        bool,
        typer.Option(
            "--summary-only", help="Only rebuild the summary and plot from finished runs."
        ),
    ] = False,
) -> None:
    """Run a grid of training runs (resumable; finished runs are skipped) and summarise it."""
    require("train", "sweep")
    require("plot", "sweep (its success plot)")
    from agentbench_rl.train.sweep import load_sweep, run_sweep, summarize_sweep

    sweep = load_sweep(file, out)
    if summary_only:
        summarize_sweep(sweep, overrides or [], console)
    else:
        run_sweep(sweep, overrides or [], runner=runner, console=console)
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

    declared = [resolve(one) for one in ([name] if name else available())]
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
    protocol: Annotated[
        str, typer.Option(help="With --server: openenv or ors (the Open Reward Standard).")
    ] = "openenv",
) -> None:
    """Steps per second and reset time of each env, as a table."""
    from agentbench_rl.bench.envs import run as run_envs
    from agentbench_rl.bench.envs import run_served

    if protocol not in ("openenv", "ors"):
        raise ValueError(f"--protocol {protocol!r} (choose from openenv, ors)")
    if server:
        require(protocol, "bench envs --server")
        for name in env or ["sokoban"]:
            run_served(name, steps=steps, console=console_for(), protocol=protocol)
    else:
        run_envs(env or None, steps=steps, console=console_for())


@bench_app.command("rollout")
def bench_rollout(
    env: Annotated[
        list[str] | None, typer.Option(help="Envs to measure (default: all here).")
    ] = None,
    repeats: Annotated[int, typer.Option(min=1, max=100, help="Alternated measurements.")] = 3,
    workers: Annotated[
        int, typer.Option(min=1, max=64, help="Worker processes of the scaling column.")
    ] = 2,
    profile: Annotated[
        bool, typer.Option(help="Profile the loop of each env that misses the overhead goal.")
    ] = False,
) -> None:
    """The trainer's rollout loop (a free policy) against the bare env, and worker scaling."""
    require("train", "bench rollout")
    from agentbench_rl.bench.rollout import run as run_rollout

    run_rollout(
        env or None, repeats=repeats, workers=workers, console=console_for(), profile=profile
    )


@bench_app.command("alfworld")
def bench_alfworld(
    games: Annotated[int, typer.Option(min=1, help="valid_seen games to time.")] = 12,
    workers: Annotated[
        int | None, typer.Option(min=1, help="Parallel workers (default: CPUs, at most 8).")
    ] = None,
) -> None:
    """ALFWorld's native engine against TextWorld per call (time, memory), and worker scaling."""
    from agentbench_rl.bench.alfworld import report

    report(console_for(), games=games, workers=workers)


@bench_app.command("estimators")
def bench_estimators(
    quick: Annotated[bool, typer.Option("--quick", help="Smaller sizes, for a smoke run.")] = False,
    adapters: Annotated[
        bool,
        typer.Option(
            "--adapters",
            help="Instead: GiGPO through each trainer adapter (verl-agent and SkyRL's token "
            "rows, verl's rows, slime) against calling it directly.",
        ),
    ] = False,
) -> None:
    """Rows per second of every estimator at 1k, 10k and 100k rows, against a per-row baseline."""
    if adapters:
        from agentbench_rl.bench.adapters import run as run_adapters

        run_adapters(quick=quick, console=console_for())
        return
    from agentbench_rl.bench.estimators import run as run_estimators

    run_estimators(quick=quick, console=console_for())


@bench_app.command("fidelity")
@with_doors(*TruthSettings.doors(), defaults={"agent": "random", "split": "train"})
def bench_fidelity(
    inputs: dict[str, Any],
    seeds: Annotated[int, typer.Option(min=1, max=1000, help="Seeds per MDP (exact MDPs).")] = 20,
    out: Annotated[Path, typer.Option(help="Folder for the tables and the PNG.")] = Path(
        "fidelity"
    ),
    parallel: Annotated[
        int,
        typer.Option(
            min=1,
            max=TRUTH_LIMITS["parallel"],
            help="Episodes stepped at once (--env); the numbers do not change.",
        ),
    ] = 64,
    export_set: Annotated[
        Path | None,
        typer.Option(
            help="Also write the batch and its truth as a credit set to this folder (--env), "
            "for bench credit."
        ),
    ] = None,
) -> None:
    """How well each estimator recovers the true advantage A(s,a): on MDPs where it is known
    exactly, or (--env: a real env, its options as below) on a real env against a Monte-Carlo
    estimate; resumes from --out."""
    from agentbench_rl.spec.doors import read_inputs

    require("plot", "bench fidelity")
    if export_set is not None and inputs["env"] is None:
        raise ValueError("--export-set needs --env (bench credit-set makes the MDPs' sets)")
    if inputs["env"] is None:
        from agentbench_rl.bench.fidelity import run as run_fidelity

        run_fidelity(seeds=seeds, out=out, console=console_for())
        return
    from agentbench_rl.bench.truth import run as run_truth

    settings = TruthSettings.read(read_inputs(TruthSettings.doors(), inputs))
    run_truth(
        settings, out, console_for(), parallel=parallel, export_set=export_set, made=made_by()
    )


@bench_app.command("credit")
@with_doors(*CreditBench.doors())
def bench_credit(
    inputs: dict[str, Any],
    out: Annotated[Path, typer.Option(help="Folder for credit.md, credit.json, credit.png.")] = (
        Path("credit")
    ),
) -> None:
    """Score estimators' credit against the true advantage of every credit set, in seconds."""
    from agentbench_rl.bench.credit.bench import run as run_credit
    from agentbench_rl.spec.doors import read_inputs

    require("plot", "bench credit (it plots the scores)")
    bench = CreditBench.read(read_inputs(CreditBench.doors(), inputs))
    run_credit(bench, out, console=console_for())


@bench_app.command("credit-set")
def bench_credit_set(
    name: Annotated[
        list[str],
        typer.Argument(help="mdp-<name> of the learning testbed (repeat), or 'mdps' for all."),
    ],
    out: Annotated[Path, typer.Option(help="Folder the set folders go in.")] = Path("credit-sets"),
    tasks: Annotated[
        int, typer.Option(min=1, max=TRUTH_LIMITS["tasks"], help="Task draws per MDP.")
    ] = MDP_SET_TASKS,
    group_size: Annotated[
        int, typer.Option(min=1, max=TRUTH_LIMITS["group_size"], help="Trajectories per task.")
    ] = 8,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the draws.")] = 0,
) -> None:
    """Make the exact credit sets of the learning testbed's MDPs (a real env's set comes from
    bench fidelity --env ... --export-set DIR)."""
    from agentbench_rl.bench.credit.sets import mdp_of, mdp_set, mdp_set_name, write_set
    from agentbench_rl.bench.learning.family import FAMILY

    names = [mdp_set_name(m) for m in FAMILY] if name == ["mdps"] else list(name)
    for set_name in names:
        made = mdp_set(mdp_of(set_name), tasks=tasks, group_size=group_size, seed=seed)
        made = replace(made, made=made_by())
        write_set(made, out / made.name)
        console.print(
            escape(
                f"wrote {out / made.name}: {len(made.batch)} rows, success {made.success_rate:.2f}"
            ),
            highlight=False,
        )


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
    require("train", "bench eval")
    from agentbench_rl.bench.eval import run as run_eval

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

    require("train", "bench train")
    from agentbench_rl.bench.train import run as run_train

    run_train(config, overrides or [], repeats, console_for(), versus, candidate)


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

    require("train", "bench engines")
    require("vllm", "bench engines")
    from agentbench_rl.bench.engines import run as run_engines

    run_engines(console_for(), model, env, rows, max_new_tokens, repeats)


@bench_app.command("choices")
def bench_choices(
    model: Annotated[
        Path | None, typer.Option(help="A saved policy folder (default: the tiny model).")
    ] = None,
    env: Annotated[str, typer.Option(help="Env whose test tasks give the prompts.")] = "textcraft",
    rows: Annotated[int, typer.Option(min=1, help="Prompts in the batch.")] = 64,
    repeats: Annotated[int, typer.Option(min=1, help="Alternating runs of each way.")] = 3,
) -> None:
    """Choose mode's scoring on the CPU: one row at a time against a padded batch (needs the
    train extra)."""

    require("train", "bench choices")
    from agentbench_rl.bench.choices import run as run_choices

    run_choices(console_for(), model, env, rows, repeats)


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

    from agentbench_rl.bench.bipace_epsilon import EPSILONS
    from agentbench_rl.bench.bipace_epsilon import run as run_epsilon

    run_epsilon(config, overrides or [], batches, epsilon or EPSILONS, console_for())


@bench_app.command("gpu")
def bench_gpu(
    out: Annotated[Path, typer.Option(help="Folder for gpu.json, gpu.md and gpu.log.")] = Path(
        "gpu"
    ),
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Rehearse every section on the CPU with tiny models.")
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

    require("train", "bench gpu")
    from agentbench_rl.bench.gpu import run as run_gpu

    run_gpu(out, dry_run, section, scale)


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
        bool,
        typer.Option(
            "--allow-modified-games",
            help="Install even if files differ from the shipped manifests.",
        ),
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

        summary = _install(
            name, archive, source, url, data_dir, max_bytes, allow_modified_games, show
        )
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
    """Recompute every figure of a submission from its episodes (an estimator's: score it on
    every standard credit set); name the first problem."""
    from agentbench_rl.bench.credit.board import CARD, read_card, validate_estimator
    from agentbench_rl.leaderboard.render import percent
    from agentbench_rl.leaderboard.validate import validate_submission

    if (folder / CARD).is_file():
        scored = validate_estimator(folder)
        console_for().print(
            escape(f"valid: estimator {read_card(folder).name}, scored on {len(scored)} sets"),
            highlight=False,
        )
        return

    submission = validate_submission(folder)
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
    from agentbench_rl.leaderboard.schema import draft_metadata

    drafted = draft_metadata(folder, {"name": name, "contact": contact, "url": url})
    if drafted.sample:
        _warning_line(
            f"{folder} is a sample, not the whole split (eval --limit); validate refuses it: "
            "rerun eval without --limit to submit"
        )
    fields = f"fill in {', '.join(drafted.to_fill)}" if drafted.to_fill else "check it"
    console.print(
        escape(
            f"wrote {drafted.path}: {fields} (and estimator, training and parameters for a "
            f"trained model), then run agentbench-rl leaderboard validate {folder}"
        ),
        highlight=False,
        soft_wrap=True,
    )


@leaderboard_app.command("submit")
def leaderboard_submit(
    folder: Annotated[Path, typer.Argument(help="Results folder of eval plus metadata.json.")],
    root: Annotated[Path, typer.Option(help="The leaderboards folder.")] = _LEADERBOARD_ROOT,
) -> None:
    """Validate a submission and file it under ROOT/<env>/<split>/ (an estimator's under
    ROOT/estimators/; never overwriting one)."""
    from agentbench_rl.bench.credit.board import CARD, submit_estimator
    from agentbench_rl.leaderboard.store import submit

    render = "agentbench-rl leaderboard render" + (
        "" if root == _LEADERBOARD_ROOT else f" --root {shlex.quote(str(root))}"
    )
    filed = submit_estimator(folder, root) if (folder / CARD).is_file() else submit(folder, root)
    console.print(
        escape(f"filed as {filed}/; run {render} to update the boards"),
        highlight=False,
        soft_wrap=True,
    )


@leaderboard_app.command("render")
def leaderboard_render(
    root: Annotated[Path, typer.Option(help="The leaderboards folder.")] = _LEADERBOARD_ROOT,
    out: Annotated[
        Path | None,
        typer.Option(help="Write the boards here instead of into ROOT (ROOT's stay untouched)."),
    ] = None,
) -> None:
    """Write README.md and the static site site/ from the filed submissions, and the estimators
    board estimators/README.md (every figure scored again on the credit sets), into ROOT or
    OUT."""
    from agentbench_rl.bench.credit.board import render_board
    from agentbench_rl.leaderboard.render import render

    require("plot", "leaderboard render")
    written = render(root, on_skip=_warning_line, out=out)
    board = render_board(root, out=out)
    console.print(
        escape(
            f"wrote {len(written) + 1} files: {written[0]}, {written[1]}, {board} and the plots"
        ),
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

    server = make_server(root, port=port)
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


def user_message(problem: BaseException, command: str | None = None) -> str:
    """The one line a user error (:data:`USER_ERRORS`) ends ``command`` with.

    Example:
        >>> full = OSError(errno.ENOSPC, "No space left on device", "runs/x/metrics.jsonl")
        >>> user_message(full, "train").startswith("no space left on the device writing runs/x")
        True
        >>> user_message(full, "train").endswith("then rerun with --resume (what finished is kept)")
        True
        >>> user_message(FileNotFoundError(errno.ENOENT, "No such file or directory", "a.yaml"))
        'a.yaml: No such file or directory'
    """
    if isinstance(problem, OSError) and problem.errno == errno.ENOSPC:
        where = f" writing {problem.filename}" if problem.filename else ""
        then = (
            f", then {RESUMABLE_COMMANDS[command]} (what finished is kept)"
            if command in RESUMABLE_COMMANDS
            else ", then run it again"
        )
        return f"no space left on the device{where}: free some space{then}"
    if isinstance(problem, ValidationError):  # a typed declaration made in code (EnvSpec)
        return one_line(problem)
    if isinstance(problem, ServerGone) and command in RESUMABLE_COMMANDS:
        return (
            f"{problem}; what finished is kept: {RESUMABLE_COMMANDS[command]} once it answers again"
        )
    if isinstance(problem, OSError) and problem.errno is not None and problem.strerror:
        return f"{problem.filename}: {problem.strerror}" if problem.filename else problem.strerror
    message = str(problem) or type(problem).__name__
    if isinstance(problem, ModuleNotFoundError) and "pip install" not in message:
        extra = extra_of(problem.name)
        if extra is not None:
            message += f"; {install_hint(extra)}"
    return message


def _reflow_help(*apps: typer.Typer) -> None:
    """Each command's docstring as paragraphs of one line: Typer's help keeps a docstring's line
    breaks, which broke the command lists at 80 columns (the terminal wraps lines itself)."""
    for each in apps:
        for command in each.registered_commands:
            callback = command.callback
            if callback is not None and callback.__doc__:
                paragraphs = inspect.cleandoc(callback.__doc__).split("\n\n")
                callback.__doc__ = "\n\n".join(" ".join(part.split()) for part in paragraphs)


_reflow_help(app, bench_app, data_app, leaderboard_app)


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
        resume = RESUMABLE_COMMANDS.get(args[0]) if args else None
        console.print(f"interrupted; {resume} to continue" if resume else "interrupted")
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()

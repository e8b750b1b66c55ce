"""The doors derived from the declarations (issue 62, point 1): every field of ``EnvSpec``,
``EvalConfig`` and ``RunOptions`` has an ``eval`` option and an ``agentbench_rl.evaluate``
keyword of the record's name, or is listed as internal with its reason; ``serve-env`` takes the
env's; both doors read with one reader, so a bad input is the same one line in both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
import typer.testing

import agentbench_rl
from agentbench_rl.bench.credit.settings import CreditBench
from agentbench_rl.bench.truth_settings import TruthSettings
from agentbench_rl.cli import SERVE_ENV_INTERNAL, app, main
from agentbench_rl.envs.spec import EnvSpec
from agentbench_rl.harness.config import EvalConfig, RunOptions
from agentbench_rl.spec.doors import read_inputs


def options_of(command: str) -> dict[str, Any]:
    """The options of ``agentbench-rl COMMAND``, by every name they answer to."""
    group: Any = typer.main.get_command(app)
    found = group.commands[command]
    return {name: param for param in found.params for name in param.opts}


def record_keys(model: type[Any], internal: dict[str, str]) -> set[str]:
    """The record keys of ``model``'s fields that a door must take."""
    if model is EnvSpec:
        names = EnvSpec.RECORD_NAMES
        return {names.get(field, field) for field in EnvSpec.model_fields if field not in internal}
    return {field for field in model.model_fields if field not in internal and field != "env"}


def test_every_field_is_an_eval_option_and_a_facade_keyword_or_internal() -> None:
    options = options_of("eval")
    doors = {door.name for door in (*EvalConfig.doors(), *RunOptions.doors())}
    for model in (EnvSpec, EvalConfig, RunOptions):
        internal = EvalConfig.INTERNAL
        for key in record_keys(model, internal):
            assert "--" + key.replace("_", "-") in options, f"eval has no option for {key}"
            assert key in doors, f"the facade takes no keyword {key}"
    assert all(reason.strip() for reason in EvalConfig.INTERNAL.values())
    # a keyword that is no door is refused by the facade's reader, in one line
    with pytest.raises(ValueError, match="unknown option 'seed' \\(did you mean 'seeds'\\?\\)"):
        agentbench_rl.evaluate("sokoban", "random", seed=1)


def test_serve_env_takes_every_env_field_but_the_listed() -> None:
    options = options_of("serve-env")
    for key in record_keys(EnvSpec, SERVE_ENV_INTERNAL):
        assert "--" + key.replace("_", "-") in options, f"serve-env has no option for {key}"
    for field in SERVE_ENV_INTERNAL:
        assert "--" + field.replace("_", "-") not in options


def test_bench_fidelity_takes_every_truth_setting() -> None:
    group: Any = typer.main.get_command(app)
    fidelity = group.commands["bench"].commands["fidelity"]
    options = {name for param in fidelity.params for name in param.opts}
    # the env's panel of task ids is the trainer's; TruthSettings.panel (a size) draws one
    env_keys = record_keys(EnvSpec, {"panel": "the trainer's"})
    for key in env_keys | record_keys(TruthSettings, {}):
        assert "--" + key.replace("_", "-") in options, f"bench fidelity has no option for {key}"
    # the record keeps its older key for the env's options, and reads both
    settings = TruthSettings.read({"env": "sokoban", "agent": "random", "env_kwargs": {"width": 6}})
    assert settings.record()["env_options"] == {"width": 6}
    assert TruthSettings.read(settings.record()) == settings


def test_bench_credit_takes_every_field_and_its_old_names() -> None:
    group: Any = typer.main.get_command(app)
    credit = group.commands["bench"].commands["credit"]
    options = {name: param for param in credit.params for name in param.opts}
    for field in CreditBench.model_fields:
        assert "--" + field.replace("_", "-") in options, f"bench credit has no option for {field}"
    assert options["--estimator"].hidden and options["--campaign"].hidden
    assert "--no-speed" in options["--speed"].secondary_opts  # on by default, so it turns off
    given = {"estimator": ["grpo"], "campaign": ["sokoban=s.json"], "speed": False}
    bench = CreditBench.read(read_inputs(CreditBench.doors(), given))
    assert bench.estimators == ["grpo"] and bench.campaigns == {"sokoban": Path("s.json")}


def test_old_names_stay_as_hidden_options_and_keywords() -> None:
    options = options_of("eval")
    assert options["--env-option"].hidden and options["--category"].hidden
    assert not options["--env-kwargs"].hidden and not options["--categories"].hidden
    record = read_inputs(EvalConfig.doors(), {"env_options": {"width": 6}, "category": ["x"]})
    assert record == {"env_kwargs": {"width": 6}, "categories": ["x"]}
    with pytest.raises(ValueError, match="given twice"):
        read_inputs(EvalConfig.doors(), {"categories": ["a"], "category": ["b"]})


def test_allow_modified_games_joins_the_env_options_under_any_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """--allow-modified-games is an env option: it joins those given as --env-option too (it
    once made them "given twice"); Sokoban takes no such option, which says it arrived."""
    with pytest.raises(SystemExit):
        main(["eval", "--env-option", "width=6", "--allow-modified-games", "--out", str(tmp_path)])
    line = capsys.readouterr().err.strip()
    assert "takes no option 'allow_modified_games'" in line and "given twice" not in line


def test_adding_a_field_is_one_edit() -> None:
    """A field added to a declaration gets its option from the field alone."""
    from pydantic import Field

    from agentbench_rl.cli import with_doors
    from agentbench_rl.spec.doors import doors_of

    class Extended(RunOptions):
        patience: int = Field(3, ge=1, description="Seconds to wait.")

    seen: dict[str, Any] = {}
    probe = typer.Typer()

    @probe.command()
    @with_doors(*doors_of(Extended.model_fields))
    def show(inputs: dict[str, Any]) -> None:
        seen.update(Extended.read(read_inputs(doors_of(Extended.model_fields), inputs)))

    probe(["--patience", "5", "--workers", "2"], standalone_mode=False)
    assert seen["patience"] == 5 and seen["workers"] == 2
    help_text = typer.testing.CliRunner().invoke(probe, ["--help"]).output
    assert "Seconds to wait (default: 3)." in help_text


# The same bad input at both doors: (eval's arguments, the facade's keywords, the line's start)
BAD = [
    (["--seeds", "-1"], {"seeds": [-1]}, "seeds.0 must be a whole number >= 0, got -1"),
    (["--limit", "0"], {"limit": 0}, "limit must be a whole number >= 1, got 0"),
    (["--workers", "0"], {"workers": 0}, "workers must be a whole number >= 1, got 0"),
    (["--max-steps", "0"], {"max_steps": 0}, "max_steps must be"),
    (["--episodes-format", "xml"], {"episodes_format": "xml"}, "episodes_format 'xml'"),
    (["--env-kwargs", "bogus=1"], {"env_kwargs": {"bogus": 1}}, "env 'sokoban' takes no option"),
    (["--env-option", "bogus=1"], {"env_options": {"bogus": 1}}, "env 'sokoban' takes no option"),
    (["--split", "nope"], {"split": "nope"}, "env 'sokoban' has no split 'nope'"),
    (["--categories", "nope"], {"categories": ["nope"]}, "categories"),
]


@pytest.mark.parametrize(("args", "keywords", "start"), BAD, ids=[case[2][:24] for case in BAD])
def test_a_bad_input_is_the_same_one_line_at_both_doors(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    args: list[str],
    keywords: dict[str, Any],
    start: str,
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["eval", "--env", "sokoban", "--out", str(tmp_path / "cli"), *args])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert exited.value.code == 2 and len(lines) == 1, lines
    with pytest.raises(ValueError) as raised:
        agentbench_rl.evaluate("sokoban", "random", out=tmp_path / "api", **keywords)
    message = str(raised.value)
    assert "\n" not in message and start in message
    assert lines[0] == f"error: {message}"
    assert not (tmp_path / "cli").exists() and not (tmp_path / "api").exists()

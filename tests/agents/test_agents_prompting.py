"""The shared prompt builder: exact text in both modes, format checks, BC targets."""

from __future__ import annotations

import pytest

from agentbench_rl.prompting import (
    HistoryStep,
    PromptConfig,
    build_prompt,
    choice_continuation,
    chosen_response,
    expert_response,
    format_ok,
    observation_text,
    response_prefix,
)

GRID_0 = "#####\n#P_O#\n#####"
GRID_1 = "#####\n#_PO#\n#####"
GRID_2 = "#####\n#__S#\n#####"


def test_generate_prompt_with_history_observations_is_exact() -> None:
    history = [HistoryStep(GRID_0, "right"), HistoryStep(GRID_1, "right")]
    prompt = build_prompt(
        "sokoban", GRID_2, history, ["up", "down"], PromptConfig(history=1, mode="generate")
    )
    assert prompt == (
        "You play Sokoban: push every box X onto a target O. "
        "# wall, _ floor, P you, S you on a target, √ box on a target.\n"
        "Your last 1 steps:\n"
        "Observation:\n#####\n#_PO#\n#####\n"
        "Action: right\n"
        "Observation:\n#####\n#__S#\n#####\n"
        "Admissible actions: up, down\n"
        "Think step by step inside <think> </think>, then give exactly one admissible action "
        "inside <action> </action>."
    )


def test_choose_prompt_with_actions_only_and_no_instruction() -> None:
    history = [HistoryStep(GRID_0, "left"), HistoryStep(GRID_1, "up"), HistoryStep(GRID_2, "up")]
    config = PromptConfig(history=2, history_observations=False, mode="choose", instruction="")
    prompt = build_prompt("sokoban", GRID_2, history, ["up", "left"], config)
    assert prompt == (
        "Your last actions: up, up\n"
        "Observation:\n#####\n#__S#\n#####\n"
        "Admissible actions: up, left\n"
        "Answer with exactly one admissible action inside <action> </action>."
    )


def test_first_step_has_no_history_block_and_unknown_env_gets_default_line() -> None:
    prompt = build_prompt("nowhere", "room", [], ["look"], PromptConfig(mode="choose"))
    assert prompt.splitlines()[:3] == [
        "Complete the task described in the observation.",
        "Observation:",
        "room",
    ]


def test_history_zero_shows_nothing_of_the_past() -> None:
    config = PromptConfig(history=0, mode="choose", instruction="")
    prompt = build_prompt("sokoban", "g", [HistoryStep("f", "up")], ["up"], config)
    assert "last" not in prompt and "Action:" not in prompt


def test_dict_observation_uses_its_text() -> None:
    assert observation_text({"image": b"...", "text": "#P#"}) == "#P#"


def test_choose_answer_pieces() -> None:
    assert response_prefix("choose") == "<action>"
    assert response_prefix("generate") == ""
    assert choice_continuation("go to desk 1") == "go to desk 1</action>"
    assert chosen_response("up") == "<action>up</action>"
    assert expert_response("up", "choose") == "up</action>"
    assert expert_response("up", "generate") == "<think></think><action>up</action>"


@pytest.mark.parametrize(
    ("answer", "ok"),
    [
        ("<think>box is right</think><action>right</action>", True),
        ("<think></think>\n<action>up</action>", True),
        ("<action>up</action>", False),  # no think block
        ("<action>up</action><think>x</think>", False),  # think after the action
        ("<think>a</think><action>up</action><action>down</action>", False),
        ("<think>a</think><think>b</think><action>up</action>", False),
        ("up", False),
    ],
)
def test_format_ok(answer: str, ok: bool) -> None:
    assert format_ok(answer) is ok


def test_bad_prompt_settings_raise() -> None:
    with pytest.raises(ValueError, match="history"):
        PromptConfig(history=-1)
    with pytest.raises(ValueError, match="action mode"):
        PromptConfig(mode="shout")  # type: ignore[arg-type]

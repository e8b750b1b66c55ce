"""The one prompt builder that training and evaluation share.

A prompt is the env's instruction, the last ``history`` steps (what the agent saw, optionally,
and what it did), the current observation, the admissible actions and the answer format. The
model-backed agents (``hf:``, ``openai:``) and the trainer all build their text here, so a policy
is evaluated on exactly the prompts it was trained on.

Two answer formats, one per action mode:

- ``generate``: the model writes ``<think>...</think><action>...</action>`` (the papers' format);
  the step counts as valid only when that format holds and the env accepts the action.
- ``choose``: the model's answer is forced to start with ``<action>``; each admissible action is
  scored as the continuation ``<name></action>`` (the closing tag ends the action, so ``go to
  cabinet 1`` never scores as a prefix of ``go to cabinet 10``).
"""

from __future__ import annotations

import re
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentbench_rl.envs.base import StepInfo, TextAgentEnv

ActionMode = Literal["generate", "choose"]
ACTION_MODES: tuple[str, ...] = typing.get_args(ActionMode)

FORMAT_GENERATE = (
    "Think step by step inside <think> </think>, then give exactly one admissible action "
    "inside <action> </action>."
)
FORMAT_CHOOSE = "Answer with exactly one admissible action inside <action> </action>."
CHOOSE_PREFIX = "<action>"
CHOOSE_SUFFIX = "</action>"
OBSERVATION_LINE = "Observation:"
ACTIONS_LINE = "Admissible actions: "

_TAGS = {
    name: (re.compile(f"<{name}>", re.IGNORECASE), re.compile(f"</{name}>", re.IGNORECASE))
    for name in ("think", "action")
}


@dataclass(frozen=True)
class PromptConfig:
    """How prompts are built.

    Attributes:
        history: how many past steps of the episode the prompt shows.
        history_observations: show each past step's observation too, not only its action (envs
            whose observation is feedback, such as ALFWorld, need it; Sokoban's grid is the
            whole state and does not).
        mode: ``generate`` or ``choose`` (see the module docstring).
        instruction: the task line; ``None`` takes the env's own line (its class's
            ``prompt_instruction``, see :func:`env_instruction`).
    """

    history: int = 2
    history_observations: bool = True
    mode: ActionMode = "generate"
    instruction: str | None = None

    def __post_init__(self) -> None:
        if self.history < 0:
            raise ValueError(f"prompt history must be >= 0, got {self.history}")
        if self.mode not in ACTION_MODES:
            raise ValueError(f"action mode '{self.mode}' (choose from generate, choose)")


@dataclass(frozen=True)
class HistoryStep:
    """One past step: the observation the agent acted on and the action it took."""

    observation: str
    action: str


class Prompt(str):
    """A prompt's text, with the frames its observation shows (``images``: RGB uint8 arrays,
    empty for a text observation). It is a ``str``, so text-only policies and agents read it as
    the text and never see the frames; vision-language ones put each frame in the chat template
    beside the text (:mod:`agentbench_rl.models.vision`, the ``openai:`` agent's image parts).

    Example:
        >>> prompt = Prompt("Observation: #P#", images=())
        >>> prompt.upper(), prompt.images
        ('OBSERVATION: #P#', ())
    """

    images: tuple[Any, ...]

    def __new__(cls, text: str, images: Sequence[Any] = ()) -> Prompt:
        prompt = super().__new__(cls, text)
        prompt.images = tuple(images)
        return prompt


def observation_images(observation: Any) -> tuple[Any, ...]:
    """The frames an observation shows: the ``image`` of a dict observation (visual Sokoban's
    ``{"image", "text"}``), none otherwise.

    Example:
        >>> observation_images("#P#"), len(observation_images({"image": [[0]], "text": "#"}))
        ((), 1)
    """
    if isinstance(observation, dict) and observation.get("image") is not None:
        return (observation["image"],)
    return ()


def observation_text(observation: Any) -> str:
    """The text of an observation: the string itself, or the ``text`` of a dict observation
    (visual Sokoban's ``{"image", "text"}``).

    Example:
        >>> observation_text({"image": None, "text": "#P#"})
        '#P#'
    """
    if isinstance(observation, dict):
        return str(observation.get("text", ""))
    return str(observation)


def env_instruction(env_name: str) -> str:
    """The line an env's prompts open with: the env class's ``prompt_instruction`` (the base
    class's generic line for a name that is not a registered env).

    Example:
        >>> env_instruction("textcraft")
        'You craft Minecraft items. Use the recipes to craft the goal item.'
    """
    from agentbench_rl.envs import env_class  # envs import nothing of agents: no cycle

    try:
        return env_class(env_name).prompt_instruction
    except ValueError:
        return TextAgentEnv.prompt_instruction


def action_choices(info: StepInfo, mode: ActionMode) -> list[str]:
    """The actions a step's prompt lists and ``choose`` mode picks from.

    ``choose`` can only pick a complete action, so it takes the choices a user has
    (``info["user_choices"]`` where the env gives them: WebShop's search of the instruction in
    place of its ``search[...]`` placeholder, which, chosen, searches the text "..."); ``generate``
    writes its own search query, so it sees the admissible actions.

    Example:
        >>> info = {"admissible_actions": ["search[...]"], "user_choices": ["search[red mug]"]}
        >>> action_choices(info, "choose"), action_choices(info, "generate")
        (['search[red mug]'], ['search[...]'])
    """
    if mode == "choose" and info.get("user_choices"):
        return list(info["user_choices"])
    return list(info["admissible_actions"])


def build_prompt(
    env_name: str,
    observation: Any,
    history: Sequence[HistoryStep],
    admissible_actions: Sequence[str],
    config: PromptConfig,
) -> Prompt:
    """The prompt (the user's message) for one step: its text, and the current observation's
    frame when it has one (past steps appear as text only).

    Example:
        >>> print(build_prompt("demo", "#P_#", [HistoryStep("#_P#", "left")], ["left", "right"],
        ...                    PromptConfig(mode="choose", instruction="Walk.",
        ...                                 history_observations=False)))
        Walk.
        Your last actions: left
        Observation:
        #P_#
        Admissible actions: left, right
        Answer with exactly one admissible action inside <action> </action>.
    """
    instruction = config.instruction
    if instruction is None:
        instruction = env_instruction(env_name)
    lines = [instruction] if instruction else []
    shown = list(history)[-config.history :] if config.history else []
    if shown and config.history_observations:
        lines.append(f"Your last {len(shown)} steps:")
        for step in shown:
            lines += [OBSERVATION_LINE, observation_text(step.observation)]
            lines.append(f"Action: {step.action}")
    elif shown:
        lines.append("Your last actions: " + ", ".join(step.action for step in shown))
    lines += [OBSERVATION_LINE, observation_text(observation)]
    lines.append(ACTIONS_LINE + ", ".join(admissible_actions))
    lines.append(FORMAT_CHOOSE if config.mode == "choose" else FORMAT_GENERATE)
    return Prompt("\n".join(lines), observation_images(observation))


@dataclass(frozen=True)
class PromptParts:
    """A prompt read back into the parts :func:`build_prompt` wrote, as lines: the context
    (instruction and history), the current observation, and the admissible actions. A policy
    that reads text as features (:mod:`agentbench_rl.models.drrn`) keys them by part, so a word
    of the current observation and the same word in the history are different features.

    Example:
        >>> parts = PromptParts.of(build_prompt("demo", "#P_#", [HistoryStep("#_P#", "left")],
        ...                        ["left", "right"], PromptConfig(mode="choose")) + "\\n<action>")
        >>> parts.current, parts.actions, parts.context[-2:]
        (('#P_#',), ('left', 'right'), ('#_P#', 'Action: left'))
    """

    context: tuple[str, ...]
    current: tuple[str, ...]
    actions: tuple[str, ...]

    @classmethod
    def of(cls, text: str) -> PromptParts:
        """The parts of a prompt (the model's input: what follows the actions line, the answer
        format and prefix, is no part). A text that is no prompt is all context."""
        lines = text.split("\n")
        try:
            opened = len(lines) - 1 - lines[::-1].index(OBSERVATION_LINE)
        except ValueError:
            return cls(tuple(lines), (), ())
        closed = next(
            (i for i in range(opened + 1, len(lines)) if lines[i].startswith(ACTIONS_LINE)),
            len(lines),
        )
        listed = lines[closed][len(ACTIONS_LINE) :] if closed < len(lines) else ""
        return cls(
            tuple(lines[:opened]),
            tuple(lines[opened + 1 : closed]),
            tuple(action for action in listed.split(", ") if action),
        )


def response_prefix(mode: ActionMode) -> str:
    """What the answer is forced to start with: ``<action>`` in ``choose`` mode, else nothing."""
    return CHOOSE_PREFIX if mode == "choose" else ""


def choice_continuation(action: str) -> str:
    """The text scored for one admissible action in ``choose`` mode (after the prefix).

    Example:
        >>> choice_continuation("up")
        'up</action>'
    """
    return action + CHOOSE_SUFFIX


def chosen_response(action: str) -> str:
    """The whole answer of a ``choose``-mode step, as the env receives it.

    Example:
        >>> chosen_response("up")
        '<action>up</action>'
    """
    return CHOOSE_PREFIX + choice_continuation(action)


def format_ok(response: str) -> bool:
    """Whether a ``generate``-mode answer keeps the papers' format: one ``<think>`` block first,
    then exactly one ``<action>`` block.

    Example:
        >>> format_ok("<think>the box is left</think><action>left</action>")
        True
        >>> format_ok("<action>left</action><action>up</action>")
        False
    """
    if _block_count(response, "think") != 1 or _block_count(response, "action") != 1:
        return False
    return response.lower().index("<think>") < response.lower().index("<action>")


def _block_count(text: str, name: str) -> int:
    """How many non-overlapping ``<name>...</name>`` blocks ``text`` holds (what a non-greedy
    regex's ``findall`` counts), in one pass: that regex is quadratic on many unclosed tags."""
    opening, closing = _TAGS[name]
    count, position = 0, 0
    while (start := opening.search(text, position)) is not None:
        end = closing.search(text, start.end())
        if end is None:  # no later opening tag can close either
            break
        count, position = count + 1, end.end()
    return count


def expert_response(action: str, mode: ActionMode) -> str:
    """The answer a behaviour-cloning target uses for the expert's ``action`` (the part after
    :func:`response_prefix`): ``up</action>`` in ``choose`` mode, an empty think block and the
    action in ``generate`` mode.

    Example:
        >>> expert_response("up", "generate")
        '<think></think><action>up</action>'
    """
    if mode == "choose":
        return choice_continuation(action)
    return f"<think></think><action>{action}</action>"

"""``TextAgentEnv``: the contract every agentbench environment keeps.

A subclass says what a task is, how a canonical action changes the state, and what the expert
would do; this base class does the rest the same way for every environment: parsing and
canonicalising the raw model text, refusing bad input without crashing, the step limit, the
``info`` dict with hashes and admissible actions, and the error after an episode ended.
"""

from __future__ import annotations

import string
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, NotRequired, TypedDict, TypeVar

import gymnasium as gym
from gymnasium import spaces

from agentbench_rl.core.actions import canonicalize_action
from agentbench_rl.core.hashing import stable_hash

ObsType = TypeVar("ObsType")

#: Characters ``sample()`` draws text from (any character is *accepted*, see :class:`UnicodeText`).
TEXT_CHARSET = frozenset(string.printable + "√")
MAX_TEXT_LENGTH = 1_000_000
#: Bound of the action space (what ``action_space.sample()`` draws); longer text is still accepted.
MAX_ACTION_LENGTH = 4096
#: Longest task id ``reset`` looks up (ALFWorld's, the longest, are about 100 characters).
MAX_TASK_ID_LENGTH = 300
#: The keys ``reset(options=...)`` takes; anything else is a typo, refused rather than ignored.
RESET_OPTIONS = frozenset({"task_id"})


class UnicodeText(spaces.Text):
    """A ``Text`` space that contains every string up to ``max_length`` characters.

    Gymnasium's ``Text`` only contains strings over its charset; product pages, game text and a
    model's raw output can hold any Unicode character, so membership checks the type and length
    only, while ``sample()`` still draws from the printable charset.

    Example:
        >>> space = text_space(10)
        >>> space.contains("Café ☕"), space.contains("x" * 11)
        (True, False)
    """

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is a string of allowed length."""
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length


def text_space(max_length: int = MAX_TEXT_LENGTH) -> spaces.Text:
    """The observation and action space of text envs: any string up to ``max_length``."""
    return UnicodeText(max_length=max_length, min_length=0, charset=TEXT_CHARSET)


class EpisodeEndedError(RuntimeError):
    """``step`` was called after the episode terminated or was truncated."""


class StepInfo(TypedDict):
    """The ``info`` of every ``reset`` and ``step``: what the env says beside the observation.

    Gymnasium types ``info`` as ``dict[str, Any]``; a ``StepInfo`` is that dict, with its keys
    named and typed for the readers (the episode driver, prompting, the trainers' adapters).

    Example:
        >>> from agentbench_rl.envs import make
        >>> env = make("sokoban", split="test")
        >>> _, info = env.reset(seed=0)
        >>> info["won"], info["step"], sorted(info["admissible_actions"])
        (False, 0, ['down', 'left', 'right', 'up'])
        >>> _, _, _, _, info = env.step("<action>UP</action>")
        >>> info["action_canonical"], info["action_valid"], info["step"]
        ('up', True, 1)
    """

    task_id: str
    category: str
    #: the canonical actions the state admits (what ``choose`` mode picks from)
    admissible_actions: list[str]
    #: the hash of what the agent sees, and of the true state (the step graph's anchors)
    obs_hash: str
    state_hash: str
    won: bool
    #: task score in 0..1 (partial credit where the env has it)
    score: float
    #: steps taken in this episode
    step: int
    #: after a step: the canonical form of the raw action, and whether it was admissible
    action_canonical: NotRequired[str]
    action_valid: NotRequired[bool]
    #: after a step, where the env answers in text ("Nothing happens.")
    feedback: NotRequired[str]
    #: WebShop: the choices ``choose`` mode offers (its search of the instruction on a search page)
    user_choices: NotRequired[list[str]]
    #: WebShop, after a purchase: the reward's parts
    reward_info: NotRequired[dict[str, Any]]


#: What ``step`` returns: observation, reward, terminated, truncated, info.
StepResult = tuple[Any, float, bool, bool, StepInfo]


@dataclass(frozen=True)
class Transition:
    """What a subclass reports for one canonical action.

    Attributes:
        reward: the environment reward for the action.
        valid: whether the action was admissible (an invalid one must leave the state unchanged).
        feedback: optional text the env answers with (e.g. "Nothing happens."); envs whose
            observation is the state itself leave it ``None``.
    """

    reward: float
    valid: bool
    feedback: str | None = None


class TextAgentEnv(gym.Env[ObsType, str], Generic[ObsType]):
    """Base class of all agentbench environments.

    Subclasses set :attr:`env_name`, :attr:`prompt_instruction` and :attr:`action_aliases`, and
    implement the abstract methods below. ``reset(seed=..., options={"task_id": ...})`` loads a
    task by id; without a task id, a task of the split is drawn from the seed.

    Example:
        >>> import agentbench_rl
        >>> env = agentbench_rl.make("sokoban", split="test")
        >>> obs, info = env.reset(options={"task_id": "test-0000"})
        >>> sorted(info["admissible_actions"])
        ['down', 'left', 'right', 'up']
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}  # noqa: RUF012
    env_name: ClassVar[str] = ""
    #: The one line a prompt opens with (what the env asks of the agent; the observation
    #: carries the rest). :func:`agentbench_rl.prompting.build_prompt` reads it.
    prompt_instruction: ClassVar[str] = "Complete the task described in the observation."
    action_aliases: ClassVar[Mapping[str, str]] = {}
    default_max_steps: ClassVar[int] = 50
    #: Whether instances may step in different threads at once (a server runs each session's
    #: env in a thread of its own; an env that shares a parser or a process-wide engine says
    #: False, and its sessions then take turns on one thread).
    thread_safe: ClassVar[bool] = True

    def __init__(
        self, split: str = "test", max_steps: int | None = None, render_mode: str | None = None
    ) -> None:
        if split not in self.splits():
            raise ValueError(
                f"{self.env_name}: unknown split '{split}' (choose from {', '.join(self.splits())})"
            )
        if max_steps is not None and (
            isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1
        ):
            raise ValueError(
                f"{self.env_name}: max_steps must be a whole number >= 1, got {max_steps!r}"
            )
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"{self.env_name}: unsupported render_mode '{render_mode}'")
        self.split = split
        self.max_steps = max_steps or self.default_max_steps
        self.render_mode = render_mode
        self.action_space = text_space(MAX_ACTION_LENGTH)
        self.observation_space: spaces.Space[Any] = text_space()  # an image env replaces it
        self.task_id: str | None = None
        self.steps = 0
        self._ended = True

    # ------------------------------------------------------------------ what subclasses provide
    @classmethod
    @abstractmethod
    def splits(cls) -> Sequence[str]:
        """Names of the standard splits, e.g. ``("train", "val", "test")``."""

    @classmethod
    @abstractmethod
    def task_ids(cls, split: str) -> list[str]:
        """Every task id of a fixed split, in manifest order (raises for unbounded splits)."""

    @classmethod
    @abstractmethod
    def split_checksum(cls, split: str) -> str:
        """Hash of the split's manifest: two runs on the same checksum saw the same tasks."""

    def checksum(self) -> str:
        """Checksum of this env's split as configured (see :meth:`results_checksum`)."""
        return self.split_checksum(self.split)

    @classmethod
    def results_checksum(cls, split_checksum: str) -> str:
        """What results files record as ``split_checksum``: a split checksum bound to this env's
        id, so a run of one env never passes for another that plays the same levels (Sokoban and
        visual Sokoban share theirs).

        Example:
            >>> from agentbench_rl.envs import env_class
            >>> text, visual = env_class("sokoban"), env_class("visual_sokoban")
            >>> text.split_checksum("test") == visual.split_checksum("test")
            True
            >>> text.results_checksum("abc") == visual.results_checksum("abc")
            False
        """
        return stable_hash([cls.env_name, split_checksum])

    def has_task(self, task_id: str) -> bool:
        """Whether ``task_id`` is, exactly, the id of a task of this env's split (no aliases).

        Example:
            >>> import agentbench_rl
            >>> env = agentbench_rl.make("sokoban", split="test")
            >>> env.has_task("test-0000"), env.has_task("test-00000"), env.has_task("val-0000")
            (True, False, False)
        """
        return task_id in self._split_task_set()

    def _split_task_set(self) -> frozenset[str]:
        cached: frozenset[str] | None = getattr(self, "_task_set", None)
        if cached is None:
            cached = self._task_set = frozenset(self.task_ids(self.split))
        return cached

    @classmethod
    def task_categories(cls, split: str) -> Mapping[str, str] | None:
        """Task id -> category for a fixed split, as :meth:`category` reports it, read from the
        env's shipped manifest (every built-in env has one); ``None``, the default, for an env
        registered without one (the validator then checks the categories' form only)."""
        return None

    @classmethod
    def implausible_episode(
        cls, success: bool, score: float, steps: int, episode_return: float
    ) -> str | None:
        """Why an episode row of the standard setting cannot come from this env, or ``None``.

        Every episode takes at least one step and at most the step limit, and a success scores 1;
        subclasses add what their reward rule implies (:meth:`expected_return`).

        Example:
            >>> from agentbench_rl.envs import env_class
            >>> env_class("sokoban").implausible_episode(True, 1.0, 0, 11.0)
            'success in 0 steps'
        """
        if steps < 1:
            return f"{'success' if success else 'an episode'} in 0 steps"
        if steps > cls.default_max_steps:
            return f"{steps} steps, past the step limit of {cls.default_max_steps}"
        if success and score != 1.0:
            return f"success with score {score}"
        expected = cls.expected_return(success, score, steps)
        if expected is not None and abs(episode_return - expected) > 1e-6:
            outcome = "a success" if success else "a failure"
            return f"return {episode_return} for {outcome} in {steps} steps (expected {expected})"
        return None

    @classmethod
    def expected_return(cls, success: bool, score: float, steps: int) -> float | None:
        """The return of an episode with this outcome under the standard reward rule, or
        ``None`` where the outcome does not fix it."""
        return None

    @abstractmethod
    def _sample_task_id(self) -> str:
        """A task id of ``self.split`` drawn with ``self.np_random`` (reset without a task id)."""

    @abstractmethod
    def _load_task(self, task_id: str) -> None:
        """Put the env in the initial state of ``task_id`` (raise ``ValueError`` if unknown)."""

    @abstractmethod
    def _apply(self, action: str) -> Transition:
        """Apply one canonical action. An invalid one must leave the state as it was."""

    @abstractmethod
    def _observation(self) -> ObsType:
        """The current observation."""

    @abstractmethod
    def _obs_hash(self) -> str:
        """Hash of the observation (its text, or its image bytes)."""

    @abstractmethod
    def _state_hash(self) -> str:
        """Hash of the true state (finer than the observation where the env can tell)."""

    @abstractmethod
    def admissible_actions(self) -> list[str]:
        """Canonical actions that are valid now."""

    @abstractmethod
    def won(self) -> bool:
        """Whether the task is solved."""

    @abstractmethod
    def category(self) -> str:
        """The task's category for per-category breakdowns (e.g. task type, depth)."""

    @abstractmethod
    def expert_action(self) -> str:
        """The action the env's expert (planner, solver or walkthrough) takes now."""

    def ended_without_win(self) -> bool:
        """Whether the episode is over although the task is not won (a WebShop purchase that
        scores below 1); the base step then terminates it. Most envs end only on a win or the
        step limit and keep this default.

        Example:
            >>> import agentbench_rl
            >>> agentbench_rl.make("sokoban", split="test").ended_without_win()
            False
        """
        return False

    def user_choices(self) -> list[str]:
        """The concrete actions a user could take now: what the ``random`` agent draws from.

        The admissible actions, unless the env lists a placeholder among them (WebShop's
        ``search[...]``), in which case it says which concrete actions a user would take.
        """
        return self.admissible_actions()

    def score(self) -> float:
        """Task score in 0..1 (partial credit where the env has it; else 1 if won)."""
        return 1.0 if self.won() else 0.0

    def canonicalize(self, raw: str | bytes) -> str:
        """The env's canonical form of a raw model output (see :func:`canonicalize_action`)."""
        return canonicalize_action(raw, self.action_aliases)

    # ------------------------------------------------------------------ the Gymnasium API
    def reset(  # type: ignore[override]  # as step's info
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsType, StepInfo]:
        """Start an episode on ``options["task_id"]`` (or a task drawn from ``seed``)."""
        task_id = self._requested_task(options)
        super().reset(seed=seed)
        if task_id is None:
            task_id = self._sample_task_id()
        self._load_task(task_id)
        self.task_id = task_id
        self.steps = 0
        self._ended = False
        return self._observation(), self._info()

    def _requested_task(self, options: Any) -> str | None:
        """The task id ``options`` asks for (``None``: draw one); ``ValueError`` if bad."""
        if options is None:
            return None
        if not isinstance(options, Mapping):
            raise ValueError(
                f"{self.env_name}: reset options must be a dict such as "
                f"{{'task_id': ...}}, got {type(options).__name__}"
            )
        unknown = sorted(str(key) for key in options if key not in RESET_OPTIONS)
        if unknown:
            raise ValueError(
                f"{self.env_name}: unknown reset option {unknown[0]!r} "
                f"(known: {', '.join(sorted(RESET_OPTIONS))})"
            )
        task_id = options.get("task_id")
        if task_id is None:
            return None
        if not isinstance(task_id, str):
            raise ValueError(
                f"{self.env_name}: task_id must be a string, got {type(task_id).__name__}"
            )
        if len(task_id) > MAX_TASK_ID_LENGTH or not self.has_task(task_id):
            shown = task_id if len(task_id) <= 60 else task_id[:60] + "..."
            raise ValueError(f"{self.env_name}: {shown!r} is not a task id of split '{self.split}'")
        return task_id

    # Gymnasium's info is dict[str, Any]: a StepInfo is one at run time, which mypy cannot see
    def step(  # type: ignore[override]
        self, action: str
    ) -> tuple[ObsType, float, bool, bool, StepInfo]:
        """Take one raw model output; bad input is answered, never raised on."""
        if self._ended:
            when = "after the episode ended" if self.task_id is not None else "before reset()"
            raise EpisodeEndedError(f"{self.env_name}: step() called {when}; call reset() first")
        canonical = self.canonicalize(action)
        transition = self._apply(canonical)
        self.steps += 1
        terminated = self.won() or self.ended_without_win()
        truncated = not terminated and self.steps >= self.max_steps
        self._ended = terminated or truncated
        info = self._info()
        info["action_canonical"] = canonical
        info["action_valid"] = transition.valid
        if transition.feedback is not None:
            info["feedback"] = transition.feedback
        return self._observation(), float(transition.reward), terminated, truncated, info

    def render(self) -> str | None:
        """The observation text in ``ansi`` mode."""
        if self.render_mode == "ansi":
            return self.observation_text()
        return None

    def observation_text(self) -> str:
        """The text an LLM agent reads now (for text envs, the observation itself)."""
        observation = self._observation()
        return observation if isinstance(observation, str) else str(observation)

    def _info(self) -> StepInfo:
        """The info of the state now (a step adds its action's fields)."""
        assert self.task_id is not None, "an info is only made after reset() chose a task"
        won = self.won()
        return {
            "task_id": self.task_id,
            "category": self.category(),
            "admissible_actions": self.admissible_actions(),
            "obs_hash": self._obs_hash(),
            "state_hash": self._state_hash(),
            "won": won,
            "score": self.score(),
            "step": self.steps,
        }

    @property
    def episode_over(self) -> bool:
        """Whether the current episode terminated or was truncated."""
        return self._ended

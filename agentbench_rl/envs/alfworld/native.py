"""The native ALFWorld engine: ``game.tw-pddl`` played without TextWorld.

It reads a game's PDDL (:mod:`~agentbench_rl.envs.alfworld.pddl`) and grammar
(:mod:`~agentbench_rl.envs.alfworld.textgen`) and plays them as TextWorld's ``PddlEnv`` with
ALFWorld's ``AlfredDemangler`` does, which stays the oracle (``backend="textworld"``; the
tests play both side by side and require the same observations, admissible commands, rewards
and state hashes at every step). What it does, in TextWorld's words:

1. Names: every object that appears in an initial fact is an entity; its display name is
   ALFWorld's demangling of the PDDL name (``desk_bar_...`` -> ``desk 1``: sorted names, each
   kind numbered from its count down, ``basin`` kept; a name without ``_bar_`` keeps no number
   and ends in a space, as ALFWorld's demangler writes it).
2. Reset: the state is the problem's initial atoms; the text is ``#intro#`` derived from the
   grammar.
3. Admissible commands: each applicable action's template derived with its parameters bound,
   sorted, duplicates dropped, ``help`` left out (agents never get it). A command is played
   by the first applicable action that reads that way (TextWorld looks it up so).
4. Step: the action's effects (:class:`~agentbench_rl.envs.alfworld.pddl.State`), then its
   feedback symbol derived with its parameters bound; anything not admissible answers
   "Nothing happens." and changes nothing. The goal is checked on the new state.
5. The expert follows the game's stored walkthrough while play stays on it. Off it, the
   expert replans with fast-downward (the planner TextWorld uses, kept for this alone): the
   game's optimised SAS translation with its initial state set to the current facts, so the
   plan is the one the TextWorld backend would make from the same state. Where the delete
   relaxation cannot reach the goal (:class:`~agentbench_rl.envs.alfworld.pddl.Relaxation`)
   no plan exists, and the expert says so without a search (fast-downward's answer too,
   after seconds). Replanning needs the ``alfworld`` extra (``fast_downward``); playing
   does not. A second expert (``expert_recovery="undo"``, :class:`PlanFollower`) undoes its
   detours instead and searches only where a detour cannot be undone.

Example:
    >>> game = AlfredGame()
    >>> intro = game.start(COMPILED_GAMES.get(sha, lambda: json.loads(data)))  # doctest: +SKIP
    >>> intro.splitlines()[-1]  # doctest: +SKIP
    'Your task is to: look at alarmclock under the desklamp.'
"""

from __future__ import annotations

import contextlib
import sys
import typing
from collections import Counter
from collections.abc import Callable, Container, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from json.encoder import encode_basestring
from typing import Any, Generic, Literal, TypeVar

from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.envs.alfworld.data import GameCache
from agentbench_rl.envs.alfworld.pddl import (
    NEGATION,
    Domain,
    Fact,
    GroundAction,
    Relaxation,
    State,
    World,
    changes_something,
    negated,
    parse_domain,
    parse_problem,
)
from agentbench_rl.envs.alfworld.textgen import Deriver, Entity, parse_logic
from agentbench_rl.extras import install_hint

#: Answer to any command the game does not accept (TextWorld's own wording).
NOTHING_HAPPENS = "Nothing happens."
#: TextWorld lists ``help`` among the admissible commands; ALFWorld agents never get it.
HIDDEN_COMMANDS = frozenset({"help"})
#: Facts left out of the state hash: ``checked(x)`` records that the agent looked at x; no
#: precondition, goal or feedback text of the ALFWorld domain reads it, so two states that
#: differ only there behave alike (and "look" or "inventory" leave the state as it was).
HISTORY_PREDICATES = frozenset({"checked"})
#: The template TextWorld's planner interface writes for a planned ``GotoLocation``.
_PLANNED_GOTO = "go to {r}"


@lru_cache(maxsize=8)
def _domain(text: str) -> Domain:
    return parse_domain(text)


def display_names(ids: Iterable[str]) -> dict[str, str]:
    """ALFWorld's display name of every PDDL object name (its ``Demangler``).

    Example:
        >>> ids = ["desk_bar_1", "desk_bar_2", "sink_bar_3_bar_sinkbasin", "agent1"]
        >>> [display_names(ids)[i] for i in ids]
        ['desk 2', 'desk 1', 'sinkbasin 1', 'agent1 ']
    """
    ordered = sorted(set(ids))

    def kind(name: str) -> str | None:
        head, bar, _ = name.partition("_bar_")
        if not bar:
            return None
        return head + "basin" if "basin" in name else head

    counts = Counter(k for k in map(kind, ordered) if k is not None)
    numbers = {k: list(range(1, count + 1)) for k, count in counts.items()}
    names: dict[str, str] = {}
    for name in ordered:
        k = kind(name)
        if k is None:
            names[name] = f"{_unmangle(name)} "
        else:
            names[name] = f"{k} {numbers[k].pop()}"
    return names


def _unmangle(name: str) -> str:
    for code, char in (("_bar_", "|"), ("_minus_", "-"), ("_plus_", "+"), ("_dot_", ".")):
        name = name.replace(code, char)
    return name.replace("_comma_", ",")


#: States a game remembers the admissible commands and hash of (per memo; it starts afresh
#: when full). Group members and the K continuations of a fidelity run revisit the same states.
MEMO_STATES = 4096
Remembered = TypeVar("Remembered")


class StateMemo(Generic[Remembered]):
    """What was computed from a state, by the set of its facts (:meth:`State.key`, the facts
    compared on a hit, so a stored value is only ever returned for an equal set).

    Example:
        >>> memo: StateMemo[int] = StateMemo()
        >>> state = State([("p", "x")])
        >>> memo.get(state, lambda: 1), memo.get(State([("p", "x")]), lambda: 2)
        (1, 1)
    """

    def __init__(self) -> None:
        self._values: dict[tuple[int, int], tuple[frozenset[Fact], Remembered]] = {}

    def get(self, state: State, compute: Callable[[], Remembered]) -> Remembered:
        """The value stored for ``state``'s facts, else ``compute()`` (then stored)."""
        key = state.key()
        stored = self._values.get(key)
        if stored is not None and stored[0] == state.facts:
            return stored[1]
        value = compute()
        if len(self._values) >= MEMO_STATES:
            self._values.clear()
        self._values[key] = (frozenset(state.facts), value)
        return value


@dataclass(frozen=True)
class Choices:
    """What a planner state allows: each admissible command's action (``help`` included), the
    admissible commands sorted without ``help``, and whether the goal holds."""

    actions: dict[str, GroundAction]
    admissible: tuple[str, ...]
    admissible_set: frozenset[str]
    won: bool


@dataclass
class NativeGame:
    """One game, read and grounded once (cached per process by its file's sha256).

    Attributes:
        sha256: sha256 of the game file (the cache key).
        data: the game JSON.
        world: the problem over its domain.
        deriver: the grammar with the game's entities.
        initial: the initial state (copied at each reset).
        intro: the text at reset.
        commands: the command text of each ground action derived so far.
        texts: the same texts by :meth:`~agentbench_rl.envs.alfworld.textgen.Deriver.derivation_key`
            (the ``go to`` of every start location derives once).
        plans: the expert's replan from each state replanned from so far.
    """

    sha256: str
    data: dict[str, Any]
    world: World
    deriver: Deriver
    initial: State
    intro: str
    actions: dict[tuple[str, tuple[str, ...]], GroundAction | None] = field(default_factory=dict)
    commands: dict[GroundAction, str] = field(default_factory=dict)
    texts: dict[Hashable, str] = field(default_factory=dict)
    plans: dict[str, tuple[str, ...]] = field(default_factory=dict)
    replan_sas: str | None = None
    # what each planner state allows and each recorded state hashes to, as played so far
    views: StateMemo[Choices] = field(default_factory=lambda: StateMemo())
    hashes: StateMemo[str] = field(default_factory=lambda: StateMemo())
    feedbacks: StateMemo[dict[GroundAction, str]] = field(default_factory=lambda: StateMemo())
    fact_texts: FactTexts = field(init=False)

    def __post_init__(self) -> None:
        self.fact_texts = FactTexts(self.world.objects)

    @property
    def walkthrough(self) -> list[str]:
        """The winning command sequence stored in the game file."""
        return list(self.data.get("walkthrough") or [])

    def mapping(self, action: GroundAction) -> dict[tuple[str, str], str]:
        """The action's parameters as the grammar binds them (name without ``?``, type)."""
        return {
            (name.lstrip("?"), type_): value
            for (name, type_), value in zip(action.schema.parameters, action.arguments, strict=True)
        }

    def action(self, schema_name: str, arguments: tuple[str, ...]) -> GroundAction | None:
        """The ground action, or None where fast-downward's translation drops it for changing
        nothing (:func:`~agentbench_rl.envs.alfworld.pddl.changes_something`)."""
        key = (schema_name, arguments)
        if key not in self.actions:
            action = GroundAction(self.world.domain.actions[schema_name], arguments)
            self.actions[key] = action if changes_something(action) else None
        return self.actions[key]

    def command(self, action: GroundAction) -> str:
        """The text of ``action`` (its template derived; it reads only static facts)."""
        text = self.commands.get(action)
        if text is None:
            template = self.deriver.grammar.actions[action.schema.name].template
            mapping = self.mapping(action)
            key = self.deriver.derivation_key(template, mapping)
            text = self.texts.get(key) if key is not None else None
            if text is None:
                text = self.deriver.derive(template, self.initial, mapping)
                if key is not None:
                    self.texts[key] = text
            self.commands[action] = text
        return text


def compile_game(data: dict[str, Any], sha256: str) -> NativeGame:
    """Read, ground and index one game.

    Example:
        >>> game = compile_game(json.loads(path.read_bytes()), sha)  # doctest: +SKIP
        >>> game.walkthrough[0]  # doctest: +SKIP
        'go to desk 1'
    """
    domain = _domain(data["pddl_domain"])
    problem = parse_problem(data["pddl_problem"])
    world = World(domain, problem, data["pddl_domain"])
    grammar = parse_logic(data["grammar"])
    initial = State(problem.init)
    entity_ids = {value for fact in problem.init for value in fact[1:]}
    names = display_names(entity_ids)
    entities = {
        object_id: Entity(object_id, problem.objects.get(object_id, ""), names[object_id])
        for object_id in entity_ids
    }
    deriver = Deriver(grammar, entities, problem.objects, domain.subtypes)
    intro = deriver.derive("#intro#", initial)
    return NativeGame(sha256, data, world, deriver, initial, intro)


#: Shared by every env of a process: group members and repeated seeds read a game once.
COMPILED_GAMES = GameCache(compile_game)


#: How the expert gets back on its plan after play left it: ``replan`` (fast-downward from the
#: new state, the plan TextWorld's expert makes) or ``undo`` (play the inverse of each detour,
#: newest first, then resume the plan; fast-downward only after a command with no inverse).
Recovery = Literal["replan", "undo"]
RECOVERIES: tuple[Recovery, ...] = typing.get_args(Recovery)


def inverse_command(command: str, location: str | None) -> str | None:
    """The command that undoes ``command`` (played at ``location``, the last receptacle gone
    to), or None where there is none: heating, cooling, cleaning and switching a lamp on stay
    done, and a move from the middle of the room has no way back.

    Example:
        >>> inverse_command("take mug 1 from desk 1", "desk 1")
        'move mug 1 to desk 1'
        >>> inverse_command("go to bed 1", "desk 1"), inverse_command("go to bed 1", None)
        ('go to desk 1', None)
        >>> inverse_command("heat mug 1 with microwave 1", "microwave 1") is None
        True
    """
    verb, _, rest = command.partition(" ")
    if verb == "go":
        return f"go to {location}" if location is not None else None
    if verb in ("open", "close"):
        return f"{'close' if verb == 'open' else 'open'} {rest}"
    if verb == "take" and " from " in rest:
        obj, _, receptacle = rest.partition(" from ")
        return f"move {obj} to {receptacle}"
    if verb == "move" and " to " in rest:
        obj, _, receptacle = rest.partition(" to ")
        return f"take {obj} from {receptacle}"
    return None


def _is_move(command: str | None) -> bool:
    return command is not None and command.startswith("go to ")


class PlanFollower:
    """Where the expert is in its plan: the game's walkthrough first, then what ``recovery``
    does whenever play has left it (both engines follow their plans by this one rule).

    A played command that is the plan's next one advances it; a command that changes nothing
    ("Nothing happens.", looking around) keeps it. Any other command that changes the state
    leaves the plan:

    - ``replan``: the plan is dropped, so the next :meth:`command` asks for a new one.
    - ``undo``: the command's inverse (:func:`inverse_command`) is pushed on a stack of undos,
      played newest first before the plan resumes, so the plan runs from the state it was made
      for. A move needs no undo when the plan's next command is a move anyway, nor when the
      newest undo is already a move back (that one returns to where the plan was). A command
      with no inverse, or an undo the game does not admit, drops the plan and the undos, as
      ``replan`` does.

    Example:
        >>> follower = PlanFollower()
        >>> follower.start(["go to desk 1", "take mug 1 from desk 1"])
        >>> follower.played("go to desk 1", state_changed=True)
        >>> anything = {"take mug 1 from desk 1", "go to desk 1", "move pen 1 to desk 1"}
        >>> follower.command(replan=lambda: ["look"], admissible=anything)
        'take mug 1 from desk 1'
        >>> follower.played("go to bed 1", state_changed=True)
        >>> follower.command(replan=lambda: ["go to desk 1"], admissible=anything)
        'go to desk 1'
        >>> undoing = PlanFollower("undo")
        >>> undoing.start(["go to desk 1", "take mug 1 from desk 1", "go to shelf 1"])
        >>> for command in ("go to desk 1", "take pen 1 from desk 1", "go to bed 1"):
        ...     undoing.played(command, state_changed=True)
        >>> undoing.command(replan=lambda: ["look"], admissible=anything)  # back to the desk
        'go to desk 1'
        >>> undoing.played("go to desk 1", state_changed=True)
        >>> undoing.command(replan=lambda: ["look"], admissible=anything)
        'move pen 1 to desk 1'
        >>> refused = {"go to shelf 1"}  # the desk does not take the pen back: a new plan
        >>> undoing.command(replan=lambda: ["go to shelf 1"], admissible=refused)
        'go to shelf 1'
    """

    def __init__(self, recovery: Recovery = "replan") -> None:
        if recovery not in RECOVERIES:
            raise ValueError(
                f"alfworld: expert_recovery {recovery!r} (choose from {', '.join(RECOVERIES)})"
            )
        self.recovery = recovery
        self._plan: Sequence[str] | None = None
        self._index = 0
        self._undos: list[str] = []
        self._location: str | None = None  # the receptacle last gone to (undo: the way back)

    def start(self, walkthrough: Sequence[str]) -> None:
        """Follow ``walkthrough`` from its first command."""
        self._plan, self._index = walkthrough, 0
        self._undos, self._location = [], None

    def played(self, command: str, state_changed: bool) -> None:
        """Record that ``command`` was played (and whether it changed the state)."""
        location = self._location
        if state_changed and _is_move(command):
            self._location = command.removeprefix("go to ")
        plan = self._plan
        if self._undos and command == self._undos[-1]:
            self._undos.pop()
        elif not self._undos and plan is not None and self._next(plan) == command:
            self._index += 1
        elif state_changed:
            self._leave(command, location)

    def _next(self, plan: Sequence[str]) -> str | None:
        return plan[self._index] if self._index < len(plan) else None

    def _leave(self, command: str, location: str | None) -> None:
        """Play left the plan by ``command`` (played at ``location``)."""
        if self.recovery == "undo" and self._plan is not None:
            if _is_move(command) and (
                _is_move(self._undos[-1] if self._undos else self._next(self._plan))
            ):
                return  # the next command (an undo or the plan's) moves anyway
            undo = inverse_command(command, location)
            if undo is not None:
                self._undos.append(undo)
                return
        self._plan, self._undos = None, []  # a new plan on the next call

    def command(self, replan: Callable[[], Sequence[str]], admissible: Container[str]) -> str:
        """The newest undo, else the plan's next command, from ``replan()`` if there is none
        (``look`` if that finds no plan either). An undo that is not ``admissible`` drops the
        plan and the undos: a scene may hold an object where no command can put it back (a
        paper towel roll on a countertop), so the expert replans instead."""
        if self._undos and self._undos[-1] not in admissible:
            self._plan, self._undos = None, []
        if self._undos:
            return self._undos[-1]
        if self._plan is None or self._index >= len(self._plan):
            self._plan, self._index = list(replan()) or ["look"], 0
        return self._plan[self._index]


class AlfredGame:
    """Plays native games one after another (the same interface as the TextWorld backend's
    ``AlfredGame``).

    Example:
        >>> game = AlfredGame()
        >>> game.admissible_commands()
        []
    """

    def __init__(self, expert_recovery: Recovery = "replan") -> None:
        self._game: NativeGame | None = None
        self._truth = State(())  # the planner's state: applicability and the goal
        self._facts = State(())  # TextWorld's record: the texts and the state hash
        self._actions: list[GroundAction] = []
        self._command_actions: dict[str, GroundAction] = {}
        self._admissible: tuple[str, ...] = ()
        self._won = False
        self._state_hash: str | None = None
        self._expert = PlanFollower(expert_recovery)

    def start(self, game: NativeGame) -> str:
        """Begin ``game`` from its initial state; returns the intro text."""
        self._game = game
        self._truth = game.initial.copy()
        self._facts = game.initial.copy()
        self._refresh()
        self._expert.start(game.walkthrough)
        return game.intro

    def _refresh(self) -> None:
        game = self._game
        assert game is not None
        choices = game.views.get(self._truth, lambda: _choices(game, self._truth))
        self._command_actions = choices.actions
        self._admissible = choices.admissible
        self._admissible_set = choices.admissible_set
        self._won = choices.won
        self._state_hash = None

    def step(self, command: str) -> tuple[str, bool]:
        """Play ``command`` if admissible; returns (feedback, valid). Others change nothing."""
        game = self._game
        if game is None or command not in self._admissible_set:
            return NOTHING_HAPPENS, False
        action = self._command_actions[command]
        before = self.state_hash()
        apply(game.world, action, self._truth, self._facts)
        # the feedback reads the recorded facts after the action: remembered per state
        said = game.feedbacks.get(self._facts, dict)
        feedback = said.get(action)
        if feedback is None:
            rule = game.deriver.grammar.actions[action.schema.name].feedback
            feedback = said[action] = game.deriver.derive(rule, self._facts, game.mapping(action))
        self._refresh()
        self._expert.played(command, state_changed=self.state_hash() != before)
        return feedback, True

    def admissible_commands(self) -> list[str]:
        """The commands the game accepts now (sorted, without ``help``)."""
        return list(self._admissible)

    def won(self) -> bool:
        """Whether the goal holds."""
        return self._won

    def state_hash(self) -> str:
        """Hash of the sorted true facts, as TextWorld writes them (``atlocation(agent1:
        agent, loc_...: location)``), without ``not_`` and ``checked`` facts."""
        if self._state_hash is None:
            game, facts = self._game, self._facts
            if game is None:
                return state_hash(facts, {})
            self._state_hash = game.hashes.get(facts, lambda: state_hash(facts, game.fact_texts))
        return self._state_hash

    def expert_command(self) -> str:
        """The next walkthrough command; a fresh plan if play left the walkthrough."""
        game = self._game
        assert game is not None
        return self._expert.command(lambda: replan(game, self._truth), self._admissible_set)

    def close(self) -> None:
        """Drop the game."""
        self._game = None


def _choices(game: NativeGame, truth: State) -> Choices:
    """The admissible commands of a planner state, computed afresh: each applicable action's
    template derived (the first action that reads so plays the command), sorted, ``help`` left
    out, and whether the goal holds."""
    world = game.world
    actions: dict[str, GroundAction] = {}
    for schema in world.domain.actions.values():
        for arguments in world.applicable(schema, truth):
            action = game.action(schema.name, arguments)
            if action is not None:
                actions.setdefault(game.command(action), action)
    admissible = tuple(sorted(c for c in actions if c not in HIDDEN_COMMANDS))
    won = world.goal_holds(truth)
    return Choices(actions, admissible, frozenset(admissible), won)


def apply(world: World, action: GroundAction, truth: State, facts: State) -> None:
    """Apply ``action`` to both states of a game.

    ``truth`` (the planner's state: positive atoms) changes as PDDL says: conditions decided
    on the state before, deletes before adds. ``facts`` (what TextWorld's texts and state
    hash read) changes as TextWorld records it: fast-downward hands back *every* effect atom
    of the operator, its conditions unchecked, adds before deletes of the same atom, and each
    is written (an add: the atom in, ``not_`` twin out; a delete: the reverse). So after
    ``use desklamp 1`` the planner has ``isOn`` and the texts' facts have ``not_isOn``.
    """
    binding = action.binding
    fired: list[tuple[Fact, bool]] = []
    every: list[tuple[Fact, bool]] = []
    for effect in action.schema.effects:
        for full, fact in world.groundings(effect, binding):
            every.append((fact, effect.delete))
            if world.holds(effect.condition, truth, full):
                fired.append((fact, effect.delete))
    for fact, delete in sorted(fired, key=lambda item: not item[1]):  # deletes first
        (truth.discard if delete else truth.add)(fact)
    for fact, delete in sorted(every, key=lambda item: item[1]):  # adds first
        twin = negated(fact)
        facts.discard(twin if not delete else fact)
        facts.add(fact if not delete else twin)


def state_hash(state: State, texts: FactTexts | dict[str, str]) -> str:
    """The state hash of the TextWorld backend, from the native facts: a hash of the sorted
    texts of its facts (:class:`FactTexts`, or the object types to write them with), without
    ``not_`` and ``checked`` facts.

    Example:
        >>> texts = FactTexts({"agent1": "agent", "loc_1": "location"})
        >>> state = State([("atlocation", "agent1", "loc_1"), ("not_opened", "loc_1")])
        >>> state_hash(state, texts) == stable_hash(
        ...     ["atlocation(agent1: agent, loc_1: location)"])
        True
    """
    if not isinstance(texts, FactTexts):
        texts = FactTexts(texts)
    hashed = sorted(filter(None, map(texts.__getitem__, state.facts)))
    # the bytes stable_hash(hashed) would hash (the list as canonical JSON), each text's JSON
    # written once per game: json.dumps took most of a fresh state's hash
    return stable_hash(f"[{','.join(map(texts.json.__getitem__, hashed))}]".encode())


class FactTexts(dict[Fact, str]):
    """Each fact as TextWorld writes it in a state hash (``atlocation(agent1: agent, loc_...:
    location)``), written once per game and fact; ``""`` for a fact the hash does not read."""

    def __init__(self, object_types: dict[str, str]) -> None:
        super().__init__()
        self.typed = {name: f"{name}: {type_}" for name, type_ in object_types.items()}
        self.json: dict[str, str] = {"": '""'}  # each text as json.dumps(text, ensure_ascii=False)

    def __missing__(self, fact: Fact) -> str:
        if not self.hashed(fact):
            self[fact] = ""
            return ""
        typed = self.typed
        arguments = ", ".join([typed.get(v, f"{v}: ") for v in fact[1:]])
        text = self[fact] = f"{fact[0]}({arguments})"
        self.json[text] = encode_basestring(text)
        return text

    @staticmethod
    def hashed(fact: Fact) -> bool:
        """Whether a state hash reads the fact (not a ``not_`` twin nor a history fact)."""
        return not fact[0].startswith(NEGATION) and fact[0] not in HISTORY_PREDICATES


def replan(game: NativeGame, state: State) -> tuple[str, ...]:
    """fast-downward's plan from ``state`` (stored per game by the full state); none, without
    a search, where the delete relaxation already proves that no plan exists (fast-downward
    would find none either, after seconds of search)."""
    key = stable_hash(sorted(" ".join(fact) for fact in state.facts))
    plan = game.plans.get(key)
    if plan is None:
        solvable = Relaxation(game.world, state).goal_reachable()
        plan = game.plans[key] = _search(game, state) if solvable else ()
    return plan


def _search(game: NativeGame, state: State) -> tuple[str, ...]:
    """Run fast-downward on the game's optimised SAS translation with its initial state set
    to ``state``, and write the plan's commands as TextWorld's planner interface does."""
    try:
        import fast_downward
    except ImportError:
        raise ImportError(
            "alfworld: the expert left the walkthrough and must replan, which needs "
            f"fast-downward: {install_hint('alfworld')}"
        ) from None
    if game.replan_sas is None:
        with _argv_kept():  # fast-downward's translator rewrites sys.argv
            _, sas = fast_downward.pddl2sas(
                game.world.domain_text, game.data["pddl_problem"], optimize=True
            )
        game.replan_sas = sas
    lib = _planner_library(fast_downward)
    if not lib.solve_sas(_with_initial_state(game.replan_sas, state).encode("utf-8"), False):
        return ()
    operators = (fast_downward.Operator * lib.get_last_plan_length())()
    lib.get_last_plan(operators)
    commands = []
    for operator in operators:
        name, *arguments = operator.name.split()
        schema = game.world.domain.actions[name]
        names = {
            param.lstrip("?"): game.deriver.entities[value].name
            for (param, _), value in zip(schema.parameters, arguments, strict=False)
        }
        template = game.deriver.grammar.actions[name].template
        commands.append((_PLANNED_GOTO if name == "gotolocation" else template).format(**names))
    return tuple(commands)


@lru_cache(maxsize=1)
def _planner_library(fast_downward: Any) -> Any:
    return fast_downward.load_lib()


def _with_initial_state(sas: str, state: State) -> str:
    """``sas`` with its ``begin_state`` section set to ``state``: each variable takes the
    value whose atom holds, else its ``NegatedAtom`` value, else ``<none of those>``; derived
    variables keep their default."""
    lines = sas.split("\n")
    values: list[int] = []
    index = 0
    begin = lines.index("begin_state")
    while index < begin:
        if lines[index] != "begin_variable":
            index += 1
            continue
        layer = int(lines[index + 2])
        count = int(lines[index + 3])
        names = lines[index + 4 : index + 4 + count]
        value = -1
        if layer == -1:
            for number, atom in enumerate(names):
                if atom.startswith("Atom ") and _sas_fact(atom[5:]) in state.facts:
                    value = number
                    break
            else:
                for number, atom in enumerate(names):
                    if atom.startswith("NegatedAtom ") or atom == "<none of those>":
                        value = number
        values.append(value)
        index += 4 + count
    end = lines.index("end_state")
    defaults = [int(line) for line in lines[begin + 1 : end]]
    state_lines = [str(v if v >= 0 else d) for v, d in zip(values, defaults, strict=True)]
    return "\n".join(lines[: begin + 1] + state_lines + lines[end:])


def _sas_fact(text: str) -> Fact:
    name, _, arguments = text.partition("(")
    return (name, *(a for a in arguments.rstrip(")").split(", ") if a))


@contextlib.contextmanager
def _argv_kept() -> Any:
    saved = sys.argv
    try:
        yield
    finally:
        sys.argv = saved

"""The TextWorld side of the ALFWorld env: compiled games and a warm PDDL interpreter.

Imported only when an ALFWorld env is made (it needs the ``alfworld`` extra). The games are
played by TextWorld's own PDDL backend (:class:`textworld.envs.pddl.PddlEnv`, which reads the
``pddl_domain``, ``grammar`` and ``pddl_problem`` embedded in each ``game.tw-pddl``) with
ALFWorld's :class:`AlfredDemangler` naming the objects ("desk 1"), exactly as ALFWorld's
``AlfredTWEnv`` sets it up. What differs is speed:

* TextWorld translates the PDDL problem to fast-downward's SAS format four times per
  load+reset (twice in ``load``, twice in ``reset``; about 0.2 s each). A :class:`CompiledGame`
  holds one translation and the initial facts, cached per process by the game's sha256, so a
  repeated reset only reloads the SAS text into the planner library.
* All games share one grammar but for the task sentence: it is parsed once per process.
* The optimised translation that TextWorld uses for replanning is made only when the expert
  has left the stored walkthrough and must replan.
* The text of each grounded command is derived once per game, not on every step.
* :class:`AlfredGame` keeps one planner library and one TextWorld environment alive across
  games (a warm environment per worker).
* A replan (about 0.6 s of fast-downward search) is kept per game by the full state it
  started from, so a state met again (the same prefix replayed, a continuation passing where
  another did) gets the same plan without a second search.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import fast_downward
import textworld
from alfworld.agents.environment.alfred_tw_env import AlfredDemangler
from textworld.core import GameState
from textworld.envs.pddl import logic as pddl_logic
from textworld.envs.pddl.pddl import PddlEnv
from textworld.envs.pddl.textgen import ContextSensitiveGrammar
from textworld.logic import Proposition

from agentbench_rl.core.hashing import stable_hash
from agentbench_rl.envs.alfworld.data import GameCache
from agentbench_rl.envs.alfworld.native import (
    HIDDEN_COMMANDS,
    HISTORY_PREDICATES,
    NOTHING_HAPPENS,
    PlanFollower,
    Recovery,
)


def _pddl_to_sas(domain: str, problem: str, optimize: bool) -> tuple[Any, str]:
    # fast_downward's translator overwrites sys.argv to feed its option parser.
    saved_argv = sys.argv
    try:
        task, sas = fast_downward.pddl2sas(domain, problem, optimize=optimize)
    finally:
        sys.argv = saved_argv
    return task, sas


@dataclass
class CompiledGame:
    """One ALFWorld game, parsed and translated once.

    Attributes:
        sha256: sha256 of the game file (the cache key).
        data: the game JSON (``pddl_domain``, ``grammar``, ``pddl_problem``, ``walkthrough``).
        logic: TextWorld's parsed grammar and action templates.
        task: fast-downward's normalised PDDL task.
        sas: the SAS text the planner library runs.
        name2type: the type of every PDDL object.
        initial_facts: the facts of the initial state.
        replan_sas: the optimised SAS used for replanning, made on first need.
        commands: the command text of each grounded action seen so far.
        plans: the expert's replan from each state replanned from so far, keyed by
            :func:`planner_state_key` (the planner is deterministic: the same state gives the
            same plan).
    """

    sha256: str
    data: dict[str, Any]
    logic: Any
    task: Any
    sas: bytes
    name2type: dict[str, str]
    initial_facts: list[Proposition] = field(default_factory=list)
    replan_sas: bytes | None = None
    commands: dict[tuple[str, tuple[str, ...]], str] = field(default_factory=dict)
    plans: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def walkthrough(self) -> list[str]:
        """The winning command sequence stored in the game file."""
        return list(self.data.get("walkthrough") or [])

    def ensure_replan_sas(self) -> bytes:
        """The optimised translation for the planner (made once, on first call)."""
        if self.replan_sas is None:
            _, sas = _pddl_to_sas(self.logic.domain, self.data["pddl_problem"], optimize=True)
            self.replan_sas = sas.encode("utf-8")
        return self.replan_sas


# The "task" rule of a game's grammar: the only part that differs between ALFWorld games.
_TASK_RULE = re.compile(r'"task": \[\s*\{\s*"rhs": "((?:[^"\\]|\\.)*)"')


class _SharedLogic:
    """Parsed grammars shared by games that differ only in their task sentence."""

    def __init__(self) -> None:
        self._by_key: dict[str, Any] = {}

    def logic_for(self, domain: str, grammar: str) -> Any:
        """A ``GameLogic`` for this game; the grammar is parsed once per process, not per game.

        A game whose grammar has no recognisable task rule is parsed on its own.
        """
        match = _TASK_RULE.search(grammar)
        if match is None:
            return pddl_logic.GameLogic(domain=domain, grammar=grammar)
        without_task = grammar[: match.start(1)] + grammar[match.end(1) :]
        key = stable_hash([domain, without_task])
        shared = self._by_key.get(key)
        if shared is None:
            shared = pddl_logic.GameLogic(domain=domain, grammar=without_task)
            self._by_key[key] = shared
        task_rhs = json.loads(f'"{match.group(1)}"')
        task_rules = ContextSensitiveGrammar.parse(json.dumps({"task": [{"rhs": task_rhs}]}))
        logic = copy.copy(shared)
        logic.grammar = ContextSensitiveGrammar()
        logic.grammar.update(shared.grammar)
        logic.grammar._rules["task"] = task_rules._rules["task"]
        return logic


_SHARED_LOGIC = _SharedLogic()


def compile_game(data: dict[str, Any], sha256: str) -> CompiledGame:
    """Parse a game's grammar and translate its PDDL problem (about 0.3 s).

    ALFWorld games share one grammar but for the task sentence: that grammar is parsed once
    per process and each game gets a copy with its own task rule.

    Example:
        >>> game = compile_game(json.loads(path.read_bytes()), sha)  # doctest: +SKIP
        >>> game.walkthrough[0]  # doctest: +SKIP
        'go to desk 1'
    """
    logic = _SHARED_LOGIC.logic_for(data["pddl_domain"], data["grammar"])
    task, sas = _pddl_to_sas(logic.domain, data["pddl_problem"], optimize=False)
    for type_ in task.types:  # as PddlState does: the planner's types join the game logic
        with contextlib.suppress(ValueError):  # already known
            logic.types.add(textworld.logic.Type(type_.name, type_.supertype_names))
    name2type = {obj.name: obj.type_name for obj in task.objects}
    return CompiledGame(sha256, data, logic, task, sas.encode("utf-8"), name2type)


#: Shared by every env of a process: group members and repeated seeds compile a game once.
COMPILED_GAMES = GameCache(compile_game)


class CompiledPddlState(pddl_logic.PddlState):
    """TextWorld's ``PddlState`` built from a :class:`CompiledGame` instead of PDDL text.

    The body mirrors ``PddlState.__init__`` (TextWorld 1.7) minus the two translations, which
    the compiled game already holds; the replanning SAS is loaded only by :meth:`replan`.
    """

    def __init__(self, downward_lib: Any, game: CompiledGame) -> None:
        self._facts: defaultdict[Any, set[Proposition]] = defaultdict(set)
        self._vars_by_name: dict[str, Any] = {}
        self._vars_by_type: defaultdict[str, set[Any]] = defaultdict(set)
        self._var_counts: Counter[Any] = Counter()
        self._logic = game.logic
        self.downward_lib = downward_lib
        self.pddl_problem = game.data["pddl_problem"]
        self.task = game.task
        self._actions = {action.name: action for action in game.task.actions}
        self.name2type = game.name2type
        self._game = game
        downward_lib.load_sas(game.sas)
        if not game.initial_facts:
            game.initial_facts = self._read_initial_facts()
        self.add_facts(game.initial_facts)

    def _read_initial_facts(self) -> list[Proposition]:
        facts = []
        for atom in self.task.init:  # the PDDL init, then the planner's own state
            if isinstance(atom, fast_downward.translate.pddl.conditions.Atom):
                if atom.predicate != "=":
                    facts.append(self._proposition(atom.predicate, atom.args))
            elif isinstance(atom, fast_downward.translate.pddl.f_expression.Assign):
                name = f"{atom.expression.value}"
                if atom.fluent.symbol != "total-cost" and not name.isdigit():
                    facts.append(self._proposition(name, atom.fluent.args))
        atoms = (pddl_logic.Atom * self.downward_lib.get_state_size())()
        self.downward_lib.get_state(atoms)
        for atom in atoms:
            fact = atom.get_fact(self.name2type)
            if not fact.is_negation:
                facts.append(fact)
        return facts

    def _proposition(self, name: str, args: Any) -> Proposition:
        variables = [textworld.logic.Variable(arg, self.name2type[arg]) for arg in args]
        return Proposition(name, variables)

    def replan(self, infos: Any) -> list[str]:
        """A plan from the current state: the game's stored one if this state was replanned
        from before, else fast-downward's (the replanning SAS loaded into the library first)."""
        key = planner_state_key(self.facts)
        plan = self._game.plans.get(key)
        if plan is None:
            self.downward_lib.load_sas_replan(self._game.ensure_replan_sas())
            plan = tuple(super().replan(infos))
            self._game.plans[key] = plan
        return list(plan)


def planner_state_key(facts: Any) -> str:
    """Hash of every fact the planner starts from, negated and ``checked`` facts included (a
    plan is reused only for exactly the state it was searched from)."""
    return stable_hash(sorted(str(fact) for fact in facts))


class WarmPddlEnv(PddlEnv):
    """TextWorld's ``PddlEnv`` that loads :class:`CompiledGame` objects.

    ``step`` and the info gathering are TextWorld's; ``load`` and ``reset`` use the compiled
    game, and the state made by ``load`` serves the first ``reset``.
    """

    def load(self, game: CompiledGame) -> None:
        """Make ``game`` the current game (its initial state is ready for ``reset``)."""
        self._compiled = game
        self._game_data = game.data
        self._game_file = None
        self.walkthrough = game.walkthrough
        self._logic = game.logic
        self._pddl_state = CompiledPddlState(self.downward_lib, game)
        self._entity_infos = self._get_entity_infos()
        self._state_is_initial = True

    def reset(self) -> GameState:
        """Back to the initial state (as ``PddlEnv.reset``, without the translation)."""
        if not self._state_is_initial:
            self._pddl_state = CompiledPddlState(self.downward_lib, self._compiled)
        self._state_is_initial = False
        self.prev_state = None
        self.state = GameState()
        self._last_action = None
        self._moves = 0
        context = {
            "state": self._pddl_state,
            "facts": list(self._pddl_state.facts),
            "variables": {},
            "mapping": {},
            "entity_infos": self._entity_infos,
        }
        self.state.feedback = self._logic.grammar.derive("#intro#", context)
        self.state.raw = self.state.feedback
        self._gather_infos()
        return self.state

    def _gather_infos(self) -> None:
        """As ``PddlEnv._gather_infos``, with each grounded action's command text cached.

        TextWorld derives every admissible command through the grammar (a TatSu parse each)
        on every step. A command depends only on the action, its arguments and the static
        ``receptacleAtLocation`` facts, so it is derived once per game (tests compare the
        result with TextWorld's own along played episodes).
        """
        pddl_state = self._pddl_state
        self.state["command_templates"] = sorted(
            {action.template for action in self._logic.actions.values()}
        )
        self.state["won"] = pddl_state.check_goal()
        self.state["lost"] = False
        self.state["_entity_infos"] = dict(self._entity_infos)
        self.state["_facts"] = list(pddl_state.facts)
        self.state["last_action"] = None
        self.state["_last_action"] = self._last_action
        actions = list(pddl_state.all_applicable_actions())
        self.state["_valid_actions"] = actions
        self.state["_valid_commands"] = [self._command(action) for action in actions]
        self.state["admissible_commands"] = sorted(set(self.state["_valid_commands"]))

    def _command(self, action: Any) -> str:
        key = (action.name, tuple(var.name for var in action.mapping.values()))
        command = self._compiled.commands.get(key)
        if command is None:
            context = {
                "state": self._pddl_state,
                "facts": self.state["_facts"],
                "variables": {
                    ph.name: self._entity_infos[var.name] for ph, var in action.mapping.items()
                },
                "mapping": action.mapping,
                "entity_infos": self._entity_infos,
            }
            action.command_template = self._logic.grammar.derive(action.command_template, context)
            mapping = {name: info.name for name, info in self._entity_infos.items()}
            command = str(action.format_command(mapping))
            self._compiled.commands[key] = command
        return command

    def close(self) -> None:
        """Nothing to release: the planner library stays loaded (see :meth:`AlfredGame.close`)."""


class AlfredGame:
    """One warm TextWorld environment playing ALFWorld games one after another.

    Example:
        >>> game = AlfredGame()  # doctest: +SKIP
        >>> feedback = game.start(compiled)  # doctest: +SKIP
        >>> feedback.splitlines()[-1]  # doctest: +SKIP
        'Your task is to: look at alarmclock under the desklamp.'
    """

    def __init__(self, expert_recovery: Recovery = "replan") -> None:
        infos = textworld.EnvInfos(admissible_commands=True, won=True)
        self._pddl = WarmPddlEnv(infos)
        self._env = AlfredDemangler(shuffle=False)(self._pddl)
        self._game: CompiledGame | None = None
        self._state: GameState | None = None
        self._admissible: list[str] = []
        self._admissible_set: frozenset[str] = frozenset()
        self._state_hash: str | None = None
        self._expert = PlanFollower(expert_recovery)

    def start(self, game: CompiledGame) -> str:
        """Load ``game`` (unless it is the current one), reset it, return the intro text."""
        if self._game is None or self._game.sha256 != game.sha256:
            self._env.load(game)
            self._game = game
        self._set_state(self._env.reset())
        self._expert.start(game.walkthrough)
        return str(self._state.feedback) if self._state is not None else ""

    def _set_state(self, state: GameState) -> None:
        self._state = state
        self._admissible = [c for c in state["admissible_commands"] if c not in HIDDEN_COMMANDS]
        self._admissible_set = frozenset(self._admissible)
        self._state_hash = None

    def step(self, command: str) -> tuple[str, bool]:
        """Play ``command`` if admissible; returns (feedback, valid). Others change nothing."""
        if command not in self._admissible_set:
            return NOTHING_HAPPENS, False
        before = self.state_hash()
        state, _, _ = self._env.step(command)
        self._set_state(state)
        self._expert.played(command, state_changed=self.state_hash() != before)
        return str(state.feedback), True

    def admissible_commands(self) -> list[str]:
        """The commands the game accepts now (TextWorld's sorted list, without ``help``)."""
        return list(self._admissible)

    def won(self) -> bool:
        """Whether the goal holds."""
        return bool(self._state is not None and self._state["won"])

    def state_hash(self) -> str:
        """Hash of the sorted true facts of the current state.

        Negated facts (TextWorld keeps ``not_opened(x)`` after a close) and the bookkeeping
        ``checked`` facts are left out: they add nothing the positive facts do not say.
        """
        if self._state_hash is None:
            facts = sorted(
                str(fact)
                for fact in self._pddl._pddl_state.facts
                if not fact.is_negation and fact.name not in HISTORY_PREDICATES
            )
            self._state_hash = stable_hash(facts)
        return self._state_hash

    def expert_command(self) -> str:
        """The next walkthrough command; a fresh plan if play left the walkthrough."""
        pddl = self._pddl
        return self._expert.command(
            lambda: pddl._pddl_state.replan(pddl._entity_infos), self._admissible_set
        )

    def close(self) -> None:
        """Drop the game; the planner library copy stays loaded until the process exits.

        ``fast_downward.close_lib`` would ``dlclose`` this copy, and the C++ destructors of the
        other copies in the process then call into its unmapped code (a segfault at exit).
        TextWorld never unloads it either.
        """
        self._game = None
        self._state = None
